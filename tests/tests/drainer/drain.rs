//! A drain from condition to cordon, buffer and evictions; flaps, recovery, manual uncordon, PDBs,
//! failures and dry-run.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_common::keys;
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::{Env, WAIT};

#[tokio::test]
async fn held_condition_cordons_then_drains_after_the_buffer_sparing_protected_pods() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let elsewhere = env
        .pod("default", "elsewhere", "some-other-node", json!({}))
        .await;
    let ds_owner = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", "ds")
        .await;
    let ds = env
        .pod(
            "kube-system",
            "ds",
            &bad,
            json!({"metadata": {"ownerReferences": ds_owner}}),
        )
        .await;
    let ne = env.pod("kube-system", "not-evicted", &bad, json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}})).await;
    let crit = env.pod("kube-system", "critical", &bad, json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}}})).await;
    let mirror = env
        .pod(
            "kube-system",
            "mirror",
            &bad,
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
        )
        .await;
    let running = env.start(env.config(Duration::from_secs(2)), "a").await;

    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    let scheduled = eventually("DrainScheduled condition", WAIT, || async {
        env.drain_scheduled(&bad).await
    })
    .await;
    assert!(
        scheduled.starts_with("Drain activity scheduled "),
        "{scheduled}"
    );
    assert!(
        env.pod_exists("default", &web).await,
        "not drained before the buffer"
    );
    env.wait_drained(&bad).await;
    assert!(
        !env.pod_exists("default", &web).await,
        "the ReplicaSet pod was evicted"
    );
    assert!(env.pod_exists("default", &elsewhere).await);
    for p in [&ds, &ne, &crit, &mirror] {
        assert!(
            env.pod_exists("kube-system", p).await,
            "kube-system/{p} must stay"
        );
    }
    assert_eq!(env.record_phase(&bad).await.as_deref(), Some("drained"));
    assert!(env.cordoned(&bad).await, "stays cordoned after the drain");
    let reasons = env.event_reasons(&bad).await;
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
    assert_eq!(
        (env.evictions("", None), env.evictions(&web, Some(201))),
        (1, 1),
        "exactly one eviction, of {web}"
    );
    let body = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        body.contains("draino_cordoned_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("draino_drained_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn flapping_condition_and_kosmos_leaf_not_ready_do_nothing() {
    let env = Env::new().await;
    let flappy = env.node("flappy", "True", 30, json!({})).await;
    let leaf = env
        .node(
            "kosmos-leaf",
            "False",
            3600,
            json!({"kosmos.io/node": "true"}),
        )
        .await;
    env.set_condition(&leaf, "Ready", "Unknown", 3600).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions.push("Ready=Unknown,1m".parse().unwrap());
    // (On the test server every request counts: take the scenario's own writes as the baseline.)
    let writes_before = [env.drainer_writes_to(&flappy), env.drainer_writes_to(&leaf)];
    let running = env.start(cfg, "a").await;
    eventually("leader", WAIT, || async {
        (*running.leader.borrow()).then_some(())
    })
    .await;
    env.barrier("KernelDeadlock", json!({})).await;
    for n in [&flappy, &leaf] {
        assert!(!env.cordoned(n).await, "{n} must not be cordoned");
        assert!(env.event_reasons(n).await.is_empty(), "{n}: no events");
    }
    assert_eq!(
        [env.drainer_writes_to(&flappy), env.drainer_writes_to(&leaf)],
        writes_before,
        "the drainer wrote neither node"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn pdb_refusals_are_retried_until_the_budget_frees() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    let pdb = env.blocking_pdb(&api).await;
    let running = env.start(env.config(Duration::from_secs(1)), "a").await;
    eventually("drain in progress", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("draining")).then_some(())
    })
    .await;
    eventually("an eviction refused with 429", WAIT, || async {
        (env.evictions(&api, Some(429)) > 0).then_some(())
    })
    .await;
    if env.cluster.real() {
        assert_eq!(
            env.pdb_status(&pdb).await,
            (0, 1),
            "the disruption controller counts the Ready pod and allows nothing"
        );
    }
    // The 429 is the refusal itself: the pod stays while the budget allows nothing.
    assert!(
        env.pod_exists("default", &api).await,
        "protected while the budget allows nothing"
    );
    env.free_pdb(&pdb).await;
    eventually("pod evicted once the budget allows", WAIT, || async {
        (!env.pod_exists("default", &api).await).then_some(())
    })
    .await;
    env.wait_drained(&bad).await;
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_drain_that_cannot_finish_fails_is_reported_and_is_retried_later() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    env.blocking_pdb(&api).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_grace_period = Duration::from_secs(1);
    cfg.eviction_headroom = Duration::from_secs(1);
    cfg.retry_base = Duration::from_secs(600);
    let running = env.start(cfg, "a").await;
    eventually("drain failed", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("failed")).then_some(())
    })
    .await;
    // The record is written first, then the DrainScheduled condition and the Event: wait for them.
    eventually("DrainScheduled says Failed", WAIT, || async {
        env.drain_scheduled(&bad)
            .await
            .filter(|m| m.contains(" | Failed: "))
    })
    .await;
    eventually("a DrainFailed Event", WAIT, || async {
        env.event_reasons(&bad)
            .await
            .contains(&"DrainFailed".to_string())
            .then_some(())
    })
    .await;
    let node = env.get_node(&bad).await;
    let record: Value = serde_json::from_str(
        node["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["attempts"], 1);
    assert!(record["retryAt"].is_string(), "{record}");
    assert!(
        env.cordoned(&bad).await,
        "a failed drain leaves the node cordoned"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn recovery_during_the_buffer_cancels_the_drain_and_uncordons() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    env.set_condition(&bad, "KernelDeadlock", "False", 700)
        .await;
    eventually("uncordoned", WAIT, || async {
        (!env.cordoned(&bad).await).then_some(())
    })
    .await;
    eventually("record and DrainScheduled removed", WAIT, || async {
        (env.record_phase(&bad).await.is_none() && env.drain_scheduled(&bad).await.is_none())
            .then_some(())
    })
    .await;
    assert!(env.pod_exists("default", &web).await, "never drained");
    // The Event comes after the node writes.
    let reasons = eventually("an UncordonSucceeded Event", WAIT, || async {
        let reasons = env.event_reasons(&bad).await;
        reasons
            .contains(&"UncordonSucceeded".to_string())
            .then_some(reasons)
    })
    .await;
    assert!(
        !reasons.contains(&"DrainStarting".to_string()),
        "{reasons:?}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_manual_uncordon_is_respected_for_the_episode() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(env.cluster.client.clone());
    nodes
        .patch(
            &bad,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": false}})),
        )
        .await
        .unwrap();
    eventually("released", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("released")).then_some(())
    })
    .await;
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(
        !env.cordoned(&bad).await,
        "not cordoned again for the same episode"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn dry_run_logs_and_emits_events_but_changes_nothing() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.dry_run = true;
    let running = env.start(cfg, "a").await;
    eventually("CordonStarting event", WAIT, || async {
        env.event_reasons(&bad)
            .await
            .contains(&"CordonStarting".to_string())
            .then_some(())
    })
    .await;
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(!env.cordoned(&bad).await);
    assert!(env.record_phase(&bad).await.is_none());
    assert!(env.drain_scheduled(&bad).await.is_none());
    running.shutdown().await;
    env.cleanup().await;
}

/// draino's `--evict-daemonset-pods` and `--ignore-safe-to-evict-annotation` with draino's
/// meaning: the DaemonSet pod and the safe-to-evict=false pod are evicted; a critical DaemonSet pod
/// (the detector's kind) and a not-evicted pod still stay.
#[tokio::test]
async fn draino_flags_evict_daemonset_and_safe_to_evict_false_pods() {
    let env = Env::new().await;
    let bad = env.node("dsbad", "True", 3600, json!({})).await;
    let ds_owner = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", "ds")
        .await;
    let ds = env
        .pod(
            "kube-system",
            "ds",
            &bad,
            json!({"metadata": {"ownerReferences": ds_owner}}),
        )
        .await;
    let detector = env
        .pod(
            "kube-system",
            "detector",
            &bad,
            json!({"metadata": {"ownerReferences": ds_owner}, "spec": {"priorityClassName": "system-node-critical"}}),
        )
        .await;
    let safe = env
        .pod(
            "default",
            "safe",
            &bad,
            json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}}),
        )
        .await;
    let ne = env.pod("kube-system", "not-evicted", &bad, json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}})).await;
    let mut cfg = env.config(Duration::from_secs(0));
    cfg.evict_daemonset_pods = true;
    cfg.ignore_safe_to_evict_annotation = true;
    let running = env.start(cfg, "a").await;
    env.wait_drained(&bad).await;
    assert!(
        !env.pod_exists("kube-system", &ds).await,
        "DaemonSet pod evicted"
    );
    assert!(
        !env.pod_exists("default", &safe).await,
        "safe-to-evict=false pod evicted"
    );
    assert!(
        env.pod_exists("kube-system", &detector).await,
        "critical pod stays"
    );
    assert!(
        env.pod_exists("kube-system", &ne).await,
        "not-evicted pod stays"
    );
    running.shutdown().await;
    env.cleanup().await;
}

/// draino's `--allow-force-delete`: a pod whose eviction keeps failing (500s, injected: only the
/// test API server fails on demand) is deleted with grace 0 at the drain's deadline, loudly; a pod a
/// PodDisruptionBudget protects is never deleted around it.
#[tokio::test]
async fn allow_force_delete_deletes_what_eviction_cannot_move_but_never_around_a_pdb() {
    let env = Env::on(nodemedic_tests::cluster::Cluster::fake().await);
    let fake = env.cluster.fake.clone().expect("the test API server");
    let bad = env.node("stuck", "True", 3600, json!({})).await;
    let stuck = env.pod("default", "stuck", &bad, json!({})).await;
    fake.fail_next("POST", &format!("/pods/{stuck}/eviction"), 500, usize::MAX);
    let mut cfg = env.config(Duration::from_secs(0));
    cfg.allow_force_delete = true;
    cfg.max_grace_period = Duration::from_secs(2);
    cfg.eviction_headroom = Duration::from_secs(1);
    let running = env.start(cfg, "a").await;
    env.wait_drained(&bad).await;
    assert!(!env.pod_exists("default", &stuck).await, "force-deleted");
    assert_eq!(
        fake.count("DELETE", &format!("/pods/{stuck}")),
        1,
        "one DELETE, with grace 0"
    );
    assert!(
        env.event_reasons(&bad)
            .await
            .contains(&"PodForceDeleted".to_string())
    );
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.contains("nodemedic_drainer_evictions_total{result=\"force_deleted\"} 1"),
        "{metrics}"
    );
    // A PDB's refusal is waited on, never deleted around: the drain fails, the pod stays. The
    // node turns bad only once its pod's budget is in place (else the drain may beat it).
    let guarded = env.node("guarded", "False", 3600, json!({})).await;
    let api = env.pod("default", "api", &guarded, json!({})).await;
    env.blocking_pdb(&api).await;
    env.set_condition(&guarded, "KernelDeadlock", "True", 3600)
        .await;
    eventually("the drain of the guarded node failed", WAIT, || async {
        env.event_reasons(&guarded)
            .await
            .contains(&"DrainFailed".to_string())
            .then_some(())
    })
    .await;
    assert!(env.pod_exists("default", &api).await, "the PDB's pod stays");
    assert_eq!(fake.count("DELETE", &format!("/pods/{api}")), 0);
    running.shutdown().await;
    env.cleanup().await;
}

/// Issue 64, point 6: with `protectedPods: leave`, an unreplicated pod stays on the drained node;
/// a ladder that replaces would delete the Node, and the pod garbage collector would then
/// force-delete the pod while the machine may still run it. The Node stays, the pod too, and the
/// node waits for a person, told why.
#[tokio::test]
async fn a_node_with_pods_the_drain_left_is_never_deleted_for_its_replacement() {
    let env = Env::new().await;
    let bad = env.node("left-pods", "True", 3600, json!({})).await;
    // No owner: nothing would bring it back elsewhere, so the drain leaves it.
    let lone = env
        .pod(
            "default",
            "lone",
            &bad,
            json!({"metadata": {"ownerReferences": null}}),
        )
        .await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions = vec!["KernelDeadlock=True,10m: drain, replace".parse().unwrap()];
    let running = env.start(cfg, "a").await;
    eventually("the node handed to a person", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("needsperson")).then_some(())
    })
    .await;
    let node = env.get_node(&bad).await;
    assert_eq!(
        node["metadata"]["name"],
        json!(bad),
        "the Node is still there"
    );
    assert!(
        env.pod_exists("default", &lone).await,
        "the pod the drain left is still there"
    );
    let record: Value = serde_json::from_str(
        node["metadata"]["annotations"][nodemedic_common::keys::DRAIN_RECORD_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let why = record["escalated"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("(default/{lone})")) && why.contains("force-deleted"),
        "{record}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

/// KEP-5683's lifecycle conditions (`--lifecycle-conditions`): `DrainInProgress` and `Drained` as
/// the drain goes, written beside draino's DrainScheduled, and removed with it at the uncordon.
#[tokio::test]
async fn lifecycle_conditions_say_the_drain_runs_then_is_done_and_go_at_the_uncordon() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    env.pod("default", "web", &bad, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.lifecycle_conditions = true;
    let running = env.start(cfg, "a").await;
    let condition = |type_: &'static str| {
        let env = &env;
        let bad = bad.clone();
        async move {
            let n = env.get_node(&bad).await;
            let found = (n["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default())
            .into_iter()
            .find(|c| c["type"] == type_)?;
            Some((
                found["status"].as_str()?.to_string(),
                found["reason"].as_str()?.to_string(),
            ))
        }
    };
    env.wait_drained(&bad).await;
    let drained = eventually("Drained=True", WAIT, || async {
        condition("Drained").await.filter(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(drained.1, "DrainCompleted");
    assert_eq!(
        condition("DrainInProgress").await,
        Some(("False".into(), "DrainCompleted".into()))
    );
    env.set_condition(&bad, "KernelDeadlock", "False", 700)
        .await;
    eventually("both removed at the uncordon", WAIT, || async {
        let gone = !env.cordoned(&bad).await
            && condition("Drained").await.is_none()
            && condition("DrainInProgress").await.is_none()
            && env.drain_scheduled(&bad).await.is_none();
        gone.then_some(())
    })
    .await;
    running.shutdown().await;
    env.cleanup().await;
}
