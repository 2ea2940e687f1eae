//! Issue 76, principle 4: the power-cycle components' ValidatingAdmissionPolicies cannot read the
//! Node, so with them alone a stolen drainer token still asked any BareMetalHost for a reboot. The
//! drainer's own machines check (`deploy/components/power-cycle-metal3/webhook.yaml`, served at
//! `/machines` beside the guard) admits the reboot annotation only for the host of a node whose
//! power-cycle the drainer has under way, as its sealed record says. Shown on a real kube-apiserver
//! of each supported release: the drainer, running as its ServiceAccount under the shipped base and
//! Metal3 RBAC and policy, power-cycles a broken node's host through the webhook; the same token
//! asking a healthy node's host, or the broken one's before its step, is refused.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use nodemedic_drainer::config::flags::PolicyArgs;
use nodemedic_drainer::guard::GuardConfig;
use nodemedic_drainer::guard::server::GuardOptions;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options};
use nodemedic_tests::cluster::{Kubelet, eventually};
use serde_json::{Value, json};

use crate::env::{Env, WAIT};
use crate::grants::{apply, component};

const SA: &str = "system:serviceaccount:kube-system:nodemedic-drainer";
const NS: &str = "metal3";

fn api(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
) -> Api<DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), NS, &ar)
}

const MACHINE: (&str, &str, &str, &str) = ("cluster.x-k8s.io", "v1beta2", "Machine", "machines");
const METAL3_MACHINE: (&str, &str, &str, &str) = (
    "infrastructure.cluster.x-k8s.io",
    "v1beta2",
    "Metal3Machine",
    "metal3machines",
);
const HOST: (&str, &str, &str, &str) = ("metal3.io", "v1alpha1", "BareMetalHost", "baremetalhosts");

/// `node`'s Machine, Metal3Machine and BareMetalHost as Cluster API and its Metal3 provider make
/// them: the Machine names the node back (nodeRef, provider ID) and owns the Metal3Machine, which
/// names the host; the host's consumerRef names the Metal3Machine. The node names its Machine.
async fn machines_of(env: &Env, run: &str, node: &str) {
    let admin = &env.cluster.client;
    let id = format!("test://{node}");
    let nodes: Api<Node> = Api::all(admin.clone());
    let claim = json!({"spec": {"providerID": id}, "metadata": {"annotations": {
        "cluster.x-k8s.io/machine": format!("m-{node}"), "cluster.x-k8s.io/cluster-namespace": NS}}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(claim))
        .await
        .unwrap();
    let create = |kind, o| create(admin, run, kind, o);
    let machine = create(
        MACHINE,
        json!({"metadata": {"name": format!("m-{node}")},
        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "Metal3Machine", "name": format!("m3m-{node}")}},
        "status": {"nodeRef": {"name": node}}}),
    )
    .await;
    create(
        METAL3_MACHINE,
        json!({"metadata": {"name": format!("m3m-{node}"),
        "annotations": {"metal3.io/BareMetalHost": format!("{NS}/host-{node}")},
        "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "name": format!("m-{node}"), "uid": machine.metadata.uid.clone().unwrap()}]},
        "spec": {}}),
    )
    .await;
    create(HOST, json!({"metadata": {"name": format!("host-{node}")},
        "spec": {"online": true, "consumerRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "Metal3Machine", "name": format!("m3m-{node}"), "namespace": NS}}}))
    .await;
}

/// Make `o`, a `kind` labelled as this run's, its status written through the subresource.
async fn create(
    admin: &kube::Client,
    run: &str,
    (g, v, k, p): (&'static str, &'static str, &'static str, &'static str),
    mut o: Value,
) -> DynamicObject {
    let api = api(admin, (g, v, k, p));
    o["apiVersion"] = json!(format!("{g}/{v}"));
    o["kind"] = json!(k);
    o["metadata"]["labels"] = json!({"nodemedic.test/run": run});
    let status = o["status"].take();
    let made = api
        .create(&PostParams::default(), &serde_json::from_value(o).unwrap())
        .await
        .unwrap();
    if !status.is_null() {
        let name = made.metadata.name.clone().unwrap();
        let body = Patch::Merge(json!({"status": status}));
        api.patch_status(&name, &PatchParams::default(), &body)
            .await
            .unwrap();
    }
    made
}

/// The shipped webhook, registered to call `addr` (no kube-proxy routes the Service here) and to
/// see only this test's hosts (the control plane is shared); returns its name.
async fn register(env: &Env, run: &str, addr: std::net::SocketAddr, ca: &str) -> String {
    let mut hook = component("power-cycle-metal3", "webhook.yaml").remove(0);
    let name = format!("metal3-under-way-{run}");
    hook["metadata"]["name"] = json!(name);
    hook["metadata"]["labels"] = json!({"nodemedic.test/run": run});
    hook["metadata"]["annotations"] = json!({});
    let w = &mut hook["webhooks"][0];
    w["clientConfig"] = json!({"url": format!("https://127.0.0.1:{}/machines", addr.port()),
        "caBundle": nodemedic_tests::webhook::base64(ca.as_bytes())});
    w["objectSelector"] = json!({"matchLabels": {"nodemedic.test/run": run}});
    apply(&env.cluster.client, &hook).await;
    name
}

/// Whether `r` is the machines check's refusal.
fn refused<T: std::fmt::Debug>(r: &Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if e.message.contains("only for a node whose remediation it has under way"))
}

fn reboot() -> Patch<Value> {
    Patch::Merge(json!({"metadata": {"annotations": {"reboot.metal3.io": ""}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_drainer_token_reaches_only_the_host_of_a_node_the_drainer_power_cycles() {
    for env in Env::each_release().await {
        on(env).await;
    }
}

async fn on(env: Env) {
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(
            "a_stolen_drainer_token_reaches_only_the_host_of_a_node_the_drainer_power_cycles",
            "kube-apiserver calling an admission webhook",
        );
        return;
    };
    let admin = env.cluster.client.clone();
    crate::ladder::install_fixture_crds(
        &admin,
        true,
        &[
            "metal3/metal3.io_baremetalhosts.yaml",
            "metal3/infrastructure.cluster.x-k8s.io_metal3machines.yaml",
            "cluster-api/cluster.x-k8s.io_machines.yaml",
        ],
    )
    .await;
    env.cluster.ensure_namespace(NS, json!({})).await;
    crate::rbac::apply_shipped_rbac(&admin).await;
    for f in ["power-cycle-metal3-rbac.yaml", "policy.yaml"] {
        for o in component("power-cycle-metal3", f) {
            apply(&admin, &o).await;
        }
    }
    let run = env.cluster.id_label();
    // The shipped Role names the shipped Lease and its ConfigMaps; this drainer keeps its own (the
    // control plane is shared with other tests), granted the same verbs by a Role of the test's.
    let lease = format!("nmt-{run}");
    lease_grants(&env, &lease).await;
    let token = plane.client_impersonating_groups(
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    );
    crate::rbac::wait_authorized(
        &token,
        "update",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        Some(&lease),
    )
    .await;
    crate::rbac::wait_authorized(
        &token,
        "patch",
        "metal3.io",
        "baremetalhosts",
        Some(NS),
        None,
    )
    .await;

    let broken = env.node("mt-broken", "False", 3600, json!({})).await;
    let healthy = env.node("mt-healthy", "False", 3600, json!({})).await;
    for n in [&broken, &healthy] {
        Kubelet::booted(&admin, n, "boot-a").await;
        machines_of(&env, &run, n).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = nodemedic_tests::webhook::write_cert(dir.path(), "nodemedic-guard");
    std::fs::write(dir.path().join("key"), [7u8; 32]).unwrap();
    let running = run::start(options(&env, &lease, dir.path()), token.clone())
        .await
        .unwrap();
    let hook = register(&env, &run, running.guard_addr.unwrap(), &ca).await;
    let hosts = api(&token, HOST);
    let pp = PatchParams::default();

    // Before any ladder: the token's reboot of either host is refused, once the API server calls
    // the webhook (a configuration takes a moment to be in force).
    let r = eventually("the webhook in force", WAIT, || async {
        let r = hosts
            .patch(&format!("host-{healthy}"), &pp, &reboot())
            .await;
        refused(&r).then_some(r)
    })
    .await;
    let release = &plane.release;
    assert!(
        format!("{r:?}").contains(&format!("node {healthy} has no drain record")),
        "{release}: {r:?}"
    );
    let r = hosts.patch(&format!("host-{broken}"), &pp, &reboot()).await;
    assert!(
        refused(&r),
        "{release}: the broken node's host before its step: {r:?}"
    );

    // The broken node's ladder: drained, then power-cycled through its host, by the drainer as
    // its account (which may patch hosts, not read them), through the webhook.
    env.set_condition(&broken, "KernelDeadlock", "True", 600)
        .await;
    let asked = eventually("the broken node's host asked to reboot", WAIT, || async {
        let h = api(&admin, HOST)
            .get(&format!("host-{broken}"))
            .await
            .ok()?;
        h.metadata.annotations?.get("reboot.metal3.io").cloned()
    })
    .await;
    assert_eq!(asked, r#"{"mode":"hard"}"#, "{release}");
    // It went through the webhook, which said why it admitted it (in the API server's audit log).
    let host = format!("host-{broken}");
    let said = eventually(
        "the webhook's word on the drainer's patch",
        WAIT,
        || async {
            // (The log names the authenticated user, the tests' administrator impersonating the account.)
            plane
                .audit()
                .into_iter()
                .find(|e| e.verb == "patch" && e.name == host && e.code == 200)
                .and_then(|e| {
                    e.annotations
                        .into_iter()
                        .find(|(k, _)| k.ends_with("under-way.nodemedic.io/decision"))
                })
        },
    )
    .await;
    assert_eq!(
        said.1,
        format!("allowed: a power-cycle of node {broken} (BareMetalHost {NS}/{host}) is under way"),
        "{release}"
    );
    // Still none for the healthy node's host, whatever the broken node's step.
    let r = hosts
        .patch(&format!("host-{healthy}"), &pp, &reboot())
        .await;
    assert!(
        refused(&r),
        "{release}: the healthy node's host while another's step is on: {r:?}"
    );
    let spared = api(&admin, HOST)
        .get(&format!("host-{healthy}"))
        .await
        .unwrap();
    assert!(
        !spared
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("reboot.metal3.io"),
        "{release}"
    );

    running.shutdown().await;
    let hooks: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(admin.clone());
    let _ = hooks.delete(&hook, &Default::default()).await;
    for kind in [HOST, METAL3_MACHINE, MACHINE] {
        for n in [&broken, &healthy] {
            let name = match kind.2 {
                "BareMetalHost" => format!("host-{n}"),
                "Metal3Machine" => format!("m3m-{n}"),
                _ => format!("m-{n}"),
            };
            let _ = api(&admin, kind).delete(&name, &Default::default()).await;
        }
    }
    env.cleanup().await;
}

/// The drainer as `drainer run` starts it with the Metal3 component: a ladder that power-cycles,
/// its record key and the guard's certificate from `dir`, under the Lease `lease`.
fn options(env: &Env, lease: &str, dir: &std::path::Path) -> Options {
    let args = PolicyArgs {
        conditions: vec!["KernelDeadlock=True: drain, power-cycle".into()],
        node_selector: Some(format!("{}={}", crate::env::LABEL, env.id)),
        drain_buffer: Some(Duration::from_secs(1)),
        power_cycle_provider: Some("metal3".into()),
        max_unhealthy: Some("100%".into()),
        breaker_new: Some("100%".into()),
        domain_outage: Some("100%".into()),
        flap_threshold: Some(0),
        slow_start_dwell: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    Options {
        config: nodemedic_drainer::config::build::build(&args).unwrap(),
        listen: "127.0.0.1:0".parse().unwrap(),
        lease: LeaseConfig {
            namespace: "kube-system".into(),
            name: lease.into(),
            identity: "machines".into(),
            duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
        },
        tick: Duration::from_millis(200),
        guard: Some(GuardOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            config: GuardConfig::default(),
        }),
        reload: None,
        reboot_signing_key: None,
        record_key_file: Some(dir.join("key")),
        record_key_previous_file: None,
        refuse_looser_start: false,
        settings: None,
    }
}

/// The shipped Role's grants on the drainer's own objects, for the objects of `lease`.
async fn lease_grants(env: &Env, lease: &str) {
    let admin = &env.cluster.client;
    let run = env.cluster.id_label();
    nodemedic_tests::drainer_objects(admin, "kube-system", lease, Some(&run)).await;
    let names: Vec<String> = nodemedic_tests::drainer_object_names(lease)
        .into_iter()
        .filter(|(k, _)| *k == "ConfigMap")
        .map(|(_, n)| n)
        .collect();
    let labels = json!({"nodemedic.test/run": run});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": lease, "namespace": "kube-system", "labels": labels},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names, "verbs": ["get", "update"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": lease, "namespace": "kube-system", "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": lease},
        "subjects": [{"kind": "ServiceAccount", "name": "nodemedic-drainer", "namespace": "kube-system"}]});
    apply(admin, &role).await;
    apply(admin, &binding).await;
}
