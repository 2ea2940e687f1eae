//! The own-node policy (deploy/own-node-policy, part of deploy/; Helm `detector.ownNodeOnly: auto`):
//! rendered the same by both, attacked with the detector's own token on the test API server (which
//! evaluates it), and enforced by real kube-apiservers of the oldest and newest supported releases:
//! there the shipped policy is installed as it is (renamed, and matching the scenario's own
//! ServiceAccount, so scenarios sharing the control plane are not its business), and the detector's
//! token is a real one from the TokenRequest API, bound to a pod on its node, carrying the
//! `authentication.kubernetes.io/node-name` claim the policy reads.

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
        4,
        "the base ships the detector's policy and the drainer's, each with its binding"
    );
    crate::assert_same_as_kustomize(&vap(&helm), &vap(&base), "own-node policy: Helm vs deploy/");
    // The drainer's NoExecute taints, named in its settings, are the only ones its policy lets it
    // write (kustomize users list them in the policy by hand).
    let mut tainted = v.clone();
    tainted["drainer"]["config"]["problemTaints"] = json!([
        "nodemedic.io/problem=disk:NoExecute",
        "nodemedic.io/soft:NoSchedule"
    ]);
    tainted["drainer"]["config"]["afterDrainTaints"] = json!(["example.com/drained:NoExecute"]);
    let t = helm_template(&chart, "nodemedic", "kube-system", Some(&tainted)).unwrap();
    let p = find(
        &t,
        "ValidatingAdmissionPolicy",
        "nodemedic-drainer-node-writes",
    );
    let keys = p["spec"]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "noExecuteKeys")
        .unwrap()["expression"]
        .clone();
    assert_eq!(
        keys,
        json!("['nodemedic.io/problem', 'example.com/drained']")
    );
    // Opting out (or a cluster before 1.30, tested by the NOTES' wording): no policy.
    v["detector"]["ownNodeOnly"] = json!(false);
    let off = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    assert!(vap(&off).is_empty());
    for overlay in ["deploy/cluster-wide", "deploy/kubelet-credential"] {
        let objs = kustomize(&repo().join(overlay)).unwrap();
        assert!(vap(&objs).is_empty(), "{overlay} leaves the policy out");
        assert_eq!(
            objs.len(),
            base.len() - 4,
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

/// The shipped policy and its binding, renamed `id` and matching the ServiceAccount `id` instead of
/// `nodemedic-detector` (in any namespace, as shipped); every rule as it ships.
fn renamed(shipped: &[Value], id: &str) -> (Value, Value) {
    let (mut policy, mut binding) = (shipped[0].clone(), shipped[1].clone());
    let conditions = policy["spec"]["matchConditions"].as_array_mut().unwrap();
    let matched = conditions[0]["expression"].as_str().unwrap();
    assert!(matched.contains("'nodemedic-detector'"), "{matched}");
    conditions[0]["expression"] =
        json!(matched.replace("'nodemedic-detector'", &format!("'{id}'")));
    policy["metadata"]["name"] = json!(id);
    binding["metadata"]["name"] = json!(id);
    binding["spec"]["policyName"] = json!(id);
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

/// PATCH a node's status with `client`, as the detector writes it.
async fn patch_status_as(client: &kube::Client, node: &str) -> Result<(), kube::Error> {
    patch_as(client, node, &condition_patch()).await
}

/// PATCH `body` onto a node's status with `client`.
async fn patch_as(client: &kube::Client, node: &str, body: &Value) -> Result<(), kube::Error> {
    let req = Request::patch(format!("/api/v1/nodes/{node}/status"))
        .header("Content-Type", "application/strategic-merge-patch+json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    client.request_text(req).await.map(drop)
}

fn denied_by_policy(r: &Result<(), kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("only the status of the node it runs on"))
}

/// A token for ServiceAccount `sa` in `ns` from the TokenRequest API, bound to `pod` when given
/// (the API server then writes the pod's node into its claims).
async fn token(cluster: &Cluster, ns: &str, sa: &str, pod: Option<(&str, &str)>) -> String {
    let mut spec = json!({"expirationSeconds": 3600});
    if let Some((name, uid)) = pod {
        spec["boundObjectRef"] =
            json!({"kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid});
    }
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let req = Request::post(format!(
        "/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
    ))
    .header("Content-Type", "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    let answer: Value =
        serde_json::from_str(&cluster.client.request_text(req).await.expect("a token")).unwrap();
    answer["status"]["token"]
        .as_str()
        .expect("status.token")
        .to_string()
}

/// POST `object` to `path` as the admin; what the API server stored.
async fn create(client: &kube::Client, path: &str, object: Value) -> Value {
    let req = Request::post(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&object).unwrap())
        .unwrap();
    let text = client
        .request_text(req)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_detector_may_patch_only_its_own_nodes_status_on_a_real_api_server() {
    let planes = envtest::shared_planes();
    if planes.is_empty() {
        envtest::say_skipped(
            "the own-node policy on the real control plane",
            "kube-apiserver's own ValidatingAdmissionPolicy evaluation and real ServiceAccount tokens (the tests below check the policy on the test API server's)",
        );
        return;
    }
    for plane in planes {
        own_node_policy_on(Cluster::on(plane)).await;
    }
}

async fn own_node_policy_on(cluster: Cluster) {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let release = cluster.release().to_string();
    let own = cluster.create_node("own").await;
    let other = cluster.create_node("other").await;
    let id = cluster.name("vap");
    let ns = id.clone();
    let else_sa = format!("{id}-else");
    create(
        &cluster.client,
        "/api/v1/namespaces",
        json!({"metadata": {"name": ns}}),
    )
    .await;
    for sa in [&id, &else_sa] {
        let path = format!("/api/v1/namespaces/{ns}/serviceaccounts");
        create(&cluster.client, &path, json!({"metadata": {"name": sa}})).await;
    }

    // The shipped policy, for this scenario's ServiceAccount and under unique names.
    let shipped = docs(&repo().join(nodemedic_tests::admission::OWN_NODE_POLICY));
    let (policy, binding) = renamed(&shipped, &id);
    let kind = |k: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", k),
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
        .unwrap_or_else(|e| panic!("{release} takes the shipped policy as it is: {e}"));
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("{release} takes the shipped binding as it is: {e}"));

    // The detector's rights, from the shipped RBAC, for both ServiceAccounts.
    let rbac = docs(&repo().join("deploy/base/detector-rbac.yaml"));
    let mut role = rbac
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .unwrap()
        .clone();
    role["metadata"] = json!({"name": id});
    create(
        &cluster.client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        role,
    )
    .await;
    create(
        &cluster.client,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({
        "metadata": {"name": id},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": ns},
                     {"kind": "ServiceAccount", "name": else_sa, "namespace": ns}]}),
    )
    .await;

    // The detector's pod on its node, and its token bound to that pod: the claim is the API
    // server's, not the holder's.
    let pod = create(
        &cluster.client,
        &format!("/api/v1/namespaces/{ns}/pods"),
        json!({
        "metadata": {"name": "detector"},
        "spec": {"nodeName": own, "serviceAccountName": id,
                 "containers": [{"name": "detector", "image": "nodemedic/detector"}]}}),
    )
    .await;
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let detector = cluster
        .plane
        .unwrap()
        .client_with_token(&token(&cluster, &ns, &id, Some(("detector", &uid))).await);
    let unbound = cluster
        .plane
        .unwrap()
        .client_with_token(&token(&cluster, &ns, &id, None).await);

    // The policy takes effect once the API server has compiled it.
    eventually(
        "the policy to deny another node's status",
        Duration::from_secs(60),
        || async { denied_by_policy(&patch_status_as(&detector, &other).await).then_some(()) },
    )
    .await;
    patch_status_as(&detector, &own)
        .await
        .unwrap_or_else(|e| panic!("{release}: its own node's status is allowed: {e}"));
    let own_annotation = json!({"metadata": {"annotations": {"nodemedic.io/detector-conditions": "KernelDeadlock"}}});
    patch_as(&detector, &own, &own_annotation)
        .await
        .unwrap_or_else(|e| panic!("{release}: its own annotation is allowed: {e}"));
    for (what, body, words) in attacks() {
        let r = patch_as(&detector, &own, &body).await;
        assert!(
            matches!(&r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(words)),
            "{release}: {what}: {r:?}"
        );
    }
    let no_claim = patch_status_as(&unbound, &own).await;
    assert!(
        denied_by_policy(&no_claim),
        "{release}: a token bound to no pod has no node claim, so no write: {no_claim:?}"
    );
    // Other ServiceAccounts (the kubelet, other controllers) are not the policy's business.
    let else_client = cluster
        .plane
        .unwrap()
        .client_with_token(&token(&cluster, &ns, &else_sa, None).await);
    patch_status_as(&else_client, &other)
        .await
        .unwrap_or_else(|e| panic!("{release}: another ServiceAccount is not the policy's: {e}"));

    let dp = kube::api::DeleteParams::default();
    let _ = bindings.delete(&id, &dp).await;
    let _ = policies.delete(&id, &dp).await;
    let _ = Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .delete(&id, &dp)
        .await;
    let _ = Api::<ClusterRole>::all(cluster.client.clone())
        .delete(&id, &dp)
        .await;
    let _ = Api::<Namespace>::all(cluster.client.clone())
        .delete(&ns, &dp)
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
