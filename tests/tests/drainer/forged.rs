//! Attacks on the drainer's records: what a node's own credential or the detector's ServiceAccount
//! can write (a PATCH of `nodes/NAME/status` keeps metadata, recording 59) must never make the
//! drainer evict, lift a taint or a cordon, or spend a budget. Each attack is made as the detector
//! would make it (a status PATCH carrying the annotation) and shown to do no harm.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_common::keys;
use nodemedic_drainer::config::Budget;
use nodemedic_drainer::config::select::Selector;
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::{Env, LABEL, WAIT, ago};

/// Write `record` (an annotation value) on `node` the way the detector's ServiceAccount can: a
/// strategic-merge PATCH of the status subresource carrying metadata.
async fn write_as_detector(env: &Env, node: &str, record: &str) {
    let body = json!({"metadata": {"annotations": {keys::DRAIN_RECORD_ANNOTATION: record}}});
    Api::<Node>::all(env.cluster.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

/// What an administrator writes on the main resource (a cordon, a taint): the part no node can.
async fn admin_patch(env: &Env, node: &str, body: Value) {
    Api::<Node>::all(env.cluster.client.clone())
        .patch(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

/// The drainer's Warning Events refusing a record on `node`.
async fn rejections(env: &Env, node: &str) -> Vec<String> {
    env.drainer_events(node)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DrainRecordRejected"))
        .inspect(|e| assert_eq!(e.type_.as_deref(), Some("Warning")))
        .filter_map(|e| e.message)
        .collect()
}

async fn wait_rejected(env: &Env, node: &str, why: &str) {
    eventually(
        &format!("a DrainRecordRejected Event on {node} saying {why:?}"),
        WAIT,
        || async {
            rejections(env, node)
                .await
                .iter()
                .any(|m| m.contains(why))
                .then_some(())
        },
    )
    .await;
}

fn forged(owner: &str, node: &str, phase: &str, extra: Value) -> String {
    let mut r = json!({"owner": owner, "episode": "KernelDeadlock=True@1", "reason": "KernelDeadlock=True",
        "phase": phase, "cordonedAt": ago(7200), "drainAt": ago(7200), "drainStarted": ago(7200),
        "node": node, "uid": "00000000-0000-4000-8000-000000000001", "at": ago(10),
        "seal": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});
    crate::env::merge(&mut r, &extra);
    r.to_string()
}

#[tokio::test]
async fn forged_records_evict_nothing_lift_no_taint_and_spend_no_budget() {
    for env in Env::each_release().await {
        forged_records_evict_nothing_lift_no_taint_and_spend_no_budget_on(env).await;
    }
}

async fn forged_records_evict_nothing_lift_no_taint_and_spend_no_budget_on(env: Env) {
    let lease = format!("nodemedic-drainer-forged-{}", env.id);
    let pool_a = json!({"pool": "a"});
    // A healthy selected node, a node the drainer does not select, a healthy selected node with a
    // control-plane taint, each with a pod, and a forged record on each written through status.
    let healthy = env
        .node("forged-healthy", "False", 3600, pool_a.clone())
        .await;
    let other = env
        .node("forged-other", "False", 3600, json!({"pool": "b"}))
        .await;
    let cp = env.node("forged-cp", "False", 3600, pool_a.clone()).await;
    let taint = json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"});
    admin_patch(&env, &cp, json!({"spec": {"taints": [taint]}})).await;
    let pods = [
        env.pod("default", "forged-h", &healthy, json!({})).await,
        env.pod("default", "forged-o", &other, json!({})).await,
        env.pod("default", "forged-c", &cp, json!({})).await,
    ];
    // "Draining, holding nothing" (as in taint-only mode): trusted, it finishes the drain.
    let holds_nothing = json!({"cordoned": false});
    let record = forged(&lease, &healthy, "draining", holds_nothing.clone());
    write_as_detector(&env, &healthy, &record).await;
    // Unsealed, as a record of a release before seals would be.
    let record = forged(&lease, &other, "draining", holds_nothing);
    let mut unsealed: Value = serde_json::from_str(&record).unwrap();
    unsealed.as_object_mut().unwrap().remove("seal");
    write_as_detector(&env, &other, &unsealed.to_string()).await;
    let probation_over = json!({"cordoned": false, "probationUntil": ago(60),
        "taints": ["node-role.kubernetes.io/control-plane:NoSchedule"]});
    write_as_detector(&env, &cp, &forged(&lease, &cp, "probation", probation_over)).await;

    // One cordon allowed: were the forged records counted, the real problem would wait.
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.selector = Selector::labels(&format!("{LABEL}={},pool=a", env.id)).unwrap();
    cfg.max_cordoned = Budget::Count(1);
    cfg.max_drains_in_flight = 1;
    let running = env.start_with_lease(cfg, "f-1", &lease).await;
    let bad = env.node("forged-bad", "True", 3600, pool_a.clone()).await;
    let bad_pod = env.pod("default", "forged-b", &bad, json!({})).await;
    env.wait_drained(&bad).await;
    assert!(!env.pod_exists("default", &bad_pod).await);

    // Everything before the barrier has been decided: the harm first, then what was said.
    env.barrier("KernelDeadlock", pool_a).await;
    for pod in &pods {
        assert!(env.pod_exists("default", pod).await, "{pod} was evicted");
        assert_eq!(env.evictions(pod, None), 0, "{pod}: an eviction was tried");
    }
    let n = env.get_node(&cp).await;
    assert_eq!(
        n["spec"]["taints"],
        json!([taint]),
        "the control-plane taint stays"
    );
    for node in [&healthy, &other, &cp] {
        assert!(!env.cordoned(node).await, "{node} cordoned");
        wait_rejected(&env, node, "Ignored the drain record").await;
        assert_eq!(
            rejections(&env, node).await.len(),
            1,
            "{node}: one Event per record"
        );
    }
    assert!(
        rejections(&env, &healthy).await[0].contains("seal does not match"),
        "{:?}",
        rejections(&env, &healthy).await
    );
    assert!(rejections(&env, &other).await[0].contains("carries no seal"));
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("nodemedic_drainer_records_rejected_total ")
                && l.split(' ').nth(1).and_then(|v| v.parse::<f64>().ok()) >= Some(3.0)
        ),
        "records rejected counted: {metrics}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_genuine_record_written_back_later_or_on_another_node_is_not_acted_on() {
    for env in Env::each_release().await {
        a_genuine_record_written_back_later_or_on_another_node_is_not_acted_on_on(env).await;
    }
}

async fn a_genuine_record_written_back_later_or_on_another_node_is_not_acted_on_on(env: Env) {
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let node = env.node("replay", "True", 3600, json!({})).await;
    let neighbour = env.node("replay-n", "False", 3600, json!({})).await;
    env.pod("default", "replay-p", &node, json!({})).await;
    let running = env
        .start_with_lease(env.config(Duration::from_secs(1)), "r-1", &lease)
        .await;
    env.wait_drained(&node).await;
    let genuine = env.get_node(&node).await["metadata"]["annotations"]
        [keys::DRAIN_RECORD_ANNOTATION]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        genuine.contains("\"seal\""),
        "records are sealed: {genuine}"
    );
    // The problem clears (for longer than its 10m): uncordoned, the record removed.
    env.set_condition(&node, "KernelDeadlock", "False", 3600)
        .await;
    eventually("uncordoned and the record removed", WAIT, || async {
        let n = env.get_node(&node).await;
        (n["spec"]["unschedulable"] != json!(true)
            && n["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION].is_null())
        .then_some(())
    })
    .await;
    // The leader keeps what it saw in its memory's ConfigMaps (never on the Lease); then it
    // stops (a rollout, say).
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    eventually(
        "the removed record remembered in the memory's ConfigMaps",
        WAIT,
        || async {
            for i in 0..nodemedic_drainer::decide::fleet::seen::SHARDS {
                let name = nodemedic_drainer::act::recall::configmap_name(&lease, i);
                let Ok(cm) = configmaps.get(&name).await else {
                    continue;
                };
                let Some(memory) = cm.data.and_then(|mut d| d.remove("memory")) else {
                    continue;
                };
                let v: Value = serde_json::from_str(&memory).ok()?;
                if v["nodes"][&node]["removed"] == json!(true) {
                    return Some(());
                }
            }
            None
        },
    )
    .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    let held = leases.get(&lease).await.unwrap();
    assert!(
        !held
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("nodemedic.io/records"),
        "the Lease carries no memory"
    );
    running.shutdown().await;
    // While no drainer runs, a person cordons both nodes for maintenance; then the old genuine
    // record ("drained, ours, cordoned") is written back on the node, and copied onto its
    // neighbour. Acted on, it would make the drainer lift the person's cordons.
    for n in [&node, &neighbour] {
        admin_patch(&env, n, json!({"spec": {"unschedulable": true}})).await;
    }
    write_as_detector(&env, &node, &genuine).await;
    write_as_detector(&env, &neighbour, &genuine).await;
    // The next leader reads the memory back before it decides.
    let running = env
        .start_with_lease(env.config(Duration::from_secs(1)), "r-2", &lease)
        .await;
    wait_rejected(&env, &node, "older record of this node written back").await;
    wait_rejected(&env, &neighbour, "sealed for node").await;
    env.barrier("KernelDeadlock", json!({})).await;
    for n in [&node, &neighbour] {
        assert!(env.cordoned(n).await, "{n}: the person's cordon was lifted");
    }
    running.shutdown().await;
    env.cleanup().await;
}

/// The node's own credential (a kubelet's, `system:node:NAME`) may annotate its own Node
/// (recording 62): a record it writes there is refused like any other, and it cannot write one on
/// another node at all (60). On the test API server, which authenticates node identities.
#[tokio::test]
async fn a_nodes_own_credential_cannot_steer_the_drainer() {
    for env in Env::each_release().await {
        a_nodes_own_credential_cannot_steer_the_drainer_on(env).await;
    }
}

async fn a_nodes_own_credential_cannot_steer_the_drainer_on(env: Env) {
    let Some(server) = env
        .cluster
        .fake_or_skip("a_nodes_own_credential_cannot_steer_the_drainer")
    else {
        return;
    };
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let own = env.node("kubelet-own", "False", 3600, json!({})).await;
    let other = env.node("kubelet-other", "False", 3600, json!({})).await;
    let pod = env.pod("default", "kubelet-p", &own, json!({})).await;
    let kubelet = server.client_as_node(&own);
    let record = forged(&lease, &own, "draining", json!({"cordoned": false}));
    let annotate = |node: &str| {
        let body =
            json!({"metadata": {"annotations": {keys::DRAIN_RECORD_ANNOTATION: record.clone()}}});
        let api = Api::<Node>::all(kubelet.clone());
        let node = node.to_string();
        async move {
            api.patch_status(&node, &PatchParams::default(), &Patch::Strategic(body))
                .await
        }
    };
    annotate(&own)
        .await
        .expect("a node may annotate its own Node (62)");
    match annotate(&other).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("a node wrote another node: {other:?}"),
    }
    let running = env
        .start_with_lease(env.config(Duration::from_secs(1)), "k-1", &lease)
        .await;
    wait_rejected(&env, &own, "seal does not match").await;
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(env.pod_exists("default", &pod).await, "{pod} was evicted");
    assert_eq!(env.evictions(&pod, None), 0);
    assert!(
        rejections(&env, &other).await.is_empty(),
        "nothing reached {other}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

/// A node may set its own `topology.kubernetes.io/zone` (NodeRestriction allows it): healthy
/// nodes moving themselves into a partitioned domain would bring its unhealthy share under the
/// outage threshold, and the partitioned nodes would be drained. Each node stays in the domain
/// it had when the drainer first saw it, and the move is reported on the node.
#[tokio::test]
async fn nodes_relabelling_their_own_zone_do_not_end_an_outage() {
    for env in Env::each_release().await {
        nodes_relabelling_their_own_zone_do_not_end_an_outage_on(env).await;
    }
}

async fn nodes_relabelling_their_own_zone_do_not_end_an_outage_on(env: Env) {
    let Some(server) = env
        .cluster
        .fake_or_skip("nodes_relabelling_their_own_zone_do_not_end_an_outage")
    else {
        return;
    };
    let zone = |z: &str| format!("zone-{z}-{}", env.id);
    let label = "topology.kubernetes.io/zone";
    let mut partitioned = Vec::new();
    for i in 0..4 {
        let status = if i < 3 { "True" } else { "False" };
        let n = env
            .node(&format!("z0-{i}"), status, 3600, json!({label: zone("a")}))
            .await;
        partitioned.push(n);
    }
    let mut movers = Vec::new();
    for i in 0..6 {
        movers.push(
            env.node(&format!("z1-{i}"), "False", 3600, json!({label: zone("b")}))
                .await,
        );
    }
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.safety.domain_outage_percent = 50.0;
    let running = env.start(cfg, "zone-1").await;
    // A barrier in a third, one-node domain (too small for an outage) is cordoned.
    env.barrier("KernelDeadlock", json!({label: zone("c")}))
        .await;
    for n in &movers {
        let body = json!({"metadata": {"labels": {label: zone("a")}}});
        Api::<Node>::all(server.client_as_node(n))
            .patch(n, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .expect("NodeRestriction lets a node set its own zone");
    }
    env.barrier("KernelDeadlock", json!({label: zone("c")}))
        .await;
    for n in &partitioned {
        assert!(
            !env.cordoned(n).await,
            "{n} cordoned: the outage was ended from outside"
        );
    }
    for n in &movers {
        eventually(&format!("{n}: FailureDomainKept"), WAIT, || async {
            let events = env.drainer_events(n).await;
            events
                .iter()
                .find(|e| e.reason.as_deref() == Some("FailureDomainKept"))
                .and_then(|e| e.message.clone())
        })
        .await;
    }
    running.shutdown().await;
    env.cleanup().await;
}

/// Issue 76, principle 2: rotating the record key. The Secret gets the new key as `key` and the
/// old one as `previous`, and the drainer restarts: the records the old key sealed are still its
/// own (a node cordoned before the rotation is uncordoned when it recovers, no record refused).
/// Without `previous`, the same record is refused: the old key alone is what made it the drainer's.
#[tokio::test]
async fn a_rotated_record_key_keeps_the_records_the_previous_one_sealed() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (key, previous) = (dir.path().join("key"), dir.path().join("previous"));
    let random = || {
        let mut b = vec![0u8; 32];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b)
            .unwrap();
        b
    };
    let (old, new) = (random(), random());
    for (hint, trust_previous) in [("rotated", true), ("unrotated", false)] {
        std::fs::write(&key, &old).unwrap();
        let _ = std::fs::remove_file(&previous);
        let node = env.node(hint, "True", 3600, json!({})).await;
        let before = env
            .start_keyed(env.config(Duration::from_secs(1)), &key, None)
            .await;
        eventually(&format!("{node} cordoned"), WAIT, || async {
            env.cordoned(&node).await.then_some(())
        })
        .await;
        before.shutdown().await;
        std::fs::write(&key, &new).unwrap();
        if trust_previous {
            std::fs::write(&previous, &old).unwrap();
        }
        let after = env
            .start_keyed(env.config(Duration::from_secs(1)), &key, Some(&previous))
            .await;
        env.set_condition(&node, "KernelDeadlock", "False", 3600)
            .await;
        if trust_previous {
            eventually(
                &format!("{node} uncordoned by its record"),
                WAIT,
                || async { (!env.cordoned(&node).await).then_some(()) },
            )
            .await;
            assert_eq!(rejections(&env, &node).await, Vec::<String>::new());
        } else {
            wait_rejected(&env, &node, "").await;
            env.barrier("KernelDeadlock", json!({})).await;
            assert!(
                env.cordoned(&node).await,
                "a cordon no trusted record says is ours stays for a person"
            );
        }
        after.shutdown().await;
    }
    env.cleanup().await;
}

/// An attacker's review (issue 76): the drainer's token may update the record memory's ConfigMaps.
/// Four nodes of a zone all unhealthy are an outage and nothing is cordoned; the memory written
/// with a pin for each, each in a domain of its own, ended the outage for the next leader, which
/// cordoned all four, and a slow-start width of 64 let it remediate a domain at once. Each shard
/// is sealed with the record key now: one the drainer did not seal is not used (and is written
/// again, sealed).
#[tokio::test]
async fn a_record_memory_the_drainer_did_not_seal_is_not_used() {
    let env = Env::new().await;
    let zone = format!("zone-{}", env.id);
    let mut nodes = Vec::new();
    for i in 0..4 {
        let labels = json!({"topology.kubernetes.io/zone": zone});
        nodes.push(env.node(&format!("g{i}"), "True", 3600, labels).await);
    }
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let mut pinned = serde_json::Map::new();
    for (i, n) in nodes.iter().enumerate() {
        let uid = env.get_node(n).await["metadata"]["uid"].clone();
        pinned.insert(
            n.clone(),
            json!({"uid": uid, "domain": format!("lone-{i}")}),
        );
    }
    let forged = json!({"nodes": {}, "pinned": pinned}).to_string();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    for i in 0..nodemedic_drainer::decide::fleet::seen::SHARDS {
        let name = nodemedic_drainer::act::recall::configmap_name(&lease, i);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "kube-system",
                "labels": {"nodemedic.test/run": env.cluster.id_label()}},
            "data": {"memory": forged, "seal": "forged"}});
        cms.patch(
            &name,
            &PatchParams::apply("attacker").force(),
            &Patch::Apply(cm),
        )
        .await
        .unwrap();
    }
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.safety = nodemedic_drainer::config::safety::Safety {
        domain_outage_percent: 50.0,
        domain_outage_min_nodes: 3,
        ..nodemedic_drainer::config::safety::Safety::off()
    };
    let running = env.start(cfg, "a").await;
    // Decided since (a barrier node of another zone is cordoned), and the memory written again.
    env.barrier("KernelDeadlock", json!({})).await;
    let shard0 = nodemedic_drainer::act::recall::configmap_name(&lease, 0);
    eventually("the memory written again, sealed", WAIT, || async {
        let data = cms.get(&shard0).await.ok()?.data?;
        (data.get("seal").is_some_and(|s| s != "forged") && !data.get("memory")?.contains("lone-"))
            .then_some(())
    })
    .await;
    for n in &nodes {
        assert!(
            !env.cordoned(n).await,
            "{n} cordoned: a forged memory ended its domain's outage"
        );
    }
    running.shutdown().await;
    env.cleanup().await;
}
