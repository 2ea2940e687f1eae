//! Stale pod readiness after a node flap: the real detector against the test API server. Stale pods
//! get a PodReadinessStale Event (mirror pods too), healthy and gated pods do not; with eviction on,
//! stale pods are evicted, a PodDisruptionBudget's refusal is retried, exempt pods stay.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_detector::readiness::watch::StaleOptions;
use nodemedic_detector::report::aggregate::Limits;
use nodemedic_detector::run::{self, Options, Running};
use nodemedic_tests::cluster::eventually;
use nodemedic_tests::server::TestApiServer;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn ago(secs: u64) -> String {
    (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(secs))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

async fn node(server: &TestApiServer, ready_for: u64) {
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    Api::<Node>::all(server.client())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let body = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "m",
        "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(ready_for)}]}});
    Api::<Node>::all(server.client())
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn pod(
    server: &TestApiServer,
    name: &str,
    ready: &str,
    containers_ready: &str,
    extra: Value,
) {
    let mut v = json!({"metadata": {"name": name, "namespace": "app", "labels": {"app": name}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}});
    for (k, x) in extra.as_object().unwrap() {
        for (k2, y) in x.as_object().unwrap() {
            v[k.as_str()][k2.as_str()] = y.clone();
        }
    }
    let p: Pod = serde_json::from_value(v).unwrap();
    Api::<Pod>::namespaced(server.client(), "app")
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
    // the kubelet's (stale) status
    let mut stored = server.object("v1", "pods", Some("app"), name).unwrap();
    stored["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": containers_ready}]});
    server.put_object("v1", "pods", Some("app"), stored);
}

async fn start(server: &TestApiServer, dir: &std::path::Path, evict: bool) -> Running {
    std::fs::create_dir_all(dir.join("rules")).unwrap();
    std::fs::write(
        dir.join("rules/k.yaml"),
        "source: kernel-monitor\ninput: {kind: kmsg}\n",
    )
    .unwrap();
    std::fs::write(dir.join("kmsg"), "").unwrap();
    let opts = Options {
        node_name: "n1".into(),
        rules: vec![dir.join("rules")],
        kmsg_path: dir.join("kmsg"),
        journalctl: "journalctl".into(),
        journal_dir: None,
        state_file: dir.join("state.json"),
        listen: "127.0.0.1:0".parse().unwrap(),
        heartbeat: Duration::from_secs(300),
        events: Limits::default(),
        report_tick: Duration::from_millis(50),
        stale: Some(StaleOptions {
            threshold: Duration::from_secs(60),
            evict,
            interval: Duration::from_millis(200),
        }),
    };
    run::start(opts, server.client()).await.unwrap()
}

fn stale_events(server: &TestApiServer) -> Vec<String> {
    let mut v: Vec<String> = server
        .objects("v1", "events")
        .iter()
        .filter(|e| e["reason"] == "PodReadinessStale")
        .map(|e| e["involvedObject"]["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn stale_pods_are_reported_and_others_are_not() {
    let server = TestApiServer::start().await;
    node(&server, 600).await;
    pod(&server, "stale", "False", "True", json!({})).await;
    pod(&server, "healthy", "True", "True", json!({})).await;
    pod(&server, "starting", "False", "False", json!({})).await;
    pod(
        &server,
        "gated",
        "False",
        "True",
        json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}}),
    )
    .await;
    pod(
        &server,
        "static",
        "False",
        "True",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let running = start(&server, dir.path(), false).await;
    eventually("two PodReadinessStale events", WAIT, || async {
        (stale_events(&server).len() == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        stale_events(&server),
        vec!["stale", "static"],
        "one Event per stale pod, once"
    );
    let ev = server
        .objects("v1", "events")
        .into_iter()
        .find(|e| e["involvedObject"]["name"] == "stale")
        .unwrap();
    assert_eq!(ev["involvedObject"]["kind"], "Pod");
    assert_eq!(ev["type"], "Warning");
    assert!(
        ev["message"].as_str().unwrap().contains("not evicted"),
        "{ev}"
    );
    assert!(
        server.log().iter().all(|l| !l.path.ends_with("/eviction")),
        "eviction is off by default"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn nothing_is_stale_until_the_node_has_been_ready_for_the_threshold() {
    let server = TestApiServer::start().await;
    node(&server, 10).await;
    pod(&server, "stale", "False", "True", json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let running = start(&server, dir.path(), true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(stale_events(&server).is_empty());
    assert!(server.object("v1", "pods", Some("app"), "stale").is_some());
    running.shutdown().await;
}

#[tokio::test]
async fn with_eviction_on_stale_pods_are_evicted_honouring_pdbs_and_exemptions() {
    let server = TestApiServer::start().await;
    node(&server, 600).await;
    pod(&server, "stale", "False", "True", json!({})).await;
    pod(&server, "guarded", "False", "True", json!({})).await;
    pod(
        &server,
        "static",
        "False",
        "True",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    )
    .await;
    pod(
        &server,
        "critical",
        "False",
        "True",
        json!({"spec": {"priority": 2000000000}}),
    )
    .await;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": "app"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}, "status": {"disruptionsAllowed": 0}});
    server.put_object(
        "policy/v1",
        "poddisruptionbudgets",
        Some("app"),
        pdb.clone(),
    );
    let dir = tempfile::tempdir().unwrap();
    let running = start(&server, dir.path(), true).await;
    eventually("the stale pod evicted", WAIT, || async {
        server
            .object("v1", "pods", Some("app"), "stale")
            .is_none()
            .then_some(())
    })
    .await;
    eventually(
        "the PDB refused the guarded pod's eviction",
        WAIT,
        || async {
            server
                .log()
                .iter()
                .any(|l| l.path.ends_with("/pods/guarded/eviction") && l.status == 429)
                .then_some(())
        },
    )
    .await;
    assert!(
        server
            .object("v1", "pods", Some("app"), "guarded")
            .is_some()
    );
    let mut freed = pdb;
    freed["status"]["disruptionsAllowed"] = json!(1);
    server.put_object("policy/v1", "poddisruptionbudgets", Some("app"), freed);
    eventually(
        "retried and evicted once the budget allows",
        WAIT,
        || async {
            server
                .object("v1", "pods", Some("app"), "guarded")
                .is_none()
                .then_some(())
        },
    )
    .await;
    for p in ["static", "critical"] {
        assert!(
            server.object("v1", "pods", Some("app"), p).is_some(),
            "{p} is never evicted"
        );
        assert!(
            !server
                .log()
                .iter()
                .any(|l| l.path.ends_with(&format!("/pods/{p}/eviction"))),
            "{p}: no eviction attempted"
        );
    }
    running.shutdown().await;
}
