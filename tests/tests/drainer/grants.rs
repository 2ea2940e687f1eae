//! Issue 76, point 2: the power-cycle and Cluster API components grant the drainer's token patch,
//! create and delete on whole kinds (every BareMetalHost, Machine or FenceAgentsRemediation in a
//! namespace). Their ValidatingAdmissionPolicies (`deploy/components/*/policy.yaml`) narrow that to
//! what the drainer does, on a real kube-apiserver of each supported release, as the drainer's
//! ServiceAccount under the component's shipped Role: a stolen token cannot power a host off,
//! change its image or BMC, edit a Machine, fence a node through an agent of its choosing or delete
//! another remediator's object; the drainer's own writes still go through. Which node's machine it may reach
//! at all is the machines webhook's to say (`machines.rs`): a policy cannot read the Node.

use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::Env;

pub(super) const SA: &str = "system:serviceaccount:kube-system:nodemedic-drainer";

pub(super) fn component(name: &str, file: &str) -> Vec<Value> {
    let path = format!(
        "{}/../deploy/components/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---")
        .filter(|d| d.contains("kind:"))
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect()
}

/// Create `v` (any kind) as the administrator, or replace what is there.
pub(super) async fn apply(client: &kube::Client, v: &Value) {
    let api_version = v["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = v["kind"].as_str().unwrap();
    let plural = match kind {
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies".to_string(),
        "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings".to_string(),
        other => format!("{}s", other.to_lowercase()),
    };
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    let api: Api<DynamicObject> = match v["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let name = v["metadata"]["name"].as_str().unwrap();
    let pp = PatchParams::apply("nodemedic-test").force();
    api.patch(name, &pp, &Patch::Apply(v))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}

/// Delete the ValidatingAdmissionPolicies and bindings among `shipped`: they bind cluster-wide.
pub(super) async fn remove_policies(admin: &kube::Client, shipped: &[Value]) {
    for o in shipped.iter().filter(|o| {
        o["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
    }) {
        let kind = o["kind"].as_str().unwrap();
        let plural = if kind == "ValidatingAdmissionPolicy" {
            "validatingadmissionpolicies"
        } else {
            "validatingadmissionpolicybindings"
        };
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        );
        let _ = Api::<DynamicObject>::all_with(admin.clone(), &ar)
            .delete(o["metadata"]["name"].as_str().unwrap(), &Default::default())
            .await;
    }
}

fn api(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    ns: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

const HOST: (&str, &str, &str, &str) = ("metal3.io", "v1alpha1", "BareMetalHost", "baremetalhosts");
const MACHINE: (&str, &str, &str, &str) = ("cluster.x-k8s.io", "v1beta2", "Machine", "machines");
pub(super) const FAR: (&str, &str, &str, &str) = (
    "fence-agents-remediation.medik8s.io",
    "v1alpha1",
    "FenceAgentsRemediation",
    "fenceagentsremediations",
);
const TEMPLATE: (&str, &str, &str, &str) = (
    "fence-agents-remediation.medik8s.io",
    "v1alpha1",
    "FenceAgentsRemediationTemplate",
    "fenceagentsremediationtemplates",
);

/// Whether `r` is the policy's refusal (422 or 403 naming nodemedic's drainer).
fn refused<T: std::fmt::Debug>(r: &Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if (e.code == 422 || e.code == 403) && e.message.contains("nodemedic's drainer may"))
}

/// An object of `kind` named `name`, with `more` (its `metadata` merged with the name, and `spec`).
fn obj(
    (group, version, kind, _): (&str, &str, &str, &str),
    name: &str,
    more: Value,
) -> DynamicObject {
    let mut v = json!({"apiVersion": format!("{group}/{version}"), "kind": kind,
        "metadata": {"name": name}});
    if let Some(m) = more["metadata"].as_object() {
        for (k, x) in m {
            v["metadata"][k] = x.clone();
        }
    }
    if !more["spec"].is_null() {
        v["spec"] = more["spec"].clone();
    }
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_drainer_token_reaches_no_machine_past_what_the_drainer_does() {
    for env in Env::each_release().await {
        on(env).await;
    }
}

async fn on(env: Env) {
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(
            "a_stolen_drainer_token_reaches_no_machine_past_what_the_drainer_does",
            "kube-apiserver's ValidatingAdmissionPolicies",
        );
        return;
    };
    let admin = env.cluster.client.clone();
    crate::ladder::install_fixture_crds(
        &admin,
        true,
        &[
            "metal3/metal3.io_baremetalhosts.yaml",
            "cluster-api/cluster.x-k8s.io_machines.yaml",
            "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediations.yaml",
            "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediationtemplates.yaml",
        ],
    )
    .await;
    for ns in ["metal3", "medik8s"] {
        env.cluster.ensure_namespace(ns, json!({})).await;
    }
    let mut shipped = Vec::new();
    for (c, files) in [
        (
            "power-cycle-metal3",
            ["power-cycle-metal3-rbac.yaml", "policy.yaml"],
        ),
        ("cluster-api", ["cluster-api-rbac.yaml", "policy.yaml"]),
        (
            "power-cycle-medik8s",
            ["power-cycle-medik8s-rbac.yaml", "policy.yaml"],
        ),
    ] {
        for f in files {
            shipped.extend(component(c, f));
        }
    }
    for o in &shipped {
        apply(&admin, o).await;
    }
    let token = plane.client_impersonating_groups(
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    );
    let name = env.name("m");

    // The objects, as their operators make them.
    let hosts_admin = api(&admin, HOST, "metal3");
    hosts_admin
        .create(
            &PostParams::default(),
            &obj(HOST, &name, json!({"metadata": {"labels": {"team": "a"}},
                "spec": {"online": true, "bmc": {"address": "ipmi://10.0.0.1", "credentialsName": "bmc"}}})),
        )
        .await
        .unwrap();
    let machines_admin = api(&admin, MACHINE, "default");
    machines_admin
        .create(
            &PostParams::default(),
            &obj(MACHINE, &name, json!({"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": name}}})),
        )
        .await
        .unwrap();
    let template_spec = json!({"agent": "fence_ipmilan", "remediationStrategy": "ResourceDeletion",
        "sharedparameters": {"--action": "reboot", "--username": "admin"}});
    api(&admin, TEMPLATE, "medik8s")
        .patch(
            "nodemedic-power-cycle",
            &PatchParams::apply("nodemedic-test").force(),
            &Patch::Apply(
                json!({"apiVersion": "fence-agents-remediation.medik8s.io/v1alpha1",
                "kind": "FenceAgentsRemediationTemplate",
                "metadata": {"name": "nodemedic-power-cycle", "namespace": "medik8s"},
                "spec": {"template": {"spec": template_spec}}}),
            ),
        )
        .await
        .unwrap();
    let theirs = format!("{name}-nhc");
    api(&admin, FAR, "medik8s")
        .create(
            &PostParams::default(),
            &obj(FAR, &theirs, json!({"spec": template_spec})),
        )
        .await
        .unwrap();

    let hosts = api(&token, HOST, "metal3");
    let merge = |v: Value| Patch::Merge(v);
    let pp = PatchParams::default();
    // In force once the API server has compiled the policies: a refused write seen.
    eventually("the policies in force", Duration::from_secs(60), || async {
        refused(
            &hosts
                .patch(&name, &pp, &merge(json!({"spec": {"online": false}})))
                .await,
        )
        .then_some(())
    })
    .await;
    let release = &plane.release;
    for (what, patch) in [
        ("power the host off", json!({"spec": {"online": false}})),
        (
            "point it at another BMC",
            json!({"spec": {"bmc": {"address": "redfish://203.0.113.9"}}}),
        ),
        (
            "give it another image",
            json!({"spec": {"image": {"url": "http://203.0.113.9/evil.qcow2", "checksum": "x"}}}),
        ),
        ("relabel it", json!({"metadata": {"labels": {"team": "b"}}})),
        (
            "detach it",
            json!({"metadata": {"annotations": {"baremetalhost.metal3.io/detached": ""}}}),
        ),
    ] {
        let r = hosts.patch(&name, &pp, &merge(patch)).await;
        assert!(refused(&r), "{release}: the token could {what}: {r:?}");
    }
    let r = hosts
        .patch(
            &name,
            &pp,
            &merge(json!({"metadata": {"annotations": {"reboot.metal3.io": ""}}})),
        )
        .await;
    assert!(
        r.is_ok(),
        "{release}: the drainer's reboot annotation: {r:?}"
    );
    let host = hosts_admin.get(&name).await.unwrap();
    assert_eq!(host.data["spec"]["online"], true, "{release}");

    let machines = api(&token, MACHINE, "default");
    for (what, patch) in [
        (
            "edit a Machine's spec",
            json!({"spec": {"providerID": "test://elsewhere"}}),
        ),
        (
            "relabel a Machine",
            json!({"metadata": {"labels": {"cluster.x-k8s.io/control-plane": ""}}}),
        ),
        (
            "pause its reconciliation",
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}),
        ),
    ] {
        let r = machines.patch(&name, &pp, &merge(patch)).await;
        assert!(refused(&r), "{release}: the token could {what}: {r:?}");
    }
    let r = machines
        .patch(
            &name,
            &pp,
            &merge(
                json!({"metadata": {"annotations": {"cluster.x-k8s.io/remediate-machine": ""}}}),
            ),
        )
        .await;
    assert!(
        r.is_ok(),
        "{release}: the drainer's remediation annotation: {r:?}"
    );

    let fars = api(&token, FAR, "medik8s");
    let ours = json!({"app.kubernetes.io/managed-by": "nodemedic-drainer"});
    let mut evil = template_spec.clone();
    evil["sharedparameters"]["--ip"] = json!("203.0.113.9");
    for (what, o) in [
        (
            "fence through an address of its own",
            obj(
                FAR,
                &format!("{name}-a"),
                json!({"metadata": {"labels": ours}, "spec": evil}),
            ),
        ),
        (
            "make one not labelled as the drainer's",
            obj(FAR, &format!("{name}-b"), json!({"spec": template_spec})),
        ),
    ] {
        let r = fars.create(&PostParams::default(), &o).await;
        assert!(refused(&r), "{release}: the token could {what}: {r:?}");
    }
    let r = fars.delete(&theirs, &Default::default()).await;
    assert!(
        refused(&r),
        "{release}: the token deleted NodeHealthCheck's remediation: {r:?}"
    );
    let own = format!("{name}-own");
    let r = fars
        .create(
            &PostParams::default(),
            &obj(
                FAR,
                &own,
                json!({"metadata": {"labels": ours}, "spec": template_spec}),
            ),
        )
        .await;
    assert!(r.is_ok(), "{release}: the drainer's own remediation: {r:?}");
    let r = fars.delete(&own, &Default::default()).await;
    assert!(r.is_ok(), "{release}: deleting its own: {r:?}");

    // Gone again: the policies bind cluster-wide.
    let _ = hosts_admin.delete(&name, &Default::default()).await;
    let _ = machines_admin.delete(&name, &Default::default()).await;
    let _ = api(&admin, FAR, "medik8s")
        .delete(&theirs, &Default::default())
        .await;
    remove_policies(&admin, &shipped).await;
    env.cleanup().await;
}

/// The attacker brief's first finding: the drainer's token may patch every Node and its status, so
/// on its own it could set a back-dated problem condition on any Node (the drainer then drains it
/// and climbs its ladder), relabel a Node, lift a person's veto, add a system taint or fake a new
/// boot. The shipped `drainer-policy.yaml` (the own-node-policy component) leaves it only what the
/// drainer writes; shown as the drainer's ServiceAccount under the shipped ClusterRole, on both
/// supported releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_drainer_token_writes_on_a_node_only_what_the_drainer_writes() {
    for env in Env::each_release().await {
        node_writes_on(env).await;
    }
}

async fn node_writes_on(env: Env) {
    use k8s_openapi::api::core::v1::Node;
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(
            "a_stolen_drainer_token_writes_on_a_node_only_what_the_drainer_writes",
            "kube-apiserver's ValidatingAdmissionPolicies",
        );
        return;
    };
    let admin = env.cluster.client.clone();
    let mut shipped = component("own-node-policy", "drainer-policy.yaml");
    // As an operator with a NoExecute --problem-taint lists its key (Helm does it from its values).
    for v in shipped[0]["spec"]["variables"].as_array_mut().unwrap() {
        if v["name"] == "noExecuteKeys" {
            v["expression"] = json!("['nodemedic.io/problem']");
        }
    }
    let rbac = std::fs::read_to_string(format!(
        "{}/../deploy/base/drainer-rbac.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for d in rbac
        .split("\n---")
        .filter(|d| d.contains("kind: ClusterRole"))
    {
        shipped.push(serde_saphyr::from_str(d).unwrap());
    }
    for o in &shipped {
        apply(&admin, o).await;
    }
    let token = plane.client_impersonating_groups(
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    );
    let node = env.cluster.create_node("written").await;
    let nodes_admin: Api<Node> = Api::all(admin.clone());
    nodes_admin
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"nodemedic.io/do-not-remediate": "a person"},
                    "labels": {"node-role.kubernetes.io/control-plane": "", "topology.kubernetes.io/zone": "z1",
                        "nodemedic.io/exclude": "true"}}}),
            ),
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(token.clone());
    let pp = PatchParams::default();
    // The node's taints now with `more` (the node lifecycle controller may have put on system
    // taints, which a list without them would take off: refused, rightly).
    let taints_with = |more: Value| {
        let nodes_admin = nodes_admin.clone();
        let node = node.clone();
        async move {
            let n = nodes_admin.get(&node).await.unwrap();
            let mut all: Vec<Value> = (n.spec.and_then(|s| s.taints).unwrap_or_default())
                .iter()
                .map(|t| serde_json::to_value(t).unwrap())
                .collect();
            all.extend(more.as_array().unwrap().iter().cloned());
            Value::Array(all)
        }
    };
    let condition = |t: &str| {
        Patch::Strategic(
            json!({"status": {"conditions": [{"type": t, "status": "True", "reason": "Forged",
            "message": "m", "lastHeartbeatTime": "2026-12-07T10:00:00Z", "lastTransitionTime": "2026-12-07T09:00:00Z"}]}}),
        )
    };
    let release = &plane.release;
    // In force once the API server has loaded it: a refused write seen. Each try writes something
    // new (a write that changes nothing passes any policy, and one made before it loaded stays).
    let tries = std::sync::atomic::AtomicU32::new(0);
    eventually("the policy in force", Duration::from_secs(60), || async {
        let n = tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = Patch::Merge(
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": format!("probe-{n}")}}}),
        );
        let r = nodes.patch(&node, &pp, &probe).await;
        refused(&r).then_some(())
    })
    .await;
    for (what, r) in [
        ("set a problem condition", nodes.patch_status(&node, &pp, &condition("GpuUnhealthy")).await),
        ("fake a new boot", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"status": {"nodeInfo": {"bootID": "forged"}}}))).await),
        ("relabel through the status", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": null}}}))).await),
        ("drop a control-plane role", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": null}}}))).await),
        ("move a node to another zone", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "elsewhere"}}}))).await),
        ("lift an exclusion", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"labels": {"nodemedic.io/exclude": null}}}))).await),
        ("make a Kosmos leaf", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"labels": {"kosmos.io/node": "true"}}}))).await),
        ("point a node at another Machine", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/machine": "someone-elses"}}}))).await),
        ("rewrite the detector's conditions list", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"annotations": {"nodemedic.io/detector-conditions": "[]"}}}))).await),
        ("finalize a node", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}}))).await),
        ("change its provider ID", nodes.patch(&node, &pp, &Patch::Merge(json!({"spec": {"providerID": "aws:///elsewhere/i-0"}}))).await),
        ("lift a person's veto", nodes.patch(&node, &pp, &Patch::Merge(json!({"metadata": {"annotations": {"nodemedic.io/do-not-remediate": null}}}))).await),
        ("evict past budgets through a NoExecute taint of its own naming", nodes.patch(&node, &pp, &Patch::Merge(json!({"spec": {"taints": taints_with(json!([{"key": "example.com/evil", "effect": "NoExecute"}])).await}}))).await),
        ("starve the node's scheduling", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"status": {"allocatable": {"pods": "0"}}}))).await),
        ("advertise devices it has not", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"status": {"capacity": {"nvidia.com/gpu": "8"}}}))).await),
        ("point the API server's kubelet calls elsewhere", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 2379}}}}))).await),
        ("claim a volume is attached", nodes.patch_status(&node, &pp, &Patch::Merge(json!({"status": {"volumesInUse": ["kubernetes.io/csi/x^vol-1"]}}))).await),
        ("force-delete through out-of-service", nodes.patch(&node, &pp, &Patch::Merge(json!({"spec": {"taints": taints_with(json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}])).await}}))).await),
    ] {
        assert!(refused(&r), "{release}: the token could {what}: {r:?}");
    }
    // What the drainer writes goes through: its condition, the cordon with its fence, its record.
    let r = nodes
        .patch_status(&node, &pp, &condition("DrainScheduled"))
        .await;
    assert!(r.is_ok(), "{release}: DrainScheduled: {r:?}");
    // Each as the drainer writes it: against the node as read (the lifecycle controller may add a
    // system taint between the read and the write; the drainer's write then fails on the
    // resourceVersion and is made again).
    let written = |what: &'static str, body: Value| {
        let (nodes, node, pp, taints_with) = (&nodes, &node, &pp, &taints_with);
        async move {
            let taints = body["taints"].clone();
            let mut body = body;
            body.as_object_mut().unwrap().remove("taints");
            eventually(what, Duration::from_secs(30), || {
                let body = body.clone();
                let taints = taints.clone();
                async move {
                    let mut patch = body;
                    if !taints.is_null() {
                        patch["spec"]["taints"] = taints_with(taints).await;
                    }
                    nodes
                        .patch(node, pp, &Patch::Strategic(patch))
                        .await
                        .ok()
                        .map(|_| ())
                }
            })
            .await;
        }
    };
    written(
        "the cordon, the fence and the record",
        json!({"metadata": {"annotations": {"nodemedic.io/drain": "{}"}}, "spec": {"unschedulable": true},
            "taints": [{"key": "nodemedic.io/remediation", "value": "reboot", "effect": "NoSchedule"}]}),
    )
    .await;
    // Its configured NoExecute problem taint, beside the fence.
    written(
        "its own NoExecute problem taint",
        json!({"taints": [{"key": "nodemedic.io/problem", "effect": "NoExecute"}]}),
    )
    .await;
    // An operator's after-drain marks (outside the owned domains) and the lifted record.
    let r = nodes
        .patch(
            &node,
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"drained": "true"},
                "annotations": {"example.com/drained": "yes", "nodemedic.io/drain": null}}})),
        )
        .await;
    assert!(r.is_ok(), "{release}: the after-drain marks: {r:?}");
    let n = nodes_admin.get(&node).await.unwrap();
    let labels = n.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        (
            labels
                .get("node-role.kubernetes.io/control-plane")
                .map(String::as_str),
            labels.get("nodemedic.io/exclude").map(String::as_str),
            labels.get("drained").map(String::as_str),
        ),
        (Some(""), Some("true"), Some("true")),
        "{release}: the role and the exclusion stay, the operator's mark is on"
    );
    assert!(
        nodemedic_common::conditions::find(&n, "GpuUnhealthy").is_none(),
        "{release}"
    );
    remove_policies(&admin, &shipped).await;
    env.cleanup().await;
}
