//! The drainer beside KWOK's kubelets (`nodemedic_tests::kwok`): the scale benches' fleets are
//! heartbeated by KWOK, so this shows on the shared control plane that a node KWOK keeps (its status
//! written as a kubelet writes it, its Lease renewed, its pods' status and their deletion carried
//! out) is cordoned, drained and uncordoned as any other: KWOK's heartbeats keep the detector's
//! condition and the drainer's record, and an evicted pod is gone once KWOK finishes it.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use nodemedic_tests::cluster::eventually;
use nodemedic_tests::kwok::{self, Heartbeat, Kwok};
use serde_json::json;

use crate::env::{Env, LABEL, WAIT};

fn ready(n: &Node) -> bool {
    nodemedic_common::conditions::find(n, "Ready").is_some_and(|c| c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_kwok_keeps_is_cordoned_drained_and_uncordoned_as_any_other() {
    let Some(binary) = kwok::binary() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "KWOK must run in CI (build/kubernetes.sh builds it)"
        );
        nodemedic_tests::envtest::say_skipped("the KWOK scenario", "KWOK's kubelets");
        return;
    };
    let env = Env::new().await;
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped("the KWOK scenario", "a real control plane");
        return;
    };
    let kwok = Kwok::start(&binary, plane, Heartbeat::Status);
    let nodes: Api<Node> = Api::all(env.cluster.client.clone());
    // A node as a scale bench makes it: a name and labels, everything else KWOK's to write.
    let name = env.name("kwok");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {LABEL: env.id, "kubernetes.io/hostname": name},
        "annotations": {kwok::ANNOTATION: "fake"}}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    eventually("KWOK to report the node Ready", WAIT, || async {
        kwok.assert_alive();
        nodes.get(&name).await.ok().filter(ready).map(|_| ())
    })
    .await;
    let pod = env.pod("default", "app", &name, json!({})).await;
    let pods: Api<Pod> = Api::namespaced(env.cluster.client.clone(), "default");

    let drainer = env.start(env.config(std::time::Duration::ZERO), "a").await;
    env.set_condition(&name, "KernelDeadlock", "True", 3600)
        .await;
    eventually("the cordon", WAIT, || async {
        env.cordoned(&name).await.then_some(())
    })
    .await;
    env.wait_drained(&name).await;
    eventually("KWOK to finish the evicted pod", WAIT, || async {
        pods.get_opt(&pod).await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(
        env.evictions(&pod, Some(201)),
        1,
        "evicted once, through the Eviction API"
    );
    // A heartbeat of KWOK's after the drain: the condition and the record are still there.
    let before = nodes.get(&name).await.unwrap().metadata.resource_version;
    eventually("a heartbeat of KWOK's", WAIT, || async {
        kwok.assert_alive();
        let n = nodes.get(&name).await.ok()?;
        (n.metadata.resource_version != before).then_some(n)
    })
    .await;
    let n = nodes.get(&name).await.unwrap();
    assert!(ready(&n), "KWOK keeps the node Ready");
    assert!(
        nodemedic_common::conditions::find(&n, "KernelDeadlock")
            .is_some_and(|c| c.status == "True"),
        "KWOK's heartbeat keeps the detector's condition"
    );
    assert_eq!(env.record_phase(&name).await.as_deref(), Some("drained"));

    // Healthy for longer than the condition's 10 minutes: the drainer uncordons.
    env.set_condition(&name, "KernelDeadlock", "False", 700)
        .await;
    eventually("the uncordon", WAIT, || async {
        (!env.cordoned(&name).await).then_some(())
    })
    .await;
    drainer.shutdown().await;
    drop(kwok);
    env.cluster.delete_node(&name).await;
    env.cleanup().await;
}
