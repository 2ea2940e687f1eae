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

/// The message of the drainer's LeftToAnotherRemediator Event on `node`, once there is one.
async fn left_to(env: &Env, node: &str) -> Option<String> {
    let mut events = env.drainer_events(node).await.into_iter();
    let said = events.find(|e| e.reason.as_deref() == Some("LeftToAnotherRemediator"))?;
    Some(said.message.unwrap_or_default())
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
        let message = eventually(&format!("{node} said to be left to {peer}"), WAIT, || {
            left_to(&env, node)
        })
        .await;
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

/// kured's DaemonSet as its manifests ship it (`kube-system/kured`, here under a name of the
/// test's own, placed on no node), its lock naming `holder` (as kured writes it; none: free).
async fn kured(env: &Env, name: &str, holder: Option<&str>) {
    let lock = holder.map(|n| {
        json!({"nodeID": n, "metadata": {"unschedulable": false},
            "created": nodemedic_tests::cluster::now_rfc3339(), "TTL": 0})
        .to_string()
    });
    let api: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
        kube::Api::namespaced(env.cluster.client.clone(), "kube-system");
    let annotations = json!({"weave.works/kured-node-lock": lock});
    if api.get_opt(name).await.unwrap().is_some() {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .unwrap();
        return;
    }
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "annotations": annotations},
        "spec": {"selector": {"matchLabels": {"name": name}},
            "template": {"metadata": {"labels": {"name": name}},
                "spec": {"nodeSelector": {"nodemedic.io/no-such-node": "true"},
                    "containers": [{"name": "kured", "image": "ghcr.io/kubereboot/kured:1.17.1"}]}}}});
    api.create(&Default::default(), &serde_json::from_value(ds).unwrap())
        .await
        .unwrap();
}

/// The phase of the drainer's record on `node`.
async fn phase(env: &Env, node: &str) -> Option<String> {
    env.record_phase(node).await
}

/// Issue 79, point 3: beside kured (`--kured-daemonset`), a node kured holds its lock for is left to
/// it (said once), and a reboot of the ladder waits while the lock holds another node, saying so;
/// once kured lets go, the reboot is asked and kured's node is taken up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_kured_no_two_nodes_reboot_at_once_and_kureds_node_is_left_to_it() {
    let s = crate::remedies::Scenario::new().await;
    let name = s.env.name("kured");
    let ours = crate::ladder::broken_node(&s, "ours").await;
    let kureds = crate::ladder::broken_node(&s, "kureds").await;
    kured(&s.env, &name, Some(&kureds)).await;
    let flag = format!("--kured-daemonset=kube-system/{name}");
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot",
            "--drain-buffer=1s",
            "--reboot-deadline=10m",
            &flag,
        ])
        .await;
    s.until(
        "our node drained, its reboot waiting for kured",
        &drainer,
        || async {
            let waits = format!("kured is rebooting {kureds} under its lock (1 at once)");
            (phase(&s.env, &ours).await.as_deref() == Some("drained")
                && drainer.output().contains(&waits))
            .then_some(())
        },
    )
    .await;
    let message = s
        .until("kured's node said to be left to it", &drainer, || {
            left_to(&s.env, &kureds)
        })
        .await;
    assert!(
        message.starts_with(&format!(
            "Left to kured, which is rebooting it (its lock on kube-system/{name})"
        )),
        "{message}"
    );
    assert!(!s.env.cordoned(&kureds).await, "kured's node cordoned");
    assert_eq!(phase(&s.env, &ours).await.as_deref(), Some("drained"));
    // kured is done and lets go: our reboot is asked, and kured's node is taken up.
    kured(&s.env, &name, None).await;
    s.until("our reboot asked once kured let go", &drainer, || async {
        (phase(&s.env, &ours).await.as_deref() == Some("rebooting")).then_some(())
    })
    .await;
    s.until("kured's node taken up", &drainer, || async {
        s.env.cordoned(&kureds).await.then_some(())
    })
    .await;
    drop(drainer);
    crate::ladder::forget_requests(&s).await;
    let _ = kube::Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(
        s.env.cluster.client.clone(),
        "kube-system",
    )
    .delete(&name, &Default::default())
    .await;
    s.env.cleanup().await;
}
