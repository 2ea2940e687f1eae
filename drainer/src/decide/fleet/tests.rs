//! The incremental rounds against the full plan: after any sequence of changes and writes, what
//! the fleet decides for the nodes it looks at is what `decide_nodes` decides for them.

use super::*;
use crate::config::Budget;
use crate::decide::{Action, Effect, decide_nodes};
use crate::decide::{NodeDecision, Why};
use crate::model::node::Condition;
use crate::model::pod::PodInfo;
use nodemedic_common::status::Status;
use std::collections::HashMap;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn cfg(max_cordoned: usize) -> Arc<Config> {
    Arc::new(Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        max_cordoned: Budget::Count(max_cordoned),
        max_drains_in_flight: 1,
        drain_buffer: Duration::from_secs(60),
        selector: crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'").unwrap(),
        ..Default::default()
    })
}

fn view(name: &str, pool: &str, bad_since: Option<i64>) -> NodeView {
    NodeView {
        name: name.into(),
        resource_version: "1".into(),
        labels: [("pool", pool)].into_iter().collect(),
        conditions: Box::new([Condition {
            type_: "KernelDeadlock".into(),
            status: if bad_since.is_some() {
                Status::True
            } else {
                Status::False
            },
            reason: None,
            since: t(bad_since.unwrap_or(0)),
            heartbeat: 0,
        }]),
        ..Default::default()
    }
}

/// Apply what the controller would write for `d` to the fleet (as a write plus its watch event).
fn act(f: &mut Fleet, d: &NodeDecision, now: Timestamp) {
    match &d.effect {
        Effect::Cordon(r)
        | Effect::Release(r)
        | Effect::Probation(r)
        | Effect::Relapse(r)
        | Effect::Reboot(r)
        | Effect::Replace(r)
        | Effect::Escalate(r) => f.wrote(&d.node, Some(r), now),
        Effect::Uncordon(_) | Effect::Forget => f.wrote(&d.node, None, now),
        Effect::Drain(job) => {
            let r = job.record.draining(now);
            f.wrote(&d.node, Some(&r), now)
        }
        Effect::Nothing | Effect::DeleteNode => {}
    }
}

fn full(f: &Fleet, cfg: &Config, now: Timestamp) -> HashMap<String, (Action, String)> {
    let nodes: Vec<k8s_openapi::api::core::v1::Node> = f
        .nodes
        .values()
        .map(|e| {
            let v = &e.view;
            let mut n = k8s_openapi::api::core::v1::Node::default();
            n.metadata.name = Some(v.name.to_string());
            n.metadata.labels = Some(v.labels.to_btree());
            n.metadata.annotations = Some(v.annotations.to_btree());
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
                unschedulable: Some(v.unschedulable),
                ..Default::default()
            });
            n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
                conditions: Some(
                    v.conditions
                        .iter()
                        .map(|c| k8s_openapi::api::core::v1::NodeCondition {
                            type_: c.type_.to_string(),
                            status: c.status.to_string(),
                            last_transition_time: Some(
                                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(c.since),
                            ),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            });
            n
        })
        .collect();
    decide_nodes(&nodes, &[] as &[PodInfo], cfg, now)
        .into_iter()
        .map(|d| (d.node.to_string(), (d.action(), d.reason())))
        .collect()
}

#[test]
fn incremental_rounds_agree_with_the_full_plan() {
    let c = cfg(3);
    let mut f = Fleet::new(c.clone());
    let mut now = t(0);
    // 20 nodes, half selected; problems start over time and clear again.
    for i in 0..20 {
        let pool = if i % 2 == 0 { "a" } else { "b" };
        f.observe(Arc::new(view(&format!("n{i:02}"), pool, None)), now);
    }
    let mut decided = 0;
    for step in 0..60i64 {
        now = t(step * 120);
        // Node (step * 7) % 20 changes state.
        let i = (step * 7 % 20) as usize;
        let name = format!("n{i:02}");
        let mut v = (**f.view(&name).unwrap()).clone();
        let bad = v.conditions[0].status == Status::False;
        v.conditions[0] = Condition {
            type_: "KernelDeadlock".into(),
            status: if bad { Status::True } else { Status::False },
            reason: None,
            since: now,
            heartbeat: 0,
        };
        v.resource_version = format!("{step}").as_str().into();
        f.observe(Arc::new(v), now);
        let expected = full(&f, &c, now);
        let decisions = f.round(now);
        decided += decisions.len();
        for (d, _) in &decisions {
            assert_eq!(
                (d.action(), d.reason()),
                expected[d.node.as_str()],
                "step {step}: {}",
                d.node
            );
        }
        for (d, _) in &decisions {
            act(&mut f, d, now);
        }
        // The running totals are what a count over all nodes says.
        let all = Totals::of(f.nodes.values().map(|e| {
            (
                e.selected,
                e.record
                    .as_deref()
                    .filter(|r| r.owned_by(&c.owner, e.selected)),
            )
        }));
        assert_eq!(f.totals(), all, "step {step}");
        assert!(f.totals().cordoned <= 3, "the budget holds");
    }
    assert!(
        decided < 60 * 20 / 3,
        "rounds decide what changed, not every node: {decided}"
    );
}

#[test]
fn a_reconfigured_fleet_decides_every_node_again_with_the_new_settings() {
    let mut f = Fleet::new(cfg(1));
    let now = t(10_000);
    for (i, pool) in ["a", "a", "b", "b"].iter().enumerate() {
        f.observe(Arc::new(view(&format!("n{i}"), pool, Some(0))), now);
    }
    let first = f.round(now);
    let cordoned: Vec<String> = first
        .iter()
        .filter(|(d, _)| matches!(d.effect, Effect::Cordon(_)))
        .map(|(d, _)| d.node.to_string())
        .collect();
    assert_eq!(cordoned.len(), 1, "a budget of one");
    for (d, _) in &first {
        act(&mut f, d, now);
    }
    // The new settings select both pools and allow three cordons.
    let new = Arc::new(Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        max_cordoned: Budget::Count(3),
        max_drains_in_flight: 1,
        drain_buffer: Duration::from_secs(60),
        selector: crate::config::select::Selector::cel("metadata.labels['pool'] in ['a', 'b']")
            .unwrap(),
        ..Default::default()
    });
    assert!(f.reconfigure(new.clone()).is_empty());
    assert_eq!(f.pending(), 4, "every node is decided again");
    let expected = full(&f, &new, now);
    let second = f.round(now);
    assert_eq!(second.len(), 4);
    for (d, _) in &second {
        assert_eq!(
            (d.action(), d.reason()),
            expected[d.node.as_str()],
            "{}",
            d.node
        );
    }
    let cordons: Vec<&str> = second
        .iter()
        .filter(|(d, _)| matches!(d.effect, Effect::Cordon(_)))
        .map(|(d, _)| d.node.as_str())
        .collect();
    assert_eq!(
        cordons.len(),
        2,
        "two more within the new budget: {cordons:?}"
    );
    assert!(
        !cordons.contains(&cordoned[0].as_str()),
        "the cordon written before the reload (not yet seen by the watch) is not repeated"
    );
    for (d, _) in &second {
        act(&mut f, d, now);
    }
    assert_eq!(f.totals().selected, 4);
    assert_eq!(f.totals().cordoned, 3);
}

fn zoned(name: &str, zone: &str, bad_since: Option<i64>) -> NodeView {
    let mut v = view(name, "a", bad_since);
    v.labels = [("pool", "a"), ("topology.kubernetes.io/zone", zone)]
        .into_iter()
        .collect();
    v
}

fn safe_cfg(edit: impl FnOnce(&mut Config)) -> Arc<Config> {
    let mut c = Config {
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        max_cordoned: Budget::Count(100),
        max_drains_in_flight: 10,
        drain_buffer: Duration::from_secs(60),
        selector: crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'").unwrap(),
        ..Default::default()
    };
    edit(&mut c);
    Arc::new(c)
}

fn whys(d: &[(NodeDecision, Arc<NodeView>)]) -> Vec<(String, Action, String)> {
    let mut out: Vec<(String, Action, String)> = d
        .iter()
        .map(|(d, _)| (d.node.to_string(), d.action(), d.reason()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn the_next_wake_is_never_in_the_past_while_the_breaker_is_open() {
    // Problems that started long before the breaker window must not make the controller wake
    // at once, round after round (it spun at 400 rounds a second before).
    let mut f = Fleet::new(safe_cfg(|_| {}));
    let now = t(100_000);
    for i in 0..6 {
        let bad = (i < 4).then_some(0);
        f.observe(Arc::new(zoned(&format!("n{i}"), "z", bad)), now);
    }
    f.round(now);
    assert!(f.breaker().is_open());
    assert!(f.next_wake().is_none_or(|w| w > now), "{:?}", f.next_wake());
    // Starts within the window wake the fleet when they leave it.
    let mut g = Fleet::new(safe_cfg(|_| {}));
    for i in 0..6 {
        let bad = (i < 4).then_some(99_900);
        g.observe(Arc::new(zoned(&format!("n{i}"), "z", bad)), now);
    }
    g.round(now);
    assert_eq!(g.next_wake(), Some(t(99_900 + 300)));
}

#[test]
fn a_pause_holds_everything_and_lifting_it_decides_the_held_nodes_again() {
    let mut f = Fleet::new(safe_cfg(|_| {}));
    let now = t(10_000);
    for i in 0..10 {
        let bad = (i == 3).then_some(0);
        f.observe(
            Arc::new(zoned(&format!("n{i}"), &format!("z{}", i % 5), bad)),
            now,
        );
    }
    f.set_pause(Some(Pause {
        by: "kubectl-annotate".into(),
        since: Some(t(9_000)),
        reason: "rollout".into(),
    }));
    let d = f.round(now);
    let held: Vec<_> = whys(&d)
        .into_iter()
        .filter(|w| w.1 == Action::Hold)
        .collect();
    assert_eq!(held.len(), 1);
    assert!(
        held[0].2.starts_with("paused by kubectl-annotate since"),
        "{held:?}"
    );
    assert_eq!(f.held(), 1);
    // Nothing changed: the held node is not decided again.
    assert!(f.round(now).is_empty());
    f.set_pause(None);
    let d = f.round(now);
    assert_eq!(
        d.len(),
        1,
        "the held node, decided again when the gate lifts"
    );
    assert!(matches!(d[0].0.effect, Effect::Cordon(_)));
}

#[test]
fn a_domain_budget_and_an_outage_act_per_domain() {
    let mut f = Fleet::new(safe_cfg(|c| {
        c.safety = crate::config::safety::Safety {
            max_cordoned_per_domain: Some(Budget::Count(1)),
            ..crate::config::safety::Safety::off()
        };
        c.safety.domain_outage_percent = 50.0;
    }));
    let now = t(10_000);
    // z0: 4 nodes, 3 bad (an outage); z1: 4 nodes, 2 bad (budget of one); z2: healthy.
    let bad_in = |zone: usize, i: usize| match zone {
        0 => i < 3,
        1 => i < 2,
        _ => false,
    };
    for zone in 0..3 {
        for i in 0..4 {
            let bad = bad_in(zone, i).then_some(0);
            f.observe(
                Arc::new(zoned(&format!("z{zone}-n{i}"), &format!("z{zone}"), bad)),
                now,
            );
        }
    }
    let d = f.round(now);
    let events = f.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(&events[0], FleetEvent::OutageStarted(o) if o.domain == "z0" && o.unhealthy == 3 && o.size == 4)
    );
    let w = whys(&d);
    let of = |n: &str| w.iter().find(|x| x.0 == n).unwrap().clone();
    for n in ["z0-n0", "z0-n1", "z0-n2"] {
        assert_eq!(of(n).1, Action::Hold);
        assert!(
            of(n)
                .2
                .starts_with("outage in z0: 3 of 4 nodes unhealthy > 50%"),
            "{:?}",
            of(n)
        );
    }
    assert_eq!(of("z1-n0").1, Action::Cordon);
    assert_eq!(of("z1-n1").1, Action::Wait);
    assert!(
        of("z1-n1")
            .2
            .starts_with("cordon budget of z1 full: 1 of 1"),
        "{:?}",
        of("z1-n1")
    );
    // The outage ends when nodes recover: its held nodes are decided again.
    for (n, i) in [("z0-n1", 1), ("z0-n2", 2)] {
        let mut v = zoned(n, "z0", None);
        v.resource_version = format!("r{i}").as_str().into();
        f.observe(Arc::new(v), now);
    }
    let d = f.round(now);
    assert_eq!(
        f.take_events(),
        vec![FleetEvent::OutageEnded {
            domain: "z0".into()
        }]
    );
    assert!(
        d.iter()
            .any(|(d, _)| d.node == "z0-n0" && matches!(d.effect, Effect::Cordon(_))),
        "{:?}",
        whys(&d)
    );
}

#[test]
fn outside_the_drain_windows_a_node_is_cordoned_and_its_drain_waits_for_the_next() {
    let mut f = Fleet::new(safe_cfg(|c| {
        c.safety = crate::config::safety::Safety::off();
        c.drain_buffer = Duration::ZERO;
        // t(0) is 2027-01-15T08:00:00Z, a Friday.
        c.safety.drain_windows = vec!["Sat 10:00-12:00 UTC".parse().unwrap()];
    }));
    let now = t(0);
    f.observe(Arc::new(zoned("n1", "z", Some(-3600))), now);
    let d = f.round(now);
    assert!(
        matches!(d[0].0.effect, Effect::Cordon(_)),
        "cordons happen at once"
    );
    for (d, _) in &d {
        act(&mut f, d, now);
    }
    let d = f.round(now);
    assert_eq!(d[0].0.action(), Action::Wait);
    assert!(
        d[0].0.reason().starts_with(
            "cordoned; drains start inside the drain windows, next at 2027-01-16T10:00:00Z"
        ),
        "{}",
        d[0].0.reason()
    );
    assert_eq!(d[0].0.wake, Some("2027-01-16T10:00:00Z".parse().unwrap()));
    let d = f.round("2027-01-16T10:00:00Z".parse().unwrap());
    assert_eq!(d[0].0.action(), Action::Drain, "inside the window");
}

#[test]
fn until_every_pod_is_listed_a_node_is_cordoned_and_its_drain_waits_without_a_slot() {
    let mut f = Fleet::new(safe_cfg(|c| {
        c.safety = crate::config::safety::Safety::off();
        c.drain_buffer = Duration::ZERO;
        c.max_drains_in_flight = 1;
    }));
    f.set_pods_listed(false);
    let now = t(0);
    f.observe(Arc::new(zoned("n1", "z", Some(-3600))), now);
    f.observe(Arc::new(zoned("n2", "z", Some(-3600))), now);
    let d = f.round(now);
    assert!(
        d.iter().all(|(d, _)| matches!(d.effect, Effect::Cordon(_))),
        "cordons need no pods: {:?}",
        whys(&d)
    );
    for (d, _) in &d {
        act(&mut f, d, now);
    }
    let d = f.round(now);
    for (d, _) in &d {
        assert_eq!(d.action(), Action::Hold, "{}", d.reason());
        assert!(
            matches!(d.why, Why::PodsNotListed { what: "the drain" }),
            "{}",
            d.reason()
        );
        assert_eq!(
            d.reason(),
            "the drain waits until every pod is listed (the drainer just started)"
        );
    }
    // Listed: the held nodes are decided again, one drain (the budget) starts: the waits took no
    // slot.
    f.set_pods_listed(true);
    let d = f.round(now);
    let drains = d
        .iter()
        .filter(|(d, _)| d.action() == Action::Drain)
        .count();
    assert_eq!(drains, 1, "{:?}", whys(&d));
}

#[test]
fn a_heartbeat_decides_nothing_and_a_late_event_does_not_undo_a_write() {
    let mut f = Fleet::new(cfg(1));
    let now = t(10_000);
    f.observe(Arc::new(view("n1", "a", Some(0))), now);
    let d = f.round(now);
    assert_eq!(d[0].0.action(), Action::Cordon);
    act(&mut f, &d[0].0, now);
    assert_eq!(f.totals().cordoned, 1, "counted before the watch shows it");
    // A heartbeat that predates our write arrives: still cordoned for us, nothing to decide.
    let mut late = view("n1", "a", Some(0));
    late.resource_version = "2".into();
    f.observe(Arc::new(late), now);
    assert_eq!(f.totals().cordoned, 1);
    let d = f.round(now);
    assert!(d.iter().all(|(d, _)| d.action() != Action::Cordon), "{d:?}");
    // Another node waits for the budget and is decided each round until a slot frees.
    f.observe(Arc::new(view("n2", "a", Some(0))), now);
    let d = f.round(now);
    assert!(matches!(d[0].0.why, Why::CordonBudget { .. }));
    let d = f.round(now);
    assert_eq!(d.len(), 1, "the waiting node is decided again");
}

#[test]
fn a_pending_condition_wakes_its_node_when_the_min_duration_is_reached() {
    let mut f = Fleet::new(cfg(5));
    let start = t(0);
    f.observe(Arc::new(view("n1", "a", Some(0))), start);
    let d = f.round(start);
    assert_eq!(d[0].0.action(), Action::Wait);
    assert_eq!(f.next_wake(), Some(t(600)));
    assert!(f.round(t(599)).is_empty());
    let d = f.round(t(600));
    assert_eq!(d[0].0.action(), Action::Cordon);
}

#[test]
fn a_round_decides_with_the_pods_last_handed_over_and_a_change_of_them_decides_again() {
    let mut f = Fleet::new(cfg(5));
    let now = t(10_000);
    let pod = |name: &str| {
        let p = crate::decide::tests::pod(name, "n1", serde_json::json!({}));
        Arc::new(PodInfo::from_pod(&p, None))
    };
    f.observe(Arc::new(view("n1", "a", None)), now);
    f.pods("n1", Arc::new(vec![pod("p1")]));
    f.pods("gone", Arc::new(vec![pod("p9")]));
    let d = f.round(now);
    assert_eq!(
        d.len(),
        1,
        "a node the fleet does not hold is not decided: {d:?}"
    );
    assert!(f.round(now).is_empty(), "nothing changed");
    // The node's state changes: it is decided with the pods it has, not none.
    f.observe(Arc::new(view("n1", "a", Some(0))), now);
    f.pods("n1", Arc::new(vec![pod("p1"), pod("p2")]));
    let d = f.round(nodemedic_common::time::add(now, Duration::from_secs(600)));
    let planned: Vec<&str> = d[0].0.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(planned, ["p1", "p2"], "{:?}", d[0].0);
    // Only its pods change: decided again.
    f.pods("n1", Arc::new(vec![pod("p2")]));
    assert_eq!(f.round(now).len(), 1);
    // A reload decides every node again, with the pods they have.
    f.reconfigure(cfg(5));
    let d = f.round(nodemedic_common::time::add(now, Duration::from_secs(600)));
    let planned: Vec<&str> = d[0].0.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(planned, ["p2"], "{:?}", d[0].0);
}

#[test]
fn the_periodic_resync_decides_again_only_the_nodes_not_at_rest() {
    let mut f = Fleet::new(cfg(5));
    let now = t(10_000);
    for i in 0..10 {
        let pool = if i % 2 == 0 { "a" } else { "b" };
        f.observe(Arc::new(view(&format!("n{i}"), pool, None)), now);
    }
    f.observe(Arc::new(view("bad", "a", Some(0))), now);
    f.observe(Arc::new(view("new", "a", Some(9_900))), now);
    let d = f.round(now);
    assert_eq!(d.len(), 12);
    for (d, _) in &d {
        act(&mut f, d, now);
    }
    // The cordon's overlay is a change: decided once more, then settled.
    let d = f.round(now);
    assert_eq!(whys(&d).len(), 1, "{:?}", whys(&d));
    assert!(f.round(now).is_empty());

    f.touch_restless();
    let d = f.round(now);
    let mut names: Vec<&str> = d.iter().map(|(d, _)| d.node.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["bad", "new"],
        "healthy and unselected nodes are at rest"
    );
    // A relist decides every node again.
    f.touch_all();
    assert_eq!(f.round(now).len(), 12);
    // A node at rest whose view changes is decided at once, and leaves the rest.
    f.observe(Arc::new(view("n0", "a", Some(0))), now);
    let d = f.round(now);
    assert_eq!(d[0].0.node, "n0");
    f.touch_restless();
    let d = f.round(now);
    assert!(d.iter().any(|(d, _)| d.node == "n0"), "{:?}", whys(&d));
}

/// `v` carrying `record` as the drainer seals it (as the watch would show it).
fn with_record(v: &NodeView, record: &Record, cfg: &Config) -> Arc<NodeView> {
    let mut v = v.clone();
    v.resource_version = "2".into();
    v.annotations = v.annotations.with(
        DRAIN_RECORD_ANNOTATION,
        Some(&record.to_annotation(&cfg.records)),
    );
    Arc::new(v)
}

/// A fleet, node `n`'s view, and the first record this drainer decided for it (at 100).
fn first_record() -> (Arc<Config>, Fleet, NodeView, Record) {
    let c = cfg(5);
    let f = Fleet::new(c.clone());
    let base = view("n", "a", Some(0));
    let v1 = Record {
        owner: c.owner.clone(),
        ..Default::default()
    }
    .bound(&base, None, t(100));
    (c, f, base, v1)
}

#[test]
fn an_older_record_written_back_is_refused_once_and_counts_as_none() {
    let (c, mut f, base, v1) = first_record();
    let v2 = v1.draining(t(200));
    f.observe(with_record(&base, &v1, &c), t(100));
    f.observe(with_record(&base, &v2, &c), t(200));
    assert_eq!(f.nodes["n"].record.as_deref(), Some(&v2));
    assert!(f.take_rejected().is_empty(), "both are ours, in order");
    // v1 written back: refused, reported once however often it is seen.
    for _ in 0..3 {
        f.observe(with_record(&base, &v1, &c), t(300));
        let mut again = (*with_record(&base, &v1, &c)).clone();
        again.resource_version = "3".into();
        f.observe(Arc::new(again), t(300));
    }
    assert_eq!(f.nodes["n"].record, None);
    let rejected = f.take_rejected();
    assert!(
        matches!(&rejected[..], [(n, Rejection::Replayed { at, newest })] if n == "n" && *at == v1.at && *newest == v2.at),
        "{rejected:?}"
    );
    // Removed (the node released), then the last one written back: refused too.
    f.observe(Arc::new(base.clone()), t(400));
    f.observe(with_record(&base, &v2, &c), t(500));
    assert_eq!(f.nodes["n"].record, None);
    assert_eq!(f.take_rejected().len(), 1);
    // A record decided now follows the newest seen, so it is taken.
    let v3 = Record {
        owner: c.owner.clone(),
        ..Default::default()
    }
    .bound(&base, Some(v2.at), t(50));
    f.observe(with_record(&base, &v3, &c), t(600));
    assert_eq!(f.nodes["n"].record.as_deref(), Some(&v3));
}

#[test]
fn stale_views_before_our_write_shows_are_neither_refused_nor_decided_on() {
    let (c, mut f, base, v1) = first_record();
    f.observe(with_record(&base, &v1, &c), t(100));
    let v2 = v1.draining(t(200));
    f.wrote("n", Some(&v2), t(200));
    // A heartbeat from before the write arrives after it: our write stays laid over it.
    let mut stale = (*with_record(&base, &v1, &c)).clone();
    stale.resource_version = "3".into();
    stale.conditions[0].heartbeat = 7;
    f.observe(Arc::new(stale), t(201));
    assert_eq!(f.nodes["n"].record.as_deref(), Some(&v2));
    assert!(f.take_rejected().is_empty());
}

#[test]
fn a_new_leader_with_the_memory_refuses_a_replay_written_while_none_ran() {
    let (c, mut f, base, v1) = first_record();
    let v2 = v1.draining(t(200));
    f.observe(with_record(&base, &v1, &c), t(100));
    f.observe(with_record(&base, &v2, &c), t(200));
    let (dirty, memory) = f.memory_changed(t(300)).unwrap();
    assert_eq!(dirty, 1 << seen::shard_of("n"), "the node's shard alone");
    let kept: Vec<String> = (0..seen::SHARDS).map(|i| memory.shard_text(i)).collect();
    assert!(
        f.memory_changed(t(301)).is_none(),
        "handed out once until it changes"
    );
    // A new leader's fleet, which first sees the node with v1 written back.
    let mut next = Fleet::new(c.clone());
    let (back, bad) =
        seen::Seen::from_shards(kept.iter().enumerate().map(|(i, t)| (i, Some(t.as_str()))));
    assert!(bad.is_empty());
    next.restore_seen(back);
    next.observe(with_record(&base, &v1, &c), t(400));
    assert_eq!(next.nodes["n"].record, None);
    assert!(matches!(
        &next.take_rejected()[..],
        [(_, Rejection::Replayed { .. })]
    ));
    // Without the memory it would have been taken.
    let mut blank = Fleet::new(c.clone());
    blank.observe(with_record(&base, &v1, &c), t(400));
    assert_eq!(blank.nodes["n"].record.as_deref(), Some(&v1));
}

/// A node's selection is evaluated again when a field its selector reads changes, not otherwise. A
/// selector that fails on every evaluation shows each evaluation as an error.
#[test]
fn selection_is_evaluated_again_only_when_a_field_it_reads_changes() {
    let cfg = Arc::new(Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
        selector: crate::config::select::Selector::cel("int(metadata.labels['pool']) > 0").unwrap(),
        ..Default::default()
    });
    let mut f = Fleet::new(cfg);
    let now = t(0);
    let first = view("n1", "a", None);
    assert!(
        f.observe(Arc::new(first.clone()), now).is_some(),
        "evaluated at first sight"
    );
    // A condition changes (a state change, decided again), an annotation too: the selector reads
    // neither.
    let bad = view("n1", "a", Some(5));
    assert!(
        f.observe(Arc::new(bad.clone()), now).is_none(),
        "a condition: not evaluated"
    );
    let mut annotated = bad.clone();
    annotated.annotations = [("x", "1")].into_iter().collect();
    assert!(
        f.observe(Arc::new(annotated.clone()), now).is_none(),
        "an annotation: not evaluated"
    );
    assert!(!f.nodes["n1"].selected);
    // A label it does not name is added, then changes: not evaluated.
    let mut other = annotated.clone();
    for zone in ["1", "2"] {
        other.labels = [("pool", "a"), ("zone", zone)].into_iter().collect();
        assert!(
            f.observe(Arc::new(other.clone()), now).is_none(),
            "a label it does not name: not evaluated"
        );
    }
    // The label it reads changes: evaluated again (and fails again).
    let relabelled = NodeView {
        labels: [("pool", "b"), ("zone", "2")].into_iter().collect(),
        ..annotated
    };
    assert!(
        f.observe(Arc::new(relabelled), now).is_some(),
        "a label it reads: evaluated"
    );
}

/// A kept selection is the one an evaluation would give: under churn of fields the selector does
/// not read, a selected node stays selected and an unselected one unselected.
#[test]
fn a_kept_selection_is_the_evaluated_one() {
    let mut f = Fleet::new(cfg(1));
    let now = t(0);
    f.observe(Arc::new(view("a1", "a", None)), now);
    f.observe(Arc::new(view("b1", "b", None)), now);
    for s in 1..4 {
        f.observe(Arc::new(view("a1", "a", Some(s))), now);
        f.observe(Arc::new(view("b1", "b", Some(s))), now);
        assert!(f.nodes["a1"].selected && !f.nodes["b1"].selected);
    }
    f.observe(Arc::new(view("b1", "a", Some(9))), now);
    assert!(f.nodes["b1"].selected, "relabelled into the pool");
}

#[test]
fn a_nodes_failure_domain_is_the_one_it_had_when_first_seen() {
    use crate::model::node::Uid;
    let mut f = Fleet::new(cfg(5));
    let now = t(10_000);
    let zone = |z: Option<&str>, bad: Option<i64>, uid: &str| {
        let mut v = view("n1", "a", bad);
        v.uid = Uid::parse(uid);
        v.labels = [("pool", "a")].into_iter().collect();
        if let Some(z) = z {
            v.labels = [("pool", "a"), ("topology.kubernetes.io/zone", z)]
                .into_iter()
                .collect();
        }
        Arc::new(v)
    };
    let (first, again) = (
        "00000000-0000-0000-0000-000000000001",
        "00000000-0000-0000-0000-000000000002",
    );
    let domain = |f: &Fleet| f.nodes["n1"].domain.as_ref().map(|d| d.to_string());
    f.observe(zone(Some("z1"), None, first), now);
    assert_eq!(domain(&f).as_deref(), Some("z1"));
    // A condition changes (the labels as they were): the same domain, nothing said.
    f.observe(zone(Some("z1"), Some(0), first), now);
    assert_eq!(domain(&f).as_deref(), Some("z1"));
    assert_eq!(f.nodes["n1"].unhealthy, Some(t(0)), "follows the condition");
    assert!(f.take_events().is_empty());
    // The node sets another zone on itself: kept in z1, and said once.
    f.observe(zone(Some("z2"), Some(0), first), now);
    assert_eq!(domain(&f).as_deref(), Some("z1"));
    assert_eq!(
        f.take_events(),
        vec![FleetEvent::DomainKept {
            node: "n1".into(),
            kept: Some("z1".into()),
            labels_say: Some("z2".into()),
        }]
    );
    f.observe(zone(Some("z2"), None, first), now);
    assert!(f.take_events().is_empty(), "said once per change");
    // Dropping the label moves it nowhere either.
    f.observe(zone(None, None, first), now);
    assert_eq!(domain(&f).as_deref(), Some("z1"));
    assert_eq!(f.take_events().len(), 1);
    // A Node made again (a new UID) is read afresh.
    f.observe(zone(Some("z3"), None, again), now);
    assert_eq!(domain(&f).as_deref(), Some("z3"));
    assert!(f.take_events().is_empty());
}

#[test]
fn healthy_nodes_relabelling_themselves_into_an_outage_do_not_end_it() {
    // The attack: z0 is partitioned (3 of 4 unhealthy, an outage: nothing in it drained). Nodes
    // that may set their own zone label move into z0 to bring its unhealthy share under the
    // threshold, so that the partitioned nodes are drained. They stay in their own domain.
    use crate::model::node::Uid;
    let mut f = Fleet::new(safe_cfg(|c| {
        c.safety = crate::config::safety::Safety::off();
        c.safety.domain_outage_percent = 50.0;
    }));
    let now = t(10_000);
    let node = |name: &str, zone: &str, bad: bool, i: u32| {
        let mut v = zoned(name, zone, bad.then_some(0));
        v.uid = Uid::parse(&format!("00000000-0000-0000-0000-{i:012}"));
        Arc::new(v)
    };
    for i in 0..4 {
        f.observe(node(&format!("z0-n{i}"), "z0", i < 3, i), now);
    }
    for i in 0..6 {
        f.observe(node(&format!("z1-n{i}"), "z1", false, 10 + i), now);
    }
    f.round(now);
    assert!(matches!(&f.take_events()[..], [FleetEvent::OutageStarted(o)] if o.domain == "z0"));
    for i in 0..6 {
        let mut v = (*node(&format!("z1-n{i}"), "z0", false, 10 + i)).clone();
        v.resource_version = "moved".into();
        f.observe(Arc::new(v), now);
    }
    let d = f.round(now);
    let events = f.take_events();
    assert_eq!(events.len(), 6, "each move said: {events:?}");
    assert!(
        events
            .iter()
            .all(|e| matches!(e, FleetEvent::DomainKept { .. }))
    );
    for (dec, _) in d.iter().filter(|(d, _)| d.node.starts_with("z0-")) {
        assert_eq!(dec.action(), Action::Hold, "{dec:?}");
    }
    assert!(
        !d.iter().any(|(d, _)| d.action() == Action::Cordon),
        "nothing in the partitioned domain cordoned: {:?}",
        whys(&d)
    );
}

#[test]
fn the_selected_nodes_attributes_are_counted_as_nodes_come_change_and_go() {
    // The common-cause watch compares a group with these counts instead of a pass over the fleet:
    // they must be what a pass would count.
    let mut f = Fleet::new(cfg(10));
    let now = t(0);
    let with = |name: &str, pool: &str, zone: &str| {
        let mut v = view(name, pool, None);
        v.labels = [("pool", pool), ("topology.kubernetes.io/zone", zone)]
            .into_iter()
            .collect();
        Arc::new(v)
    };
    f.observe(with("n1", "a", "z1"), now);
    f.observe(with("n2", "a", "z2"), now);
    f.observe(with("n3", "b", "z1"), now);
    f.observe(with("n2", "a", "z1"), now); // a label it compares changed
    f.observe(with("n3", "a", "z2"), now); // selected now
    f.observe(with("n1", "b", "z1"), now); // no longer selected
    f.remove("n2");
    let selected: Vec<NodeView> = (f.nodes.values())
        .filter(|e| e.selected)
        .map(|e| (*e.view).clone())
        .collect();
    assert_eq!(selected.len(), 1);
    let full = crate::decide::common_cause::AttributeCounts::of(selected.iter());
    assert!(format!("{full:?}").contains("\"z2\": 1"), "{full:?}");
    assert_eq!(f.running.attributes, full);
}

/// The selected nodes carrying a symptom condition we set are kept as views come and go: the
/// symptoms' writes look for clears among them, not among every node.
#[test]
fn the_nodes_carrying_our_symptom_conditions_are_kept_as_their_views_change() {
    let mut f = Fleet::new(cfg(1));
    let now = t(0);
    let symptom = |name: &str, pool: &str, status: Status, reason: &str| {
        let mut v = view(name, pool, None);
        let mut conditions = v.conditions.to_vec();
        conditions.push(Condition {
            type_: crate::decide::symptoms::PODS_NOT_STARTING.into(),
            status,
            reason: Some(reason.into()),
            since: t(0),
            heartbeat: 0,
        });
        v.conditions = conditions.into();
        Arc::new(v)
    };
    let marked = |f: &Fleet| {
        let mut names: Vec<String> = f.symptomatic().map(|n| n.to_string()).collect();
        names.sort();
        names
    };
    f.observe(symptom("n1", "a", Status::True, "PodsWaitingToStart"), now);
    f.observe(symptom("n2", "a", Status::False, "PodsStart"), now);
    f.observe(symptom("n3", "b", Status::True, "PodsWaitingToStart"), now);
    f.observe(symptom("n4", "a", Status::True, "SomeoneElses"), now);
    f.observe(Arc::new(view("n5", "a", None)), now);
    assert_eq!(
        marked(&f),
        ["n1"],
        "True with our reason, on a selected node"
    );
    f.observe(symptom("n2", "a", Status::True, "PodsWaitingToStart"), now);
    f.observe(symptom("n1", "a", Status::False, "PodsStart"), now);
    assert_eq!(marked(&f), ["n2"], "set on one, cleared on the other");
    f.observe(symptom("n2", "b", Status::True, "PodsWaitingToStart"), now);
    assert!(marked(&f).is_empty(), "a node leaving the selection leaves");
    f.observe(symptom("n4", "a", Status::True, "PodsWaitingToStart"), now);
    f.remove("n4");
    assert!(marked(&f).is_empty(), "a node gone leaves");
}

/// A change that leaves what the common-cause watch compares as it was (a condition, with the
/// labels decoded unchanged and so shared) keeps the counts without counting again; one of the
/// software alone, with the same labels, is counted again: the counts stay those of a full pass.
#[test]
fn the_attribute_counts_follow_a_change_of_software_alone_and_stay_over_a_condition_change() {
    use crate::decide::common_cause::AttributeCounts;
    use crate::model::node::node_info;
    let mut f = Fleet::new(cfg(10));
    let now = t(0);
    let software = |kernel: &str| node_info([kernel, "Ubuntu 24.04", "containerd://2.0", "v1.31"]);
    let mut n1 = view("n1", "a", None);
    n1.info = software("6.8.0-1");
    let mut n2 = view("n2", "a", None);
    n2.info = software("6.8.0-1");
    f.observe(Arc::new(n1.clone()), now);
    f.observe(Arc::new(n2), now);
    let full = |f: &Fleet| {
        let selected: Vec<NodeView> = (f.nodes.values())
            .filter(|e| e.selected)
            .map(|e| (*e.view).clone())
            .collect();
        AttributeCounts::of(selected.iter())
    };
    assert!(format!("{:?}", f.running.attributes).contains("\"6.8.0-1\": 2"));

    // The condition turns bad: the labels are the same map, the software the same.
    let mut bad = view("n1", "a", Some(0));
    bad.labels = n1.labels.clone();
    bad.info = n1.info.clone();
    assert!(bad.labels.shares(&n1.labels));
    f.observe(Arc::new(bad.clone()), now);
    assert_eq!(f.running.attributes, full(&f));

    // The kernel changes on the same labels (a reboot into a new one): counted again.
    let mut rebooted = bad.clone();
    rebooted.info = software("6.8.0-2");
    f.observe(Arc::new(rebooted), now);
    let counts = format!("{:?}", f.running.attributes);
    assert!(
        counts.contains("\"6.8.0-1\": 1") && counts.contains("\"6.8.0-2\": 1"),
        "{counts}"
    );
    assert_eq!(f.running.attributes, full(&f));
}

/// A reboot request stands only for a node the policy selects whose problem is set now (issue 76,
/// principle 1): a record of ours in phase `rebooting`, however authentic, asks no detector to
/// reboot a healthy node or one outside the selection, and the request goes when the node leaves.
#[test]
fn a_reboot_request_stands_only_for_a_selected_node_with_its_problem_now() {
    let c = cfg(5);
    let mut f = Fleet::new(c.clone());
    let rebooting = |v: &NodeView| {
        Record {
            owner: c.owner.clone(),
            phase: crate::model::record::Phase::Rebooting,
            step: Some(crate::model::ladder::Step::Reboot),
            step_at: Some(t(100)),
            step_until: Some(t(1300)),
            boot_id: "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b".into(),
            ..Default::default()
        }
        .bound(v, None, t(100))
    };
    for (name, pool, bad) in [
        ("bad-a", "a", Some(0)),
        ("healthy-a", "a", None),
        ("bad-b", "b", Some(0)),
    ] {
        let v = view(name, pool, bad);
        let r = rebooting(&v);
        f.observe(with_record(&v, &r, &c), t(100));
    }
    let requests = f.reboots_changed().expect("requests made");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["bad-a"],
        "only the selected node with its problem"
    );
    // The problem clears: its request goes with it.
    let v = view("bad-a", "a", None);
    let r = rebooting(&v);
    let mut healed = (*with_record(&v, &r, &c)).clone();
    healed.resource_version = "3".into();
    f.observe(Arc::new(healed), t(200));
    let requests = f.reboots_changed().expect("the request withdrawn");
    assert!(requests.is_empty(), "{requests:?}");
}

/// A step under way passes the gates and the slow start again while its request stands (issue 76,
/// principle 1): a record of ours, however authentic, keeps no request standing past a pause or
/// past its domain's width (the step that started first keeps its place), and a reboot withheld
/// past its deadline is not counted as failed (no power-cycle for a reboot never carried out): once
/// nothing holds it, it starts again as a new step does, one at a time.
#[test]
fn a_step_under_way_keeps_its_request_only_while_the_gates_and_the_slow_start_allow() {
    use crate::decide::ladder::LadderWhy;
    use crate::model::ladder::Step;
    const BOOT: &str = "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b";
    let c = Arc::new(Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec![
            "KernelDeadlock=True,10m: drain, reboot, power-cycle"
                .parse()
                .unwrap(),
        ],
        selector: crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'").unwrap(),
        ..Default::default()
    });
    let mut f = Fleet::new(c.clone());
    for (name, at) in [("first", 100), ("second", 110)] {
        let mut v = view(name, "a", Some(-1000));
        v.boot = crate::model::node::Uid::parse(BOOT);
        v.unschedulable = true;
        let r = Record {
            owner: c.owner.clone(),
            phase: crate::model::record::Phase::Rebooting,
            ladder: Some("drain, reboot, power-cycle".parse().unwrap()),
            step: Some(Step::Reboot),
            step_at: Some(t(at)),
            step_until: Some(t(at + 1200)),
            boot_id: BOOT.into(),
            cordoned: true,
            ..Default::default()
        }
        .bound(&v, None, t(at));
        f.observe(with_record(&v, &r, &c), t(at));
    }
    let held = |d: &[(NodeDecision, Arc<NodeView>)], name: &str| {
        d.iter().find(|(d, _)| d.node == name).map(|(d, _)| {
            assert!(
                matches!(d.why, Why::Ladder(LadderWhy::RequestHeld { .. }))
                    == (d.action() == Action::Hold),
                "{}",
                d.reason()
            );
            (d.action(), d.reason())
        })
    };
    let d = f.round(t(120));
    let (action, reason) = held(&d, "second").expect("decided");
    assert_eq!(action, Action::Hold, "{reason}");
    assert!(
        reason.contains("slow start") && reason.contains("1 started before it"),
        "{reason}"
    );
    assert_eq!(held(&d, "first").expect("decided").0, Action::Wait);
    let requests = f.reboots_changed().expect("requests made");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["first"],
        "the one with the place"
    );

    // A pause withdraws the request that stood.
    f.set_pause(Some(Pause {
        by: "kubectl-annotate".into(),
        since: Some(t(130)),
        reason: "incident".into(),
    }));
    let d = f.round(t(140));
    let (action, reason) = held(&d, "first").expect("a standing request is decided again");
    assert_eq!(action, Action::Hold, "{reason}");
    assert!(reason.contains("paused by kubectl-annotate"), "{reason}");
    let requests = f.reboots_changed().expect("the request withdrawn");
    assert!(requests.is_empty(), "{requests:?}");
    // Held past the deadline: still held, nothing written.
    let d = f.round(t(2000));
    assert!(
        d.iter().all(|(d, _)| d.action() == Action::Hold),
        "{:?}",
        whys(&d)
    );

    // The pause lifts past both deadlines: the first reboot starts again (not a power-cycle), the
    // second still waits for its place.
    f.set_pause(None);
    let d = f.round(t(2010));
    let again = d.iter().find(|(d, _)| d.node == "first").expect("decided");
    assert_eq!(again.0.action(), Action::Reboot, "{}", again.0.reason());
    let Effect::Reboot(r) = &again.0.effect else {
        unreachable!()
    };
    assert_eq!((r.step, r.step_at), (Some(Step::Reboot), Some(t(2010))));
    let cancelled = r.ended.last().expect("the withheld attempt kept");
    assert_eq!(cancelled.outcome, crate::model::attempt::Outcome::Withheld);
    assert_eq!(held(&d, "second").expect("decided").0, Action::Hold);
    act(&mut f, &again.0, t(2010));
    let requests = f.reboots_changed().expect("the new request");
    assert_eq!(
        requests["first"].requested,
        nodemedic_common::time::rfc3339(t(2010))
    );
    assert_eq!(requests.len(), 1, "{requests:?}");
    // The withheld reboot is not one of the day's: only the one started again counts, once the
    // watch shows its record.
    assert_eq!(f.records.seen.reboots_today("first", t(2020)), (1, 0));
    let mut shown = (*with_record(&again.1, r, &c)).clone();
    shown.resource_version = "5".into();
    f.observe(Arc::new(shown), t(2020));
    assert_eq!(f.records.seen.nodes["first"].reboots, [t(2010)]);
}
