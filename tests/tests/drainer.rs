//! Drainer scenarios: the real controller (`run::start`) with a real kube::Client over HTTP against the
//! test API server: Nodes, Pods, the eviction subresource with PodDisruptionBudgets, Leases.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_common::keys;
use nodemedic_drainer::config::{Budget, Config};
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_tests::cluster::eventually;
use nodemedic_tests::server::TestApiServer;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn config(buffer: Duration) -> Config {
    Config {
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        drain_buffer: buffer,
        max_cordoned: Budget::Count(10),
        max_grace_period: Duration::from_secs(30),
        eviction_headroom: Duration::from_secs(30),
        ..Default::default()
    }
}

async fn start(server: &TestApiServer, cfg: Config, identity: &str) -> Running {
    let opts = Options {
        config: cfg,
        listen: "127.0.0.1:0".parse().unwrap(),
        lease: LeaseConfig {
            namespace: "kube-system".into(),
            name: "nodemedic-drainer".into(),
            identity: identity.into(),
            duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
        },
        tick: Duration::from_millis(200),
    };
    run::start(opts, server.client()).await.unwrap()
}

fn ago(secs: i64) -> String {
    (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(secs as u64))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A node with Ready=True and KernelDeadlock=`status` since `since_secs` ago.
async fn node(server: &TestApiServer, name: &str, status: &str, since_secs: i64, labels: Value) {
    let nodes: Api<Node> = Api::all(server.client());
    let n: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    set_condition(server, name, "KernelDeadlock", status, since_secs).await;
    set_condition(server, name, "Ready", "True", 3600).await;
}

async fn set_condition(
    server: &TestApiServer,
    node: &str,
    type_: &str,
    status: &str,
    since_secs: i64,
) {
    let nodes: Api<Node> = Api::all(server.client());
    let body = json!({"status": {"conditions": [{"type": type_, "status": status, "reason": "Test", "message": "m",
        "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(since_secs)}]}});
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn pod(server: &TestApiServer, ns: &str, name: &str, node: &str, extra: Value) {
    let mut v = json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        "status": {"phase": "Running"}
    });
    merge(&mut v, &extra);
    let p: Pod = serde_json::from_value(v).unwrap();
    Api::<Pod>::namespaced(server.client(), ns)
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .for_each(|(k, v)| merge(a.entry(k.clone()).or_insert(Value::Null), v)),
        (a, b) => *a = b.clone(),
    }
}

fn get_node(server: &TestApiServer, name: &str) -> Value {
    server.object("v1", "nodes", None, name).unwrap()
}

fn cordoned(server: &TestApiServer, name: &str) -> bool {
    get_node(server, name)["spec"]["unschedulable"] == json!(true)
}

fn pod_exists(server: &TestApiServer, ns: &str, name: &str) -> bool {
    server.object("v1", "pods", Some(ns), name).is_some()
}

fn event_reasons(server: &TestApiServer, node: &str) -> Vec<String> {
    server
        .objects("v1", "events")
        .iter()
        .filter(|e| e["involvedObject"]["name"] == node)
        .map(|e| e["reason"].as_str().unwrap_or("").to_string())
        .collect()
}

fn drain_scheduled(server: &TestApiServer, node: &str) -> Option<String> {
    get_node(server, node)["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == keys::DRAIN_SCHEDULED_CONDITION)
        .map(|c| c["message"].as_str().unwrap_or("").to_string())
}

fn record_phase(server: &TestApiServer, node: &str) -> Option<String> {
    let raw = get_node(server, node)["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
        .as_str()?
        .to_string();
    serde_json::from_str::<Value>(&raw).ok()?["phase"]
        .as_str()
        .map(String::from)
}

#[tokio::test]
async fn held_condition_cordons_then_drains_after_the_buffer_sparing_protected_pods() {
    let server = TestApiServer::start().await;
    node(&server, "bad", "True", 3600, json!({})).await;
    pod(&server, "default", "web", "bad", json!({})).await;
    pod(&server, "default", "elsewhere", "other-node", json!({})).await;
    pod(&server, "kube-system", "ds", "bad", json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u2", "controller": true}]}})).await;
    pod(
        &server,
        "kube-system",
        "not-evicted",
        "bad",
        json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}}),
    )
    .await;
    pod(
        &server,
        "kube-system",
        "critical",
        "bad",
        json!({"spec": {"priority": 2000001000}}),
    )
    .await;
    pod(
        &server,
        "kube-system",
        "mirror",
        "bad",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    )
    .await;
    let running = start(&server, config(Duration::from_secs(2)), "a").await;

    eventually("cordoned", WAIT, || async {
        cordoned(&server, "bad").then_some(())
    })
    .await;
    let scheduled = eventually("DrainScheduled condition", WAIT, || async {
        drain_scheduled(&server, "bad")
    })
    .await;
    assert!(
        scheduled.starts_with("Drain activity scheduled "),
        "{scheduled}"
    );
    assert!(
        pod_exists(&server, "default", "web"),
        "not drained before the buffer"
    );
    eventually("drain completed", WAIT, || async {
        drain_scheduled(&server, "bad").filter(|m| m.contains(" | Completed: "))
    })
    .await;
    assert!(
        !pod_exists(&server, "default", "web"),
        "the ReplicaSet pod was evicted"
    );
    for (ns, p) in [
        ("default", "elsewhere"),
        ("kube-system", "ds"),
        ("kube-system", "not-evicted"),
        ("kube-system", "critical"),
        ("kube-system", "mirror"),
    ] {
        assert!(pod_exists(&server, ns, p), "{ns}/{p} must stay");
    }
    assert_eq!(record_phase(&server, "bad").as_deref(), Some("drained"));
    assert!(cordoned(&server, "bad"), "stays cordoned after the drain");
    let reasons = event_reasons(&server, "bad");
    for r in [
        "CordonStarting",
        "CordonSucceeded",
        "DrainScheduled",
        "DrainStarting",
        "DrainSucceeded",
    ] {
        assert!(
            reasons.contains(&r.to_string()),
            "{r} missing from {reasons:?}"
        );
    }
    assert_eq!(server.count("POST", "/pods/web/eviction"), 1);
    assert_eq!(
        server
            .log()
            .iter()
            .filter(|l| l.path.ends_with("/eviction") && !l.path.contains("/web/"))
            .count(),
        0,
        "no other eviction"
    );
    let body = http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        body.contains("draino_cordoned_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("draino_drained_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn flapping_condition_and_kosmos_leaf_not_ready_do_nothing() {
    let server = TestApiServer::start().await;
    node(&server, "flappy", "True", 30, json!({})).await;
    node(
        &server,
        "kosmos-leaf",
        "False",
        3600,
        json!({"kosmos.io/node": "true"}),
    )
    .await;
    set_condition(&server, "kosmos-leaf", "Ready", "Unknown", 3600).await;
    let mut cfg = config(Duration::from_secs(1));
    cfg.conditions.push("Ready=Unknown,1m".parse().unwrap());
    let writes_before = server.count("PATCH", "/api/v1/nodes/");
    let running = start(&server, cfg, "a").await;
    eventually("leader", WAIT, || async {
        (*running.leader.borrow()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for n in ["flappy", "kosmos-leaf"] {
        assert!(!cordoned(&server, n), "{n} must not be cordoned");
        assert!(event_reasons(&server, n).is_empty(), "{n}: no events");
    }
    assert_eq!(
        server.count("PATCH", "/api/v1/nodes/"),
        writes_before,
        "the drainer wrote no node"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn pdb_refusals_are_retried_until_the_budget_frees() {
    let server = TestApiServer::start().await;
    node(&server, "bad", "True", 3600, json!({})).await;
    pod(&server, "default", "api", "bad", json!({})).await;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "api-pdb", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    server.put_object(
        "policy/v1",
        "poddisruptionbudgets",
        Some("default"),
        pdb.clone(),
    );
    let running = start(&server, config(Duration::from_secs(1)), "a").await;
    eventually("an eviction refused with 429", WAIT, || async {
        server
            .log()
            .iter()
            .any(|l| l.path.ends_with("/pods/api/eviction") && l.status == 429)
            .then_some(())
    })
    .await;
    assert!(pod_exists(&server, "default", "api"));
    let mut freed = pdb;
    freed["status"]["disruptionsAllowed"] = json!(1);
    server.put_object("policy/v1", "poddisruptionbudgets", Some("default"), freed);
    eventually("pod evicted once the budget allows", WAIT, || async {
        (!pod_exists(&server, "default", "api")).then_some(())
    })
    .await;
    eventually("drain succeeded", WAIT, || async {
        drain_scheduled(&server, "bad").filter(|m| m.contains("Completed"))
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn recovery_during_the_buffer_cancels_the_drain_and_uncordons() {
    let server = TestApiServer::start().await;
    node(&server, "bad", "True", 3600, json!({})).await;
    pod(&server, "default", "web", "bad", json!({})).await;
    let running = start(&server, config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        cordoned(&server, "bad").then_some(())
    })
    .await;
    // healthy again for longer than the min duration
    set_condition(&server, "bad", "KernelDeadlock", "False", 700).await;
    eventually("uncordoned", WAIT, || async {
        (!cordoned(&server, "bad")).then_some(())
    })
    .await;
    eventually("record and DrainScheduled removed", WAIT, || async {
        (record_phase(&server, "bad").is_none() && drain_scheduled(&server, "bad").is_none())
            .then_some(())
    })
    .await;
    assert!(pod_exists(&server, "default", "web"), "never drained");
    let reasons = event_reasons(&server, "bad");
    assert!(
        reasons.contains(&"UncordonSucceeded".to_string()),
        "{reasons:?}"
    );
    assert!(
        !reasons.contains(&"DrainStarting".to_string()),
        "{reasons:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_manual_uncordon_is_respected_for_the_episode() {
    let server = TestApiServer::start().await;
    node(&server, "bad", "True", 3600, json!({})).await;
    let running = start(&server, config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        cordoned(&server, "bad").then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .patch(
            "bad",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": false}})),
        )
        .await
        .unwrap();
    eventually("released", WAIT, || async {
        (record_phase(&server, "bad").as_deref() == Some("released")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !cordoned(&server, "bad"),
        "not cordoned again for the same episode"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_budget_of_one_takes_three_bad_nodes_one_at_a_time() {
    let server = TestApiServer::start().await;
    for (n, since) in [("n1", 3000), ("n2", 2000), ("n3", 1000)] {
        node(&server, n, "True", since, json!({})).await;
    }
    let mut cfg = config(Duration::from_secs(1));
    cfg.max_cordoned = Budget::Count(1);
    let running = start(&server, cfg, "a").await;
    eventually("n1 (oldest problem) drained", WAIT, || async {
        drain_scheduled(&server, "n1").filter(|m| m.contains("Completed"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let count = || {
        ["n1", "n2", "n3"]
            .iter()
            .filter(|n| cordoned(&server, n))
            .count()
    };
    assert_eq!(count(), 1, "only one node cordoned at a time");
    // n1 recovers: it is uncordoned and the next one is taken
    set_condition(&server, "n1", "KernelDeadlock", "False", 700).await;
    eventually("n2 cordoned after n1 recovered", WAIT, || async {
        (!cordoned(&server, "n1") && cordoned(&server, "n2")).then_some(())
    })
    .await;
    assert_eq!(count(), 1);
    assert!(!cordoned(&server, "n3"));
    running.shutdown().await;
}

#[tokio::test]
async fn two_replicas_one_leader_and_failover_continues_the_drain() {
    let server = TestApiServer::start().await;
    node(&server, "bad", "True", 3600, json!({})).await;
    pod(&server, "default", "api", "bad", json!({})).await;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "api-pdb", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}},
        "status": {"disruptionsAllowed": 0}});
    server.put_object(
        "policy/v1",
        "poddisruptionbudgets",
        Some("default"),
        pdb.clone(),
    );
    let a = start(&server, config(Duration::from_secs(1)), "replica-a").await;
    eventually("a leads", WAIT, || async {
        (*a.leader.borrow()).then_some(())
    })
    .await;
    let b = start(&server, config(Duration::from_secs(1)), "replica-b").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!*b.leader.borrow(), "only one leader");
    eventually("drain in progress (blocked by the PDB)", WAIT, || async {
        (record_phase(&server, "bad").as_deref() == Some("draining")).then_some(())
    })
    .await;
    let starts_before = event_reasons(&server, "bad")
        .iter()
        .filter(|r| *r == "DrainStarting")
        .count();
    a.shutdown().await;
    eventually("b takes over", WAIT, || async {
        (*b.leader.borrow()).then_some(())
    })
    .await;
    let lease = server
        .object(
            "coordination.k8s.io/v1",
            "leases",
            Some("kube-system"),
            "nodemedic-drainer",
        )
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    let mut freed = pdb;
    freed["status"]["disruptionsAllowed"] = json!(1);
    server.put_object("policy/v1", "poddisruptionbudgets", Some("default"), freed);
    eventually("b finished the drain", WAIT, || async {
        drain_scheduled(&server, "bad").filter(|m| m.contains("Completed"))
    })
    .await;
    assert!(!pod_exists(&server, "default", "api"));
    let starts = event_reasons(&server, "bad")
        .iter()
        .filter(|r| *r == "DrainStarting")
        .count();
    assert_eq!(
        starts,
        starts_before + 1,
        "b resumed the drain once; a's drain stopped with its leadership"
    );
    b.shutdown().await;
}

async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf).into_owned()
}
