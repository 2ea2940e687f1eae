//! The executor over a cluster in memory, on paused time: what each effect writes, in order, and
//! what it does not (not leading, dry-run, a node that changed).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys;
use serde_json::json;
use tokio::sync::watch;

use super::memory::{MemoryCluster, Slow, Write};
use super::*;
use crate::config::Config;
use crate::decide::Effect;
use crate::decide::{DrainJob, ToEvict};
use crate::model::cluster::{ConditionPatch, Gated};
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::Record;
use crate::model::record::{DrainOutcome, EvictError, Phase};
use crate::observe::Observed;
use crate::record::Recorder;
use crate::record::event_queue::EventQueue;
use nodemedic_common::clock::Clock;

struct Rig {
    exec: Executor<MemoryCluster>,
    cluster: MemoryCluster,
    observed: Observed,
    leader: watch::Sender<bool>,
}

fn rig(dry_run: bool) -> Rig {
    rig_with(dry_run, false)
}

/// A rig whose Events go through an [`EventQueue`] (`queued`), as `drainer run` writes them.
fn rig_with(dry_run: bool, queued: bool) -> Rig {
    let observed = Observed::default();
    let cluster = MemoryCluster::new(observed.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    cluster.put_node(node);
    for name in ["web", "db"] {
        cluster.put_pod(pod(name));
    }
    cluster.sync();
    let (leader, leading) = watch::channel(true);
    let gated = Gated::new(cluster.clone(), leading);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let clock = Clock::tokio();
    let mut record = Recorder::new(gated.clone(), metrics, observed.clone(), clock);
    if queued {
        record = record.with_event_queue(EventQueue::start(gated.clone()).0);
    }
    Rig {
        exec: Executor::new(gated, record, dry_run, clock),
        cluster,
        observed,
        leader,
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "app", "uid": format!("00000000-0000-4000-8000-00000000000{}", name.len())},
        "spec": {"nodeName": "n1", "containers": [], "terminationGracePeriodSeconds": 600},
        "status": {"phase": "Running"}}))
    .unwrap()
}

fn record(phase: Phase) -> Record {
    let t: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
    Record {
        owner: "nodemedic-drainer".into(),
        episode: "e".into(),
        reason: "KernelDeadlock=True".into(),
        phase,
        cordoned_at: t,
        drain_at: t,
        drain_started: None,
        finished_at: None,
        attempts: 0,
        retry_at: None,
        // n1 has no uid: the nil UUID
        node: "n1".into(),
        uid: crate::model::node::Uid::NONE.to_string(),
        ..Default::default()
    }
}

fn reasons(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Event { event, .. } => Some(event.reason.clone()),
            _ => None,
        })
        .collect()
}

/// The message of the Event with `reason` among `writes`.
fn message(writes: &[Write], reason: &str) -> String {
    writes
        .iter()
        .find_map(|w| match w {
            Write::Event { event, .. } if event.reason == reason => Some(event.message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {reason} Event"))
}

fn view(r: &Rig) -> NodeView {
    (*r.observed.node("n1").unwrap()).clone()
}

fn cfg() -> Config {
    Config {
        max_grace_period: Duration::from_secs(60),
        eviction_headroom: Duration::from_secs(30),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_cordon_writes_the_record_against_the_version_seen_then_drain_scheduled() {
    let r = rig(false);
    let v = view(&r);
    let cordon = Effect::Cordon(record(Phase::Cordoned));
    assert!(r.exec.apply(&v, &cordon, &cfg()).await);
    let w = r.cluster.take_writes();
    let Write::Node { name, patch } = &w[1] else {
        panic!("{w:?}")
    };
    assert_eq!(name, "n1");
    assert_eq!(
        patch.resource_version.as_deref(),
        Some(&*v.resource_version.to_string())
    );
    assert_eq!(patch.unschedulable, Some(true));
    assert!(patch.annotations[keys::DRAIN_RECORD_ANNOTATION].is_some());
    assert!(
        matches!(&w[3], Write::Status { patch: ConditionPatch::Set { type_, .. }, .. } if type_ == "DrainScheduled"),
        "{w:?}"
    );
    assert_eq!(
        reasons(&w),
        ["CordonStarting", "CordonSucceeded", "DrainScheduled"]
    );
    let node = r.cluster.node("n1").unwrap();
    assert_eq!(node.spec.unwrap().unschedulable, Some(true));
}

/// A heartbeat lands between the decision and its cordon (the burst of 500 lost a cordon to this
/// for seconds): the conflict reads the node, finds its state the one decided on, and cordons
/// against the heartbeat's version. A change of state in between is refused as before.
#[tokio::test(start_paused = true)]
async fn a_heartbeat_between_decision_and_cordon_costs_one_read_and_a_change_is_refused() {
    let r = rig(false);
    let decided = view(&r);
    r.cluster.heartbeat("n1", Timestamp::now());
    let beat = r.cluster.node("n1").unwrap().metadata.resource_version;
    assert_ne!(
        beat.as_deref(),
        Some(&*decided.resource_version.to_string())
    );
    let cordon = Effect::Cordon(record(Phase::Cordoned));
    assert!(r.exec.apply(&decided, &cordon, &cfg()).await);
    let patches: Vec<_> = r
        .cluster
        .take_writes()
        .into_iter()
        .filter_map(|w| match w {
            Write::Node { patch, .. } => Some(patch.resource_version),
            _ => None,
        })
        .collect();
    let decided_version = Some(decided.resource_version.to_string());
    assert_eq!(patches, [decided_version, beat], "refused, then written");
    assert_eq!(
        r.cluster.node("n1").unwrap().spec.unwrap().unschedulable,
        Some(true)
    );

    // The state changes after the decision: Ready turns False.
    let r = rig(false);
    let decided = view(&r);
    let at = "2026-11-24T10:00:00Z".parse().unwrap();
    r.cluster
        .set_condition("n1", "Ready", nodemedic_common::status::Status::False, at);
    assert!(!r.exec.apply(&decided, &cordon, &cfg()).await);
    let unschedulable = r
        .cluster
        .node("n1")
        .unwrap()
        .spec
        .and_then(|s| s.unschedulable);
    assert_ne!(
        unschedulable,
        Some(true),
        "nothing written on a changed node"
    );
    let w = r.cluster.take_writes();
    assert!(
        message(&w, "CordonFailed").contains("changed since it was decided on"),
        "{w:?}"
    );
}

/// `drainer run` writes Events behind the writes they tell of: a cordon waits for none of them
/// (however slow the API server is with Events), and they follow in the order they happened.
#[tokio::test(start_paused = true)]
async fn a_cordon_waits_for_no_event_and_its_events_follow_in_order() {
    let r = rig_with(false, true);
    r.cluster.set_delay(Slow::Events, Duration::from_secs(10));
    let started = tokio::time::Instant::now();
    let cordon = Effect::Cordon(record(Phase::Cordoned));
    assert!(r.exec.apply(&view(&r), &cordon, &cfg()).await);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited for an Event"
    );
    let node = r.cluster.node("n1").unwrap();
    assert_eq!(node.spec.unwrap().unschedulable, Some(true));
    let mut w = r.cluster.take_writes();
    assert!(
        w.iter().any(|w| matches!(w, Write::Status { .. })),
        "DrainScheduled written: {w:?}"
    );
    // The three Events, each 10 s behind the one before, on the node's one lane.
    tokio::time::timeout(Duration::from_secs(600), async {
        while reasons(&w).len() < 3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            w.extend(r.cluster.take_writes());
        }
    })
    .await
    .expect("the cordon's Events were written");
    assert_eq!(
        reasons(&w),
        ["CordonStarting", "CordonSucceeded", "DrainScheduled"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cordon_against_a_node_that_changed_since_is_refused_and_said() {
    let r = rig(false);
    let stale = view(&r);
    let at = "2026-11-24T10:00:00Z".parse().unwrap();
    r.cluster
        .set_condition("n1", "Ready", nodemedic_common::status::Status::False, at);
    let cordon = Effect::Cordon(record(Phase::Cordoned));
    assert!(!r.exec.apply(&stale, &cordon, &cfg()).await);
    let w = r.cluster.take_writes();
    assert_eq!(reasons(&w), ["CordonStarting", "CordonFailed"]);
    assert!(
        !w.iter().any(|w| matches!(w, Write::Status { .. })),
        "no DrainScheduled"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_reaches_the_cluster_while_not_leading() {
    let r = rig(false);
    r.leader.send_replace(false);
    let v = view(&r);
    let cordon = Effect::Cordon(record(Phase::Cordoned));
    assert!(!r.exec.apply(&v, &cordon, &cfg()).await);
    assert!(
        !r.exec
            .apply(&v, &Effect::Uncordon(record(Phase::Cordoned)), &cfg())
            .await
    );
    assert!(!r.exec.apply(&v, &Effect::DeleteNode, &cfg()).await);
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: vec![ToEvict::plain(PodInfo::from_pod(&pod("web"), None))],
    };
    assert_eq!(r.exec.drain("n1", job, &cfg()).await, None);
    assert_eq!(r.cluster.take_writes(), vec![]);
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_writes_nothing_for_any_effect_but_the_starting_events_marked_as_such() {
    let r = rig(true);
    let v = view(&r);
    let step = |phase, step| Record {
        step: Some(step),
        ..record(phase)
    };
    use crate::model::ladder::Step;
    let effects = [
        Effect::Cordon(record(Phase::Cordoned)),
        Effect::Uncordon(record(Phase::Cordoned)),
        Effect::Uncordon(step(Phase::Restarting, Step::RestartKubelet)),
        Effect::Relapse(record(Phase::Cordoned)),
        Effect::Release(record(Phase::Released)),
        Effect::Probation(record(Phase::Probation)),
        Effect::Forget,
        Effect::DeleteNode,
        Effect::Reboot(step(Phase::Rebooting, Step::Reboot)),
        Effect::Reboot(step(Phase::Rebooting, Step::PowerCycle)),
        Effect::Reboot(step(Phase::Restarting, Step::RestartKubelet)),
        Effect::Replace(step(Phase::Replacing, Step::Replace)),
        Effect::Escalate(record(Phase::NeedsPerson)),
    ];
    for effect in &effects {
        assert!(!r.exec.apply(&v, effect, &cfg()).await, "{effect:?}");
    }
    let w = r.cluster.take_writes();
    assert_eq!(reasons(&w), ["CordonStarting", "UncordonStarting"]);
    assert_eq!(w.len(), 2, "only the two Events: {w:?}");
    for reason in ["CordonStarting", "UncordonStarting"] {
        let m = message(&w, reason);
        assert!(m.starts_with(crate::model::occurrence::DRY_RUN), "{m}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_drain_evicts_with_the_capped_grace_and_waits_until_the_pods_are_gone() {
    let r = rig(false);
    r.cluster.set_termination(Duration::from_secs(20));
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: ["web", "db"]
            .map(|n| ToEvict::plain(PodInfo::from_pod(&pod(n), None)))
            .to_vec(),
    };
    let run = r.exec.drain("n1", job, &cfg()).await.unwrap();
    assert_eq!(run.outcome, DrainOutcome::Drained);
    assert_eq!(
        run.ended.duration_since(run.started).as_secs(),
        20,
        "it waited for the pods to go, no longer"
    );
    let w = r.cluster.take_writes();
    let starting = message(&w, "DrainStarting");
    assert!(
        starting.starts_with("Draining node: 2 pods to evict: ")
            && starting.contains("/web")
            && starting.contains("/db"),
        "it names the pods: {starting}"
    );
    let grace: Vec<Option<i64>> = w
        .iter()
        .filter_map(|w| match w {
            Write::Evict { grace, .. } => Some(*grace),
            _ => None,
        })
        .collect();
    assert_eq!(
        grace,
        [Some(60), Some(60)],
        "600s of their own, capped at --max-grace-period"
    );
    assert!(!r.cluster.has_pod("app", "web") && !r.cluster.has_pod("app", "db"));
    let status = |w: &[Write]| -> Vec<String> {
        (w.iter())
            .filter_map(|w| match w {
                Write::Status {
                    patch: ConditionPatch::Set { type_, status, .. },
                    ..
                } => Some(format!("{type_}={}", status.as_str())),
                _ => None,
            })
            .collect()
    };
    assert!(
        status(&w).is_empty(),
        "no lifecycle conditions unless asked: {w:?}"
    );
    // Asked (--lifecycle-conditions): the drain says it runs, before its first eviction.
    let mut c = cfg();
    c.lifecycle_conditions = true;
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: vec![ToEvict::plain(PodInfo::from_pod(&pod("api"), None))],
    };
    r.exec.drain("n1", job, &c).await.unwrap();
    let w = r.cluster.take_writes();
    assert_eq!(status(&w), ["DrainInProgress=True", "Drained=False"]);
    let first_eviction = w.iter().position(|w| matches!(w, Write::Evict { .. }));
    let said = w.iter().position(|w| matches!(w, Write::Status { .. }));
    assert!(said < first_eviction, "{w:?}");
}

/// Six drains of ten pods at once could send 48 evictions together (eight each); every drain's
/// requests share [`turns::DRAIN_REQUESTS_IN_FLIGHT`] places, so a round's cordons are not sent behind
/// hundreds of them. Each drain still evicts all its pods.
#[tokio::test(start_paused = true)]
async fn drains_under_way_together_send_at_most_their_shared_number_of_requests_at_once() {
    let r = rig(false);
    r.cluster
        .set_delay(Slow::Evictions, Duration::from_millis(100));
    let nodes: Vec<String> = (0..6).map(|i| format!("m{i}")).collect();
    let mut jobs = Vec::new();
    for node in &nodes {
        let n: Node = serde_json::from_value(json!({"metadata": {"name": node}})).unwrap();
        r.cluster.put_node(n);
        let mut evict = Vec::new();
        for i in 0..10 {
            let mut p = pod(&format!("{node}-p{i}"));
            p.spec.as_mut().unwrap().node_name = Some(node.clone());
            p.metadata.uid = Some(format!("00000000-0000-4000-8000-0000000{i}{}", &node[1..]));
            r.cluster.put_pod(p.clone());
            evict.push(ToEvict::plain(PodInfo::from_pod(&p, None)));
        }
        let mut rec = record(Phase::Draining);
        rec.node = node.clone();
        jobs.push((
            node.clone(),
            DrainJob {
                kept: Vec::new(),
                record: rec,
                evict,
            },
        ));
    }
    r.cluster.sync();
    let (cfg, exec) = (&cfg(), &r.exec);
    assert_eq!(cfg.eviction_concurrency, 8);
    let runs = futures::future::join_all(
        jobs.into_iter()
            .map(|(node, job)| async move { exec.drain(&node, job, cfg).await }),
    )
    .await;
    for run in &runs {
        let run = run.as_ref().expect("each drain ran");
        assert_eq!(run.outcome, DrainOutcome::Drained, "{}", run.node);
    }
    let evictions = r
        .cluster
        .take_writes()
        .iter()
        .filter(|w| matches!(w, Write::Evict { .. }))
        .count();
    assert_eq!(evictions, 60, "every pod of every drain was evicted");
    assert_eq!(
        r.cluster.most_evictions_at_once(),
        super::turns::DRAIN_REQUESTS_IN_FLIGHT,
        "the drains filled their shared places, and no more"
    );
}

#[tokio::test(start_paused = true)]
async fn a_budget_refusal_is_retried_until_the_deadline_and_never_forced() {
    let r = rig(false);
    r.cluster.protect("app", "web");
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: vec![ToEvict::plain(PodInfo::from_pod(&pod("web"), None))],
    };
    let cfg = Config {
        allow_force_delete: true,
        ..cfg()
    };
    let run = r.exec.drain("n1", job, &cfg).await.unwrap();
    let failed = EvictError::NotEvicted {
        pod: "app/web".into(),
    };
    assert_eq!(run.outcome, DrainOutcome::Failed(vec![failed]));
    let w = r.cluster.take_writes();
    let tries = w
        .iter()
        .filter(|w| matches!(w, Write::Evict { .. }))
        .count();
    assert_eq!(
        tries, 19,
        "at 0s, 5s, ... 90s: every 5s until the next would pass the 90s deadline"
    );
    assert!(!w.iter().any(|w| matches!(w, Write::DeletePod { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_pod_still_there_at_the_deadline_is_force_deleted_only_when_allowed() {
    for allowed in [false, true] {
        let r = rig(false);
        r.cluster.set_termination(Duration::from_secs(3600));
        let job = DrainJob {
            kept: Vec::new(),
            record: record(Phase::Draining),
            evict: vec![ToEvict::plain(PodInfo::from_pod(&pod("web"), None))],
        };
        let cfg = Config {
            allow_force_delete: allowed,
            ..cfg()
        };
        let run = r.exec.drain("n1", job, &cfg).await.unwrap();
        let w = r.cluster.take_writes();
        let deleted = w.contains(&Write::DeletePod {
            pod: "app/web".into(),
            grace: 0,
        });
        assert_eq!(deleted, allowed);
        if allowed {
            assert_eq!(run.outcome, DrainOutcome::Drained);
            assert!(
                reasons(&w).contains(&"PodForceDeleted".to_string()),
                "{w:?}"
            );
        } else {
            let still = EvictError::StillPresent {
                pod: "app/web".into(),
            };
            assert_eq!(run.outcome, DrainOutcome::Failed(vec![still]));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn finishing_a_drain_writes_the_given_record_the_outcome_and_the_marks() {
    let r = rig(false);
    let t: Timestamp = "2026-11-24T10:05:00Z".parse().unwrap();
    let run = DrainRun {
        kept: vec!["kube-system/proxy-n1 (DaemonSet pod)".into()],
        node: "n1".into(),
        record: record(Phase::Draining),
        outcome: DrainOutcome::Drained,
        started: t,
        ended: t,
    };
    let cfg = Config {
        after_drain: crate::config::AfterDrain {
            labels: vec![("drained".into(), "true".into())],
            taints: vec![crate::config::Taint {
                key: "drained".into(),
                value: None,
                effect: "NoSchedule".into(),
            }],
            ..Default::default()
        },
        ..cfg()
    };
    let finished = record(Phase::Drained);
    r.exec.finish_drain(&run, &finished, &cfg).await;
    let node = r.cluster.node("n1").unwrap();
    let annotations = node.metadata.annotations.unwrap();
    assert_eq!(
        annotations[keys::DRAIN_RECORD_ANNOTATION],
        finished.to_annotation(&cfg.records),
        "the record as the controller decided it"
    );
    assert_eq!(node.metadata.labels.unwrap()["drained"], "true");
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        ("drained", "NoSchedule")
    );
    let conditions = node.status.unwrap().conditions.unwrap();
    let scheduled = conditions
        .iter()
        .find(|c| c.type_ == "DrainScheduled")
        .unwrap();
    assert!(
        scheduled
            .message
            .as_deref()
            .unwrap()
            .contains("| Completed: 2026-11-24T10:05:00Z")
    );
    let w = r.cluster.take_writes();
    assert_eq!(reasons(&w), ["DrainSucceeded", "MarkedDrained"]);
    assert_eq!(
        message(&w, "DrainSucceeded"),
        "Drained node; left running: 1 pod: kube-system/proxy-n1 (DaemonSet pod)",
        "it says which pods it left running"
    );
    // Uncordoning takes the marks away again.
    let v = view(&r);
    assert!(
        r.exec
            .apply(&v, &Effect::Uncordon(record(Phase::Cordoned)), &cfg)
            .await
    );
    let node = r.cluster.node("n1").unwrap();
    assert_eq!(node.spec.unwrap().taints, None);
    assert!(
        !node
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("drained")
    );
}

/// The node's taints as `KEY:EFFECT`, sorted.
fn taints_of(r: &Rig) -> Vec<String> {
    let node = r.cluster.node("n1").unwrap();
    let mut t: Vec<String> = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    t.sort();
    t
}

fn unschedulable(r: &Rig) -> bool {
    let node = r.cluster.node("n1").unwrap();
    node.spec.and_then(|s| s.unschedulable).unwrap_or(false)
}

fn tainted(phase: Phase, cordoned: bool, taints: &[&str]) -> Record {
    Record {
        cordoned,
        taints: taints.iter().map(|t| t.to_string()).collect(),
        ..record(phase)
    }
}

#[tokio::test(start_paused = true)]
async fn taints_go_on_with_the_cordon_and_only_ours_come_off() {
    let r = rig(false);
    let other = "example.com/other:NoSchedule";
    let mut node = r.cluster.node("n1").unwrap();
    node.spec.get_or_insert_with(Default::default).taints =
        Some(vec![k8s_openapi::api::core::v1::Taint {
            key: "example.com/other".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    r.cluster.put_node(node);
    let problem = "nodemedic.io/problem:NoSchedule";
    let held = tainted(Phase::Cordoned, true, &[problem]);
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Cordon(held.clone()), &cfg())
            .await
    );
    assert!(unschedulable(&r));
    assert_eq!(taints_of(&r), [other, problem]);
    assert_eq!(
        reasons(&r.cluster.take_writes()),
        ["CordonStarting", "CordonSucceeded", "DrainScheduled"]
    );
    let uncordon = Effect::Uncordon(held);
    assert!(r.exec.apply(&view(&r), &uncordon, &cfg()).await);
    assert!(!unschedulable(&r));
    assert_eq!(taints_of(&r), [other], "another's taint stays");
    let node = r.cluster.node("n1").unwrap();
    assert!(
        !node
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(keys::DRAIN_RECORD_ANNOTATION)
    );
}

#[tokio::test(start_paused = true)]
async fn taint_only_leaves_the_cordon_alone_and_a_stale_view_is_refused() {
    let r = rig(false);
    let problem = "nodemedic.io/problem:NoExecute";
    let stale = view(&r);
    let at = "2026-11-24T10:00:00Z".parse().unwrap();
    r.cluster
        .set_condition("n1", "Ready", nodemedic_common::status::Status::False, at);
    let hold = Effect::Cordon(tainted(Phase::Cordoned, false, &[problem]));
    assert!(
        !r.exec.apply(&stale, &hold, &cfg()).await,
        "the node changed since"
    );
    assert_eq!(taints_of(&r), Vec::<String>::new());
    r.cluster.take_writes();
    assert!(r.exec.apply(&view(&r), &hold, &cfg()).await);
    assert!(!unschedulable(&r));
    assert_eq!(taints_of(&r), [problem]);
    let w = r.cluster.take_writes();
    assert_eq!(
        reasons(&w),
        ["CordonStarting", "TaintSucceeded", "DrainScheduled"]
    );
}

#[tokio::test(start_paused = true)]
async fn probation_swaps_the_cordon_for_its_taint_and_a_relapse_swaps_back() {
    let r = rig(false);
    let (problem, probation) = (
        "nodemedic.io/problem:NoSchedule",
        "nodemedic.io/probation:PreferNoSchedule",
    );
    let held = tainted(Phase::Drained, true, &[problem]);
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Cordon(held.clone()), &cfg())
            .await
    );
    let until = "2026-11-24T11:00:00Z".parse().unwrap();
    let mut during = tainted(Phase::Probation, false, &[probation]);
    during.probation_until = Some(until);
    r.cluster.take_writes();
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Probation(during.clone()), &cfg())
            .await
    );
    assert!(!unschedulable(&r));
    assert_eq!(taints_of(&r), [probation]);
    assert_eq!(reasons(&r.cluster.take_writes()), ["ProbationStarted"]);
    let back = tainted(Phase::Cordoned, true, &[problem]);
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Relapse(back.clone()), &cfg())
            .await
    );
    assert!(unschedulable(&r));
    assert_eq!(taints_of(&r), [problem]);
    assert_eq!(
        reasons(&r.cluster.take_writes()),
        ["ProblemBackInProbation", "DrainScheduled"]
    );
    assert_eq!(
        Record::of(&view(&r), &cfg().records, &cfg().owner),
        Some(back)
    );
}

#[tokio::test(start_paused = true)]
async fn a_release_lifts_what_is_left_of_our_hold() {
    let r = rig(false);
    let problem = "nodemedic.io/problem:NoSchedule";
    let held = tainted(Phase::Cordoned, true, &[problem]);
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Cordon(held.clone()), &cfg())
            .await
    );
    // A person removes our taint; the cordon is still ours.
    let mut node = r.cluster.node("n1").unwrap();
    node.spec.as_mut().unwrap().taints = None;
    r.cluster.put_node(node);
    let released = Record {
        phase: Phase::Released,
        cordoned: false,
        taints: vec![],
        ..held
    };
    assert!(
        r.exec
            .apply(&view(&r), &Effect::Release(released.clone()), &cfg())
            .await
    );
    assert!(!unschedulable(&r), "the rest of the hold is lifted");
    assert_eq!(
        Record::of(&view(&r), &cfg().records, &cfg().owner),
        Some(released)
    );
}

fn policed(name: &str, policy: &str, action: crate::config::policy::PolicyAction) -> ToEvict {
    ToEvict {
        pod: PodInfo::from_pod(&pod(name), None),
        policy: Some((policy.into(), action)),
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_policy_lets_the_pod_finish_and_evicts_it_only_after_its_wait() {
    use crate::config::policy::PolicyAction;
    let r = rig(false);
    let wait = PolicyAction::Wait {
        max: Duration::from_secs(600),
    };
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: vec![
            policed("web", "jobs", wait.clone()),
            policed("db", "jobs", wait),
        ],
    };
    // web finishes after 2 minutes; db is still running when the wait is over.
    let cluster = r.cluster.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(120)).await;
        cluster.set_pod_phase("app", "web", "Succeeded");
    });
    let run = r.exec.drain("n1", job, &cfg()).await.unwrap();
    assert_eq!(run.outcome, DrainOutcome::Drained);
    let w = r.cluster.take_writes();
    let evicted: Vec<&str> = w
        .iter()
        .filter_map(|w| match w {
            Write::Evict { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, ["app/db"], "the finished pod is never evicted");
    assert_eq!(
        run.ended.duration_since(run.started).as_secs(),
        600,
        "db was evicted when its wait was over (and went at once)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_delete_policy_deletes_a_pod_budgets_keep_refusing_and_says_so() {
    use crate::config::policy::PolicyAction;
    let r = rig(false);
    r.cluster.protect("app", "web");
    let delete = PolicyAction::Delete {
        after: Duration::from_secs(120),
    };
    let job = DrainJob {
        kept: Vec::new(),
        record: record(Phase::Draining),
        evict: vec![policed("web", "databases", delete)],
    };
    let run = r.exec.drain("n1", job, &cfg()).await.unwrap();
    assert_eq!(
        run.outcome,
        DrainOutcome::Drained,
        "past the 90s deadline a plain pod would fail"
    );
    let w = r.cluster.take_writes();
    assert!(
        w.contains(&Write::DeletePod {
            pod: "app/web".into(),
            grace: 60
        }),
        "deleted with its eviction's grace: {w:?}"
    );
    let tries = w
        .iter()
        .filter(|w| matches!(w, Write::Evict { .. }))
        .count();
    assert_eq!(tries, 25, "refused at 0s, 5s, ... 120s, then deleted");
    assert!(
        reasons(&w).contains(&"PodDeletedByPolicy".to_string()),
        "{w:?}"
    );
    assert!(!r.cluster.has_pod("app", "web"));
}

/// A power-cycle that fails ends its attempt in the node's record (the record written once more,
/// a later version): refused, a permanent failure (the ladder goes on at once); unreachable past
/// its retries, a transient one (the step waits out its deadline).
#[tokio::test(start_paused = true)]
async fn a_failed_power_cycle_ends_its_attempt_in_the_record_with_its_outcome() {
    use crate::config::ladder::PowerCycle;
    use crate::model::attempt::Outcome;
    use crate::model::ladder::Step;
    for (provider, fails, outcome) in [
        // Metal3 without the node naming its Machine: no host to ask, a refusal.
        (PowerCycle::Metal3, false, Outcome::PermanentFailure),
        // The endpoint answers 503 to every try.
        (
            PowerCycle::Http {
                url: crate::config::url::check("https://gw.example/p", false).unwrap(),
                token_file: None,
                ca_file: None,
            },
            true,
            Outcome::TransientFailure,
        ),
    ] {
        let r = rig(false);
        if fails {
            r.cluster.power_cycle_fails("n1");
        }
        let mut c = cfg();
        c.ladder.power_cycle = Some(provider);
        let mut next = record(Phase::Rebooting);
        next.step = Some(Step::PowerCycle);
        next.step_at = Some(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap());
        next.boot_id = "b1".into();
        let next = next.bound(&view(&r), None, r.exec.clock.now());
        assert!(
            r.exec
                .apply(&view(&r), &Effect::Reboot(next.clone()), &c)
                .await
        );
        let annotation = (view(&r).annotations)
            .get(nodemedic_common::keys::DRAIN_RECORD_ANNOTATION)
            .unwrap_or_default()
            .to_string();
        let written: Record = serde_json::from_str(&annotation).unwrap();
        assert_eq!(written.ended.len(), 1, "{annotation}");
        assert_eq!(
            (written.ended[0].step, written.ended[0].outcome),
            (Step::PowerCycle, outcome)
        );
        assert!(written.at > next.at, "a later version of the record");
        let w = r.cluster.take_writes();
        assert!(
            reasons(&w).contains(&"RemediationAttemptEnded".to_string()),
            "{:?}",
            reasons(&w)
        );
        let failed = message(&w, "PowerCycleFailed");
        let said = if fails {
            "at the step's deadline"
        } else {
            "goes on now"
        };
        assert!(failed.contains(said), "{failed}");
    }
}
