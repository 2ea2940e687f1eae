//! The own-node policy (deploy/own-node-policy, part of deploy/; Helm `detector.ownNodeOnly: auto`):
//! rendered the same by both, attacked with the detector's own token on the test API server (which
//! evaluates it), and enforced by a real kube-apiserver where one is at hand.
//!
//! The harness's kube-apiserver is v1.26: ValidatingAdmissionPolicy is alpha there (the harness turns
//! its feature gate on) and service account tokens carry no node-name claim yet (1.30+). So the
//! scenario serves the shipped policy as `v1alpha1` (without `validationActions`, which v1alpha1 does
//! not have: its bindings always deny) and gives the detector's user the claim by impersonation
//! (`Impersonate-Extra-authentication.kubernetes.io%2fnode-name`), as a 1.30+ token would carry it.

use std::time::Duration;

use http::Request;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest;
use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

#[test]
fn helm_renders_the_bases_own_node_policy_on_1_30_and_names_cluster_wide_mode_otherwise() {
    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    assert_eq!(
        v["detector"]["ownNodeOnly"], "auto",
        "on by default where it can work"
    );
    let Some(helm) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    check_types(&helm);
    // Offline rendering assumes a current Kubernetes: the policy is there, as in the base.
    let Some(base) = kustomize(&repo().join("deploy")) else {
        return;
    };
    let vap = |objs: &[Value]| -> Vec<Value> {
        objs.iter()
            .filter(|o| {
                o["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        vap(&base).len(),
        2,
        "the base ships the policy and its binding"
    );
    crate::assert_same_as_kustomize(&vap(&helm), &vap(&base), "own-node policy: Helm vs deploy/");
    // Opting out (or a cluster before 1.30, tested by the NOTES' wording): no policy.
    v["detector"]["ownNodeOnly"] = json!(false);
    let off = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    assert!(vap(&off).is_empty());
    for overlay in ["deploy/cluster-wide", "deploy/kubelet-credential"] {
        let objs = kustomize(&repo().join(overlay)).unwrap();
        assert!(vap(&objs).is_empty(), "{overlay} leaves the policy out");
        assert_eq!(
            objs.len(),
            base.len() - 2,
            "{overlay} changes nothing else's count"
        );
    }
    // The user the policy matches is the release's detector ServiceAccount (or one a namePrefix
    // renamed), in any namespace.
    v["detector"]["ownNodeOnly"] = json!(true);
    let other = helm_template(&chart, "edge", "monitoring", Some(&v)).unwrap();
    let p = find(
        &other,
        "ValidatingAdmissionPolicy",
        "edge-nodemedic-detector-own-node",
    );
    let expr = p["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        expr.contains("endsWith('edge-nodemedic-detector')"),
        "{expr}"
    );
    find(&other, "ServiceAccount", "edge-nodemedic-detector");
    // Issue 64, point 7: before 1.30 ("auto" there, or "kubelet" anywhere) the detector runs with
    // its node's own credential, as deploy/kubelet-credential: no ServiceAccount token at all.
    v["detector"]["ownNodeOnly"] = json!("kubelet");
    let kubelet = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&kubelet);
    assert!(vap(&kubelet).is_empty());
    let overlay = kustomize(&repo().join("deploy/kubelet-credential")).unwrap();
    let spec = |objs: &[Value]| pod_spec(find(objs, "DaemonSet", "nodemedic-detector")).clone();
    let (h, k) = (spec(&kubelet), spec(&overlay));
    let mounts = |s: &Value| {
        let mut m: Vec<String> = s["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap().to_string())
            .collect();
        m.sort();
        m
    };
    assert_eq!(
        mounts(&h),
        mounts(&k),
        "the same mounts as deploy/kubelet-credential"
    );
    assert!(
        !mounts(&h).iter().any(|m| m.contains("serviceaccount")),
        "no token"
    );
    let env = h["containers"][0]["env"].to_string();
    assert!(env.contains("/etc/kubernetes/kubelet.conf"), "{env}");
}

#[test]
fn helm_notes_name_cluster_wide_mode_when_the_policy_is_off() {
    let chart = repo().join("deploy/helm/nodemedic");
    let notes = std::fs::read_to_string(chart.join("templates/NOTES.txt")).unwrap();
    assert!(
        notes.contains("include \"nodemedic.ownNodeOnly\""),
        "{notes}"
    );
    assert!(notes.contains("WARNING: cluster-wide mode"), "{notes}");
}

/// The shipped policy as v1.26's `v1alpha1` takes it, matching user `...:<id>` under name `id`:
/// v1alpha1 has neither `matchConditions` (1.27) nor `variables` (1.28) nor `validationActions`
/// (its bindings always deny), so the variables are written out where they are used and each
/// validation passes any other user, as the match condition would.
fn for_v1alpha1(shipped: &[Value], id: &str) -> (Value, Value) {
    let (mut policy, mut binding) = (shipped[0].clone(), shipped[1].clone());
    let spec = policy["spec"].as_object_mut().unwrap();
    let mut vars: Vec<(String, String)> = Vec::new();
    for v in spec.remove("variables").unwrap().as_array().unwrap() {
        let mut expr = v["expression"].as_str().unwrap().to_string();
        for (name, e) in &vars {
            expr = expr.replace(&format!("variables.{name}"), &format!("({e})"));
        }
        vars.push((v["name"].as_str().unwrap().to_string(), expr));
    }
    let matched = spec.remove("matchConditions").unwrap()[0]["expression"]
        .as_str()
        .unwrap()
        .replace("':nodemedic-detector'", &format!("':{id}'"));
    for v in spec["validations"].as_array_mut().unwrap() {
        let mut expr = v["expression"].as_str().unwrap().to_string();
        for (name, e) in &vars {
            expr = expr.replace(&format!("variables.{name}"), &format!("({e})"));
        }
        assert!(!expr.contains("variables."), "{expr}");
        v["expression"] = json!(format!("!({matched}) || ({expr})"));
    }
    policy["apiVersion"] = json!("admissionregistration.k8s.io/v1alpha1");
    policy["metadata"]["name"] = json!(id);
    binding["apiVersion"] = json!("admissionregistration.k8s.io/v1alpha1");
    binding["metadata"]["name"] = json!(id);
    binding["spec"]["policyName"] = json!(id);
    binding["spec"]
        .as_object_mut()
        .unwrap()
        .remove("validationActions");
    (policy, binding)
}

/// A status PATCH body with one condition, as the detector writes.
fn condition_patch() -> Value {
    json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": "False",
        "reason": "KernelHasNoDeadlock", "message": "m",
        "lastHeartbeatTime": nodemedic_tests::cluster::now_rfc3339(),
        "lastTransitionTime": nodemedic_tests::cluster::now_rfc3339()}]}})
}

/// Status PATCHes of its own Node that a detector never makes, and the words of the refusal.
fn attacks() -> Vec<(&'static str, Value, &'static str)> {
    let record = json!({"phase": "Draining", "owner": "kube-system/nodemedic-drainer"}).to_string();
    vec![
        (
            "a label (exempting the node, or steering a selector)",
            json!({"metadata": {"labels": {"kosmos.io/node": "true"}}}),
            "no labels or other metadata",
        ),
        (
            "a forged drain record",
            json!({"metadata": {"annotations": {"nodemedic.io/drain": record}}}),
            "no labels or other metadata",
        ),
        (
            "a finalizer",
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
            "no labels or other metadata",
        ),
        (
            "its addresses",
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
            "only its Node's status conditions",
        ),
        (
            "its capacity",
            json!({"status": {"capacity": {"pods": "1000"}}}),
            "only its Node's status conditions",
        ),
    ]
}

/// PATCH a node's status as `user`, with the node-name claim `claim` if any.
async fn patch_status_as(
    cluster: &Cluster,
    user: &str,
    claim: Option<&str>,
    node: &str,
) -> Result<(), kube::Error> {
    patch_as(cluster, user, claim, node, &condition_patch()).await
}

/// PATCH `body` onto a node's status as `user`, with the node-name claim `claim` if any.
async fn patch_as(
    cluster: &Cluster,
    user: &str,
    claim: Option<&str>,
    node: &str,
    body: &Value,
) -> Result<(), kube::Error> {
    let mut req = Request::patch(format!("/api/v1/nodes/{node}/status"))
        .header("Content-Type", "application/strategic-merge-patch+json")
        .header("Impersonate-User", user)
        .header("Impersonate-Group", "system:serviceaccounts")
        .header("Impersonate-Group", "system:authenticated");
    if let Some(c) = claim {
        req = req.header(
            "Impersonate-Extra-authentication.kubernetes.io%2fnode-name",
            c,
        );
    }
    cluster
        .client
        .request_text(req.body(serde_json::to_vec(body).unwrap()).unwrap())
        .await
        .map(drop)
}

fn denied_by_policy(r: &Result<(), kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("only the status of the node it runs on"))
}

#[tokio::test]
async fn a_detector_may_patch_only_its_own_nodes_status_on_a_real_api_server() {
    let Some(plane) = envtest::shared() else {
        envtest::say_skipped(
            "the own-node policy on the real control plane",
            "kube-apiserver's own ValidatingAdmissionPolicy evaluation (the tests above check the policy on the test API server's)",
        );
        return;
    };
    let cluster = Cluster::on(plane);
    let own = cluster.create_node("own").await;
    let other = cluster.create_node("other").await;
    let id = cluster.name("vap");
    let user = format!("system:serviceaccount:kube-system:{id}");

    // The shipped policy, for this scenario's user and under unique names, as v1.26 takes it.
    let shipped = docs(&repo().join(nodemedic_tests::admission::OWN_NODE_POLICY));
    let (policy, binding) = for_v1alpha1(&shipped, &id);
    let kind = |k: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1alpha1", k),
            plural,
        )
    };
    let policies: Api<DynamicObject> = Api::all_with(
        cluster.client.clone(),
        &kind("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let bindings: Api<DynamicObject> = Api::all_with(
        cluster.client.clone(),
        &kind(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    );
    policies
        .create(
            &PostParams::default(),
            &serde_json::from_value(policy).unwrap(),
        )
        .await
        .expect("the API server takes the shipped policy");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();

    // The detector's rights, from the shipped RBAC, for this user.
    let rbac = docs(&repo().join("deploy/base/detector-rbac.yaml"));
    let mut role = rbac
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .unwrap()
        .clone();
    role["metadata"] = json!({"name": id});
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": id},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crb).unwrap(),
        )
        .await
        .unwrap();

    // The policy takes effect once the API server has compiled it.
    eventually(
        "the policy to deny another node's status",
        Duration::from_secs(60),
        || async {
            denied_by_policy(&patch_status_as(&cluster, &user, Some(&own), &other).await)
                .then_some(())
        },
    )
    .await;
    patch_status_as(&cluster, &user, Some(&own), &own)
        .await
        .expect("its own node's status is allowed");
    let own_annotation = json!({"metadata": {"annotations": {"nodemedic.io/detector-conditions": "KernelDeadlock"}}});
    patch_as(&cluster, &user, Some(&own), &own, &own_annotation)
        .await
        .expect("its own annotation is allowed");
    for (what, body, words) in attacks() {
        let r = patch_as(&cluster, &user, Some(&own), &own, &body).await;
        assert!(
            matches!(&r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(words)),
            "{what}: {r:?}"
        );
    }
    let no_claim = patch_status_as(&cluster, &user, None, &own).await;
    assert!(
        denied_by_policy(&no_claim),
        "no claim, no write: {no_claim:?}"
    );
    // Other users (the kubelet, other controllers) are not the policy's business.
    let other_user = format!("system:serviceaccount:kube-system:{id}-else");
    let crb2 = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{id}-else")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": other_user}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crb2).unwrap(),
        )
        .await
        .unwrap();
    eventually(
        "RBAC for the other user",
        Duration::from_secs(60),
        || async {
            patch_status_as(&cluster, &other_user, None, &other)
                .await
                .ok()
        },
    )
    .await;

    let dp = kube::api::DeleteParams::default();
    let _ = bindings.delete(&id, &dp).await;
    let _ = policies.delete(&id, &dp).await;
    for n in [id.clone(), format!("{id}-else")] {
        let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
            .delete(&n, &dp)
            .await;
    }
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster.client.clone())
        .delete(&id, &dp)
        .await;
    cluster.delete_node(&own).await;
    cluster.delete_node(&other).await;
}

/// The attacks of the issue, with the detector's own token (a ServiceAccount token with the
/// node-name claim), against the shipped policy on the test API server, which evaluates it as
/// kube-apiserver does: each write a detector never makes is refused, with words that say why;
/// what a detector does write passes; a token without the claim may write nothing; a
/// ServiceAccount of another name is not the policy's business; a dry run is judged the same.
#[tokio::test]
async fn the_shipped_policy_refuses_each_write_a_detector_does_not_make() {
    use k8s_openapi::api::core::v1::{Event, Node};
    use kube::api::{Patch, PatchParams};
    use nodemedic_tests::server::{TestApiServer, User};
    let server = TestApiServer::start().await;
    let admin = server.client();
    nodemedic_tests::admission::install_own_node_policy(&admin).await;
    let cluster = Cluster::fake_on(server.clone());
    let (own, other) = (
        cluster.create_node("own").await,
        cluster.create_node("other").await,
    );
    let as_detector = |ns: &str, node: Option<&str>| {
        Api::<Node>::all(server.client_as(User::service_account(ns, "nodemedic-detector", node)))
    };
    let detector = as_detector("kube-system", Some(&own));
    let pp = PatchParams::default();
    let patch = |api: Api<Node>, node: String, body: Value, pp: PatchParams| async move {
        api.patch_status(&node, &pp, &Patch::Strategic(body))
            .await
            .map(drop)
    };
    let refused = |r: &Result<(), kube::Error>, words: &str| {
        matches!(r, Err(kube::Error::Api(s)) if s.code == 403
            && s.message.contains("ValidatingAdmissionPolicy 'nodemedic-detector-own-node' with binding")
            && s.message.contains(words))
    };

    patch(detector.clone(), own.clone(), condition_patch(), pp.clone())
        .await
        .expect("its own conditions");
    let own_annotations = json!({"metadata": {"annotations": {
        "nodemedic.io/detector-conditions": "KernelDeadlock", "nodemedic.io/detector-rules": "r1"}}});
    patch(detector.clone(), own.clone(), own_annotations, pp.clone())
        .await
        .expect("its own annotations");
    for (what, body, words) in attacks() {
        let before = cluster.node(&own).await;
        let r = patch(detector.clone(), own.clone(), body.clone(), pp.clone()).await;
        assert!(refused(&r, words), "{what}: {r:?}");
        let dry = patch(
            detector.clone(),
            own.clone(),
            body,
            PatchParams {
                dry_run: true,
                ..pp.clone()
            },
        )
        .await;
        assert!(refused(&dry, words), "{what}, dry run: {dry:?}");
        assert_eq!(cluster.node(&own).await, before, "{what}: nothing changed");
    }
    // Another node from this node's token; its own node from a token without the claim (before
    // 1.30, or a token not bound to a pod); another node from the same name in another namespace
    // (another install, confined without a namespace written in the policy): each refused.
    let cases = [
        ("another node", detector.clone(), other.clone()),
        ("no claim", as_detector("kube-system", None), own.clone()),
        (
            "another namespace",
            as_detector("monitoring", Some(&own)),
            other.clone(),
        ),
    ];
    for (what, api, node) in cases {
        let r = patch(api, node, condition_patch(), pp.clone()).await;
        assert!(
            refused(&r, "only the status of the node it runs on"),
            "{what}: {r:?}"
        );
    }
    // Other users are not evaluated: another ServiceAccount may do what its RBAC allows.
    let else_sa = Api::<Node>::all(server.client_as(User::service_account(
        "kube-system",
        "else",
        Some(&own),
    )));
    patch(
        else_sa,
        other.clone(),
        json!({"metadata": {"labels": {"x": "y"}}}),
        pp.clone(),
    )
    .await
    .expect("not the policy's business");

    // Events: about its own Node only.
    let events = |node: Option<&str>| {
        Api::<Event>::namespaced(
            server.client_as(User::service_account(
                "kube-system",
                "nodemedic-detector",
                node,
            )),
            "default",
        )
    };
    let event = |name: &str, about: &str| -> Event {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": about, "uid": about},
            "reason": "KernelOops", "message": "m", "type": "Warning",
            "source": {"component": "kernel-monitor", "host": about}}))
        .unwrap()
    };
    events(Some(&own))
        .create(&PostParams::default(), &event("own.1", &own))
        .await
        .expect("an Event about its own node");
    let r = events(Some(&own))
        .create(&PostParams::default(), &event("other.1", &other))
        .await
        .map(drop);
    assert!(
        refused(&r, "Events only about the node it runs on"),
        "{r:?}"
    );
    // Issue 64, point 7: an Event about another node, rewritten by the detector's token into one
    // about its own node (an update checked on the new Event alone passed).
    Api::<Event>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &event("theirs.1", &other))
        .await
        .unwrap();
    let mut rewritten = event("theirs.1", &own);
    rewritten.metadata.resource_version = Api::<Event>::namespaced(admin.clone(), "default")
        .get("theirs.1")
        .await
        .unwrap()
        .metadata
        .resource_version;
    let r = events(Some(&own))
        .replace("theirs.1", &PostParams::default(), &rewritten)
        .await
        .map(drop);
    assert!(
        refused(&r, "Events only about the node it runs on"),
        "{r:?}"
    );
    // A kustomize namePrefix renames the ServiceAccount: still confined.
    let prefixed = Api::<Node>::all(server.client_as(User::service_account(
        "kube-system",
        "team-nodemedic-detector",
        Some(&own),
    )));
    let r = patch(prefixed, other.clone(), condition_patch(), pp.clone()).await;
    assert!(
        refused(&r, "only the status of the node it runs on"),
        "{r:?}"
    );
}
