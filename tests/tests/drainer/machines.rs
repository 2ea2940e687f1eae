//! Issue 76, principle 4: the power-cycle components' ValidatingAdmissionPolicies cannot read the
//! Node, so with them alone a stolen drainer token still asked any BareMetalHost for a reboot. The
//! drainer's own machines check (`deploy/components/power-cycle-metal3/webhook.yaml`, served at
//! `/machines` beside the guard) admits the reboot annotation only for the host of a node whose
//! power-cycle the drainer has under way, as its sealed record says. Shown on a real kube-apiserver
//! of each supported release: the drainer, running as its ServiceAccount under the shipped base and
//! Metal3 RBAC and policy, power-cycles a broken node's host through the webhook; the same token
//! asking a healthy node's host, or the broken one's before its step, is refused. Likewise for a
//! Fence Agents Remediation made (medik8s) and a Machine marked (Cluster API): the drainer's own,
//! for the node whose power-cycle, then replacement, is under way, pass; the token's for another
//! node, or for a step not yet reached, do not.

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
use crate::grants::{FAR, SA, apply, component};
use crate::ladder::{HOST, MACHINE, METAL3_MACHINE};

const NS: &str = "metal3";

fn api_in(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    ns: &str,
) -> Api<DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn api(client: &kube::Client, kind: (&str, &str, &str, &str)) -> Api<DynamicObject> {
    api_in(client, kind, NS)
}

/// `node`'s Machine, Metal3Machine and BareMetalHost as Cluster API and its Metal3 provider make
/// them: the Machine names the node back (nodeRef, provider ID) and owns the Metal3Machine, which
/// names the host; the host's consumerRef names the Metal3Machine. The node names its Machine.
async fn machines_of(env: &Env, run: &str, node: &str, ns: &'static str) {
    let admin = &env.cluster.client;
    let id = format!("test://{node}");
    let nodes: Api<Node> = Api::all(admin.clone());
    let claim = json!({"spec": {"providerID": id}, "metadata": {"annotations": {
        "cluster.x-k8s.io/machine": format!("m-{node}"), "cluster.x-k8s.io/cluster-namespace": ns}}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(claim))
        .await
        .unwrap();
    let create = |kind, o| create(admin, run, kind, o, ns);
    let machine = create(
        MACHINE,
        json!({"metadata": {"name": format!("m-{node}")},
        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "Metal3Machine", "name": format!("m3m-{node}")}},
        "status": {"nodeRef": {"name": node}}}),
    )
    .await;
    if ns != NS {
        return;
    }
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
    ns: &str,
) -> DynamicObject {
    let api = api_in(admin, (g, v, k, p), ns);
    o["apiVersion"] = json!(format!("{g}/{v}"));
    o["kind"] = json!(k);
    o["metadata"]["labels"] = json!({"nodemedic.test/run": run});
    let status = o["status"].take();
    let o: DynamicObject = serde_json::from_value(o).unwrap();
    // A CRD just established can still answer 404 for a moment: its handler comes up after.
    let made = eventually(&format!("{k} served"), WAIT, || async {
        match api.create(&PostParams::default(), &o).await {
            Err(kube::Error::Api(e)) if e.code == 404 => None,
            made => Some(made.unwrap()),
        }
    })
    .await;
    if !status.is_null() {
        let name = made.metadata.name.clone().unwrap();
        let body = Patch::Merge(json!({"status": status}));
        api.patch_status(&name, &PatchParams::default(), &body)
            .await
            .unwrap();
    }
    made
}

/// `component`'s shipped webhook, registered to call `addr` (no kube-proxy routes the Service here)
/// and, the control plane being shared, to see only this test's objects (their names carry its
/// id); returns its name.
async fn register(env: &Env, component_: &str, addr: std::net::SocketAddr, ca: &str) -> String {
    let mut hook = component(component_, "webhook.yaml").remove(0);
    let run = env.cluster.id_label();
    let name = format!("{component_}-under-way-{run}");
    hook["metadata"]["name"] = json!(name);
    hook["metadata"]["labels"] = json!({"nodemedic.test/run": run});
    hook["metadata"]["annotations"] = json!({});
    let w = &mut hook["webhooks"][0];
    w["clientConfig"] = json!({"url": format!("https://127.0.0.1:{}/machines", addr.port()),
        "caBundle": nodemedic_tests::webhook::base64(ca.as_bytes())});
    let ours = json!({"name": "this-test", "expression": format!("request.name.contains('{}')", env.cluster.id)});
    w["matchConditions"].as_array_mut().unwrap().push(ours);
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

/// A control plane with the drainer's account under the shipped base RBAC and `components`' RBAC
/// and policy, its own Lease granted as the shipped Role grants the shipped one; the account's
/// client, and a directory with the drainer's record key and the guard's certificate.
struct Setup {
    plane: &'static nodemedic_tests::envtest::ControlPlane,
    token: kube::Client,
    lease: String,
    dir: tempfile::TempDir,
    ca: String,
}

async fn setup(
    env: &Env,
    test: &str,
    crds: &[&str],
    components: &[(&str, &[&str])],
) -> Option<Setup> {
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(test, "kube-apiserver calling an admission webhook");
        return None;
    };
    let admin = env.cluster.client.clone();
    crate::ladder::install_fixture_crds(&admin, true, crds).await;
    for ns in [NS, "medik8s"] {
        env.cluster.ensure_namespace(ns, json!({})).await;
    }
    crate::rbac::apply_shipped_rbac(&admin).await;
    for (c, files) in components {
        for f in *files {
            for o in component(c, f) {
                apply(&admin, &o).await;
            }
        }
    }
    // The shipped Role names the shipped Lease and its ConfigMaps; this drainer keeps its own (the
    // control plane is shared with other tests), granted the same verbs by a Role of the test's.
    let lease = format!("nmt-{}", env.cluster.id_label());
    lease_grants(env, &lease).await;
    let groups = [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ];
    let token = plane.client_impersonating_groups(SA, &groups);
    let lease_api = (
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        Some(lease.as_str()),
    );
    crate::rbac::wait_authorized(
        &token,
        "update",
        lease_api.0,
        lease_api.1,
        lease_api.2,
        lease_api.3,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca = nodemedic_tests::webhook::write_cert(dir.path(), "nodemedic-guard");
    std::fs::write(dir.path().join("key"), [7u8; 32]).unwrap();
    Some(Setup {
        plane,
        token,
        lease,
        dir,
        ca,
    })
}

/// What the webhook said of the write of `verb` on the `resource` `name` that the API server admitted (its
/// audit log names the authenticated user, the tests' administrator impersonating the account).
async fn webhook_said(s: &Setup, verb: &str, resource: &str, name: &str) -> String {
    eventually(
        &format!("the webhook's word on {verb} {name}"),
        WAIT,
        || async {
            s.plane
                .audit()
                .into_iter()
                .filter(|e| {
                    (e.verb == verb && e.name == name && e.resource == resource)
                        && e.subresource.is_empty()
                        && (200..300).contains(&e.code)
                })
                .find_map(|e| {
                    e.annotations
                        .into_iter()
                        .find(|(k, _)| k.ends_with("under-way.nodemedic.io/decision"))
                        .map(|(_, v)| v)
                })
        },
    )
    .await
}

async fn unregister(env: &Env, hooks: &[String]) {
    let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(env.cluster.client.clone());
    for h in hooks {
        let _ = api.delete(h, &Default::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_drainer_token_reaches_only_the_host_of_a_node_the_drainer_power_cycles() {
    for env in Env::each_release().await {
        metal3(env).await;
    }
}

async fn metal3(env: Env) {
    let crds = [
        "metal3/metal3.io_baremetalhosts.yaml",
        "metal3/infrastructure.cluster.x-k8s.io_metal3machines.yaml",
        "cluster-api/cluster.x-k8s.io_machines.yaml",
    ];
    let files: &[&str] = &["power-cycle-metal3-rbac.yaml", "policy.yaml"];
    let test = "a_stolen_drainer_token_reaches_only_the_host_of_a_node_the_drainer_power_cycles";
    let Some(s) = setup(&env, test, &crds, &[("power-cycle-metal3", files)]).await else {
        return;
    };
    let admin = env.cluster.client.clone();
    let run = env.cluster.id_label();
    crate::rbac::wait_authorized(
        &s.token,
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
        machines_of(&env, &run, n, NS).await;
    }
    let ladder = "KernelDeadlock=True: drain, power-cycle";
    let running = run::start(options(&env, &s, ladder, "metal3", None), s.token.clone())
        .await
        .unwrap();
    let hook = register(
        &env,
        "power-cycle-metal3",
        running.guard_addr.unwrap(),
        &s.ca,
    )
    .await;
    let hosts = api(&s.token, HOST);
    let pp = PatchParams::default();
    let release = &s.plane.release;

    // Before any ladder: the token's reboot of either host is refused, once the API server calls
    // the webhook (a configuration takes a moment to be in force).
    let r = eventually("the webhook in force", WAIT, || async {
        let r = hosts
            .patch(&format!("host-{healthy}"), &pp, &reboot())
            .await;
        refused(&r).then_some(r)
    })
    .await;
    let no_record = format!("node {healthy} has no drain record");
    assert!(format!("{r:?}").contains(&no_record), "{release}: {r:?}");
    let r = hosts.patch(&format!("host-{broken}"), &pp, &reboot()).await;
    assert!(
        refused(&r),
        "{release}: the broken node's host before its step: {r:?}"
    );

    // The broken node's ladder: drained, then power-cycled through its host, by the drainer as
    // its account (which may patch hosts, not read them), through the webhook.
    env.set_condition(&broken, "KernelDeadlock", "True", 600)
        .await;
    let host = format!("host-{broken}");
    let asked = eventually("the broken node's host asked to reboot", WAIT, || async {
        let h = api(&admin, HOST).get(&host).await.ok()?;
        h.metadata.annotations?.get("reboot.metal3.io").cloned()
    })
    .await;
    assert_eq!(asked, r#"{"mode":"hard"}"#, "{release}");
    assert_eq!(
        webhook_said(&s, "patch", "baremetalhosts", &host).await,
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
    let annotations = spared.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("reboot.metal3.io"), "{release}");

    // The attacker's review: the token reads the broken node's sealed record now, and writes it
    // back once the host has rebooted and the node is back (a new boot, the problem over).
    let nodes: Api<Node> = Api::all(s.token.clone());
    let record = |n: Node| n.metadata.annotations?.get("nodemedic.io/drain").cloned();
    let saved = record(nodes.get(&broken).await.unwrap()).unwrap();
    let done = Patch::Merge(json!({"metadata": {"annotations": {"reboot.metal3.io": null}}}));
    api(&admin, HOST).patch(&host, &pp, &done).await.unwrap();
    Kubelet::booted(&admin, &broken, "boot-b").await;
    env.set_condition(&broken, "KernelDeadlock", "False", 0)
        .await;
    eventually("the power-cycle proven", WAIT, || async {
        let events = env.drainer_events(&broken).await;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("RebootProven"))
    })
    .await;
    let back = Patch::Merge(json!({"metadata": {"annotations": {"nodemedic.io/drain": saved}}}));
    nodes.patch(&broken, &pp, &back).await.unwrap();
    let r = hosts.patch(&host, &pp, &reboot()).await;
    assert!(
        refused(&r) && format!("{r:?}").contains("has booted since its power-cycle was asked for"),
        "{release}: the written-back record: {r:?}"
    );

    running.shutdown().await;
    unregister(&env, &[hook]).await;
    for (kind, prefix) in [(HOST, "host-"), (METAL3_MACHINE, "m3m-"), (MACHINE, "m-")] {
        for n in [&broken, &healthy] {
            let _ = api(&admin, kind)
                .delete(&format!("{prefix}{n}"), &Default::default())
                .await;
        }
    }
    env.cleanup().await;
}

/// The template of the medik8s component (its policy's paramRef), as the grants test makes it.
const TEMPLATE: &str = "nodemedic-power-cycle";

fn far_template() -> Value {
    json!({"agent": "fence_ipmilan", "remediationStrategy": "ResourceDeletion",
        "sharedparameters": {"--action": "reboot", "--username": "admin"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_drainer_token_fences_and_marks_only_for_a_node_the_drainer_remediates() {
    for env in Env::each_release().await {
        fence_and_mark(env).await;
    }
}

async fn fence_and_mark(env: Env) {
    let crds = [
        "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediations.yaml",
        "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediationtemplates.yaml",
        "cluster-api/cluster.x-k8s.io_machines.yaml",
    ];
    let rbac_and_policy = |rbac: &'static str| -> &'static [&'static str] {
        match rbac {
            "medik8s" => &["power-cycle-medik8s-rbac.yaml", "policy.yaml"],
            _ => &["cluster-api-rbac.yaml", "policy.yaml"],
        }
    };
    let components = [
        ("power-cycle-medik8s", rbac_and_policy("medik8s")),
        ("cluster-api", rbac_and_policy("cluster-api")),
    ];
    let test = "a_stolen_drainer_token_fences_and_marks_only_for_a_node_the_drainer_remediates";
    let Some(s) = setup(&env, test, &crds, &components).await else {
        return;
    };
    let admin = env.cluster.client.clone();
    let run = env.cluster.id_label();
    let template = json!({"apiVersion": "fence-agents-remediation.medik8s.io/v1alpha1",
        "kind": "FenceAgentsRemediationTemplate",
        "metadata": {"name": TEMPLATE, "namespace": "medik8s"},
        "spec": {"template": {"spec": far_template()}}});
    apply(&admin, &template).await;
    crate::rbac::wait_authorized(
        &s.token,
        "patch",
        "cluster.x-k8s.io",
        "machines",
        Some("default"),
        None,
    )
    .await;
    let broken = env.node("mf-broken", "False", 3600, json!({})).await;
    let healthy = env.node("mf-healthy", "False", 3600, json!({})).await;
    for n in [&broken, &healthy] {
        Kubelet::booted(&admin, n, "boot-a").await;
        machines_of(&env, &run, n, "default").await;
    }
    let ladder = "KernelDeadlock=True: drain, power-cycle, replace";
    let template_flag = format!("FenceAgentsRemediationTemplate/medik8s/{TEMPLATE}");
    let opts = options(&env, &s, ladder, "medik8s", Some(template_flag));
    let running = run::start(opts, s.token.clone()).await.unwrap();
    let addr = running.guard_addr.unwrap();
    let hooks = [
        register(&env, "power-cycle-medik8s", addr, &s.ca).await,
        register(&env, "cluster-api", addr, &s.ca).await,
    ];
    let release = &s.plane.release;
    let fars = api_in(&s.token, FAR, "medik8s");
    let machines = api_in(&s.token, MACHINE, "default");
    let pp = PatchParams::default();
    let mark = || {
        Patch::Merge(
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/remediate-machine": ""}}}),
        )
    };
    // A fence the policy would pass (the drainer's label, the template's spec), for `node`.
    let fence = |node: &str| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "fence-agents-remediation.medik8s.io/v1alpha1",
            "kind": "FenceAgentsRemediation", "metadata": {"name": node,
                "labels": {"app.kubernetes.io/managed-by": "nodemedic-drainer"}},
            "spec": far_template()}),
        )
        .unwrap()
    };

    // Before any ladder: no fence and no mark, for either node.
    let r = eventually("the webhooks in force", WAIT, || async {
        let r = fars.create(&PostParams::default(), &fence(&healthy)).await;
        refused(&r).then_some(r)
    })
    .await;
    assert!(
        format!("{r:?}").contains(&format!("node {healthy} has no drain record")),
        "{release}: {r:?}"
    );
    let r = eventually("the Machine webhook in force", WAIT, || async {
        let r = machines.patch(&format!("m-{healthy}"), &pp, &mark()).await;
        refused(&r).then_some(r)
    })
    .await;
    assert!(
        format!("{r:?}").contains(&format!("node {healthy} has no drain record")),
        "{release}: {r:?}"
    );

    // The broken node: drained, fenced through the template by the drainer (admitted), and while
    // its power-cycle is on, its Machine is not the token's to mark (not its step).
    env.set_condition(&broken, "KernelDeadlock", "True", 600)
        .await;
    eventually("the drainer's fence of the broken node", WAIT, || async {
        api_in(&admin, FAR, "medik8s")
            .get_opt(&broken)
            .await
            .ok()
            .flatten()
    })
    .await;
    let r = machines.patch(&format!("m-{broken}"), &pp, &mark()).await;
    let not_yet = "at its power-cycle step (phase rebooting), not a replace";
    assert!(
        refused(&r) && format!("{r:?}").contains(not_yet),
        "{release}: {r:?}"
    );
    // Named for the healthy node, annotated for the broken one (a remediator of another release
    // goes by the name): refused (the attacker's review had it admitted).
    let mut twisted = fence(&healthy);
    twisted.metadata.annotations = Some(
        [(
            "remediation.medik8s.io/node-name".to_string(),
            broken.clone(),
        )]
        .into(),
    );
    let r = fars.create(&PostParams::default(), &twisted).await;
    assert!(
        refused(&r) && format!("{r:?}").contains("named for another node"),
        "{release}: {r:?}"
    );
    let r = fars.create(&PostParams::default(), &fence(&healthy)).await;
    assert!(
        refused(&r),
        "{release}: the healthy node fenced while another's step is on: {r:?}"
    );

    assert_eq!(
        webhook_said(&s, "create", "fenceagentsremediations", &broken).await,
        format!("allowed: a power-cycle of node {broken} is under way"),
        "{release}"
    );
    // No new boot by the deadline: the replacement marks the broken node's Machine (admitted).
    let machine = format!("m-{broken}");
    eventually("the broken node's Machine marked", WAIT, || async {
        let m = api_in(&admin, MACHINE, "default")
            .get(&machine)
            .await
            .ok()?;
        m.metadata
            .annotations?
            .get("cluster.x-k8s.io/remediate-machine")
            .cloned()
    })
    .await;
    assert_eq!(
        webhook_said(&s, "patch", "machines", &machine).await,
        format!("allowed: a replace of node {broken} (Machine default/{machine}) is under way"),
        "{release}"
    );
    let r = machines.patch(&format!("m-{healthy}"), &pp, &mark()).await;
    assert!(refused(&r), "{release}: the healthy node's Machine: {r:?}");
    let spared = api_in(&admin, MACHINE, "default")
        .get(&format!("m-{healthy}"))
        .await
        .unwrap();
    let annotations = spared.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("cluster.x-k8s.io/remediate-machine"),
        "{release}"
    );

    running.shutdown().await;
    unregister(&env, &hooks).await;
    for n in [&broken, &healthy] {
        let _ = api_in(&admin, MACHINE, "default")
            .delete(&format!("m-{n}"), &Default::default())
            .await;
        let _ = api_in(&admin, FAR, "medik8s")
            .delete(n, &Default::default())
            .await;
    }
    env.cleanup().await;
}

/// The drainer as `drainer run` starts it with a power-cycle component: `ladder`, its `provider`
/// (and medik8s' `template`), its record key and the guard's certificate from the setup's
/// directory, under the setup's Lease.
fn options(
    env: &Env,
    s: &Setup,
    ladder: &str,
    provider: &str,
    template: Option<String>,
) -> Options {
    let (lease, dir) = (s.lease.as_str(), s.dir.path());
    let args = PolicyArgs {
        conditions: vec![ladder.into()],
        node_selector: Some(format!("{}={}", crate::env::LABEL, env.id)),
        drain_buffer: Some(Duration::from_secs(1)),
        reboot_deadline: Some(Duration::from_secs(20)),
        power_cycle_provider: Some(provider.into()),
        remediation_template: template,
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
