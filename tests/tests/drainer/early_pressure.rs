//! Seed 001's case end to end through the real binaries (issue 41): a node's image filesystem (a
//! size-limited tmpfs the test mounts in a mount namespace of its own, `unshare -rm`, and fills)
//! fills at a steady rate; `detector run` with a resources rule sets ImageFilesystemFillingUp on
//! the Node while the kubelet's DiskPressure is untouched; `drainer run`, whose conditions name
//! it, cordons and drains the node through the Eviction API: it waits while a
//! PodDisruptionBudget refuses, evicts once it allows, and leaves the not-evicted and the critical
//! kube-system pods running. Where the machine cannot mount a tmpfs, the test says so and stops
//! (the shipped scenario `early-disk-pressure` covers the drainer's part).

use nodemedic_tests::bins::debug_bin;
use nodemedic_tests::tmpfs::{can_mount, filling_detector};
use serde_json::json;

use crate::remedies::Scenario;

const RULES: &str = r#"
source: resource-monitor
input:
  kind: resources
  interval: 1s
  filesystems: {imagefs: MOUNT}
conditions:
  - type: ImageFilesystemFillingUp
    reason: ImageFilesystemHasRoom
    message: the image filesystem has room
rules:
  - {type: permanent, condition: ImageFilesystemFillingUp, reason: ImageFilesystemFullSoon, signal: imagefs.available, reaches: 15%, within: 40s, trend: 8s}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filling_image_filesystem_is_drained_gracefully_before_the_kubelet_would_evict() {
    if !can_mount() {
        eprintln!(
            "this machine cannot mount a tmpfs in a namespace of its own (unshare -rm): the drainer's part is the shipped scenario early-disk-pressure"
        );
        return;
    }
    let s = Scenario::new().await;
    let env = &s.env;
    let node = env.node("filling", "False", 3600, json!({})).await;
    let web = env.pod("default", "web", &node, json!({})).await;
    let pdb = env.blocking_pdb(&web).await;
    let not_evicted =
        json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}});
    let proxy = env.pod("kube-system", "proxy", &node, not_evicted).await;
    let critical =
        json!({"spec": {"priorityClassName": "system-node-critical", "priority": 2000001000}});
    let agent = env.pod("kube-system", "agent", &node, critical).await;

    let bin = debug_bin("nodemedic-detector", "detector");
    let log = std::fs::File::create(s.dir.path().join("detector.log")).unwrap();
    let _detector = filling_detector(&bin, s.dir.path(), &node, &s.kubeconfig, RULES, log.into());
    let (drainer, _) = s
        .drainer(&["ImageFilesystemFillingUp=True", "--drain-buffer=1s"])
        .await;
    let set = s
        .until("the early condition on the node", &drainer, || async {
            let n = env.get_node(&node).await;
            n["status"]["conditions"].as_array().and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "ImageFilesystemFillingUp" && c["status"] == "True")
                    .cloned()
            })
        })
        .await;
    assert_eq!(set["reason"], "ImageFilesystemFullSoon", "{set}");
    s.until("cordoned", &drainer, || async {
        env.cordoned(&node).await.then_some(())
    })
    .await;
    // The PDB refuses: the web pod stays, and the drain keeps asking (never deletes it).
    s.until("an eviction refused by the PDB", &drainer, || async {
        (env.evictions(&web, Some(429)) > 0).then_some(())
    })
    .await;
    assert!(env.pod_exists("default", &web).await);
    env.free_pdb(&pdb).await;
    s.until(
        "the web pod evicted once the PDB allows",
        &drainer,
        || async { (!env.pod_exists("default", &web).await).then_some(()) },
    )
    .await;
    s.until("the drain done", &drainer, || async {
        env.event_reasons(&node)
            .await
            .contains(&"DrainSucceeded".to_string())
            .then_some(())
    })
    .await;
    // What may never be evicted stays, and nothing asked to evict it.
    for pod in [&proxy, &agent] {
        assert!(
            env.pod_exists("kube-system", pod).await,
            "{pod} was removed"
        );
        assert_eq!(env.evictions(pod, None), 0, "{pod} was asked to leave");
    }
    // The kubelet's own condition was never touched: the node was drained before any hard eviction.
    let n = env.get_node(&node).await;
    let disk = n["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "DiskPressure");
    assert!(!disk, "{n}");
    drop(drainer);
    s.env.cleanup().await;
}
