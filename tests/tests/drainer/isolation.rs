//! Two drainers with disjoint selectors and their own Leases never touch each other's nodes.

use std::time::Duration;

use nodemedic_common::keys;
use nodemedic_drainer::config::Budget;
use nodemedic_drainer::config::select::Selector;
use serde_json::{Value, json};

use crate::env::{Env, LABEL};

#[tokio::test]
async fn two_drainers_with_disjoint_selectors_never_touch_each_others_nodes() {
    let env = Env::new().await;
    let a = env.node("pool-a", "True", 3600, json!({"pool": "a"})).await;
    let b = env.node("pool-b", "True", 3000, json!({"pool": "b"})).await;
    let pa = env.pod("default", "pa", &a, json!({})).await;
    let pb = env.pod("default", "pb", &b, json!({})).await;
    let (lease_a, lease_b) = (
        format!("nodemedic-drainer-a-{}", env.id),
        format!("nodemedic-drainer-b-{}", env.id),
    );
    let drainer = |pool: &str| {
        let mut cfg = env.config(Duration::from_secs(1));
        cfg.selector = Selector::labels(&format!("{LABEL}={},pool={pool}", env.id)).unwrap();
        // A budget of one each: before records named their drainer, each counted the other's
        // cordon and waited forever ("cordon budget full: 2 of 1").
        cfg.max_cordoned = Budget::Count(1);
        cfg
    };
    let ra = env.start_with_lease(drainer("a"), "a-1", &lease_a).await;
    let rb = env.start_with_lease(drainer("b"), "b-1", &lease_b).await;
    env.wait_drained(&a).await;
    env.wait_drained(&b).await;
    // Each drainer has decided what it saw before a barrier of its own pool.
    env.barrier("KernelDeadlock", json!({"pool": "a"})).await;
    env.barrier("KernelDeadlock", json!({"pool": "b"})).await;
    for (node, lease) in [(&a, &lease_a), (&b, &lease_b)] {
        let n = env.get_node(node).await;
        let record: Value = serde_json::from_str(
            n["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record["owner"], json!(lease), "{node}: {record}");
        let starts = env
            .event_reasons(node)
            .await
            .iter()
            .filter(|r| *r == "DrainStarting" || *r == "DrainSucceeded")
            .count();
        assert_eq!(
            starts, 2,
            "{node}: one DrainStarting and one DrainSucceeded"
        );
    }
    assert_eq!(env.evictions(&pa, None), 1, "one eviction of {pa}");
    assert_eq!(env.evictions(&pb, None), 1, "one eviction of {pb}");
    if let Some(plane) = env.cluster.plane {
        // Counted at the API server: each drainer wrote only its own node.
        let agent = |lease: &str| format!("nodemedic-test-{lease}-{}", env.cluster.id);
        let wrote = |lease: &str, node: &str| {
            plane
                .audit()
                .iter()
                .filter(|e| {
                    e.user_agent == agent(lease)
                        && e.resource == "nodes"
                        && e.name == node
                        && e.verb != "get"
                })
                .count()
        };
        assert!(wrote(&lease_a, &a) > 0 && wrote(&lease_b, &b) > 0);
        assert_eq!(wrote(&lease_a, &b), 0, "drainer a never wrote b's node");
        assert_eq!(wrote(&lease_b, &a), 0, "drainer b never wrote a's node");
    }
    ra.shutdown().await;
    rb.shutdown().await;
    env.cleanup().await;
}
