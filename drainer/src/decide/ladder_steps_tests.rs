//! The remediation ladder's steps by cause and from outside: one condition climbing the ladder
//! its reason names, and a reboot that did not happen followed by a power-cycle. Pure.

use super::ladder::{FENCE_TAINT, LadderWhy};
use super::ladder_tests::{
    BOOT_A, BOOT_B, booted, decided_with, fenced, ladder_cfg, ladder_why, on_node, rebooting,
    record, with_reboots,
};
use super::tests::{N, NOW, cfg, node, one, t};
use super::*;
use crate::config::ladder::Step;
use crate::model::node::NodeView;
use crate::model::record::Phase;

/// A condition `type_` True since 0 with `reason`.
fn with_reason(n: N, type_: &str, reason: &str) -> N {
    let mut n = n.cond(type_, "True", 0);
    let conditions = n.0.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions.last_mut().unwrap().reason = Some(reason.into());
    n
}

#[test]
fn one_condition_climbs_the_ladder_its_reason_names() {
    let mut c = cfg();
    c.conditions = vec![
        "GpuUnhealthy=True,reason=GpuXidReset,10m: drain, reboot"
            .parse()
            .unwrap(),
        "GpuUnhealthy=True,reason=GpuXidReplace|GpuFellOffTheBus,10m: drain, replace"
            .parse()
            .unwrap(),
    ];
    let drained_with = |reason: &str| {
        let mut r = record(Phase::Drained);
        r.episode = format!("GpuUnhealthy=True ({reason})@{}", t(0).as_second());
        r.reason = format!("GpuUnhealthy=True ({reason})");
        with_reason(booted(node("n"), BOOT_A), "GpuUnhealthy", reason)
            .unschedulable()
            .record(r)
    };
    let d = one(drained_with("GpuXidReset"), &c);
    assert_eq!(d.action(), Action::Reboot, "{}", d.reason());
    let d = one(drained_with("GpuFellOffTheBus"), &c);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    // The problem is said with its reason.
    let view = NodeView::of(&with_reason(node("n"), "GpuUnhealthy", "GpuXidReplace").0);
    let p = super::problem::problem(&view, None, None, &c, t(NOW));
    assert_eq!(p.held.len(), 1, "{:?}", p.held);
    assert!(
        p.held[0].starts_with("GpuUnhealthy=True (GpuXidReplace) for "),
        "{:?}",
        p.held
    );
    assert_eq!(p.ladder.unwrap().to_string(), "drain, replace");
    // A reason no listed condition names: not a problem this configuration acts on.
    let view = NodeView::of(&with_reason(node("n"), "GpuUnhealthy", "GpuXidOther").0);
    let p = super::problem::problem(&view, None, None, &c, t(NOW));
    assert!(p.held.is_empty() && p.pending.is_empty(), "{:?}", p.held);
}

#[test]
fn a_reboot_that_did_not_happen_goes_on_to_a_power_cycle_without_the_fence() {
    let late = NOW - 1300;
    let steps = "drain, reboot, power-cycle, replace";
    let c = ladder_cfg(steps);
    // Its own reboot was counted today; the power-cycle has the day's limit to itself.
    let d = with_reboots(
        on_node(rebooting(late, steps), BOOT_A, true),
        &c,
        (1, 0),
        &[],
    );
    assert_eq!(d.action(), Action::PowerCycle, "{}", d.reason());
    let Effect::Reboot(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(
        (r.phase, r.step),
        (Phase::Rebooting, Some(Step::PowerCycle))
    );
    assert_eq!(r.boot_id, BOOT_A, "proven by a bootID other than this one");
    assert!(
        !r.taints.contains(&FENCE_TAINT.to_string()),
        "the detector is asked nothing"
    );
    assert!(
        d.reason().contains("power-cycling it through"),
        "{}",
        d.reason()
    );
    // Awaited, then proven as a reboot is.
    let mut cycling = rebooting(NOW - 60, steps);
    cycling.step = Some(Step::PowerCycle);
    cycling.taints.clear();
    let d = one(on_node(cycling.clone(), BOOT_A, true), &c);
    assert!(matches!(
        ladder_why(&d),
        LadderWhy::AwaitingReboot {
            next: Some(Step::Replace),
            ..
        }
    ));
    let d = one(on_node(cycling, BOOT_B, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
    // Power-cycled as often as the day allows: the ladder goes on, saying why.
    let d = with_reboots(
        on_node(rebooting(late, steps), BOOT_A, true),
        &c,
        (1, 1),
        &[],
    );
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    assert!(
        d.reason()
            .contains("power-cycled 1 time(s) in the last 24h"),
        "{}",
        d.reason()
    );
}

#[test]
fn a_remediator_that_gives_up_sends_the_ladder_on_before_the_deadline() {
    let steps = "drain, power-cycle, replace";
    let c = ladder_cfg(steps);
    let mut cycling = rebooting(NOW - 60, steps);
    cycling.step = Some(Step::PowerCycle);
    cycling.taints.clear();
    let said = Some("FenceAgentFailed: fence_ipmilan timed out");
    let d = decided_with(
        on_node(cycling.clone(), BOOT_A, true),
        &c,
        (0, 1),
        &[],
        said,
    );
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    assert!(
        d.reason().contains(
            "its remediator gave up on the power-cycle (FenceAgentFailed: fence_ipmilan timed out)"
        ),
        "{}",
        d.reason()
    );
    // Back with a new boot meanwhile: what the remediator said no longer matters.
    let d = decided_with(
        on_node(cycling.clone(), BOOT_B, false),
        &c,
        (0, 1),
        &[],
        said,
    );
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
    // Nothing said: awaited until the deadline.
    let d = decided_with(on_node(cycling, BOOT_A, true), &c, (0, 1), &[], None);
    assert!(
        matches!(ladder_why(&d), LadderWhy::AwaitingReboot { .. }),
        "{}",
        d.reason()
    );
}

/// A held node, not yet ours: `node("n")` booted as A, Ready, the problem held since 0.
pub(super) fn held_new() -> N {
    booted(node("n"), BOOT_A)
        .cond("KernelDeadlock", "True", 0)
        .cond("Ready", "True", 0)
}

#[test]
fn a_restart_comes_first_without_a_cordon_and_a_proof_lifts_its_fence() {
    let steps = "restart kubelet, drain, reboot";
    let c = ladder_cfg(steps);
    let d = one(held_new(), &c);
    assert_eq!(d.action(), Action::Restart, "{}", d.reason());
    let Effect::Reboot(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(
        (r.phase, r.step, r.cordoned),
        (Phase::Restarting, Some(Step::RestartKubelet), false)
    );
    assert_eq!(r.taints, [FENCE_TAINT], "new pods wait for the restart");
    assert_eq!(
        r.boot_id, BOOT_A,
        "the detector's request is bound to this boot"
    );
    assert!(
        d.reason().starts_with("restart kubelet first"),
        "{}",
        d.reason()
    );
    // Awaited while the problem holds, until its deadline.
    let mut restarting = r.clone();
    restarting.step_until = Some(t(NOW + 60));
    let on = |r: &crate::model::record::Record, held: bool| {
        let n = booted(node("n"), BOOT_A).cond("Ready", "True", 0);
        let n = if held {
            n.cond("KernelDeadlock", "True", 0)
        } else {
            n.cond("KernelDeadlock", "False", NOW - 700)
        };
        fenced(n).record(r.clone())
    };
    let d = one(on(&restarting, true), &c);
    assert!(
        matches!(ladder_why(&d), LadderWhy::AwaitingRestart { .. }),
        "{}",
        d.reason()
    );
    assert_eq!(d.action(), Action::Wait);
    // The problem clears: proven, the fence and the record go, nothing was ever cordoned.
    let d = one(on(&restarting, false), &c);
    assert!(
        matches!(ladder_why(&d), LadderWhy::RestartProven { .. }),
        "{}",
        d.reason()
    );
    assert!(matches!(&d.effect, Effect::Uncordon(r) if r.phase == Phase::Restarting));
}

#[test]
fn a_restart_that_does_not_help_is_cordoned_and_the_ladder_goes_on_after_the_drain() {
    let steps = "restart containerd, drain, reboot";
    let c = ladder_cfg(steps);
    let Effect::Reboot(mut r) = one(held_new(), &c).effect else {
        panic!("a restart first")
    };
    r.step_until = Some(t(NOW - 1));
    let n = fenced(booted(node("n"), BOOT_A).cond("Ready", "True", 0).cond(
        "KernelDeadlock",
        "True",
        0,
    ))
    .record(r);
    let d = one(n, &c);
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
    let Effect::Cordon(cordoned) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(
        cordoned.step,
        Some(Step::RestartContainerd),
        "the ladder goes on"
    );
    assert_eq!(cordoned.phase, Phase::Cordoned);
    // Drained, its next step is the reboot (the restart is behind it).
    let mut drained = cordoned.clone();
    drained.phase = Phase::Drained;
    drained.finished_at = Some(t(NOW - 60));
    let n = booted(node("n"), BOOT_A)
        .cond("KernelDeadlock", "True", 0)
        .unschedulable()
        .record(drained);
    let d = one(n, &c);
    assert_eq!(d.action(), Action::Reboot, "{}", d.reason());
}

#[test]
fn no_restart_without_a_boot_to_bind_it_to_or_against_a_veto() {
    let c = ladder_cfg("restart kubelet, drain");
    let bootless = node("n").cond("KernelDeadlock", "True", 0);
    assert_eq!(one(bootless, &c).action(), Action::Cordon);
    let mut vetoed = held_new();
    vetoed.0.metadata.annotations = Some(
        [(
            nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION.to_string(),
            "x".to_string(),
        )]
        .into(),
    );
    assert_eq!(one(vetoed, &c).action(), Action::Cordon);
}

/// The attempts a decision ends, in the record it writes: each step's attempt, with how it ended.
#[test]
fn every_attempt_ends_in_the_record_with_its_outcome() {
    use crate::model::attempt::{Attempt, Outcome};
    let steps = "drain, reboot, power-cycle, replace";
    let c = ladder_cfg(steps);
    let ended = |e: &Effect| -> Vec<(Step, Outcome)> {
        let r = match e {
            Effect::Reboot(r) | Effect::Replace(r) | Effect::Escalate(r) | Effect::Probation(r) => {
                r
            }
            other => panic!("{other:?}"),
        };
        r.ended.iter().map(|a| (a.step, a.outcome)).collect()
    };
    // No new boot by the deadline: a permanent failure, and the power-cycle next.
    let d = with_reboots(
        on_node(rebooting(NOW - 1300, steps), BOOT_A, true),
        &c,
        (1, 0),
        &[],
    );
    assert_eq!(
        ended(&d.effect),
        [(Step::Reboot, Outcome::PermanentFailure)]
    );
    // Proven: succeeded, kept through the probation.
    let mut c2 = ladder_cfg(steps);
    c2.remedy.uncordon_after = std::time::Duration::from_secs(600);
    let d = one(on_node(rebooting(NOW - 60, steps), BOOT_B, false), &c2);
    assert_eq!(ended(&d.effect), [(Step::Reboot, Outcome::Succeeded)]);
    // A provider that refused (the executor wrote it into the record): the next step now.
    let mut refused = rebooting(NOW - 60, steps);
    refused.step = Some(Step::PowerCycle);
    refused.taints.clear();
    refused.ended = vec![Attempt::new(
        Step::PowerCycle,
        Outcome::PermanentFailure,
        refused.step_at,
        t(NOW - 30),
        "it answered HTTP 403",
    )];
    let d = with_reboots(on_node(refused, BOOT_A, true), &c, (1, 1), &[]);
    assert_eq!(d.action(), Action::Replace, "{}", d.reason());
    assert!(
        d.reason().contains("it answered HTTP 403"),
        "{}",
        d.reason()
    );
    assert_eq!(
        ended(&d.effect),
        [(Step::PowerCycle, Outcome::PermanentFailure)]
    );
    // A veto during the reboot: cancelled, for a person.
    let mut vetoed = on_node(rebooting(NOW - 1300, steps), BOOT_A, true);
    vetoed
        .0
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION.into(),
            "x".into(),
        );
    let d = one(vetoed, &c);
    assert_eq!(ended(&d.effect), [(Step::Reboot, Outcome::Cancelled)]);
}

#[test]
fn a_restart_overtaken_by_a_reboot_is_superseded_and_the_ladder_goes_on() {
    use crate::model::attempt::Outcome;
    let c = ladder_cfg("restart kubelet, drain, reboot");
    let Effect::Reboot(mut r) = one(held_new(), &c).effect else {
        panic!("a restart first")
    };
    r.step_until = Some(t(NOW + 240));
    // The machine rebooted meanwhile (another bootID), its problem still there.
    let n = fenced(booted(node("n"), BOOT_B).cond("Ready", "True", 0).cond(
        "KernelDeadlock",
        "True",
        0,
    ))
    .record(r);
    let d = one(n, &c);
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
    let Effect::Cordon(next) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(next.ended.len(), 1);
    assert_eq!(next.ended[0].outcome, Outcome::Superseded);
}

/// A node we hold that the policy no longer selects gets no step from its record (issue 76,
/// principle 1: a record sealed with a stolen key brought in an unselected node, which the drainer
/// rebooted): held as it is while its problem lasts, whatever phase its record says; released once
/// the problem cleared. The same nodes, selected, go on.
#[test]
fn a_node_that_left_the_selection_is_held_or_released_never_stepped() {
    let mut c = ladder_cfg("drain, reboot, power-cycle, replace");
    c.selector = crate::config::select::Selector::labels("pool=a").unwrap();
    let drained = |pool: &str, held: bool| {
        let n = booted(node("n"), BOOT_A)
            .label("pool", pool)
            .unschedulable();
        let n = if held {
            n.cond("KernelDeadlock", "True", 0)
        } else {
            n.cond("KernelDeadlock", "False", NOW - 700)
        };
        n.cond("Ready", "True", NOW - 600)
            .record(record(Phase::Drained))
    };
    // Selected, drained, problem held: the ladder's reboot.
    let d = one(drained("a", true), &c);
    assert_eq!(d.action(), Action::Reboot, "{}", d.reason());
    // Not selected: held as it is, nothing written.
    let d = one(drained("b", true), &c);
    assert_eq!(
        d.why,
        Why::LeftSelection { released: false },
        "{}",
        d.reason()
    );
    assert_eq!(d.action(), Action::Hold);
    assert_eq!(d.effect, Effect::Nothing);
    assert!(d.reason().contains("no further step"), "{}", d.reason());
    // A reboot past its deadline on a node outside the selection: no power-cycle after it.
    let late = rebooting(NOW - 1300, "drain, reboot, power-cycle, replace");
    let d = one(on_node(late.clone(), BOOT_A, true).label("pool", "a"), &c);
    assert_eq!(d.action(), Action::PowerCycle, "selected: {}", d.reason());
    let d = one(on_node(late, BOOT_A, true).label("pool", "b"), &c);
    assert_eq!(
        d.why,
        Why::LeftSelection { released: false },
        "{}",
        d.reason()
    );
    assert_eq!(d.effect, Effect::Nothing);
    // Its problem cleared: released, our hold lifted, the step under way cancelled.
    let d = one(drained("b", false), &c);
    assert_eq!(
        d.why,
        Why::LeftSelection { released: true },
        "{}",
        d.reason()
    );
    let Effect::Release(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(r.phase, Phase::Released);
    assert!(!r.cordoned && r.taints.is_empty(), "{r:?}");
    let r = rebooting(NOW - 60, "drain, reboot");
    let d = one(on_node(r, BOOT_A, false).label("pool", "b"), &c);
    let Effect::Release(r) = &d.effect else {
        panic!("{d:?}")
    };
    let last = r.ended.last().expect("the reboot's attempt ended");
    assert_eq!(last.step, Step::Reboot);
    assert!(last.why.contains("left the selection"), "{last:?}");
}

/// A reboot whose problem cleared before the node booted again is over: past its deadline the
/// ladder does not go on to a power-cycle of a node that has no problem (issue 76, principle 3);
/// the attempt is kept as cancelled through a probation.
#[test]
fn a_reboot_whose_problem_cleared_first_goes_on_to_no_power_cycle() {
    let mut c = ladder_cfg("drain, reboot, power-cycle, replace");
    let late = rebooting(NOW - 1300, "drain, reboot, power-cycle, replace");
    // Still held: the power-cycle, as before.
    let d = one(on_node(late.clone(), BOOT_A, true), &c);
    assert_eq!(d.action(), Action::PowerCycle, "{}", d.reason());
    // Cleared: recovered, with a probation when one is configured.
    let d = one(on_node(late.clone(), BOOT_A, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
    c.remedy.uncordon_after = std::time::Duration::from_secs(1800);
    let d = one(on_node(late, BOOT_A, false), &c);
    let Effect::Probation(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert!(!r.taints.contains(&FENCE_TAINT.to_string()), "{r:?}");
    let last = r.ended.last().expect("the reboot's attempt ended");
    assert_eq!(
        (last.step, last.outcome),
        (Step::Reboot, crate::model::attempt::Outcome::Cancelled)
    );
}

/// A power-cycle whose problem cleared before a new boot is awaited to its deadline (the provider
/// may still carry it out: the node stays held), then over with no next step.
#[test]
fn a_power_cycle_whose_problem_cleared_is_awaited_then_goes_on_to_nothing() {
    let c = ladder_cfg("drain, reboot, power-cycle, replace");
    let cycling = |at: i64| {
        let mut r = rebooting(at, "drain, reboot, power-cycle, replace");
        r.step = Some(Step::PowerCycle);
        r.taints.clear();
        r
    };
    let d = one(on_node(cycling(NOW - 60), BOOT_A, false), &c);
    assert_eq!(d.action(), Action::Wait, "{}", d.reason());
    let d = one(on_node(cycling(NOW - 1300), BOOT_A, false), &c);
    assert_eq!(d.action(), Action::Uncordon, "{}", d.reason());
}

/// Every step that takes the machine down passes the same refusals before it starts (issue 76,
/// principle 3): with a pod the drain left (`protectedPods: leave`), neither the reboot nor the
/// power-cycle after it runs, a person is told; the node's own agents (DaemonSet, mirror and
/// `kube-system` not-evicted pods) go down with it as the detector allows; a control-plane node only
/// with `--remediate-control-plane`.
#[test]
fn a_reboot_or_power_cycle_never_runs_where_pods_are_left_or_on_a_control_plane_node() {
    use super::tests::{pod, run};
    let owned = |kind: &str| {
        serde_json::json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": kind,
            "name": "o", "uid": "u", "controller": true}]}})
    };
    let drained = || {
        booted(node("n"), BOOT_A)
            .cond("KernelDeadlock", "True", 0)
            .unschedulable()
            .record(record(Phase::Drained))
    };
    let agents = vec![
        pod("agent", "n", owned("DaemonSet")),
        pod("static", "n", owned("Node")),
        pod(
            "kube-proxy",
            "n",
            serde_json::json!({"metadata": {"namespace": "kube-system",
                "annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}}),
        ),
    ];
    for ladder in ["drain, reboot, power-cycle", "drain, power-cycle"] {
        let mut c = ladder_cfg(ladder);
        c.ladder.power_cycle = Some(crate::config::ladder::PowerCycle::Metal3);
        let d = run(vec![drained()], &agents, &c).remove(0);
        assert!(
            matches!(d.action(), Action::Reboot | Action::PowerCycle),
            "{ladder}: the node's own agents go down with it: {}",
            d.reason()
        );
        let mut left = agents.clone();
        left.push(pod("db-0", "n", owned("StatefulSet")));
        let d = run(vec![drained()], &left, &c).remove(0);
        assert_eq!(d.action(), Action::Escalate, "{ladder}: {}", d.reason());
        let Effect::Escalate(r) = &d.effect else {
            panic!("{d:?}")
        };
        assert!(
            r.escalated
                .starts_with("1 pod(s) the drain left are still on it (default/db-0)"),
            "{}",
            r.escalated
        );
        // A control-plane node: a person, unless the command line allows it.
        let cp = || drained().label("node-role.kubernetes.io/control-plane", "");
        let d = run(vec![cp()], &agents, &c).remove(0);
        assert_eq!(d.action(), Action::Escalate, "{ladder}: {}", d.reason());
        assert!(
            d.reason().contains("--remediate-control-plane"),
            "{}",
            d.reason()
        );
        c.ladder.control_plane = true;
        let d = run(vec![cp()], &agents, &c).remove(0);
        assert!(
            matches!(d.action(), Action::Reboot | Action::PowerCycle),
            "{ladder}: allowed: {}",
            d.reason()
        );
    }
}
