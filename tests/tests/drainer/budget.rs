//! Budgets: one node at a time, and one WaitingForBudget Event per wait.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use nodemedic_drainer::config::Budget;
use nodemedic_tests::cluster::eventually;
use serde_json::json;

use crate::env::{Env, WAIT};

#[tokio::test]
async fn a_budget_of_one_takes_three_bad_nodes_one_at_a_time() {
    let env = Env::new().await;
    let mut names = Vec::new();
    for (n, since) in [("n1", 3000), ("n2", 2000), ("n3", 1000)] {
        names.push(env.node(n, "True", since, json!({})).await);
    }
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_cordoned = Budget::Count(1);
    let running = env.start(cfg, "a").await;
    env.wait_drained(&names[0]).await;
    // The barrier waits for the budget too (a WaitingForBudget Event is what it waits for).
    env.barrier("KernelDeadlock", json!({})).await;
    let mut count = 0;
    for n in &names {
        count += env.cordoned(n).await as usize;
    }
    assert_eq!(count, 1, "only one node cordoned at a time");
    env.set_condition(&names[0], "KernelDeadlock", "False", 700)
        .await;
    eventually("n2 cordoned after n1 recovered", WAIT, || async {
        (!env.cordoned(&names[0]).await && env.cordoned(&names[1]).await).then_some(())
    })
    .await;
    assert!(!env.cordoned(&names[2]).await);
    let waiting: Vec<Event> = env
        .drainer_events(&names[2])
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WaitingForBudget"))
        .collect();
    assert_eq!(
        waiting.len(),
        1,
        "a waiting node says so, with one Event for its wait, not one per round: {waiting:?}"
    );
    assert_eq!(
        waiting[0].message.as_deref(),
        Some("waiting for the cordon budget (--max-cordoned) to free a slot")
    );
    running.shutdown().await;
    env.cleanup().await;
}
