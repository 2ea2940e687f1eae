//! Fleet safety on a real API server: a partition opens the circuit breaker (nothing cordoned, an
//! Event on the drainer's Lease, its state kept there, a notification), it closes after its
//! cooldown and the one real failure left is then cordoned; a pause annotated on the Lease holds
//! the drainer until it is removed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use nodemedic_drainer::config::safety::Safety;
use nodemedic_drainer::model::keys::{BREAKER_ANNOTATION, PAUSE_ANNOTATION};
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::{Env, WAIT};

/// A local endpoint recording notification bodies.
async fn hook() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), seen)
}

fn lease_name(env: &Env) -> String {
    format!("nodemedic-drainer-test-{}", env.id)
}

async fn lease(env: &Env) -> Lease {
    Api::<Lease>::namespaced(env.cluster.client.clone(), "kube-system")
        .get(&lease_name(env))
        .await
        .unwrap()
}

async fn lease_events(env: &Env) -> Vec<Event> {
    Api::<Event>::namespaced(env.cluster.client.clone(), "kube-system")
        .list(&ListParams::default().fields(&format!(
            "involvedObject.kind=Lease,involvedObject.name={}",
            lease_name(env)
        )))
        .await
        .unwrap()
        .items
}

fn events_of(seen: &Arc<Mutex<Vec<Value>>>, event: &str) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|v| v["event"] == event)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_partition_opens_the_breaker_which_closes_after_its_cooldown() {
    let env = Env::new().await;
    let mut nodes = Vec::new();
    for i in 0..6 {
        let zone = json!({"topology.kubernetes.io/zone": format!("z{}", i % 3)});
        nodes.push(env.node(&format!("p{i}"), "False", 3600, zone).await);
    }
    let (url, seen) = hook().await;
    let mut cfg = env.config(Duration::from_secs(3600));
    cfg.safety = Safety {
        breaker_cooldown: Duration::from_secs(3),
        ..Safety::default()
    };
    cfg.notify_urls = vec![nodemedic_drainer::config::url::NotifyUrl::new(url)];
    let running = env.start(cfg, "a").await;
    // Four of six at once (their problem held an hour): more than 30%.
    for n in &nodes[..4] {
        env.set_condition(n, "KernelDeadlock", "True", 3600).await;
    }
    let opened = eventually(
        "the CircuitBreakerOpened event on the lease",
        WAIT,
        || async {
            lease_events(&env)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("CircuitBreakerOpened"))
        },
    )
    .await;
    assert_eq!(
        opened.message.as_deref(),
        Some(
            "Circuit breaker opened (4 of 6 nodes unhealthy > 30%): nothing new is cordoned or drained until it closes"
        )
    );
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.contains("nodemedic_drainer_breaker_open 1"),
        "{metrics}"
    );
    let kept = eventually("the breaker kept on the lease", WAIT, || async {
        lease(&env)
            .await
            .metadata
            .annotations
            .and_then(|a| a.get(BREAKER_ANNOTATION).cloned())
    })
    .await;
    assert!(kept.contains("\"openSince\""), "{kept}");
    for n in &nodes {
        assert!(
            !env.cordoned(n).await,
            "{n} cordoned while the breaker is open"
        );
    }
    eventually("the breaker_opened notification", WAIT, || async {
        (!events_of(&seen, "breaker_opened").is_empty()).then_some(())
    })
    .await;

    // Three recover: one real failure is left, under the threshold. After the cooldown the
    // breaker closes and that node is cordoned.
    for n in &nodes[1..4] {
        env.set_condition(n, "KernelDeadlock", "False", 3600).await;
    }
    eventually(
        "the last bad node cordoned once the breaker closed",
        WAIT,
        || async { env.cordoned(&nodes[0]).await.then_some(()) },
    )
    .await;
    assert!(
        lease_events(&env)
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some("CircuitBreakerClosed"))
    );
    for n in &nodes[1..] {
        assert!(!env.cordoned(n).await, "{n}");
    }
    let cordoned = eventually("the cordon notified", WAIT, || async {
        events_of(&seen, "cordoned").into_iter().next()
    })
    .await;
    assert_eq!(cordoned["node"], nodes[0].as_str());
    assert!(
        cordoned["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "KernelDeadlock" && c["status"] == "True"),
        "{cordoned}"
    );
    assert!(
        cordoned["text"]
            .as_str()
            .unwrap()
            .contains("cordoned: node")
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_pause_on_the_lease_holds_the_drainer_until_it_is_removed() {
    let env = Env::new().await;
    let node = env.node("paused", "False", 3600, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(3600)), "a").await;
    let leases: Api<Lease> = Api::namespaced(env.cluster.client.clone(), "kube-system");
    eventually("the drainer leads", WAIT, || async {
        leases.get_opt(&lease_name(&env)).await.unwrap().map(|_| ())
    })
    .await;
    // What `kubectl annotate lease ... nodemedic.io/pause=...` sends, under its field manager.
    let annotate = |value: Value| {
        let leases = leases.clone();
        let name = lease_name(&env);
        async move {
            leases
                .patch(
                    &name,
                    &PatchParams {
                        field_manager: Some("kubectl-annotate".into()),
                        ..Default::default()
                    },
                    &Patch::Merge(json!({"metadata": {"annotations": {PAUSE_ANNOTATION: value}}})),
                )
                .await
                .unwrap();
        }
    };
    annotate(json!("kernel rollout")).await;
    // The drainer reads the Lease every retry period (200 ms here) and says when it is paused.
    let metrics_url = format!("http://{}/metrics", running.addr);
    let gauge = |name: &'static str| {
        let url = metrics_url.clone();
        async move {
            let m = nodemedic_tests::http_get(&url).await;
            m.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<i64>().ok())
        }
    };
    eventually("the drainer paused", WAIT, || async {
        (gauge("nodemedic_drainer_paused").await == Some(1)).then_some(())
    })
    .await;
    env.set_condition(&node, "KernelDeadlock", "True", 3600)
        .await;
    // Held: the round that decided the bad node counted it as held instead of cordoning it.
    eventually("the bad node held", WAIT, || async {
        (gauge("nodemedic_drainer_held_nodes").await == Some(1)).then_some(())
    })
    .await;
    assert!(!env.cordoned(&node).await, "cordoned while paused");
    // The election's renewals keep the annotation (they write the Lease they read).
    assert!(
        lease(&env)
            .await
            .metadata
            .annotations
            .unwrap()
            .contains_key(PAUSE_ANNOTATION)
    );
    annotate(Value::Null).await;
    eventually("cordoned once the pause is lifted", WAIT, || async {
        env.cordoned(&node).await.then_some(())
    })
    .await;
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_drained_node_is_marked_for_replacement_unmarked_on_recovery_or_deleted() {
    use nodemedic_drainer::config::Taint;
    let env = Env::new().await;
    let marked = env.node("marked", "True", 3600, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.after_drain.labels = vec![("nodemedic.test/replace".into(), "yes".into())];
    cfg.after_drain.annotations = vec![("nodemedic.test/why".into(), "drained".into())];
    cfg.after_drain.taints = vec![
        "nodemedic.test/replace=yes:NoSchedule"
            .parse::<Taint>()
            .unwrap(),
    ];
    let running = env.start(cfg, "a").await;
    env.wait_drained(&marked).await;
    // The MarkedDrained Event is written once every mark is.
    eventually("the MarkedDrained event", WAIT, || async {
        env.event_reasons(&marked)
            .await
            .contains(&"MarkedDrained".to_string())
            .then_some(())
    })
    .await;
    let node = env.get_node(&marked).await;
    assert_eq!(node["metadata"]["labels"]["nodemedic.test/replace"], "yes");
    assert_eq!(
        node["metadata"]["annotations"]["nodemedic.test/why"],
        "drained"
    );
    assert!(
        node["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "nodemedic.test/replace" && t["effect"] == "NoSchedule"),
        "{node}"
    );
    // It recovers: uncordoned, and the marks go with the cordon.
    env.set_condition(&marked, "KernelDeadlock", "False", 700)
        .await;
    let node = eventually("uncordoned and unmarked", WAIT, || async {
        let n = env.get_node(&marked).await;
        (n["spec"]["unschedulable"] != json!(true)).then_some(n)
    })
    .await;
    assert!(
        node["metadata"]["labels"]
            .get("nodemedic.test/replace")
            .is_none(),
        "{node}"
    );
    assert!(
        node["metadata"]["annotations"]
            .get("nodemedic.test/why")
            .is_none(),
        "{node}"
    );
    assert!(
        !node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "nodemedic.test/replace"),
        "{node}"
    );
    running.shutdown().await;

    // With --delete-drained-node-after, the Node object goes once that long has passed.
    let doomed = env.node("doomed", "True", 3600, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.after_drain.delete_after = Some(Duration::from_secs(2));
    let running = env.start(cfg, "b").await;
    env.wait_drained(&doomed).await;
    eventually("the drained node deleted", WAIT, || async {
        Api::<k8s_openapi::api::core::v1::Node>::all(env.cluster.client.clone())
            .get_opt(&doomed)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    running.shutdown().await;
    env.cleanup().await;
}
