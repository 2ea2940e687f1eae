//! The remediation ladder's decisions over a node in every state of it: reboot, its proof, its
//! deadline, replacement, a person at the end, and what stops it (veto, Kosmos, gates, limits).
//! Pure.

use k8s_openapi::api::core::v1::NodeSystemInfo;
use nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION;

use super::candidate::Candidate;
use super::counts::Totals;
use super::gates::Gates;
use super::ladder::{FENCE_TAINT, LadderWhy};
use super::tests::{N, NOW, cfg, node, one, t};
use super::*;
use crate::config::Config;
use crate::config::ladder::Step;
use crate::model::node::NodeView;
use crate::model::record::{Phase, Record};

pub(super) const BOOT_A: &str = "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b";
pub(super) const BOOT_B: &str = "7c1e2d3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5";

pub(super) fn ladder_cfg(steps: &str) -> Config {
    let mut c = cfg();
    c.conditions[0] = format!("KernelDeadlock=True,10m: {steps}").parse().unwrap();
    c
}

pub(super) fn booted(mut n: N, id: &str) -> N {
    n.0.status.get_or_insert_with(Default::default).node_info = Some(NodeSystemInfo {
        boot_id: id.into(),
        ..Default::default()
    });
    n
}

pub(super) fn record(phase: Phase) -> Record {
    Record {
        owner: crate::config::DEFAULT_OWNER.into(),
        episode: format!("KernelDeadlock=True@{}", t(0).as_second()),
        reason: "KernelDeadlock=True".into(),
        phase,
        cordoned_at: t(NOW - 3000),
        drain_at: t(NOW - 2400),
        finished_at: Some(t(NOW - 1800)),
        ..Default::default()
    }
}

/// A drained node of ours, its problem held since 0, booted as `boot`.
fn drained(boot: &str) -> N {
    booted(node("n"), boot)
        .cond("KernelDeadlock", "True", 0)
        .unschedulable()
        .record(record(Phase::Drained))
}

/// A node whose reboot was requested at `at` (boot A then), proof due 20 minutes later.
pub(super) fn rebooting(at: i64, ladder: &str) -> Record {
    let mut r = record(Phase::Rebooting);
    r.ladder = Some(ladder.parse().unwrap());
    r.step = Some(Step::Reboot);
    r.step_at = Some(t(at));
    r.step_until = Some(t(at + 1200));
    r.boot_id = BOOT_A.into();
    r.taints = vec![FENCE_TAINT.into()];
    r
}

/// `r` on a node as it stands, with the fence taint it says, booted `boot`, Ready, and with the
/// problem `held` (since 0) or cleared (at `NOW - 700`, past its 10m).
pub(super) fn on_node(r: Record, boot: &str, held: bool) -> N {
    let mut n = booted(node("n"), boot).unschedulable();
    n = if held {
        n.cond("KernelDeadlock", "True", 0)
    } else {
        n.cond("KernelDeadlock", "False", NOW - 700)
    };
    n = n.cond("Ready", "True", NOW - 600);
    if r.taints.iter().any(|t| t == FENCE_TAINT) {
        n = fenced(n);
    }
    n.record(r)
}

/// `n` with the fence taint on (as a reboot's or a restart's record puts it).
pub(super) fn fenced(mut n: N) -> N {
    let spec = n.0.spec.get_or_insert_with(Default::default);
    spec.taints
        .get_or_insert_with(Vec::new)
        .push(k8s_openapi::api::core::v1::Taint {
            key: "nodemedic.io/remediation".into(),
            value: Some("reboot".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    n
}

pub(super) fn ladder_why(d: &NodeDecision) -> &LadderWhy {
    match &d.why {
        Why::Ladder(w) => w,
        other => panic!("not a ladder decision: {other:?} ({})", d.reason()),
    }
}

#[test]
fn the_fence_taint_is_the_one_the_detector_checks() {
    use nodemedic_common::reboot::{FENCE_TAINT_EFFECT, FENCE_TAINT_KEY, FENCE_TAINT_VALUE};
    assert_eq!(
        FENCE_TAINT,
        format!("{FENCE_TAINT_KEY}={FENCE_TAINT_VALUE}:{FENCE_TAINT_EFFECT}")
    );
}

#[test]
fn a_drained_node_on_a_ladder_is_rebooted_with_the_fence_and_its_boot_recorded() {
    let d = one(drained(BOOT_A), &ladder_cfg("drain, reboot, replace"));
    assert_eq!(d.action(), Action::Reboot, "{}", d.reason());
    let Effect::Reboot(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(r.phase, Phase::Rebooting);
    assert_eq!(r.boot_id, BOOT_A);
    assert_eq!(r.step, Some(Step::Reboot));
    assert_eq!(r.step_at, Some(t(NOW)));
    assert_eq!(r.step_until, Some(t(NOW + 1200)), "--reboot-deadline 20m");
    assert_eq!(r.ladder.unwrap().to_string(), "drain, reboot, replace");
    assert!(r.taints.contains(&FENCE_TAINT.to_string()));
    assert!(d.reason().contains("rebooting it"), "{}", d.reason());
    // draino's form: drained, then it waits.
    let d = one(drained(BOOT_A), &cfg());
    assert!(matches!(d.why, Why::Drained { .. }), "{}", d.reason());
    assert_eq!(d.effect, Effect::Nothing);
}

#[test]
fn a_reboot_is_awaited_then_proven_by_a_new_boot_ready_and_the_problem_clear() {
    let c = ladder_cfg("drain, reboot, replace");
    let r = rebooting(NOW - 60, "drain, reboot, replace");
    // Not back yet.
    let d = one(on_node(r.clone(), BOOT_A, true), &c);
    assert_eq!(d.action(), Action::Wait);
    assert!(matches!(
        ladder_why(&d),
        LadderWhy::AwaitingReboot {
            booted: false,
            next: Some(Step::Replace),
            ..
        }
    ));
    // The problem cleared before any new boot: its request went with the problem, so nothing is
    // awaited and no next step comes; it recovers as any node (issue 76).
    let d = one(on_node(r.clone(), BOOT_A, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
    // Back with a new boot, the problem still held: awaited until the deadline.
    let d = one(on_node(r.clone(), BOOT_B, true), &c);
    assert!(matches!(
        ladder_why(&d),
        LadderWhy::AwaitingReboot { booted: true, .. }
    ));
    // Proven: uncordoned (no probation configured), the fence going with our hold.
    let d = one(on_node(r.clone(), BOOT_B, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
    assert_eq!(
        ladder_why(&d),
        &LadderWhy::RebootProven {
            probation_until: None
        }
    );
    // With a probation: it starts, without the fence, the step kept for a relapse.
    let mut c = c;
    c.remedy.uncordon_after = std::time::Duration::from_secs(1800);
    let d = one(on_node(r, BOOT_B, false), &c);
    let Effect::Probation(p) = &d.effect else {
        panic!("{d:?}")
    };
    assert!(!p.taints.contains(&FENCE_TAINT.to_string()));
    assert_eq!(p.step, Some(Step::Reboot));
    assert_eq!(
        ladder_why(&d),
        &LadderWhy::RebootProven {
            probation_until: Some(t(NOW + 1800))
        }
    );
}

#[test]
fn no_proof_by_the_deadline_goes_on_to_replace_or_to_a_person() {
    let late = NOW - 1300;
    // No new bootID: the next step, replace.
    let c = ladder_cfg("drain, reboot, replace");
    let d = one(
        on_node(rebooting(late, "drain, reboot, replace"), BOOT_A, true),
        &c,
    );
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    let Effect::Replace(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!((r.phase, r.step), (Phase::Replacing, Some(Step::Replace)));
    assert!(!r.taints.contains(&FENCE_TAINT.to_string()));
    // The problem survived the reboot: replace too.
    let d = one(
        on_node(rebooting(late, "drain, reboot, replace"), BOOT_B, true),
        &c,
    );
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    // A ladder that ends with the reboot: a person, told why.
    let c = ladder_cfg("drain, reboot");
    let d = one(on_node(rebooting(late, "drain, reboot"), BOOT_A, true), &c);
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
    let Effect::Escalate(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(r.phase, Phase::NeedsPerson);
    assert!(
        r.escalated
            .starts_with("no new bootID by the reboot deadline"),
        "{}",
        r.escalated
    );
    // The record's ladder rules the episode, whatever the configuration says now.
    let d = one(
        on_node(rebooting(late, "drain, reboot"), BOOT_A, true),
        &ladder_cfg("drain, reboot, replace"),
    );
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
    // Waiting for the person then: nothing written.
    let mut waiting = record(Phase::NeedsPerson);
    waiting.escalated = "no new bootID by the reboot deadline".into();
    waiting.step_at = Some(t(NOW - 60));
    let d = one(on_node(waiting.clone(), BOOT_A, true), &c);
    assert_eq!((d.action(), &d.effect), (Action::None, &Effect::Nothing));
    assert!(
        d.reason().starts_with("needs a person since"),
        "{}",
        d.reason()
    );
    // The problem cleared while waiting: recovered as any node.
    let d = one(on_node(waiting, BOOT_A, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
}

#[test]
fn a_replacement_still_here_at_its_deadline_needs_a_person() {
    let c = ladder_cfg("drain, replace");
    let d = one(drained(BOOT_A), &c);
    assert_eq!(
        d.action(),
        Action::Replace,
        "a ladder without reboot replaces at once: {}",
        d.reason()
    );
    let mut r = record(Phase::Replacing);
    r.step = Some(Step::Replace);
    r.step_at = Some(t(NOW - 60));
    r.step_until = Some(t(NOW + 1740));
    let d = one(on_node(r.clone(), BOOT_A, true), &c);
    assert!(matches!(
        ladder_why(&d),
        LadderWhy::AwaitingReplacement { .. }
    ));
    // Even with the problem cleared: it was deleted, nothing is undone.
    let d = one(on_node(r.clone(), BOOT_A, false), &c);
    assert!(matches!(
        ladder_why(&d),
        LadderWhy::AwaitingReplacement { .. }
    ));
    r.step_until = Some(t(NOW - 1));
    let d = one(on_node(r, BOOT_A, true), &c);
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
    // Just drain: a person right after the drain.
    let d = one(drained(BOOT_A), &ladder_cfg("drain"));
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
    assert!(d.reason().contains("no step after drain"), "{}", d.reason());
}

#[test]
fn a_veto_a_kosmos_leaf_a_gate_or_a_window_stops_the_next_step() {
    let c = ladder_cfg("drain, reboot, replace");
    let mut n = drained(BOOT_A);
    n.0.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DO_NOT_REMEDIATE_ANNOTATION.into(), "true".into());
    let d = one(n, &c);
    assert_eq!(
        (d.action(), ladder_why(&d), &d.effect),
        (
            Action::None,
            &LadderWhy::Vetoed { step: Step::Reboot },
            &Effect::Nothing
        )
    );
    let mut k = cfg();
    k.kosmos_other_conditions = true;
    k.conditions[0] = "KernelDeadlock=True,10m: drain, reboot".parse().unwrap();
    let d = one(drained(BOOT_A).label("kosmos.io/node", "true"), &k);
    assert_eq!(ladder_why(&d), &LadderWhy::KosmosLeaf);
    // A drain window closed: the step waits for it.
    let mut w = c;
    w.safety.drain_windows = vec!["Mon 00:00-00:01 UTC".parse().unwrap()];
    let d = one(drained(BOOT_A), &w);
    assert!(
        matches!(d.why, Why::OutsideDrainWindow { .. }),
        "{}",
        d.reason()
    );
    assert_eq!(d.effect, Effect::Nothing);
}

/// Decide `n` as the controller would, with its memory: `reboots_today` of the node and the
/// replacements of the last hour.
fn with_memory(n: N, cfg: &Config, reboots_today: u32, replaced: &[i64]) -> NodeDecision {
    with_reboots(n, cfg, (reboots_today, 0), replaced)
}

/// [`with_memory`] with its power-cycles of the day too.
pub(super) fn with_reboots(
    n: N,
    cfg: &Config,
    reboots_today: (u32, u32),
    replaced: &[i64],
) -> NodeDecision {
    decided_with(n, cfg, reboots_today, replaced, None)
}

/// [`with_reboots`], and what its remediator said when it gave up on its power-cycle.
pub(super) fn decided_with(
    n: N,
    cfg: &Config,
    reboots_today: (u32, u32),
    replaced: &[i64],
    gave_up: Option<&str>,
) -> NodeDecision {
    let view = NodeView::of(&n.0);
    let record = crate::model::record::Record::of(&view, &cfg.records, &cfg.owner);
    let mut c = selected(&view, record.as_ref(), reboots_today);
    c.gave_up = gave_up;
    let mut gates = Gates::open(cfg.safety.flap_window);
    gates.replaced = replaced.iter().map(|s| t(*s)).collect();
    decided_in(&c, &gates, cfg)
}

/// `view` as a selected node with its `record`, no pods, no domain, rebooted `reboots_today`.
pub(super) fn selected<'a>(
    view: &'a NodeView,
    record: Option<&'a crate::model::record::Record>,
    reboots_today: (u32, u32),
) -> Candidate<'a> {
    Candidate {
        node: view,
        selected: true,
        record,
        pods: Vec::new(),
        domain: None,
        flapping: None,
        silent: None,
        symptoms: None,
        newest: None,
        reboots_today,
        gave_up: None,
    }
}

/// `c` decided under `gates` (one node of one held).
pub(super) fn decided_in(c: &Candidate, gates: &Gates, cfg: &Config) -> NodeDecision {
    let totals = Totals {
        selected: 1,
        cordoned: 1,
        ..Default::default()
    };
    batch::decide_some(std::slice::from_ref(c), &totals, gates, cfg, t(NOW)).remove(0)
}

#[test]
fn past_its_reboots_of_the_day_a_node_goes_on_and_replacements_wait_for_their_budget() {
    let c = ladder_cfg("drain, reboot, replace");
    let d = with_memory(drained(BOOT_A), &c, 0, &[]);
    assert_eq!(d.action(), Action::Reboot, "{}", d.reason());
    let d = with_memory(drained(BOOT_A), &c, 1, &[]);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    let d = with_memory(drained(BOOT_A), &c, 1, &[NOW - 3000, NOW - 600]);
    assert_eq!(d.action(), Action::Wait, "{}", d.reason());
    assert_eq!(
        ladder_why(&d),
        &LadderWhy::ReplaceBudget {
            used: 2,
            limit: 2,
            next: Some(t(NOW - 3000 + 3600))
        }
    );
    // An hour-old replacement no longer counts.
    let d = with_memory(drained(BOOT_A), &c, 1, &[NOW - 3700, NOW - 600]);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    // Past the reboots with no step after: a person, told why.
    let d = with_memory(drained(BOOT_A), &ladder_cfg("drain, reboot"), 1, &[]);
    assert_eq!(d.action(), Action::Escalate);
    assert!(
        d.reason().contains("--max-reboots-per-node-per-day"),
        "{}",
        d.reason()
    );
    // A node that reports no bootID is not rebooted: its reboot could not be proven.
    let d = one(drained(""), &c);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
}

#[test]
fn a_problem_back_after_a_proven_reboot_is_drained_again_then_replaced() {
    let c = ladder_cfg("drain, reboot, replace");
    let mut p = rebooting(NOW - 3000, "drain, reboot, replace");
    p.phase = Phase::Probation;
    p.taints.clear();
    p.probation_until = Some(t(NOW + 600));
    let d = one(on_node(p, BOOT_B, true), &c);
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
    let Effect::Relapse(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!((r.phase, r.step), (Phase::Cordoned, Some(Step::Reboot)));
    // Once drained again, the next step is the one after the reboot.
    let mut again = r.clone();
    again.phase = Phase::Drained;
    again.finished_at = Some(t(NOW));
    let d = one(on_node(again, BOOT_B, true), &c);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
}

#[test]
fn slow_start_lets_a_domain_remediate_as_many_at_once_as_it_has_earned() {
    let c = ladder_cfg("drain, reboot, replace");
    let a = drained(BOOT_A);
    let mut b = booted(node("m"), BOOT_A)
        .cond("KernelDeadlock", "True", 0)
        .unschedulable()
        .record(record(Phase::Drained));
    b.0.metadata.name = Some("m".into());
    let views: Vec<NodeView> = [&a, &b].iter().map(|n| NodeView::of(&n.0)).collect();
    let records: Vec<_> = views
        .iter()
        .map(|v| Record::of(v, &c.records, &c.owner))
        .collect();
    let decide = |width: u32, under_way: usize| {
        let candidates: Vec<Candidate> = views
            .iter()
            .zip(&records)
            .map(|(v, r)| Candidate {
                node: v,
                selected: true,
                record: r.as_ref(),
                pods: Vec::new(),
                domain: Some("zone-a"),
                flapping: None,
                silent: None,
                symptoms: None,
                newest: None,
                reboots_today: (0, 0),
                gave_up: None,
            })
            .collect();
        let mut gates = Gates::open(c.safety.flap_window);
        gates.pace.insert("zone-a".into(), width);
        gates.remediating.insert("zone-a".into(), under_way);
        let totals = Totals {
            selected: 2,
            cordoned: 2,
            ..Default::default()
        };
        batch::decide_some(&candidates, &totals, &gates, &c, t(NOW))
            .into_iter()
            .map(|d| (d.action(), d.reason()))
            .collect::<Vec<_>>()
    };
    // Width one: one reboots, the other waits for it.
    let d = decide(1, 0);
    let actions: Vec<Action> = d.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        actions,
        [Action::Wait, Action::Reboot],
        "m comes first by name: {d:?}"
    );
    assert!(
        d[0].1
            .starts_with("slow start: 1 of 1 remediation(s) under way in zone-a"),
        "{}",
        d[0].1
    );
    // One already under way: none starts.
    assert!(decide(1, 1).iter().all(|(a, _)| *a == Action::Wait));
    // Earned two: both.
    assert!(decide(2, 0).iter().all(|(a, _)| *a == Action::Reboot));
}

#[test]
fn a_veto_during_a_reboot_ends_the_ladder_with_a_person_at_its_deadline() {
    let c = ladder_cfg("drain, reboot, replace");
    let veto = |mut n: N| {
        n.0.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(DO_NOT_REMEDIATE_ANNOTATION.into(), "true".into());
        n
    };
    let d = one(
        veto(on_node(
            rebooting(NOW - 60, "drain, reboot, replace"),
            BOOT_A,
            true,
        )),
        &c,
    );
    assert_eq!(d.action(), Action::Wait, "{}", d.reason());
    let d = one(
        veto(on_node(
            rebooting(NOW - 1300, "drain, reboot, replace"),
            BOOT_A,
            true,
        )),
        &c,
    );
    assert_eq!(d.action(), Action::Escalate, "not replaced: {}", d.reason());
    let Effect::Escalate(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert!(r.escalated.contains("do-not-remediate"), "{}", r.escalated);
    assert!(
        !r.taints.contains(&FENCE_TAINT.to_string()),
        "the fence goes"
    );
}

/// Issue 64, point 6: with `protectedPods: leave` a drain leaves StatefulSet, unreplicated and
/// annotated pods on the node; deleting the Node would have the pod garbage collector force-delete
/// them while the machine may still run them. Replace (and `--delete-drained-node-after`) delete
/// only a node where nothing but DaemonSet, mirror and finished pods is left; otherwise a person.
#[test]
fn a_node_is_replaced_or_deleted_only_when_nothing_but_daemonset_and_mirror_pods_is_left() {
    use super::tests::{pod, run};
    let owned = |kind: &str| {
        serde_json::json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": kind,
            "name": "o", "uid": "u", "controller": true}]}})
    };
    let empty = [
        pod("agent", "n", owned("DaemonSet")),
        pod("static", "n", owned("Node")),
        pod(
            "done",
            "n",
            serde_json::json!({"status": {"phase": "Succeeded"}}),
        ),
    ];
    let c = ladder_cfg("drain, replace");
    let d = run(vec![drained(BOOT_A)], &empty, &c).remove(0);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    let mut left = empty.to_vec();
    left.push(pod("db-0", "n", owned("StatefulSet")));
    let d = run(vec![drained(BOOT_A)], &left, &c).remove(0);
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
    let Effect::Escalate(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert!(
        r.escalated.starts_with(
            "1 pod(s) besides DaemonSet and mirror pods are still on it (default/db-0): deleting the Node"
        ),
        "{}",
        r.escalated
    );
    // draino's --delete-drained-node-after, no ladder: the same.
    let mut c = cfg();
    c.after_drain.delete_after = Some(std::time::Duration::from_secs(60));
    let d = run(vec![drained(BOOT_A)], &empty, &c).remove(0);
    assert_eq!(d.effect, Effect::DeleteNode, "{}", d.reason());
    let d = run(vec![drained(BOOT_A)], &left, &c).remove(0);
    assert_eq!(d.action(), Action::Escalate, "{}", d.reason());
}
