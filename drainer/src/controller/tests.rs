//! The loop over a cluster in memory: what it writes, round by round, as the nodes change under it.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use serde_json::json;
use tokio::sync::{Notify, watch};

use super::*;
use crate::act::memory::{MemoryCluster, Slow, Write};
use crate::metrics::Metrics;
use crate::model::cluster::Gated;
use crate::model::record::{Phase, Record};

fn ago(secs: u64) -> String {
    nodemedic_common::time::rfc3339(Timestamp::now() - Duration::from_secs(secs))
}

fn node(name: &str, bad: bool) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"conditions": [
            {"type": "KernelDeadlock", "status": if bad { "True" } else { "False" }, "lastTransitionTime": ago(3600)},
            {"type": "Ready", "status": "True", "lastTransitionTime": ago(600)}]}}))
    .unwrap()
}

struct Rig {
    c: Controller<MemoryCluster>,
    cluster: MemoryCluster,
    leader: watch::Sender<bool>,
    /// The controller's clock.
    clock: Clock,
}

fn config(max_cordoned: usize) -> Config {
    Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        drain_buffer: Duration::ZERO,
        max_cordoned: crate::config::Budget::Count(max_cordoned),
        ..Default::default()
    }
}

/// A controller over `nodes` (synced), leading.
fn rig(cfg: Config, nodes: Vec<Node>, pods: Vec<Pod>) -> Rig {
    let observed = Observed::default();
    let cluster = MemoryCluster::new(observed.clone());
    nodes.into_iter().for_each(|n| cluster.put_node(n));
    pods.into_iter().for_each(|p| cluster.put_pod(p));
    cluster.sync();
    let (leader, leading) = watch::channel(true);
    let gated = Gated::new(cluster.clone(), leading.clone());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let clock = Clock::tokio();
    let record = Recorder::new(gated.clone(), metrics, observed.clone(), clock);
    let exec = Executor::new(gated, record, cfg.dry_run, clock);
    let c = Controller::new(cfg, observed, exec, Health::default(), leading, clock);
    Rig {
        c,
        cluster,
        leader,
        clock,
    }
}

/// Nodes cordoned by these writes.
fn cordons(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Node { name, patch } if patch.unschedulable == Some(true) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The phases of the records these writes stored, by node.
fn records(writes: &[Write]) -> Vec<(String, Option<Phase>)> {
    let key = nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Node { name, patch } => patch.annotations.get(key).map(|r| {
                let phase = r
                    .as_deref()
                    .map(|r| serde_json::from_str::<Record>(r).unwrap().phase);
                (name.clone(), phase)
            }),
            _ => None,
        })
        .collect()
}

/// The Events written: (about, reason, count).
fn events(writes: &[Write]) -> Vec<(String, String, i32)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Event { about, event, .. } => {
                Some((about.clone(), event.reason.clone(), event.count))
            }
            _ => None,
        })
        .collect()
}

fn waits(writes: &[Write]) -> Vec<(String, String, i32)> {
    let mut e = events(writes);
    e.retain(|(_, reason, _)| reason == "WaitingForBudget");
    e
}

#[tokio::test]
async fn a_selector_that_fails_on_a_node_counts_once_per_view_and_selects_nothing() {
    let cfg = Config {
        conditions: vec!["KernelDeadlock=True".parse().unwrap()],
        // A node whose name is not a number makes this expression fail (a missing key would not:
        // that is "not selected", as in draino).
        selector: crate::config::select::Selector::cel("int(metadata.name) > 0").unwrap(),
        ..Default::default()
    };
    let mut r = rig(cfg, vec![node("unlabelled", true)], vec![]);
    r.c.round().await;
    r.c.round().await;
    assert_eq!(
        r.c.record.metrics().selector_errors.get(),
        1,
        "once for the view, not per round"
    );
    assert_eq!(
        r.cluster.take_writes(),
        vec![],
        "not selected: nothing done"
    );
}

#[tokio::test]
async fn the_loop_cordons_once_then_drains_once_the_record_is_seen() {
    let mut r = rig(
        config(10),
        vec![node("bad", true), node("ok", false)],
        vec![],
    );
    r.cluster.lag(true);
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(cordons(&w), vec!["bad"], "{w:?}");
    // Our write is not in the cache yet (the watch is late): not cordoned again.
    r.c.round().await;
    assert_eq!(r.cluster.take_writes(), vec![]);
    // The cache catches up with the record (buffer 0: the drain is due).
    r.cluster.lag(false);
    r.cluster.deliver();
    r.c.round().await;
    // The drain runs as a task, and comes back to the loop when its evictions end.
    let run = tokio::time::timeout(Duration::from_secs(60), r.c.drains.ended.1.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.node.as_str(), &run.outcome),
        ("bad", &DrainOutcome::Drained)
    );
    let w = r.cluster.take_writes();
    assert_eq!(records(&w), vec![("bad".into(), Some(Phase::Draining))]);
    assert!(
        events(&w).contains(&("bad".into(), "DrainStarting".into(), 1)),
        "{w:?}"
    );
}

#[tokio::test]
async fn a_drain_that_ended_has_its_record_decided_here_and_written_once() {
    let pod = web_pod("9f1d3c52-0a7e-4c1e-9d7a-2f5b8e6c4a10", "bad");
    let mut r = rig(config(10), vec![node("bad", true)], vec![pod]);
    r.c.round().await; // cordon
    r.c.round().await; // the drain starts
    let run = tokio::time::timeout(Duration::from_secs(60), r.c.drains.ended.1.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(!r.cluster.has_pod("app", "web"), "evicted");
    r.c.drain_ended(run);
    let task = r.c.drains.running.remove("bad").unwrap();
    task.await.unwrap();
    let w = r.cluster.take_writes();
    let phases: Vec<Option<Phase>> = records(&w).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        phases,
        vec![
            Some(Phase::Cordoned),
            Some(Phase::Draining),
            Some(Phase::Drained)
        ]
    );
    assert!(w.contains(&Write::Evict {
        pod: "app/web".into(),
        grace: Some(30)
    }));
    let reasons: Vec<String> = events(&w).into_iter().map(|(_, r, _)| r).collect();
    assert!(
        reasons.ends_with(&["DrainSucceeded".to_string()]),
        "{reasons:?}"
    );
    // The next round sees the drained record (laid over the node): no drain again.
    r.c.round().await;
    assert_eq!(records(&r.cluster.take_writes()), vec![]);
}

#[tokio::test]
async fn a_node_waiting_for_the_budget_gets_one_event_not_one_per_round() {
    let mut r = rig(
        config(1),
        vec![node("first", true), node("second", true)],
        vec![],
    );
    r.c.round().await;
    r.c.round().await;
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(
        waits(&w),
        vec![("second".into(), "WaitingForBudget".into(), 1)],
        "{w:?}"
    );
    assert_eq!(cordons(&w), vec!["first"]);
}

#[tokio::test]
async fn a_node_decided_after_a_heartbeat_is_written_against_the_heartbeats_version() {
    let mut r = rig(
        config(1),
        vec![node("first", true), node("second", true)],
        vec![],
    );
    r.c.round().await;
    r.c.round().await;
    assert_eq!(cordons(&r.cluster.take_writes()), vec!["first"]);
    // The kubelet heartbeats "second" (a new resourceVersion, the same state: the fleet does not
    // see it), then "first" turns healthy, which frees the budget.
    r.cluster.heartbeat("second", Timestamp::now());
    r.cluster.put_node(node("first", false));
    // "first" is released, then "second" cordoned.
    for _ in 0..3 {
        r.c.round().await;
    }
    let w = r.cluster.take_writes();
    assert_eq!(cordons(&w), vec!["second"], "{w:?}");
    let second = r.c.observed.node("second").unwrap();
    assert!(
        second.unschedulable,
        "the cordon was made against the heartbeat's version, not refused as a conflict: {w:?}"
    );
}

#[test]
fn a_write_goes_against_the_cached_view_only_when_its_state_is_the_decided_one() {
    use crate::model::node::NodeView;
    let decided = Arc::new(NodeView {
        name: "n".into(),
        resource_version: "1".into(),
        ..Default::default()
    });
    let beat = Arc::new(NodeView {
        resource_version: "2".into(),
        ..NodeView::clone(&decided)
    });
    let changed = Arc::new(NodeView {
        unschedulable: true,
        resource_version: "3".into(),
        ..NodeView::clone(&decided)
    });
    let to_write = |latest| round::latest_to_write(decided.clone(), latest);
    assert_eq!(to_write(Some(beat)).resource_version, "2");
    assert_eq!(to_write(Some(changed)).resource_version, "1");
    assert_eq!(to_write(None).resource_version, "1");
}

#[tokio::test(start_paused = true)]
async fn nothing_is_written_while_not_leading() {
    let r = rig(config(10), vec![node("bad", true)], vec![]);
    r.leader.send_replace(false);
    let (stop_tx, stop) = watch::channel(false);
    let changed = Arc::new(Notify::new());
    let task = tokio::spawn(r.c.run(changed.clone(), Duration::from_millis(5), stop));
    // Paused time: many ticks pass at once.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        r.cluster.take_writes(),
        vec![],
        "a follower plans nothing and writes nothing"
    );
    r.leader.send_replace(true);
    changed.notify_one();
    let mut w = Vec::new();
    for _ in 0..1000 {
        w.extend(r.cluster.take_writes());
        if !cordons(&w).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cordons(&w), vec!["bad"]);
    stop_tx.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_stale_pod_is_reported_once_not_every_round() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "app", "uid": "u1"},
        "spec": {"nodeName": "flapped", "containers": []},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]}}))
    .unwrap();
    let mut r = rig(config(10), vec![node("flapped", false)], vec![pod]);
    r.c.round().await;
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(
        events(&w),
        vec![("app/web".into(), "PodReadinessStale".into(), 1)]
    );
    assert!(
        !w.iter().any(|w| matches!(w, Write::Evict { .. })),
        "not evicted unless configured"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_wait_refreshes_its_event_count_once_a_minute() {
    // Paused time: the minute passes without sleeping.
    let mut r = rig(
        config(1),
        vec![node("first", true), node("second", true)],
        vec![],
    );
    r.c.round().await;
    tokio::time::advance(Duration::from_secs(30)).await;
    r.c.round().await;
    tokio::time::advance(Duration::from_secs(31)).await;
    r.c.round().await;
    assert_eq!(
        waits(&r.cluster.take_writes()),
        vec![
            ("second".into(), "WaitingForBudget".into(), 1),
            ("second".into(), "WaitingForBudget".into(), 2),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_is_decided_until_a_debounce_after_the_first_change() {
    let r = rig(config(10), vec![node("a", false)], vec![]);
    let clock = r.clock;
    let (tx, mut taps) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop) = watch::channel(false);
    let changed = Arc::new(Notify::new());
    let c = r.c.with_tap(tx);
    // No tick within the test: only changes start rounds.
    let task = tokio::spawn(c.run(changed.clone(), Duration::from_secs(3600), stop));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let first = clock.now();
    changed.notify_one();
    // More of the burst, before the debounce ends.
    tokio::time::sleep(DEBOUNCE / 2).await;
    changed.notify_one();
    tokio::time::sleep(DEBOUNCE * 4).await;
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    let mut rounds = Vec::new();
    while let Ok(t) = taps.try_recv() {
        if let Tap::Round { at, .. } = t {
            rounds.push(at);
        }
    }
    // (The second change's wake-up is a round of its own after that one, with nothing left to take.)
    assert_eq!(
        rounds.first(),
        Some(&nodemedic_common::time::add(first, DEBOUNCE)),
        "the first round starts a debounce after the first change, with all that came meanwhile (a zone's burst is seen whole by the gates)"
    );
}

/// `app/web` with `uid`, Running on `node`, of a ReplicaSet (so a drain evicts it).
fn web_pod(uid: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "app", "uid": uid,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                "uid": "0b8f5f0e-5d41-4b5a-8a55-3c6c1a7e2d90", "controller": true}]},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Running"}}))
    .unwrap()
}

/// A pod of no owner on `node`, bound an hour ago and never started.
/// A pod on `node` in namespace `name` (one namespace each: `decide::symptoms` counts no single
/// tenant's pods alone) waiting for its sandbox.
fn waiting_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": name, "uid": format!("uid-{name}"), "creationTimestamp": ago(3700)},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(3600)}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    }))
    .unwrap()
}

/// The cluster operators' node agent on `node` (a DaemonSet's pod in kube-system) waiting for its
/// sandbox: what a tenant's waiting pods need beside them to count (`decide::symptoms`).
fn agent_pod(node: &str) -> Pod {
    let mut p = waiting_pod("agent", node);
    p.metadata.namespace = Some("kube-system".into());
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "apps/v1",
        "kind": "DaemonSet", "name": "agent", "uid": "7f1e5c1a-3b2d-4c5e-8f9a-0b1c2d3e4f5a", "controller": true}))
    .unwrap()]);
    p
}

#[tokio::test]
async fn the_symptoms_are_assessed_off_the_loop_and_written_by_the_round_after() {
    let cfg = Config {
        symptoms: crate::decide::symptoms::SymptomSettings {
            not_starting_after: Some(Duration::from_secs(600)),
            not_terminating_after: None,
        },
        ..config(10)
    };
    let nodes = vec![node("stuck", false), node("fine", false)];
    let pods = vec![waiting_pod("w", "stuck"), agent_pod("stuck")];
    let mut r = rig(cfg, nodes, pods);
    let status_writes = |w: &[Write]| -> Vec<(String, String)> {
        w.iter()
            .filter_map(|w| match w {
                Write::Status {
                    name,
                    patch: crate::model::cluster::ConditionPatch::Set { type_, status, .. },
                } => Some((name.clone(), format!("{type_}={status}"))),
                _ => None,
            })
            .collect()
    };
    r.c.round().await;
    assert_eq!(
        status_writes(&r.cluster.take_writes()),
        vec![],
        "the round does not wait for the assessment"
    );
    // The assessment wakes the loop when it is done (its task ends just after: wait for that too).
    let woken = r.c.observed.changed.clone();
    let symptoms = r.c.chores.symptoms.as_ref().expect("the assessment runs");
    tokio::time::timeout(Duration::from_secs(60), async {
        woken.notified().await;
        while !symptoms.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the finished assessment wakes the loop");
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(
        status_writes(&w),
        vec![("stuck".to_string(), "PodsNotStarting=True".to_string())],
        "{w:?}"
    );
    assert!(
        events(&w).iter().any(|(about, ..)| about == "stuck"),
        "with its Event: {w:?}"
    );
    // Not assessed again before it is due.
    r.c.round().await;
    assert!(r.c.chores.symptoms.is_none());
}

#[tokio::test]
async fn a_burst_past_the_budget_cordons_first_and_writes_the_waits_after() {
    // One cordon allowed, four bad: the waits' Events went out one at a time before the round's
    // cordons (seconds at 500 nodes); now they follow them, written together.
    let nodes = ["a", "b", "c", "d"].map(|n| node(n, true)).to_vec();
    let mut r = rig(config(1), nodes, vec![]);
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(cordons(&w).len(), 1, "{w:?}");
    assert_eq!(waits(&w).len(), 3, "{w:?}");
    let cordon_at = w
        .iter()
        .position(|w| matches!(w, Write::Node { patch, .. } if patch.unschedulable == Some(true)))
        .unwrap();
    let first_wait = w
        .iter()
        .position(|w| matches!(w, Write::Event { event, .. } if event.reason == "WaitingForBudget"))
        .unwrap();
    assert!(cordon_at < first_wait, "{w:?}");
}

#[tokio::test]
async fn a_burst_holds_every_node_before_scheduling_any_drain() {
    // Each cordon's DrainScheduled went out with it, holding a write slot; now the round's holds
    // all go first, and the conditions after them.
    let nodes = ["a", "b", "c", "d"].map(|n| node(n, true)).to_vec();
    let mut r = rig(config(10), nodes, vec![]);
    r.c.round().await;
    let w = r.cluster.take_writes();
    assert_eq!(cordons(&w).len(), 4, "{w:?}");
    let last_hold = w
        .iter()
        .rposition(|w| matches!(w, Write::Node { patch, .. } if patch.unschedulable == Some(true)))
        .unwrap();
    let scheduled: Vec<usize> = (w.iter().enumerate())
        .filter(|(_, w)| matches!(w, Write::Status { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(scheduled.len(), 4, "{w:?}");
    assert!(scheduled.iter().all(|&i| i > last_hold), "{w:?}");
}

/// Where among `writes` `node` is cordoned.
fn cordoned_at(writes: &[Write], node: &str) -> usize {
    (writes.iter())
        .position(|w| matches!(w, Write::Node { name, patch } if name == node && patch.unschedulable == Some(true)))
        .unwrap_or_else(|| panic!("{node} cordoned: {writes:?}"))
}

/// Wait for the drain of "a" to end, drained; the writes so far.
async fn drained_a(r: &mut Rig) -> Vec<Write> {
    let run = tokio::time::timeout(Duration::from_secs(60), r.c.drains.ended.1.recv())
        .await
        .expect("the drain of a ended")
        .unwrap();
    assert_eq!(run.outcome, crate::model::record::DrainOutcome::Drained);
    r.cluster.take_writes()
}

#[tokio::test(start_paused = true)]
async fn a_rounds_drains_start_once_its_cordons_are_written() {
    // "a" was cordoned a round before "b" turned bad: the round that drains "a" cordons "b", and
    // the API server is slow with cordons. The drain waits for the cordon (its evictions would
    // otherwise share the server with a burst's cordons).
    let pod = web_pod("00000000-0000-4000-8000-000000000001", "a");
    let mut r = rig(
        config(10),
        vec![node("a", true), node("b", false)],
        vec![pod],
    );
    r.c.round().await;
    assert_eq!(cordons(&r.cluster.take_writes()), vec!["a"]);
    r.cluster.set_delay(Slow::Cordons, Duration::from_secs(1));
    r.cluster.put_node(node("b", true));
    r.c.round().await;
    let w = drained_a(&mut r).await;
    let cordon_b = cordoned_at(&w, "b");
    let evict = (w.iter())
        .position(|w| matches!(w, Write::Evict { .. }))
        .unwrap_or_else(|| panic!("a's pod evicted: {w:?}"));
    assert!(cordon_b < evict, "{w:?}");
}

#[tokio::test(start_paused = true)]
async fn a_drain_under_way_sends_no_new_eviction_while_a_later_round_writes_its_cordons() {
    // "a" drains 24 pods, 8 at a time, each eviction answered in 1 s. Half a second in, "b"
    // turns bad and its cordon takes the API server 3 s: the 8 evictions in flight finish, and
    // the next begin only once the cordon is written (without the turn, 24 were made by then).
    let pods = (0..24)
        .map(|i| {
            let mut p = web_pod(&format!("00000000-0000-4000-8000-0000000000{i:02}"), "a");
            p.metadata.name = Some(format!("web-{i}"));
            p
        })
        .collect();
    let mut r = rig(config(10), vec![node("a", true), node("b", false)], pods);
    r.c.round().await;
    assert_eq!(cordons(&r.cluster.take_writes()), vec!["a"]);
    r.cluster.set_delay(Slow::Evictions, Duration::from_secs(1));
    r.c.round().await; // starts a's drain
    tokio::time::sleep(Duration::from_millis(500)).await;
    r.cluster.set_delay(Slow::Cordons, Duration::from_secs(3));
    r.cluster.put_node(node("b", true));
    r.c.round().await;
    let w = drained_a(&mut r).await;
    let cordon_b = cordoned_at(&w, "b");
    let evictions = |ws: &[Write]| {
        ws.iter()
            .filter(|w| matches!(w, Write::Evict { .. }))
            .count()
    };
    assert_eq!(evictions(&w[..cordon_b]), 8, "only those in flight: {w:?}");
    assert_eq!(evictions(&w), 24, "the drain went on after it");
}

#[tokio::test(start_paused = true)]
async fn a_rounds_tail_is_written_while_the_next_round_cordons_and_each_nodes_writes_keep_their_order()
 {
    // The API server takes 10 s for each DrainScheduled condition. "b" turns bad while "a"'s is
    // being written: "b"'s cordon does not wait for it (in a burst of 500 the late nodes waited a
    // second); "a"'s drain does.
    let pod = web_pod("00000000-0000-4000-8000-000000000001", "a");
    let mut r = rig(
        config(10),
        vec![node("a", true), node("b", false)],
        vec![pod],
    );
    r.c.mode.detach_tail = true;
    r.cluster.set_delay(Slow::Status, Duration::from_secs(10));
    let started = tokio::time::Instant::now();
    r.c.round().await;
    r.cluster.put_node(node("b", true));
    r.c.round().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a round waited for the one before it to write its DrainScheduled"
    );
    let w = r.cluster.take_writes();
    assert_eq!(cordons(&w), vec!["a", "b"], "{w:?}");
    assert!(
        !w.iter()
            .any(|w| matches!(w, Write::Status { .. } | Write::Evict { .. })),
        "{w:?}"
    );
    let w = drained_a(&mut r).await;
    let scheduled = (w.iter())
        .position(|w| matches!(w, Write::Status { name, .. } if name == "a"))
        .unwrap_or_else(|| panic!("a's DrainScheduled: {w:?}"));
    let evict = (w.iter())
        .position(|w| matches!(w, Write::Evict { .. }))
        .unwrap_or_else(|| panic!("a's pod evicted: {w:?}"));
    assert!(scheduled < evict, "{w:?}");
    r.c.settle().await;
}

/// A round during which node `bad` goes bad: its change comes in at the round's first yield to the
/// runtime.
async fn round_with_a_change_meanwhile(r: &mut Rig, bad: &str) {
    let (cluster, b) = (r.cluster.clone(), bad.to_string());
    let change = tokio::spawn(async move { cluster.put_node(node(&b, true)) });
    r.c.round().await;
    assert!(change.is_finished(), "the change came in during the round");
}

/// Rounds (ten at most, no time passing) until `done` holds and a cordon was written: the
/// cordons written, after those `cordoned` already.
async fn rounds_until(
    r: &mut Rig,
    mut cordoned: Vec<String>,
    done: impl Fn(&Controller<MemoryCluster>) -> bool,
) -> Vec<String> {
    for _ in 0..10 {
        if done(&r.c) && !cordoned.is_empty() {
            break;
        }
        r.c.round().await;
        cordoned.extend(cordons(&r.cluster.take_writes()));
    }
    cordoned
}

#[tokio::test(start_paused = true)]
async fn a_periodic_resync_gives_way_to_a_change_and_goes_on_at_the_next_round() {
    // More nodes than a resync takes between two looks at the changes.
    let n = 3 * YIELD_EVERY;
    let name = |i: usize| format!("n{i:04}");
    for gives_way in [true, false] {
        let nodes = (0..n).map(|i| node(&name(i), false)).collect();
        let mut r = rig(config(10), nodes, vec![]);
        r.c.mode.resync_gives_way = gives_way;
        r.c.round().await; // the first list: every node, whole
        assert!(r.c.chores.resync_left.is_empty());
        r.cluster.take_writes();
        tokio::time::advance(RESYNC).await;
        // A node goes bad while the periodic resync runs: its change comes in at the resync's
        // first yield to the runtime.
        let bad = name(n - 1);
        round_with_a_change_meanwhile(&mut r, &bad).await;
        let left = r.c.chores.resync_left.len();
        if gives_way {
            assert!(
                left > 0 && left < n,
                "the resync stopped part way for the change: {left} of {n} left"
            );
        } else {
            assert_eq!(left, 0, "a simulation keeps whole rounds");
        }
        // The next round decides the change (unless the resync took the new view already: it
        // reads each view from the cache as it goes), and once the rounds have no changes (our
        // own writes come back as changes first: a few rounds, no time passing) the resync goes
        // on to its end.
        let first = cordons(&r.cluster.take_writes());
        let cordoned = rounds_until(&mut r, first, |c| c.chores.resync_left.is_empty()).await;
        assert_eq!(cordoned, vec![bad]);
        assert!(r.c.chores.resync_left.is_empty(), "{gives_way}");
        assert!(r.c.fleet.contains(&name(0)) && r.c.fleet.contains(&name(n - 1)));
    }
}

/// The watchdog's walk over the selected nodes gives way to a change as the resync does: it
/// stops part way, the next round decides the change and the walk goes on to its end.
#[tokio::test(start_paused = true)]
async fn the_watchdogs_walk_gives_way_to_a_change_and_goes_on_at_the_next_round() {
    let n = 3 * YIELD_EVERY;
    let name = |i: usize| format!("n{i:04}");
    let mut cfg = config(10);
    // A walk every 10 s, well within a resync period.
    cfg.watchdog.silent_after = Some(Duration::from_secs(30));
    let nodes = (0..n).map(|i| node(&name(i), false)).collect();
    let mut r = rig(cfg, nodes, vec![]);
    r.c.mode.resync_gives_way = true;
    r.c.round().await; // the first list, and a first walk: nothing came in meanwhile
    assert!(r.c.chores.watchdog_walk.is_none());
    r.cluster.take_writes();
    tokio::time::advance(Duration::from_secs(10)).await;
    let bad = name(n - 1);
    round_with_a_change_meanwhile(&mut r, &bad).await;
    let left =
        r.c.chores
            .watchdog_walk
            .as_ref()
            .map_or(0, |w| w.left.len());
    assert!(
        left > 0 && left < n,
        "the walk stopped part way for the change: {left} of {n} left"
    );
    // The next round decides the change; once the rounds have no changes (our own writes come
    // back as changes first: a few rounds, no time passing) the walk goes on to its end.
    let cordoned = rounds_until(&mut r, Vec::new(), |c| c.chores.watchdog_walk.is_none()).await;
    assert_eq!(cordoned, vec![bad]);
    assert!(r.c.chores.watchdog_walk.is_none(), "and went on to its end");
}

/// A round taking a change that woke the controller decides it and leaves a due resync to the
/// next round, which it wakes; a change of nothing decisions read does not; under such changes in
/// every round the resync waits 5 s at most, and is then done whole.
#[tokio::test(start_paused = true)]
async fn a_round_with_an_urgent_change_leaves_the_due_chores_to_the_next_round_for_five_seconds_at_most()
 {
    use futures::FutureExt;
    let n = 3 * YIELD_EVERY;
    let name = |i: usize| format!("n{i:04}");
    let with = |name: &str, bad: bool, label: usize, note: usize| -> Node {
        let mut v = serde_json::to_value(node(name, bad)).unwrap();
        v["metadata"]["labels"] = json!({"k": label.to_string()});
        v["metadata"]["annotations"] = json!({"note": note.to_string()});
        // Fixed times: `node` reads the wall clock, whose second may turn between two puts (a
        // change of a condition's time would wake the controller).
        for c in v["status"]["conditions"].as_array_mut().unwrap() {
            c["lastTransitionTime"] = json!("2026-11-01T00:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    };
    let nodes = (0..n).map(|i| with(&name(i), false, 0, 0)).collect();
    let mut r = rig(config(10), nodes, vec![]);
    r.c.mode.resync_gives_way = true;
    r.c.round().await;
    r.cluster.take_writes();
    // The first round assesses the pods' symptoms on a blocking thread, which wakes the controller
    // when it is done: that wake-up comes when the thread gets there (late on a busy machine, and
    // then it was taken for the label's below). Waited for, and taken with the rest.
    while (r.c.chores.symptoms.as_ref()).is_some_and(|t| !t.is_finished()) {
        tokio::task::yield_now().await;
    }
    let woken =
        |c: &Controller<MemoryCluster>| c.observed.changed.notified().now_or_never().is_some();
    tokio::time::advance(RESYNC).await;
    woken(&r.c); // whatever the first round's own writes woke
    let before = r.c.chores.last_resync;
    r.cluster.put_node(with(&name(1), false, 1, 0));
    assert!(!woken(&r.c), "a label nothing reads wakes nothing");
    r.c.round().await;
    assert!(
        r.c.chores.last_resync > before && r.c.chores.resync_left.is_empty(),
        "and the round that takes it does the due resync"
    );

    tokio::time::advance(RESYNC).await;
    let before = r.c.chores.last_resync;
    r.cluster.put_node(with(&name(0), true, 0, 0));
    r.c.round().await;
    assert_eq!(cordons(&r.cluster.take_writes()), vec![name(0)]);
    assert_eq!(r.c.chores.last_resync, before, "the due resync waits");
    assert!(woken(&r.c), "for the next round, woken at once");
    // Our cordon comes back as a change first: a few rounds, no time passing.
    let cordoned = rounds_until(&mut r, vec![name(0)], |c| c.chores.last_resync > before).await;
    assert_eq!(cordoned, vec![name(0)]);
    assert!(
        r.c.chores.last_resync > before,
        "a round without such a change begins it"
    );
    // (It gives way to our DrainScheduled coming back; rounds without changes end it.)
    let _ = rounds_until(&mut r, vec![name(0)], |c| c.chores.resync_left.is_empty()).await;
    assert!(r.c.chores.resync_left.is_empty());

    tokio::time::advance(RESYNC).await;
    let before = r.c.chores.last_resync;
    let mut rounds = 0;
    while r.c.chores.last_resync == before {
        rounds += 1;
        assert!(rounds <= 7, "the resync waited more than 5 s");
        r.cluster.put_node(with(&name(2), false, 0, rounds));
        if rounds == 6 {
            round_with_a_change_meanwhile(&mut r, &name(n - 1)).await;
        } else {
            r.c.round().await;
        }
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(
        rounds, 6,
        "an annotation every second: the round 5 s on does it"
    );
    assert!(
        r.c.chores.resync_left.is_empty(),
        "whole, though a change came in meanwhile"
    );
}

/// Settings with the detector watchdog on (a walk every 10 s), and the detector DaemonSet they
/// name as placing its pods on the nodes of a pool.
fn watched_by_the_watchdog() -> (
    Config,
    impl Fn(&str) -> k8s_openapi::api::apps::v1::DaemonSet,
) {
    let mut cfg = config(10);
    cfg.watchdog.silent_after = Some(Duration::from_secs(30));
    let (ns, name) = (cfg.watchdog.daemonset.clone()).expect("the default DaemonSet");
    let ds = move |pool: &str| {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {}, "template": {"spec": {
                "nodeSelector": {"pool": pool}, "containers": []}}}}))
        .unwrap()
    };
    (cfg, ds)
}

/// The detector DaemonSet is read off the loop: a round does not wait for an API server slow to
/// answer that read (a cordon decided meanwhile is written at once); the watchdog's walk does, and
/// begins once the read is in, with the placement it gave. The read wakes the loop when done.
#[tokio::test(start_paused = true)]
async fn a_slow_read_of_the_detector_daemonset_holds_the_watchdogs_walk_not_the_round() {
    use crate::decide::silence::Placement;
    let (cfg, ds) = watched_by_the_watchdog();
    let ds = ds("a");
    let mut r = rig(cfg, vec![node("good", false), node("bad", true)], vec![]);
    r.cluster.put_daemon_set(ds.clone());
    let slow = Duration::from_secs(3600);
    r.cluster.set_delay(Slow::DaemonSets, slow);
    let start = tokio::time::Instant::now();
    r.c.round().await;
    assert!(
        start.elapsed() < slow,
        "the round waited {:?} for the read",
        start.elapsed()
    );
    assert_eq!(cordons(&r.cluster.take_writes()), vec!["bad".to_string()]);
    assert!(
        r.c.chores.last_watchdog.is_none() && r.c.chores.watchdog_walk.is_none(),
        "the walk waits for the read"
    );
    assert_ne!(r.c.fleet.placement(), &Placement::of(&ds));
    // Rounds meanwhile do not start another read, nor the walk.
    r.c.round().await;
    assert!(r.c.chores.last_watchdog.is_none() && r.c.chores.placement_task.is_some());
    // The read is answered and wakes the loop (the rounds' own writes may have woken it first);
    // the round after takes its placement and walks.
    while !r.c.chores.placement_task.as_ref().unwrap().is_finished() {
        tokio::time::timeout(slow * 2, r.c.observed.changed.notified())
            .await
            .expect("the read wakes the loop once done");
    }
    r.c.round().await;
    assert_eq!(r.c.fleet.placement(), &Placement::of(&ds));
    assert!(r.c.chores.last_watchdog.is_some() && r.c.chores.placement_task.is_none());
}

/// A DaemonSet read that ended a resync period before a round takes it (the watchdog turned off
/// meanwhile, leadership lost) is not walked with: it is read again, and the walk waits for that.
#[tokio::test(start_paused = true)]
async fn a_daemonset_read_left_for_a_resync_period_is_read_again_before_the_walk() {
    use crate::decide::silence::Placement;
    let (cfg, ds) = watched_by_the_watchdog();
    let mut r = rig(cfg, vec![node("good", false)], vec![]);
    r.cluster.put_daemon_set(ds("a"));
    r.cluster
        .set_delay(Slow::DaemonSets, Duration::from_secs(10));
    r.c.round().await;
    let task =
        r.c.chores
            .placement_task
            .as_ref()
            .expect("a read under way");
    while !task.is_finished() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Left for a resync period, while the DaemonSet moved to another pool.
    tokio::time::advance(RESYNC).await;
    r.cluster.put_daemon_set(ds("b"));
    r.c.round().await;
    assert_ne!(
        r.c.fleet.placement(),
        &Placement::of(&ds("a")),
        "not walked with"
    );
    assert!(
        r.c.chores.last_watchdog.is_none(),
        "the walk waits for the new read"
    );
    let task = r.c.chores.placement_task.as_ref().expect("read again");
    while !task.is_finished() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    r.c.round().await;
    assert_eq!(r.c.fleet.placement(), &Placement::of(&ds("b")));
    assert!(r.c.chores.last_watchdog.is_some());
}

/// A reload naming another detector DaemonSet: the next walk begins with where that one runs, not
/// with the old one's placement, read up to a resync period before (its nodes would be judged
/// silent, and the new one's not watched, until the next read).
#[tokio::test(start_paused = true)]
async fn a_reload_naming_another_detector_daemonset_reads_it_before_the_next_walk() {
    use crate::decide::silence::Placement;
    let (cfg, ds) = watched_by_the_watchdog();
    let mut r = rig(cfg, vec![node("good", false)], vec![]);
    r.cluster.put_daemon_set(ds("a"));
    let read = |r: &Rig| {
        let task =
            r.c.chores
                .placement_task
                .as_ref()
                .expect("a read under way");
        task.is_finished()
    };
    r.c.round().await;
    while !read(&r) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    r.c.round().await;
    assert_eq!(r.c.fleet.placement(), &Placement::of(&ds("a")));
    let first_walk = r.c.chores.last_watchdog.expect("walked");

    // Another DaemonSet, on another pool, named by a reload.
    let mut next = ds("b");
    next.metadata.name = Some("detector-next".into());
    r.cluster.put_daemon_set(next.clone());
    let (mut reloaded, _) = watched_by_the_watchdog();
    let ns = next.metadata.namespace.clone().expect("a namespace");
    // As a reload from the file says it (what `reconfigure` compares).
    (reloaded.said).push(("detectorDaemonSet".into(), format!("{ns}/detector-next")));
    reloaded.watchdog.daemonset = Some((ns, "detector-next".into()));
    r.c.reconfigure(reloaded);
    tokio::time::advance(super::chores::watchdog_every(Duration::from_secs(30))).await;
    r.c.round().await;
    assert_eq!(
        r.c.chores.last_watchdog,
        Some(first_walk),
        "no walk with the old DaemonSet's placement"
    );
    while !read(&r) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    r.c.round().await;
    assert_eq!(r.c.fleet.placement(), &Placement::of(&next));
    assert_ne!(
        r.c.chores.last_watchdog,
        Some(first_walk),
        "walked with the new one's"
    );
}

/// The same reload while the old DaemonSet's read is under way: what that read gives is dropped,
/// and the one now named read before the walk.
#[tokio::test(start_paused = true)]
async fn a_read_of_the_daemonset_a_reload_replaced_is_not_walked_with() {
    use crate::decide::silence::Placement;
    let (cfg, ds) = watched_by_the_watchdog();
    let mut r = rig(cfg, vec![node("good", false)], vec![]);
    r.cluster.put_daemon_set(ds("a"));
    let mut next = ds("b");
    next.metadata.name = Some("detector-next".into());
    r.cluster.put_daemon_set(next.clone());
    r.cluster
        .set_delay(Slow::DaemonSets, Duration::from_secs(10));
    let read = |r: &Rig| {
        let task =
            r.c.chores
                .placement_task
                .as_ref()
                .expect("a read under way");
        task.is_finished()
    };
    r.c.round().await;
    let (mut reloaded, _) = watched_by_the_watchdog();
    let ns = next.metadata.namespace.clone().expect("a namespace");
    (reloaded.said).push(("detectorDaemonSet".into(), format!("{ns}/detector-next")));
    reloaded.watchdog.daemonset = Some((ns, "detector-next".into()));
    r.c.reconfigure(reloaded);
    while !read(&r) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    r.c.round().await;
    assert_ne!(r.c.fleet.placement(), &Placement::of(&ds("a")), "dropped");
    assert!(
        r.c.chores.last_watchdog.is_none(),
        "the walk waits for the new read"
    );
    while !read(&r) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    r.c.round().await;
    assert_eq!(r.c.fleet.placement(), &Placement::of(&next));
    assert!(r.c.chores.last_watchdog.is_some());
}
