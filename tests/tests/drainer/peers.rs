//! Peace with the other remediators (issue 79, point 3), on a real API server: a node
//! cluster-autoscaler is deleting or Karpenter is disrupting (each by the taint its project writes)
//! is left to it, said once in an Event, and taken up again once the peer lets go; a pod Karpenter
//! never disrupts (`karpenter.sh/do-not-disrupt: "true"`) stays on a node the drainer drains.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::cluster::eventually;
use serde_json::json;

use crate::env::{Env, WAIT};

/// Put `taints` on `node`, as the peer does.
async fn taint(env: &Env, node: &str, taints: serde_json::Value) {
    kube::Api::<Node>::all(env.cluster.client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": taints}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_node_another_remediator_has_taken_is_left_to_it_and_taken_up_when_it_lets_go() {
    let env = Env::new().await;
    let by_ca = env.node("peer-ca", "True", 3600, json!({})).await;
    let by_karpenter = env.node("peer-karpenter", "True", 3600, json!({})).await;
    taint(
        &env,
        &by_ca,
        json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1765200000", "effect": "NoSchedule"}]),
    )
    .await;
    taint(
        &env,
        &by_karpenter,
        json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
    )
    .await;
    // The control, drained beside them: its do-not-disrupt pod stays, the other goes.
    let free = env.node("peer-free", "True", 3600, json!({})).await;
    let kept = env
        .pod(
            "default",
            "do-not-disrupt",
            &free,
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        )
        .await;
    let web = env.pod("default", "web", &free, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(1)), "a").await;
    env.wait_drained(&free).await;
    assert!(!env.pod_exists("default", &web).await, "{web} evicted");
    assert!(
        env.pod_exists("default", &kept).await,
        "the do-not-disrupt pod stays"
    );
    assert_eq!(env.evictions(&kept, None), 0, "never asked to evict it");
    for (node, peer) in [(&by_ca, "cluster-autoscaler"), (&by_karpenter, "Karpenter")] {
        let said = eventually(
            &format!("{node} said to be left to {peer}"),
            WAIT,
            || async {
                env.drainer_events(node)
                    .await
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("LeftToAnotherRemediator"))
            },
        )
        .await;
        let message = said.message.unwrap_or_default();
        assert!(
            message.starts_with(&format!("Left to {peer}, which is")),
            "{message}"
        );
        assert!(
            !env.cordoned(node).await,
            "{node} cordoned though {peer} took it"
        );
        assert_eq!(env.record_phase(node).await, None, "{node}: no record");
    }
    // cluster-autoscaler lets go (its scale-down was cancelled): the node's problem is taken up.
    taint(&env, &by_ca, json!([])).await;
    eventually("cordoned once the peer let go", WAIT, || async {
        env.cordoned(&by_ca).await.then_some(())
    })
    .await;
    let said = env
        .drainer_events(&by_karpenter)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("LeftToAnotherRemediator"))
        .map(|e| e.count.unwrap_or(1))
        .sum::<i32>();
    assert_eq!(said, 1, "said once while it lasts");
    assert!(!env.cordoned(&by_karpenter).await);
    running.shutdown().await;
    env.cleanup().await;
}
