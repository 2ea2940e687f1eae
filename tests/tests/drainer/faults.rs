//! Faults a real cluster has on a bad day: the API server restarting mid-drain (every watch lost,
//! connections reset) on a private real control plane, and a slow API server during a leader change
//! on the test API server (latency is injected there).

use std::time::Duration;

use nodemedic_drainer::config::Budget;
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest::{self, ControlPlane, KcmOptions};
use serde_json::json;

use crate::env::{Env, WAIT};

#[tokio::test]
async fn an_api_server_restart_mid_drain_evicts_nothing_twice_and_keeps_the_budget() {
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "API server restart mid-drain",
            "a kube-apiserver process to stop and start again over the same etcd",
        );
        return;
    };
    // A private plane: restarting the shared one would cut the other scenarios' watches.
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(
        &assets,
        Some(KcmOptions::default()),
    )));
    let env = Env::on(Cluster::on(plane));
    let first = env.node("first", "True", 3600, json!({})).await;
    let second = env.node("second", "True", 3000, json!({})).await;
    let api = env.pod("default", "api", &first, json!({})).await;
    let web: Vec<String> = futures_pods(&env, &first, 3).await;
    let other = env.pod("default", "other", &second, json!({})).await;
    let pdb = env.blocking_pdb(&api).await;
    let mut cfg = env.config(Duration::from_secs(0));
    cfg.max_cordoned = Budget::Count(1);
    let d = env.start(cfg, "replica-a").await;
    eventually("the first node's other pods evicted", WAIT, || async {
        for w in &web {
            if env.pod_exists("default", w).await {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert_eq!(env.record_phase(&first).await.as_deref(), Some("draining"));

    plane.restart_apiserver();
    // The drainer's watches come back (with backoff) and it goes on where it was: once it has
    // decided a node made after the restart (held by the budget: a WaitingForBudget Event), it has
    // seen the second node again too.
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(
        !env.cordoned(&second).await,
        "the budget of one cordoned node holds across the restart"
    );
    env.free_pdb(&pdb).await;
    env.wait_drained(&first).await;
    assert!(!env.pod_exists("default", &api).await);
    for p in web.iter().chain([&api]) {
        assert_eq!(env.evictions(p, Some(201)), 1, "{p} evicted exactly once");
    }
    assert_eq!(env.evictions(&other, None), 0);
    assert!(!env.cordoned(&second).await, "still one cordoned node");
    let starts = env
        .event_reasons(&first)
        .await
        .iter()
        .filter(|r| *r == "DrainStarting")
        .count();
    assert_eq!(starts, 1, "the drain was not started again");
    d.shutdown().await;
    env.cleanup().await;
}

async fn futures_pods(env: &Env, node: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(
            env.pod("default", &format!("web{i}"), node, json!({}))
                .await,
        );
    }
    out
}

#[tokio::test]
async fn watches_cut_mid_stream_and_gone_on_resume_are_listed_again_and_nothing_is_missed() {
    // Cut streams and a forced 410 on resume: only the test API server does that on demand.
    let env = Env::on(Cluster::fake().await);
    let fake = env.cluster.fake.clone().expect("the test API server");
    let node = env.node("cut", "False", 3600, json!({})).await;
    let later = env.node("later", "False", 3600, json!({})).await;
    let d = env
        .start(env.config(Duration::from_secs(0)), "replica-a")
        .await;
    eventually("the drainer leads", WAIT, || async {
        (*d.leader.borrow()).then_some(())
    })
    .await;
    // Its node list and watch are up (both are GETs of /api/v1/nodes), so what follows counts
    // only what the cut and the 410 make it do.
    eventually("the node list and watch", WAIT, || async {
        (node_lists(&fake) >= 2).then_some(())
    })
    .await;
    let lists_before = node_lists(&fake);
    fake.gone_on_resume(20);
    fake.cut_watches();
    // The change happens while the watches are down; resuming is refused, so only a new list shows it.
    env.set_condition(&node, "KernelDeadlock", "True", 3600)
        .await;
    eventually("the node cordoned after the re-list", WAIT, || async {
        env.cordoned(&node).await.then_some(())
    })
    .await;
    assert!(
        node_lists(&fake) > lists_before,
        "the nodes were listed again after 410 Gone"
    );
    fake.restart();
    env.set_condition(&later, "KernelDeadlock", "True", 3600)
        .await;
    eventually("a change after a server restart acted on", WAIT, || async {
        env.cordoned(&later).await.then_some(())
    })
    .await;
    d.shutdown().await;
    env.cleanup().await;
}

/// GET /api/v1/nodes without watch: a list.
fn node_lists(fake: &nodemedic_tests::server::TestApiServer) -> usize {
    fake.log()
        .iter()
        .filter(|l| l.method == "GET" && l.path == "/api/v1/nodes")
        .count()
        .saturating_sub(
            fake.log()
                .iter()
                .filter(|l| l.method == "GET" && l.path == "/api/v1/nodes" && l.status == 0)
                .count(),
        )
}

#[tokio::test]
async fn a_leader_change_mid_drain_with_a_slow_api_evicts_each_pod_once() {
    // 150 ms on every request: only the test API server is slow on demand.
    let env = Env::on(Cluster::fake().await);
    let fake = env.cluster.fake.clone().expect("the test API server");
    let bad = env.node("slow", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let pdb = env.blocking_pdb(&api).await;
    fake.inject(
        "*",
        "",
        nodemedic_tests::server::FaultKind::Delay(Duration::from_millis(150)),
        usize::MAX,
    );
    let a = env
        .start(env.config(Duration::from_secs(0)), "replica-a")
        .await;
    eventually("a leads", WAIT, || async {
        (*a.leader.borrow()).then_some(())
    })
    .await;
    let b = env
        .start(env.config(Duration::from_secs(0)), "replica-b")
        .await;
    eventually("the drain blocked by the PDB", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("draining")
            && !env.pod_exists("default", &web).await)
            .then_some(())
    })
    .await;
    a.shutdown().await;
    eventually("b takes over", WAIT, || async {
        (*b.leader.borrow()).then_some(())
    })
    .await;
    env.free_pdb(&pdb).await;
    env.wait_drained(&bad).await;
    assert_eq!(env.evictions(&web, Some(201)), 1, "web evicted once");
    assert_eq!(env.evictions(&api, Some(201)), 1, "api evicted once");
    b.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_pod_the_drainer_cannot_read_at_its_start_costs_only_itself() {
    // The first list of pods is read in one pass: the odd pod (a time past what our types hold)
    // fails that list, and the list read again object by object leaves it out and goes on. On the
    // test API server: the drainer's reading is the point (faults below has the real server's).
    let env = Env::on(Cluster::fake().await);
    let fake = env.cluster.fake.clone().expect("the test API server");
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let other = env.node("other", "False", 3600, json!({})).await;
    let odd = env.pod("default", "odd", &other, json!({})).await;
    let far = json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "9999-12-31T23:59:59Z"}]});
    env.cluster.set_pod_status("default", &odd, far).await;
    let d = env
        .start(env.config(Duration::from_secs(0)), "replica-a")
        .await;
    env.wait_drained(&bad).await;
    assert_eq!(env.evictions(&web, Some(201)), 1, "web evicted once");
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", d.addr)).await;
    assert!(
        metrics.contains("nodemedic_drainer_malformed_objects_total{kind=\"pod\"} 1"),
        "the odd pod alone left out: {metrics}"
    );
    let pod_lists = fake
        .log()
        .iter()
        .filter(|l| l.method == "GET" && l.path == "/api/v1/pods")
        .count();
    assert!(
        pod_lists >= 3,
        "the list read in one pass failed on the odd pod and was read again (then watched): {pod_lists} requests"
    );
    d.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_node_dated_past_year_9999_spoils_only_itself() {
    // The odd node is in every scenario's node lists meanwhile: that is the point (each drainer
    // leaves it out and goes on); it carries no scenario's label, so none selects it.
    let env = Env::new().await;
    if !env.cluster.real() {
        envtest::say_skipped(
            "a node dated 9999-12-31 on the real control plane",
            "kube-apiserver's own decoding of a date past 9999 (what it stores and serves)",
        );
        return;
    }
    let good = env.node("good", "True", 3600, json!({})).await;
    // kube-apiserver takes times up to 9999-12-31T23:59:59Z; our types end 26 hours earlier.
    let odd = env.name("odd");
    let nodes: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        env.cluster.client.clone(),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
    );
    nodes
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": odd}}))
            .unwrap(),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            &odd,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"conditions": [{"type": "KernelDeadlock",
                "status": "True", "reason": "Odd", "message": "m",
                "lastHeartbeatTime": "9999-12-31T23:59:59Z",
                "lastTransitionTime": "9999-12-31T23:59:59Z"}]}})),
        )
        .await
        .expect("the API server takes the date");
    let d = env
        .start(env.config(Duration::from_secs(3600)), "replica-a")
        .await;
    eventually("the good node cordoned all the same", WAIT, || async {
        env.cordoned(&good).await.then_some(())
    })
    .await;
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", d.addr)).await;
    assert!(
        metrics.contains("nodemedic_drainer_malformed_objects_total{kind=\"pod\"} 0"),
        "the odd node is read (its times clamped), not left out: {metrics}"
    );
    d.shutdown().await;
    nodes
        .delete(&odd, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    env.cleanup().await;
}

#[tokio::test]
async fn a_new_leader_cordons_before_its_pod_list_is_in_and_drains_only_after() {
    // A new leader lists 650,000 pods for tens of seconds. A cordon needs only the nodes (as
    // draino's did), so a bad node is held meanwhile; its drain waits for every pod to be known.
    // On the test API server: only it holds a request until the test lets it go.
    let env = Env::on(Cluster::fake().await);
    let fake = env.cluster.fake.clone().expect("the test API server");
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let list = fake.hold_next("GET", "/api/v1/pods");
    let running = env.start(env.config(Duration::from_secs(0)), "a").await;
    eventually("the bad node cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    assert_eq!(
        fake.count("GET", "/api/v1/pods"),
        0,
        "cordoned while the pod list was held"
    );
    assert_eq!(env.record_phase(&bad).await.as_deref(), Some("cordoned"));
    assert_eq!(fake.count("POST", "/eviction"), 0, "nothing evicted");
    list.release();
    env.wait_drained(&bad).await;
    assert!(
        !env.pod_exists("default", &web).await,
        "evicted once listed"
    );
    running.shutdown().await;
    env.cleanup().await;
}
