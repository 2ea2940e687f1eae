//! The opt-in guard overlay, its webhook and the Kyverno alternative, and the chart with the guard.

use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

#[test]
fn guard_overlay_webhook_and_kyverno_alternative() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::Service;
    let dir = repo().join("deploy/guard");
    let objects = docs(&repo().join("deploy/components/guard/guard.yaml"));
    let svc = find(&objects, "Service", "nodemedic-guard");
    let _: Service = typed(svc);
    let vwc = find(
        &objects,
        "ValidatingWebhookConfiguration",
        "nodemedic-kosmos-guard",
    );
    let _: ValidatingWebhookConfiguration = typed(vwc);
    let w = &vwc["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Ignore");
    assert_eq!(w["timeoutSeconds"], 3);
    assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
    assert_eq!(w["sideEffects"], "NoneOnDryRun");
    // Only the guarded users' requests are sent to it: the users its matchCondition names are the
    // drainer's --guard-user defaults, no more and no fewer.
    let expr = w["matchConditions"][0]["expression"].as_str().unwrap();
    let named: Vec<&str> = expr.split('\'').skip(1).step_by(2).collect();
    assert_eq!(named, nodemedic_drainer::guard::DEFAULT_USERS, "{expr}");
    assert!(expr.starts_with("request.userInfo.username in ["), "{expr}");
    let rules: Vec<(String, String)> = w["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let ops = r["operations"].as_array().unwrap().clone();
            let res = r["resources"].as_array().unwrap().clone();
            ops.into_iter().flat_map(move |o| {
                res.clone().into_iter().map(move |x| {
                    (
                        o.as_str().unwrap().to_string(),
                        x.as_str().unwrap().to_string(),
                    )
                })
            })
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            ("DELETE".into(), "pods".into()),
            ("CREATE".into(), "pods/eviction".into())
        ],
        "scoped to pod deletions and evictions only"
    );
    assert_eq!(
        w["clientConfig"]["service"]["name"],
        svc["metadata"]["name"]
    );
    assert_eq!(w["clientConfig"]["service"]["path"], "/validate");

    // The patch: flags point into the mounted Secret, the Service targets its port by name.
    let component = repo().join("deploy/components/guard");
    let patch = docs(&component.join("drainer-guard-patch.yaml")).remove(0);
    let c = &patch["spec"]["template"]["spec"]["containers"][0];
    // The flags are appended (JSON patch), so other components' flags combine with them.
    let ops = docs(&component.join("drainer-guard-args.yaml"));
    let ops = ops[0].as_array().expect("a JSON patch");
    let args: Vec<&str> = ops
        .iter()
        .inspect(|op| {
            assert_eq!(
                (op["op"].as_str(), op["path"].as_str()),
                (Some("add"), Some("/spec/template/spec/containers/0/args/-"))
            )
        })
        .map(|op| op["value"].as_str().unwrap())
        .collect();
    let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    for flag in ["--guard-tls-cert=", "--guard-tls-key="] {
        let path = args
            .iter()
            .find_map(|a| a.strip_prefix(flag))
            .unwrap_or_else(|| panic!("{flag} missing"));
        assert!(path.starts_with(mount), "{flag}{path} is not under {mount}");
    }
    assert!(
        args.iter()
            .any(|a| a.starts_with("--guard-listen=0.0.0.0:9443"))
    );
    assert_eq!(c["ports"][0]["name"], svc["spec"]["ports"][0]["targetPort"]);
    let Some(base) = kustomize(&repo().join("deploy")) else {
        return;
    };
    let base_args =
        &pod_spec(find(&base, "Deployment", "nodemedic-drainer"))["containers"][0]["args"];
    let overlay = kustomize(&dir).unwrap();
    let rendered_args =
        &pod_spec(find(&overlay, "Deployment", "nodemedic-drainer"))["containers"][0]["args"];
    let mut expected = base_args.as_array().unwrap().clone();
    expected.extend(args.iter().map(|a| Value::from(*a)));
    assert_eq!(
        rendered_args.as_array().unwrap(),
        &expected,
        "the base's arguments, then the guard's"
    );
    {
        let rendered = kustomize(&dir).unwrap();
        check_labels(&rendered, false);
        check_types(
            &rendered
                .iter()
                .filter(|o| o["kind"] != "Service")
                .cloned()
                .collect::<Vec<_>>(),
        );
        let d = find(&rendered, "Deployment", "nodemedic-drainer");
        let c = &pod_spec(d)["containers"][0];
        assert!(
            c["args"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == "--guard-listen=0.0.0.0:9443")
        );
        assert!(
            pod_spec(d)["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["secret"]["secretName"] == "nodemedic-guard-tls")
        );
        assert!(
            pod_spec(d)["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == "config"),
            "base volumes kept"
        );
    }
    // The Kyverno alternative carries the same three preconditions.
    let k = docs(&dir.join("kyverno-policy.yaml")).remove(0);
    let text = serde_json::to_string(&k).unwrap();
    assert_eq!(k["kind"], "ClusterPolicy");
    for needle in ["node-controller", "kosmos.io/node", "Ready", "DELETE"] {
        assert!(text.contains(needle), "kyverno policy lacks {needle}");
    }
}

#[test]
fn helm_chart_with_the_guard_matches_the_guard_overlay() {
    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["guard"]["enabled"] = json!(true);
    let Some(helm) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    check_types(&helm);
    check_rbac(&helm);
    check_labels(&helm, true);
    let d = find(&helm, "Deployment", "nodemedic-drainer");
    let args = &pod_spec(d)["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--guard-listen=0.0.0.0:9443"),
        "{args}"
    );
    find(
        &helm,
        "ValidatingWebhookConfiguration",
        "nodemedic-kosmos-guard",
    );
    find(&helm, "Service", "nodemedic-guard");
    if let Some(overlay) = kustomize(&repo().join("deploy/guard")) {
        crate::assert_same_as_kustomize(&helm, &overlay, "guard.enabled vs deploy/guard");
    }
}

/// The guard's NetworkPolicy admits the drainer container's named ports and nothing else, selects
/// exactly the drainer's pods (a policy selecting more would cut other pods off), and admits only
/// the API server's addresses to the guard's port when the chart is given them.
#[test]
fn the_guard_network_policy_admits_only_the_drainers_own_ports() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let Some(overlay) = kustomize(&repo().join("deploy/guard")) else {
        return;
    };
    let np = find(&overlay, "NetworkPolicy", "nodemedic-guard");
    let _: NetworkPolicy = typed(np);
    assert_eq!(
        np["spec"]["policyTypes"],
        json!(["Ingress"]),
        "egress untouched"
    );
    let d = find(&overlay, "Deployment", "nodemedic-drainer");
    let pod_labels = d["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    let selects = np["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap();
    for (k, v) in selects {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "selects the drainer's pods: {k}"
        );
    }
    assert_eq!(
        selects.get("app.kubernetes.io/component"),
        Some(&json!("drainer"))
    );
    let mut ports: Vec<String> = pod_spec(d)["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut admitted: Vec<String> = np["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["ports"].as_array().unwrap().clone())
        .map(|p| p["port"].as_str().unwrap().to_string())
        .collect();
    ports.sort();
    admitted.sort();
    assert_eq!(admitted, ports, "exactly the container's ports");

    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["guard"]["enabled"] = json!(true);
    v["guard"]["networkPolicy"]["apiServerCIDRs"] = json!(["10.0.0.10/32", "fd00::10/128"]);
    let Some(helm) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    let np = find(&helm, "NetworkPolicy", "nodemedic-guard");
    let _: NetworkPolicy = typed(np);
    assert_eq!(
        np["spec"]["ingress"][0]["from"],
        json!([{"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "fd00::10/128"}}])
    );
    assert!(
        np["spec"]["ingress"][1].get("from").is_none(),
        "metrics from anywhere"
    );
    v["guard"]["networkPolicy"]["enabled"] = json!(false);
    let off = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    assert!(!off.iter().any(|o| o["kind"] == "NetworkPolicy"));
}
