//! The shipped manifests: `deploy/` rendered by `kubectl kustomize` and the chart by real Helm, every
//! object checked against its k8s-openapi type, RBAC checked against the
//! permissions the code declares, and the properties operators rely on checked one by one.

//!
//! Modules: `render` (the real tools), `checks` (what every rendering must satisfy), `image` (the
//! Dockerfile's build steps), `monitoring` (alerts and dashboard), and the scenarios below and in `guard`.

mod checks;
mod detector_only;
mod guard;
mod image;
mod images;
mod install;
mod monitoring;
mod own_node;
mod pressure;
mod probes;
mod real_node;
mod render;

use serde_json::{Value, json};

use checks::*;
use render::*;

#[test]
fn kustomize_base_renders_valid_least_privilege_objects() {
    let Some(objects) = kustomize(&repo().join("deploy")) else {
        return;
    };
    assert!(objects.len() >= 12, "{} objects", objects.len());
    check_types(&objects);
    check_rbac(&objects);
    check_workloads(&objects);
    check_configs(&objects);
    check_labels(&objects, false);
}

/// Helm's chart renders what kustomize renders, plus the metadata only Helm has (its chart and
/// manager labels, the config checksums): compared with that metadata removed. The drainer's config
/// is compared as settings (the chart writes it with toYaml, the base is a commented file).
pub fn assert_same_as_kustomize(helm: &[Value], base: &[Value], what: &str) {
    // The one object only Helm ships: the record key, which it makes at install (with kustomize,
    // the install guide's line makes it).
    let mut helm: Vec<Value> = helm
        .iter()
        .filter(|o| {
            !(o["kind"] == "Secret"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-drainer-record-key")))
        })
        .map(without_helm_metadata)
        .collect();
    let mut base = base.to_vec();
    helm.sort_by_key(key);
    base.sort_by_key(key);
    assert_eq!(
        helm.iter().map(key).collect::<Vec<_>>(),
        base.iter().map(key).collect::<Vec<_>>(),
        "{what}: the same objects"
    );
    for (h, b) in helm.iter_mut().zip(base.iter_mut()) {
        if h["kind"] == "ConfigMap" && h["data"].get("drainer.yaml").is_some() {
            let parse = |o: &mut Value| {
                let v =
                    serde_saphyr::from_str::<Value>(o["data"]["drainer.yaml"].as_str().unwrap())
                        .unwrap();
                o["data"]["drainer.yaml"] = v;
            };
            parse(h);
            parse(b);
        }
        assert_eq!(
            h,
            b,
            "{what}: {:?} differs between Helm and kustomize",
            key(h)
        );
    }
}

fn without_helm_metadata(o: &Value) -> Value {
    let mut o = o.clone();
    let strip = |m: &mut Value| {
        if let Some(l) = m.get_mut("labels").and_then(Value::as_object_mut) {
            l.remove("helm.sh/chart");
            l.remove("app.kubernetes.io/managed-by");
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("checksum/config");
            // Helm's own instruction (the record key Secret outlives an uninstall).
            a.remove("helm.sh/resource-policy");
            if a.is_empty() {
                m.as_object_mut().unwrap().remove("annotations");
            }
        }
    };
    strip(&mut o["metadata"]);
    if o["spec"]["template"]["metadata"].is_object() {
        strip(&mut o["spec"]["template"]["metadata"]);
    }
    o
}

fn chart() -> std::path::PathBuf {
    repo().join("deploy/helm/nodemedic")
}

#[test]
fn helm_chart_lints_clean_and_renders_the_kustomize_base() {
    let Some(lint) = helm_lint(&chart(), None) else {
        return;
    };
    lint.unwrap_or_else(|report| panic!("helm lint --strict:\n{report}"));
    let Some(helm) = helm_template(&chart(), "nodemedic", "kube-system", None) else {
        return;
    };
    check_types(&helm);
    check_rbac(&helm);
    check_workloads(&helm);
    check_configs(&helm);
    check_labels(&helm, true);
    if let Some(base) = kustomize(&repo().join("deploy")) {
        assert_same_as_kustomize(&helm, &base, "default values");
    }
}

/// Helm makes the drainer's record key at install: 32 random bytes, a new key each install, kept
/// by `helm.sh/resource-policy: keep` (and by the chart's lookup on upgrade).
#[test]
fn helm_makes_a_new_record_key_each_install() {
    let Some(a) = helm_template(&chart(), "nodemedic", "kube-system", None) else {
        return;
    };
    let b = helm_template(&chart(), "nodemedic", "kube-system", None).unwrap();
    let key = |objects: &[Value]| {
        let s = find(objects, "Secret", "nodemedic-drainer-record-key");
        assert_eq!(
            s["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
        s["data"]["key"].as_str().unwrap().to_string()
    };
    assert_ne!(key(&a), key(&b), "two installs, two keys");
}

/// The chart's `policy` is the kustomize `component`'s: the same match, variables and rules (the
/// chart names the drainer's ServiceAccount exactly; the component any whose name ends so).
fn same_policy(helm: &[Value], component: &str, policy: &str) {
    let ours = docs(&repo().join(format!("deploy/components/{component}/policy.yaml")));
    let (h, k) = (
        find(helm, "ValidatingAdmissionPolicy", policy),
        find(&ours, "ValidatingAdmissionPolicy", policy),
    );
    for field in [
        "matchConstraints",
        "variables",
        "validations",
        "paramKind",
        "failurePolicy",
    ] {
        assert_eq!(h["spec"][field], k["spec"][field], "{policy}: {field}");
    }
    assert_eq!(
        h["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:kube-system:nodemedic-drainer'"
    );
    find(helm, "ValidatingAdmissionPolicyBinding", policy);
}

/// The chart's machines webhook for `short` is the kustomize `component`'s: the same rules, failure
/// policy, side effects, timeout and path, served by the release's guard.
fn same_webhook(helm: &[Value], component: &str, short: &str) {
    let name = format!("nodemedic-drainer-{short}-under-way");
    let ours = docs(&repo().join(format!("deploy/components/{component}/webhook.yaml")));
    let (h, k) = (
        &find(helm, "ValidatingWebhookConfiguration", &name)["webhooks"][0],
        &find(&ours, "ValidatingWebhookConfiguration", &name)["webhooks"][0],
    );
    for field in [
        "name",
        "rules",
        "failurePolicy",
        "sideEffects",
        "timeoutSeconds",
        "matchPolicy",
    ] {
        assert_eq!(h[field], k[field], "{name}: {field}");
    }
    assert_eq!(h["clientConfig"], k["clientConfig"], "{name}");
    assert_eq!(
        h["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:kube-system:nodemedic-drainer'"
    );
}

#[test]
fn helm_values_operators_set_take_effect_and_releases_do_not_collide() {
    let Some(a) = helm_template(&chart(), "edge", "monitoring", None) else {
        return;
    };
    let b = helm_template(&chart(), "core", "monitoring", None).unwrap();
    // Two releases: every name differs (cluster-scoped ones included), every selector is its own.
    for (x, y) in a.iter().zip(b.iter()) {
        assert_ne!(key(x), key(y));
    }
    let d = find(&a, "Deployment", "edge-nodemedic-drainer");
    assert_eq!(
        d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"],
        "edge"
    );
    let args = pod_spec(d)["containers"][0]["args"].as_array().unwrap();
    assert!(
        args.contains(&json!("--lease-name=edge-nodemedic-drainer")),
        "{args:?}"
    );
    let crb = find(&a, "ClusterRoleBinding", "edge-nodemedic-drainer");
    assert_eq!(crb["roleRef"]["name"], "edge-nodemedic-drainer");
    assert_eq!(crb["subjects"][0]["name"], "edge-nodemedic-drainer");
    assert_eq!(crb["subjects"][0]["namespace"], "monitoring");
    check_labels(&a, true);

    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["fullnameOverride"] = json!("nm");
    v["logFormat"] = json!("text");
    v["imagePullSecrets"] = json!([{"name": "regcred"}]);
    v["drainer"]["replicas"] = json!(3);
    v["drainer"]["image"]["tag"] = json!("9.9.9");
    v["drainer"]["image"]["pullPolicy"] = json!("Always");
    v["drainer"]["nodeSelector"] = json!({"pool": "system"});
    v["drainer"]["podAnnotations"] = json!({"team": "sre"});
    v["drainer"]["extraArgs"] = json!(["--dry-run"]);
    v["detector"]["createRulesConfigMap"] = json!(false);
    v["detector"]["rulesConfigMap"] = json!("my-rules");
    v["detector"]["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    v["detector"]["podLabels"] = json!({"cost-center": "42"});
    let custom = helm_template(&chart(), "x", "monitoring", Some(&v)).unwrap();
    check_types(&custom);
    let d = find(&custom, "Deployment", "nm-drainer");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["namespace"], "monitoring");
    let spec = pod_spec(d);
    let c = &spec["containers"][0];
    assert_eq!(c["image"], "nodemedic/drainer:9.9.9");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(spec["nodeSelector"], json!({"pool": "system"}));
    assert_eq!(
        d["spec"]["template"]["metadata"]["annotations"]["team"],
        "sre"
    );
    let args = c["args"].as_array().unwrap();
    for a in ["--namespace=monitoring", "--log-format=text", "--dry-run"] {
        assert!(args.contains(&json!(a)), "{a} in {args:?}");
    }
    assert!(
        !custom
            .iter()
            .any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "my-rules"),
        "no rules ConfigMap when the user brings one"
    );
    let ds = find(&custom, "DaemonSet", "nm-detector");
    assert_eq!(
        pod_spec(ds)["tolerations"],
        json!([{"key": "dedicated", "operator": "Exists"}])
    );
    assert_eq!(
        ds["spec"]["template"]["metadata"]["labels"]["cost-center"],
        "42"
    );
    assert!(
        ds["spec"]["selector"]["matchLabels"]
            .get("cost-center")
            .is_none()
    );
    assert!(
        pod_spec(ds)["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|vol| vol["configMap"]["name"] == "my-rules")
    );
}

#[test]
fn the_config_checksum_rolls_the_drainer_only_when_its_config_changes() {
    let checksum = |v: &Value| {
        let objects = helm_template(&chart(), "nodemedic", "kube-system", Some(v))?;
        let d = find(&objects, "Deployment", "nodemedic-drainer");
        let ds = find(&objects, "DaemonSet", "nodemedic-detector");
        let get =
            |o: &Value| o["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone();
        Some((get(d), get(ds)))
    };
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some((drainer, detector)) = checksum(&v) else {
        return;
    };
    assert!(drainer.as_str().is_some_and(|s| s.len() == 64), "{drainer}");
    v["drainer"]["replicas"] = json!(5);
    assert_eq!(
        checksum(&v).unwrap(),
        (drainer.clone(), detector.clone()),
        "not a config change"
    );
    v["drainer"]["config"]["drainBuffer"] = json!("20m");
    let (d2, ds2) = checksum(&v).unwrap();
    assert_ne!(d2, drainer);
    assert_eq!(ds2, detector);
    v["rollOnConfigChange"] = json!(false);
    assert_eq!(checksum(&v).unwrap(), (Value::Null, Value::Null));
}

#[test]
fn values_the_schema_refuses_fail_helm_lint() {
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["drainer"]["replicas"] = json!("two");
    let Some(r) = helm_lint(&chart(), Some(&v)) else {
        return;
    };
    let report = r.expect_err("a string for replicas");
    assert!(report.contains("replicas"), "{report}");
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["drainer"]["replcas"] = json!(2);
    let report = helm_lint(&chart(), Some(&v))
        .unwrap()
        .expect_err("a misspelled key");
    assert!(report.contains("replcas"), "{report}");
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["logFormat"] = json!("yaml");
    let report = helm_lint(&chart(), Some(&v))
        .unwrap()
        .expect_err("an unknown log format");
    assert!(report.contains("logFormat"), "{report}");
}

#[test]
fn deleting_drained_nodes_is_granted_only_where_configured_and_exactly() {
    use std::collections::BTreeSet;
    let base_and_delete: BTreeSet<_> = needed(nodemedic_drainer::act::PERMISSIONS)
        .union(&needed(nodemedic_drainer::act::DELETE_NODES_PERMISSIONS))
        .cloned()
        .collect();
    if let Some(overlay) = kustomize(&repo().join("deploy/delete-drained-nodes")) {
        check_types(&overlay);
        check_labels(&overlay, false);
        assert_eq!(granted(&overlay, "nodemedic-drainer"), base_and_delete);
    }
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert!(
        !granted(&plain, "nodemedic-drainer")
            .iter()
            .any(|(_, r, verb, _)| r == "nodes" && verb == "delete"),
        "no delete without deleteDrainedNodeAfter"
    );
    // Issue 64, point 6: a ladder that replaces, or deleteDrainedNodeAfter, implies no delete; only
    // drainer.deleteNodes, by name, grants it.
    let no_delete = |objects: &[Value]| {
        !granted(objects, "nodemedic-drainer")
            .iter()
            .any(|(_, r, verb, _)| r == "nodes" && verb == "delete")
    };
    v["drainer"]["config"]["conditions"] =
        json!(["KernelDeadlock=True,10m: drain, reboot, replace"]);
    v["drainer"]["config"]["deleteDrainedNodeAfter"] = json!("30m");
    let implied = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    assert!(no_delete(&implied), "a replace ladder implies no delete");
    v["drainer"]["deleteNodes"] = json!(true);
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&with);
    assert_eq!(granted(&with, "nodemedic-drainer"), base_and_delete);
}

/// Rebooting (a ladder step) is the detector's to carry out: only where deploy/reboot or
/// `detector.reboot.enabled` grant it, exactly the one ConfigMap read and the host's PID namespace.
#[test]
fn rebooting_is_granted_only_where_configured_and_exactly() {
    use std::collections::BTreeSet;
    let base: BTreeSet<_> = needed(nodemedic_detector::report::kube::PERMISSIONS);
    let with_reboot: BTreeSet<_> = base
        .union(&needed(nodemedic_detector::reboot::REBOOT_PERMISSIONS))
        .cloned()
        .collect();
    let reads_requests = |objects: &[Value], name: &str| {
        objects.iter().any(|o| {
            o["kind"] == "Role"
                && o["rules"][0]["resourceNames"] == json!([name])
                && o["rules"][0]["resources"] == json!(["configmaps"])
        })
    };
    let detector_args = |objects: &[Value]| -> (String, bool) {
        let ds = objects
            .iter()
            .find(|o| o["kind"] == "DaemonSet")
            .expect("the detector DaemonSet");
        let spec = &ds["spec"]["template"]["spec"];
        (
            spec["containers"][0]["args"].to_string(),
            spec["hostPID"] == json!(true),
        )
    };
    if let Some(plain) = kustomize(&repo().join("deploy/base")) {
        assert_eq!(granted(&plain, "nodemedic-detector"), base);
        assert!(!detector_args(&plain).0.contains("--reboot-requests"));
    }
    if let Some(overlay) = kustomize(&repo().join("deploy/reboot")) {
        check_types(&overlay);
        check_labels(&overlay, false);
        let text = serde_json::to_string(&overlay).unwrap();
        assert!(!text.contains("\"verbs\":[\"*\"]"), "no wildcard");
        assert_eq!(granted(&overlay, "nodemedic-detector"), with_reboot);
        assert!(reads_requests(&overlay, "nodemedic-drainer-reboots"));
        let (args, host_pid) = detector_args(&overlay);
        assert!(
            args.contains("--reboot-requests=kube-system/nodemedic-drainer-reboots"),
            "{args}"
        );
        assert!(host_pid);
        assert!(args.contains("--reboot-public-key="), "{args}");
        assert_eq!(
            granted(&overlay, "nodemedic-drainer"),
            needed(nodemedic_drainer::act::PERMISSIONS),
            "the drainer's rights are the base's"
        );
        // The drainer signs with the key its pod mounts from a Secret its token cannot read.
        let drainer = find(&overlay, "Deployment", "nodemedic-drainer");
        let spec = pod_spec(drainer);
        assert!(
            spec["containers"][0]["args"]
                .to_string()
                .contains("--reboot-signing-key=")
        );
        assert!(
            spec["volumes"]
                .to_string()
                .contains("nodemedic-drainer-reboot-key")
        );
        let roles = serde_json::to_string(
            &overlay
                .iter()
                .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(
            !roles.contains("nodemedic-drainer-reboot-key"),
            "no role lets a token read the signing key"
        );
    }
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert_eq!(granted(&plain, "nodemedic-detector"), base);
    v["detector"]["reboot"]["enabled"] = json!(true);
    let public = nodemedic_common::reboot::SigningKey::from_pem(
        &nodemedic_common::reboot::SigningKey::generate_pem(),
        "key.pem",
    )
    .unwrap()
    .verifying_key()
    .to_pem();
    v["detector"]["reboot"]["publicKey"] = json!(public);
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&with);
    assert_eq!(granted(&with, "nodemedic-detector"), with_reboot);
    assert!(reads_requests(&with, "nodemedic-drainer-reboots"));
    let (args, host_pid) = detector_args(&with);
    assert!(
        args.contains("--reboot-requests=kube-system/nodemedic-drainer-reboots"),
        "{args}"
    );
    assert!(args.contains("--reboot-public-key="), "{args}");
    assert!(host_pid);
    let key = find(&with, "ConfigMap", "nodemedic-reboot-public-key");
    assert_eq!(key["data"]["public.pem"], json!(public));
    let spec = pod_spec(find(&with, "Deployment", "nodemedic-drainer"));
    assert!(
        spec["containers"][0]["args"]
            .to_string()
            .contains("--reboot-signing-key=")
    );
}

/// Power-cycling through Metal3 only where its component grants it, exactly that, in the hosts'
/// namespace only.
#[test]
fn power_cycling_through_metal3_is_granted_only_where_configured_and_exactly() {
    power_cycling_component_grants(
        "metal3",
        nodemedic_drainer::act::METAL3_PERMISSIONS,
        "metal3",
    );
}

/// Power-cycling through Fence Agents Remediation likewise, in the remediator's namespace only.
#[test]
fn power_cycling_through_medik8s_is_granted_only_where_configured_and_exactly() {
    power_cycling_component_grants(
        "medik8s",
        nodemedic_drainer::act::MEDIK8S_PERMISSIONS,
        "medik8s",
    );
}

/// The base with `deploy/components/power-cycle-PROVIDER` grants the drainer exactly its own
/// permissions and `extra`, in a Role in `namespace`.
fn power_cycling_component_grants(
    provider: &str,
    extra: &[nodemedic_common::rbac::Permission],
    namespace: &str,
) {
    use std::collections::BTreeSet;
    let base = needed(nodemedic_drainer::act::PERMISSIONS);
    let with: BTreeSet<_> = base.union(&needed(extra)).cloned().collect();
    let dir = repo().join(format!("target/{provider}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!("resources:\n  - ../../deploy/base\ncomponents:\n  - ../../deploy/components/power-cycle-{provider}\n"),
    )
    .unwrap();
    let rendered = kustomize(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let Some(objects) = rendered else { return };
    check_types(&objects);
    assert_eq!(granted(&objects, "nodemedic-drainer"), with);
    let role = find(
        &objects,
        "Role",
        &format!("nodemedic-drainer-power-cycle-{provider}"),
    );
    assert_eq!(
        role["metadata"]["namespace"], namespace,
        "one namespace only"
    );
}

/// The chart's `drainer.powerCycle`: each provider's flags, and for metal3 and medik8s exactly
/// their permissions, in the one namespace they reach; the http provider's token mounted.
#[test]
fn the_charts_power_cycle_providers_get_their_flags_and_exactly_their_roles() {
    use std::collections::BTreeSet;
    let base = needed(nodemedic_drainer::act::PERMISSIONS);
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert_eq!(granted(&plain, "nodemedic-drainer"), base);
    // A machine reached only for a node under remediation needs the guard's certificate: without
    // the guard the chart says so instead of rendering a token that reaches every machine.
    v["drainer"]["powerCycle"]["provider"] = json!("metal3");
    let refused = helm_template_refused(&chart(), &v).unwrap();
    assert!(refused.contains("need guard.enabled"), "{refused}");
    v["guard"]["enabled"] = json!(true);
    let args = |objects: &[Value]| {
        let d = find(objects, "Deployment", "nodemedic-drainer");
        pod_spec(d)["containers"][0]["args"].to_string()
    };
    for (provider, extra, namespace, flags) in [
        (
            "metal3",
            nodemedic_drainer::act::METAL3_PERMISSIONS,
            "metal3",
            vec!["--power-cycle-provider=metal3"],
        ),
        (
            "medik8s",
            nodemedic_drainer::act::MEDIK8S_PERMISSIONS,
            "fence",
            vec![
                "--power-cycle-provider=medik8s",
                "--remediation-template=FenceAgentsRemediationTemplate/fence/far-ipmi",
            ],
        ),
    ] {
        v["drainer"]["powerCycle"]["provider"] = json!(provider);
        v["drainer"]["powerCycle"]["remediationTemplate"] =
            json!("FenceAgentsRemediationTemplate/fence/far-ipmi");
        let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
        check_types(&with);
        let want: BTreeSet<_> = base.union(&needed(extra)).cloned().collect();
        assert_eq!(granted(&with, "nodemedic-drainer"), want, "{provider}");
        let role = find(&with, "Role", "nodemedic-drainer-power-cycle");
        assert_eq!(role["metadata"]["namespace"], namespace, "{provider}");
        for f in flags {
            assert!(args(&with).contains(f), "{provider}: {}", args(&with));
        }
        // The component's policy confining the token to what the drainer does (issue 76), the
        // same rules as the kustomize component's; the medik8s one bound to the chart's template.
        let (component, policy) = match provider {
            "metal3" => ("power-cycle-metal3", "nodemedic-drainer-metal3-reboot-only"),
            _ => ("power-cycle-medik8s", "nodemedic-drainer-own-remediations"),
        };
        same_policy(&with, component, policy);
        same_webhook(&with, component, provider);
        if provider == "medik8s" {
            let b = find(&with, "ValidatingAdmissionPolicyBinding", policy);
            assert_eq!(
                b["spec"]["paramRef"],
                json!({"name": "far-ipmi", "namespace": "fence", "parameterNotFoundAction": "Deny"})
            );
        }
    }
    // Another remediator's template: the Role grants its own kinds (issue 76, point 6).
    let mut snr = v.clone();
    snr["drainer"]["powerCycle"] = json!({"provider": "medik8s",
        "remediationTemplate": "SelfNodeRemediationTemplate/snr/automatic"});
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&snr)).unwrap();
    let role = find(&with, "Role", "nodemedic-drainer-power-cycle");
    assert_eq!(role["metadata"]["namespace"], "snr");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["self-node-remediation.medik8s.io"], "resources": ["selfnoderemediationtemplates"], "verbs": ["get"]},
            {"apiGroups": ["self-node-remediation.medik8s.io"], "resources": ["selfnoderemediations"], "verbs": ["list", "create", "delete"]}
        ])
    );
    // And its policy confines the token to its own remediations of that kind, with the template's
    // spec (the attacker brief: the chart granted these kinds with no policy).
    let p = find(
        &with,
        "ValidatingAdmissionPolicy",
        "nodemedic-drainer-own-remediations",
    );
    assert_eq!(
        p["spec"]["paramKind"],
        json!({"apiVersion": "self-node-remediation.medik8s.io/v1alpha1", "kind": "SelfNodeRemediationTemplate"})
    );
    assert_eq!(
        p["spec"]["matchConstraints"]["resourceRules"][0]["resources"],
        json!(["selfnoderemediations"])
    );
    let b = find(
        &with,
        "ValidatingAdmissionPolicyBinding",
        "nodemedic-drainer-own-remediations",
    );
    assert_eq!(b["spec"]["paramRef"]["name"], "automatic");
    let mut capi = v.clone();
    capi["drainer"]["clusterAPI"] = json!(true);
    capi["drainer"]["powerCycle"] = json!({"provider": ""});
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&capi)).unwrap();
    same_policy(
        &with,
        "cluster-api",
        "nodemedic-drainer-machine-remediation-only",
    );
    same_webhook(&with, "cluster-api", "cluster-api");
    v["drainer"]["powerCycle"] = json!({"provider": "http", "url": "https://bmc-gateway.example/power",
        "tokenSecret": "bmc-token"});
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    assert_eq!(
        granted(&with, "nodemedic-drainer"),
        base,
        "an endpoint needs no role"
    );
    let a = args(&with);
    assert!(
        a.contains("--power-cycle-url=https://bmc-gateway.example/power")
            && a.contains("--power-cycle-token-file=/var/run/nodemedic/power-cycle/token"),
        "{a}"
    );
    let spec = pod_spec(find(&with, "Deployment", "nodemedic-drainer"));
    assert!(spec["volumes"].to_string().contains("bmc-token"), "{spec}");
}

#[test]
fn marking_machines_is_granted_only_where_configured_and_exactly() {
    use std::collections::BTreeSet;
    let base = needed(nodemedic_drainer::act::PERMISSIONS);
    let with_machines: BTreeSet<_> = base
        .union(&needed(nodemedic_drainer::act::CLUSTER_API_PERMISSIONS))
        .cloned()
        .collect();
    let and_delete: BTreeSet<_> = with_machines
        .union(&needed(nodemedic_drainer::act::DELETE_NODES_PERMISSIONS))
        .cloned()
        .collect();
    if let Some(overlay) = kustomize(&repo().join("deploy/cluster-api")) {
        check_types(&overlay);
        assert_eq!(granted(&overlay, "nodemedic-drainer"), and_delete);
        assert_eq!(
            granted(&overlay, "nodemedic-detector"),
            needed(nodemedic_detector::report::kube::PERMISSIONS)
        );
    }
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert_eq!(granted(&plain, "nodemedic-drainer"), base);
    v["drainer"]["clusterAPI"] = json!(true);
    v["guard"]["enabled"] = json!(true);
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&with);
    assert_eq!(granted(&with, "nodemedic-drainer"), with_machines);
}

/// Issue 79: kured's lock is read only where kured is named, and exactly (the kured component and
/// the chart's drainer.kuredDaemonSet grant the same, with the flag).
#[test]
fn reading_kureds_lock_is_granted_only_where_configured_and_exactly() {
    use std::collections::BTreeSet;
    let base = needed(nodemedic_drainer::act::PERMISSIONS);
    let with_kured: BTreeSet<_> = base
        .union(&needed(nodemedic_drainer::act::KURED_PERMISSIONS))
        .cloned()
        .collect();
    let dir = tempfile::tempdir_in(repo().join("target")).unwrap();
    let rel = dir
        .path()
        .strip_prefix(repo())
        .unwrap()
        .components()
        .count();
    let up = "../".repeat(rel);
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!("resources: [{up}deploy/base]\ncomponents: [{up}deploy/components/kured]\n"),
    )
    .unwrap();
    if let Some(overlay) = kustomize(dir.path()) {
        check_types(&overlay);
        assert_eq!(granted(&overlay, "nodemedic-drainer"), with_kured);
        let role = find(&overlay, "Role", "nodemedic-drainer-kured");
        assert_eq!(role["rules"][0]["resourceNames"], json!(["kured"]));
    }
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["drainer"]["kuredDaemonSet"] = json!("kube-system/kured");
    let Some(with) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    check_types(&with);
    assert_eq!(granted(&with, "nodemedic-drainer"), with_kured);
    let role = find(&with, "Role", "nodemedic-drainer-kured");
    assert_eq!(role["rules"][0]["resourceNames"], json!(["kured"]));
    let d = find(&with, "Deployment", "nodemedic-drainer");
    let args = pod_spec(d)["containers"][0]["args"].to_string();
    assert!(
        args.contains("--kured-daemonset=kube-system/kured"),
        "{args}"
    );
}

#[test]
fn force_deleting_pods_is_granted_only_where_configured_and_exactly() {
    use std::collections::BTreeSet;
    let base_and_delete: BTreeSet<_> = needed(nodemedic_drainer::act::PERMISSIONS)
        .union(&needed(nodemedic_drainer::act::FORCE_DELETE_PERMISSIONS))
        .cloned()
        .collect();
    if let Some(overlay) = kustomize(&repo().join("deploy/allow-force-delete")) {
        check_types(&overlay);
        check_labels(&overlay, false);
        assert_eq!(granted(&overlay, "nodemedic-drainer"), base_and_delete);
    }
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert!(
        !granted(&plain, "nodemedic-drainer")
            .iter()
            .any(|(_, r, verb, _)| r == "pods" && verb == "delete"),
        "no pod delete without allowForceDelete"
    );
    v["drainer"]["config"]["allowForceDelete"] = json!(true);
    let with = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&with);
    assert_eq!(granted(&with, "nodemedic-drainer"), base_and_delete);
}

#[test]
fn helm_adds_the_exec_checks_asked_for_with_the_namespaces_they_need() {
    let mut v: Value = docs(&chart().join("values.yaml")).remove(0);
    v["detector"]["checks"] = json!(["kubelet-monitor", "readonly-root-monitor"]);
    v["detector"]["hostNetwork"] = json!(true);
    v["detector"]["hostPID"] = json!(true);
    let Some(objects) = helm_template(&chart(), "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    check_configs(&objects);
    let rules = find(&objects, "ConfigMap", "nodemedic-detector-rules");
    assert!(rules["data"]["kubelet-monitor.yaml"].is_string());
    assert!(rules["data"]["readonly-root-monitor.yaml"].is_string());
    let ds = find(&objects, "DaemonSet", "nodemedic-detector");
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostNetwork"], true);
    assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(spec["hostPID"], true);
    // In the node's network namespace it listens on the node's address, not on every interface.
    let c = &spec["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"--listen=$(POD_IP):20257"), "{args:?}");
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "POD_IP"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"),
        "{c}"
    );
    let own_netns = helm_template(&chart(), "nodemedic", "kube-system", None).unwrap();
    let ds = find(&own_netns, "DaemonSet", "nodemedic-detector");
    let args = ds["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--listen=0.0.0.0:20257") && !args.contains("POD_IP"),
        "{args}"
    );
    // The chart's copies are the shipped files.
    for f in std::fs::read_dir(repo().join("config/checks"))
        .unwrap()
        .flatten()
    {
        if f.path().extension().is_some_and(|e| e == "yaml") {
            assert_eq!(
                std::fs::read_to_string(f.path()).unwrap(),
                std::fs::read_to_string(chart().join("checks").join(f.file_name())).unwrap(),
                "deploy/helm/nodemedic/checks/{:?} differs from config/checks",
                f.file_name()
            );
        }
    }
    // A check that is not there is refused by the schema.
    v["detector"]["checks"] = json!(["kubelet-monitr"]);
    match helm_lint(&chart(), Some(&v)) {
        Some(Err(report)) => assert!(report.contains("/detector/checks/0"), "{report}"),
        other => panic!("a misspelt check passed helm lint: {other:?}"),
    }
}

/// The drainer's memory figure is one measurement, said the same way where requests are set.
#[test]
fn the_drainers_memory_comment_is_the_same_in_kustomize_and_helm() {
    let measured = |path: &str| -> String {
        let text = std::fs::read_to_string(repo().join(path)).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let start = lines
            .iter()
            .position(|l| l.starts_with("# Measured (docs/benchmarks.md): RSS"))
            .unwrap_or_else(|| panic!("{path}: no drainer memory comment"));
        lines[start..]
            .iter()
            .take_while(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let base = measured("deploy/base/drainer-deployment.yaml");
    assert!(base.contains("MiB"), "{base}");
    assert_eq!(base, measured("deploy/helm/nodemedic/values.yaml"));
}

/// SECURITY.md's identity table says what the detector and the drainer may do: exactly what
/// their code calls (and so what the shipped RBAC grants, checked above), no more, no less.
#[test]
fn the_threat_model_lists_exactly_the_rights_each_part_holds() {
    use std::collections::BTreeSet;
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../SECURITY.md")).unwrap();
    let said = |who: &str| -> BTreeSet<(String, String)> {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| **{who}**")))
            .unwrap_or_else(|| panic!("no row for {who} in SECURITY.md"));
        let may = row.split(" | ").nth(1).unwrap();
        may.split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|rule| {
                let (resource, verbs) = rule.split_once(' ').unwrap();
                verbs
                    .split('/')
                    .map(|v| (resource.to_string(), v.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let code = |perms: &[nodemedic_common::rbac::Permission]| -> BTreeSet<(String, String)> {
        perms
            .iter()
            .flat_map(|p| {
                p.verbs
                    .iter()
                    .map(|v| (p.resource.to_string(), v.to_string()))
            })
            .collect()
    };
    assert_eq!(
        said("the detector"),
        code(nodemedic_detector::report::kube::PERMISSIONS)
    );
    assert_eq!(
        said("the drainer"),
        code(nodemedic_drainer::act::PERMISSIONS)
    );
}

/// deploy/kubelet-credential: the detector runs with the node's kubelet kubeconfig (mounted
/// read-only from the host), and holds no ServiceAccount token at all; the rest is the base.
#[test]
fn the_kubelet_credential_overlay_gives_the_detector_the_nodes_credential_only() {
    let Some(objects) = kustomize(&repo().join("deploy/kubelet-credential")) else {
        return;
    };
    check_types(&objects);
    check_rbac(&objects);
    let ds = find(&objects, "DaemonSet", "nodemedic-detector");
    let spec = checks::pod_spec(ds);
    assert_eq!(spec["automountServiceAccountToken"], false);
    let c = &spec["containers"][0];
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "KUBECONFIG" && e["value"] == "/etc/kubernetes/kubelet.conf"),
        "{env:?}"
    );
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mounted = |p: &str| mounts.iter().find(|m| m["mountPath"] == p);
    assert!(mounted("/var/run/secrets/kubernetes.io/serviceaccount").is_none());
    for p in ["/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/pki"] {
        assert_eq!(
            mounted(p).map(|m| m["readOnly"].clone()),
            Some(true.into()),
            "{p}"
        );
    }
    // Everything the base mounts besides the token is still there.
    for p in [
        "/dev/kmsg",
        "/var/log/journal",
        "/etc/nodemedic/rules",
        "/var/lib/nodemedic",
    ] {
        assert!(mounted(p).is_some(), "{p} lost");
    }
    let volumes = spec["volumes"].as_array().unwrap();
    assert!(volumes.iter().all(|v| v["name"] != "token"));
}

/// The README's install section: its kustomize overlay and its `helm install --set` flags point
/// both workloads at the images the operator built (copied from the README, not restated here).
#[test]
fn the_readmes_overlay_and_helm_values_point_both_workloads_at_your_images() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let after = &readme[readme
        .find("my-cluster/kustomization.yaml")
        .expect("the overlay")..];
    let yaml = after
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the overlay's block");
    let dir = repo().join(format!("target/readme-overlay-{}", std::process::id()));
    let overlay = dir.join("my-cluster");
    std::fs::create_dir_all(&overlay).unwrap();
    // The README's overlay sits beside deploy/; this one two folders deeper.
    std::fs::write(
        overlay.join("kustomization.yaml"),
        yaml.replace("../deploy", "../../../deploy"),
    )
    .unwrap();
    let rendered = kustomize(&overlay);
    std::fs::remove_dir_all(&dir).unwrap();
    let Some(rendered) = rendered else { return };
    let image = |docs: &[Value], kind: &str, name: &str| {
        pod_spec(find(docs, kind, name))["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        image(&rendered, "DaemonSet", "nodemedic-detector"),
        "REGISTRY/nodemedic/detector:0.1.0"
    );
    assert_eq!(
        image(&rendered, "Deployment", "nodemedic-drainer"),
        "REGISTRY/nodemedic/drainer:0.1.0"
    );

    // `helm install ... --set K=V ...` as the README writes it.
    let install = &readme[readme.find("helm install nodemedic").expect("helm install")..];
    let install = install[..install.find("```").unwrap()].replace("\\\n", " ");
    let mut values = json!({});
    for set in install.split_whitespace().skip_while(|w| *w != "--set") {
        let Some((path, v)) = set.split_once('=') else {
            continue;
        };
        let mut at = &mut values;
        for key in path.split('.') {
            at = at.as_object_mut().unwrap().entry(key).or_insert(json!({}));
        }
        *at = json!(v);
    }
    let Some(helm) = helm_template(&chart(), "nodemedic", "kube-system", Some(&values)) else {
        return;
    };
    assert!(
        image(&helm, "DaemonSet", "nodemedic-detector").starts_with("REGISTRY/nodemedic/detector:"),
        "{values}"
    );
    assert!(
        image(&helm, "Deployment", "nodemedic-drainer").starts_with("REGISTRY/nodemedic/drainer:")
    );
}

#[test]
fn the_plugins_roles_grant_exactly_what_it_reads_by_name_and_bind_nobody() {
    let Some(objects) = kustomize(&repo().join("deploy/kubectl-plugin")) else {
        return;
    };
    check_types(&objects);
    check_labels(&objects, false);
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 2, "two roles and no binding: {kinds:?}");
    let cluster = rules_of(find(&objects, "ClusterRole", "nodemedic-plugin-reader"));
    let role = find(&objects, "Role", "nodemedic-plugin-reader");
    let namespaced = rules_of(role);
    let names: Vec<&Value> = (role["rules"].as_array().unwrap().iter())
        .map(|r| &r["resourceNames"])
        .collect();
    let granted: std::collections::BTreeSet<_> = cluster.union(&namespaced).cloned().collect();
    assert_eq!(granted, needed(nodemedic_drainer::live::PERMISSIONS));
    assert!(
        granted
            .iter()
            .all(|(_, _, verb, _)| ["get", "list"].contains(&verb.as_str())),
        "read only: {granted:?}"
    );
    // In the drainer's namespace, only the objects it names.
    assert!(
        names
            .iter()
            .all(|n| n.as_array().is_some_and(|a| !a.is_empty())),
        "{names:?}"
    );
    let role = find(&objects, "Role", "nodemedic-plugin-reader");
    assert_eq!(role["metadata"]["namespace"], "kube-system");

    // Helm's chart: none by default; asked for, the same roles (under the release's names).
    let plain = helm_template(&chart(), "nodemedic", "kube-system", None).unwrap_or_default();
    assert!(
        !plain
            .iter()
            .any(|o| o["metadata"]["name"] == "nodemedic-plugin-reader")
    );
    let values = json!({"kubectlPlugin": {"readerRoles": true}});
    let Some(helm) = helm_template(&chart(), "nodemedic", "kube-system", Some(&values)) else {
        return;
    };
    for kind in ["ClusterRole", "Role"] {
        let ours = find(&helm, kind, "nodemedic-plugin-reader");
        let theirs = find(&objects, kind, "nodemedic-plugin-reader");
        assert_eq!(ours["rules"], theirs["rules"], "{kind}");
    }
    assert!(
        !helm.iter().any(
            |o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))
                && o["roleRef"]["name"] == "nodemedic-plugin-reader"
        ),
        "no binding"
    );
    let other = helm_template(&chart(), "other", "ops", Some(&values)).unwrap();
    let role = find(&other, "Role", "other-nodemedic-plugin-reader");
    assert_eq!(role["metadata"]["namespace"], "ops");
    assert_eq!(
        role["rules"][0]["resourceNames"],
        json!(["other-nodemedic-drainer"])
    );
}
