//! The detector watchdog over nodes in every state: heard recently, silent, never heard, exempt by
//! placement or as Kosmos leaf nodes, and `DetectorSilent` as a problem condition; then the fleet's
//! episodes (one report when a node falls silent, one when it is heard again). Pure.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION;
use serde_json::json;

use super::fleet::{Fleet, FleetEvent};
use super::problem::problem;
use super::silence::{Placement, placement_among, silence};
use crate::config::Config;
use crate::model::node::{Condition, NodeTaint, NodeView, Status, TaintEffect};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

const NOW: i64 = 100_000;
const MIN: i64 = 60;

fn cfg() -> Config {
    Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        ..Default::default()
    }
}

fn condition(type_: &str, heartbeat: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: Status::False,
        reason: None,
        since: t(0),
        heartbeat: t(heartbeat).as_second(),
    }
}

/// A node created at t(0); its detector (annotation: KernelDeadlock) last heard at `heard`.
fn node(name: &str, heard: Option<i64>) -> NodeView {
    let mut v = NodeView {
        name: name.into(),
        resource_version: "1".into(),
        created: t(0).as_second(),
        labels: [("pool", "a")].into_iter().collect(),
        conditions: Box::new([condition("Ready", NOW)]),
        ..Default::default()
    };
    if let Some(h) = heard {
        v.annotations = [(OWNED_CONDITIONS_ANNOTATION, "KernelDeadlock")]
            .into_iter()
            .collect();
        v.conditions = Box::new([condition("Ready", NOW), condition("KernelDeadlock", h)]);
    }
    v
}

fn daemonset(spec: serde_json::Value) -> Placement {
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "nodemedic-detector", "namespace": "kube-system"},
        "spec": {"selector": {}, "template": {"spec": spec}}
    }))
    .unwrap();
    placement_among(&[ds], &cfg().watchdog)
}

fn everywhere() -> Placement {
    daemonset(json!({"containers": []}))
}

#[test]
fn a_detector_is_silent_once_its_heartbeats_are_older_than_the_limit() {
    let c = cfg();
    let limit = c.watchdog.silent_after.unwrap().as_secs() as i64;
    let p = everywhere();
    // Heard one second short of the limit: alive.
    assert_eq!(
        silence(&node("n", Some(NOW - limit + 1)), &c, &p, t(NOW)),
        None
    );
    let s = silence(&node("n", Some(NOW - limit - MIN)), &c, &p, t(NOW)).unwrap();
    assert_eq!(s.last_heard, t(NOW - limit - MIN));
    assert_eq!(s.declared, t(NOW - MIN));
    assert!(!s.never);
    // The newest of the owned conditions counts; Ready (the kubelet's) does not.
    let mut v = node("n", Some(NOW - limit - MIN));
    v.annotations = [(OWNED_CONDITIONS_ANNOTATION, "KernelDeadlock,DockerHung")]
        .into_iter()
        .collect();
    v.conditions = Box::new([
        condition("Ready", NOW),
        condition("KernelDeadlock", NOW - limit - MIN),
        condition("DockerHung", NOW - 10),
    ]);
    assert_eq!(silence(&v, &c, &p, t(NOW)), None);
}

#[test]
fn npd_conditions_count_when_named_and_the_watchdog_can_be_off() {
    let mut c = cfg();
    let p = everywhere();
    // NPD writes no ownership annotation: its conditions count only when named.
    let mut v = node("n", None);
    v.conditions = Box::new([
        condition("Ready", NOW),
        condition("KernelDeadlock", NOW - 10),
    ]);
    assert!(
        silence(&v, &c, &p, t(NOW)).unwrap().never,
        "not named: never heard"
    );
    c.watchdog.conditions = vec!["KernelDeadlock".into()];
    assert_eq!(silence(&v, &c, &p, t(NOW)), None);
    v.conditions = Box::new([
        condition("Ready", NOW),
        condition("KernelDeadlock", NOW - 3600),
    ]);
    assert_eq!(
        silence(&v, &c, &p, t(NOW)).unwrap().last_heard,
        t(NOW - 3600)
    );
    c.watchdog.silent_after = None;
    assert_eq!(silence(&v, &c, &p, t(NOW)), None, "off");
}

#[test]
fn a_node_never_heard_is_silent_only_where_the_daemonset_places_a_pod() {
    let c = cfg();
    let never = node("n", None);
    let s = silence(&never, &c, &everywhere(), t(NOW)).unwrap();
    assert!(s.never);
    assert_eq!(s.last_heard, t(0), "since the node was created");
    // A young node has not had the time.
    let mut young = node("young", None);
    young.created = t(NOW - 60).as_second();
    assert_eq!(silence(&young, &c, &everywhere(), t(NOW)), None);
    // nodeSelector and required node affinity.
    let gpu_only = daemonset(json!({"containers": [], "nodeSelector": {"gpu": "true"}}));
    assert_eq!(silence(&never, &c, &gpu_only, t(NOW)), None);
    let affinity = |op: &str, values: &[&str]| {
        daemonset(json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": op, "values": values}]}
        ]}}}}))
    };
    assert!(silence(&never, &c, &affinity("In", &["a", "b"]), t(NOW)).is_some());
    assert_eq!(
        silence(&never, &c, &affinity("NotIn", &["a"]), t(NOW)),
        None
    );
    assert_eq!(
        silence(&never, &c, &affinity("DoesNotExist", &[]), t(NOW)),
        None
    );
    // Not configured or not readable: only nodes heard before are watched.
    assert_eq!(silence(&never, &c, &Placement::Unknown, t(NOW)), None);
    let old = node("n", Some(NOW - 3600));
    assert!(silence(&old, &c, &Placement::Unknown, t(NOW)).is_some());
    // A node the DaemonSet no longer places a pod on has no detector to hear from.
    assert_eq!(silence(&old, &c, &gpu_only, t(NOW)), None);
    // No DaemonSet named: every selected node runs one.
    let mut anywhere = cfg();
    anywhere.watchdog.daemonset = None;
    assert_eq!(
        placement_among(&[], &anywhere.watchdog),
        Placement::Everywhere
    );
    assert!(silence(&never, &anywhere, &Placement::Everywhere, t(NOW)).is_some());
}

#[test]
fn taints_keep_the_daemonset_off_unless_tolerated_or_added_by_its_controller() {
    let c = cfg();
    let tainted = |key: &str, effect: TaintEffect| {
        let mut v = node("n", None);
        v.taints = Box::new([NodeTaint::new(key, None, effect)]);
        v
    };
    let p = everywhere();
    let dedicated = tainted("dedicated", TaintEffect::NoSchedule);
    assert_eq!(silence(&dedicated, &c, &p, t(NOW)), None, "not tolerated");
    assert!(
        silence(
            &tainted("dedicated", TaintEffect::PreferNoSchedule),
            &c,
            &p,
            t(NOW)
        )
        .is_some()
    );
    // The DaemonSet controller tolerates these for every daemon pod.
    for key in [
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/not-ready",
    ] {
        let effect = if key.ends_with("not-ready") {
            TaintEffect::NoExecute
        } else {
            TaintEffect::NoSchedule
        };
        assert!(
            silence(&tainted(key, effect), &c, &p, t(NOW)).is_some(),
            "{key}"
        );
    }
    let tolerant = daemonset(json!({"containers": [], "tolerations": [{"operator": "Exists"}]}));
    assert!(silence(&dedicated, &c, &tolerant, t(NOW)).is_some());
    let by_key = daemonset(
        json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    assert!(silence(&dedicated, &c, &by_key, t(NOW)).is_some());
    // Our own NoSchedule problem taint does not take a running detector away.
    let mut ours = cfg();
    ours.remedy.taints = vec!["nodemedic.io/problem:NoSchedule".parse().unwrap()];
    let problem = tainted("nodemedic.io/problem", TaintEffect::NoSchedule);
    assert!(silence(&problem, &ours, &p, t(NOW)).is_some());
}

#[test]
fn kosmos_leaf_nodes_are_never_silent() {
    let c = cfg();
    let mut v = node("leaf", Some(NOW - 7200));
    v.labels = [("pool", "a"), ("kosmos.io/node", "true")]
        .into_iter()
        .collect();
    assert_eq!(silence(&v, &c, &everywhere(), t(NOW)), None);
}

#[test]
fn detector_silent_is_a_problem_condition_from_when_it_was_declared() {
    let mut c = cfg();
    c.conditions
        .push("DetectorSilent=True,30m".parse().unwrap());
    let v = node("n", Some(NOW - 3600));
    // Declared silent 20 minutes ago: pending, 10 minutes left.
    let p = problem(&v, Some(t(NOW - 20 * MIN)), None, &c, t(NOW));
    assert!(p.held.is_empty());
    assert_eq!(p.pending.len(), 1, "{:?}", p.pending);
    assert!(p.pending[0].0.starts_with("DetectorSilent=True"));
    assert_eq!(p.pending[0].1, Duration::from_secs(600));
    let p = problem(&v, Some(t(NOW - 31 * MIN)), None, &c, t(NOW));
    assert_eq!(p.held.len(), 1);
    assert!(
        p.held[0].starts_with("DetectorSilent=True for 31m"),
        "{:?}",
        p.held
    );
    // Heard: no such condition.
    let p = problem(&v, None, None, &c, t(NOW));
    assert!(p.held.is_empty() && p.pending.is_empty());
}

fn fleet(c: Config, views: &[NodeView]) -> Fleet {
    let mut f = Fleet::new(Arc::new(c));
    for v in views {
        f.observe(Arc::new(v.clone()), t(NOW));
    }
    f.set_placement(everywhere());
    f
}

/// The views the controller would hand over for the fleet's selected nodes: the fleet's own, but
/// for those in `newer` (the cache's, which heartbeats the fleet never sees may have refreshed).
fn latest(f: &Fleet, newer: &[NodeView]) -> Vec<Arc<NodeView>> {
    f.selected_names()
        .map(|n| match newer.iter().find(|v| v.name == *n) {
            Some(v) => Arc::new(v.clone()),
            None => f.view(n).unwrap().clone(),
        })
        .collect()
}

/// Which of the watchdog's reports a test expects.
#[derive(Debug, PartialEq)]
enum Said {
    Silent,
    Heard,
}

/// The nodes the fleet reported since the last take, all of them of the kind `said`.
fn reported(f: &mut Fleet, said: Said) -> Vec<String> {
    f.take_events()
        .into_iter()
        .map(|e| match e {
            FleetEvent::DetectorSilent { node, .. } if said == Said::Silent => node,
            FleetEvent::DetectorHeard { node, .. } if said == Said::Heard => node,
            other => panic!("only {said:?} reports: {other:?}"),
        })
        .collect()
}

#[test]
fn the_fleet_reports_each_silence_once_and_the_detector_heard_again() {
    let mut c = cfg();
    c.selector = crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'").unwrap();
    let mut other = node("other-pool", Some(NOW - 7200));
    other.labels = [("pool", "b")].into_iter().collect();
    let mut f = fleet(
        c,
        &[
            node("quiet", Some(NOW - 7200)),
            node("fine", Some(NOW - 10)),
            other,
        ],
    );
    f.watch_detectors(&latest(&f, &[]), t(NOW));
    let events = f.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(&events[0], FleetEvent::DetectorSilent { node, silence } if node == "quiet" && silence.last_heard == t(NOW - 7200))
    );
    assert_eq!(f.silent_count(), 1);
    // Still silent a resync later: nothing new.
    f.watch_detectors(&latest(&f, &[]), t(NOW + MIN));
    assert_eq!(f.take_events(), vec![]);
    // Heard again: a heartbeat the cache holds and the fleet never saw.
    let heard = node("quiet", Some(NOW + 90));
    f.watch_detectors(&latest(&f, &[heard]), t(NOW + 2 * MIN));
    let events = f.take_events();
    assert!(
        matches!(&events[..], [FleetEvent::DetectorHeard { node, silent_for }]
        if node == "quiet" && *silent_for == Duration::from_secs((7200 - 900 + 120) as u64)),
        "{events:?}"
    );
    assert_eq!(f.silent_count(), 0);
    assert_eq!(f.silence("quiet"), None);
    // Silent again: a new episode, reported again (and "fine", last heard at NOW - 10, by now too).
    f.observe(Arc::new(node("quiet", Some(NOW + 90))), t(NOW + 2 * MIN));
    f.watch_detectors(&latest(&f, &[]), t(NOW + 90 + 16 * MIN));
    assert_eq!(reported(&mut f, Said::Silent), ["fine", "quiet"]);
}

#[test]
fn a_fleet_wide_silence_and_some_detectors_heard_again_report_exactly_those() {
    // The DaemonSet down everywhere, then back on every third node: the ones heard again are
    // reported once each, in name order, and the rest stay silent.
    let names: Vec<String> = (0..3000).map(|i| format!("n-{i:05}")).collect();
    let views: Vec<NodeView> = names.iter().map(|n| node(n, Some(NOW - 7200))).collect();
    let mut f = fleet(cfg(), &views);
    f.watch_detectors(&latest(&f, &[]), t(NOW));
    assert_eq!(f.take_events().len(), 3000);
    let back: Vec<NodeView> = names
        .iter()
        .step_by(3)
        .map(|n| node(n, Some(NOW + 90)))
        .collect();
    f.watch_detectors(&latest(&f, &back), t(NOW + 2 * MIN));
    let expected: Vec<String> = names.iter().step_by(3).cloned().collect();
    assert_eq!(reported(&mut f, Said::Heard), expected);
    assert_eq!(f.silent_count(), 2000);
    assert!(f.silence("n-00001").is_some() && f.silence("n-00000").is_none());
}

#[test]
fn a_silent_node_is_cordoned_when_detector_silent_is_a_configured_condition() {
    let mut c = cfg();
    c.conditions
        .push("DetectorSilent=True,30m".parse().unwrap());
    let mut f = fleet(c, &[node("quiet", Some(NOW - 3600))]);
    // Declared at NOW - 45m: held 45m > 30m.
    f.watch_detectors(&latest(&f, &[]), t(NOW));
    let decisions = f.round(t(NOW));
    let (d, _) = &decisions[0];
    assert_eq!(d.action(), crate::decide::Action::Cordon, "{d:?}");
    assert!(d.reason().contains("DetectorSilent=True"), "{}", d.reason());
}
