//! One node's decision (pure): opt-out label, selection, then either what our record says we did
//! (release after a person lifted our cordon or taint, probation and uncordon on recovery, cordon
//! again on a relapse, drain when due, retry after failure) or whether a new problem warrants a
//! cordon (and/or taints), within the safety gates and the budgets.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;

use super::candidate::Candidate;
use super::context::Context;
use super::counts::Budgets;
use super::decision::{DrainJob, Effect, Why};
use super::gates::Gates;
use super::ladder::{self, LadderWhy};
use super::problem::Problem;
use crate::config::Config;
use crate::model::intern::ArcStr;
use crate::model::record::{Phase, Record};

/// What a decision comes to.
type Decided = (Why, Effect);

pub(super) fn decide_node(
    c: &Candidate,
    record: Option<&Record>,
    p: &Problem,
    x: &Context,
    b: &mut Budgets,
) -> Decided {
    let Context { gates, cfg, now } = *x;
    let (node, selected) = (c.node, c.selected);
    if node.label(&cfg.exclude_label.0) == Some(cfg.exclude_label.1.as_str()) {
        let label = format!("{}={}", cfg.exclude_label.0, cfg.exclude_label.1);
        return (Why::Excluded { label }, Effect::Nothing);
    }
    if !selected && record.is_none() {
        return (Why::NotSelected, Effect::Nothing);
    }
    let bad = !p.held.is_empty();
    let Some(r) = record else {
        return decide_new(c, p, x, b);
    };
    if r.phase == Phase::Released {
        return if bad && p.episode == r.episode {
            (Why::ReleasedEpisode, Effect::Nothing)
        } else if !bad && p.pending.is_empty() {
            if let Some(h) = paused(gates) {
                return h;
            }
            (Why::ForgetReleased, Effect::Forget)
        } else {
            // A new episode: as if there were no record.
            decide_new(c, p, x, b)
        };
    }
    if let Some(what) = r.lifted(node) {
        if let Some(h) = paused(gates) {
            return h;
        }
        let released = release(c, r, &format!("a person lifted the hold ({what})"), now, b);
        let why = Why::ManualUncordon { what };
        return (why, Effect::Release(released));
    }
    if !selected {
        return left_selection(c, r, p, x, b);
    }
    match r.phase {
        Phase::Replacing => return ladder::replacing(r, now),
        Phase::Restarting => {
            return match ladder::restarting(c, r, p, x, b) {
                Ok(d) => d,
                // Not proven: cordoned and drained as the ladder goes on.
                Err(ended) => cordon(c, p, x, Some((r, ended))),
            };
        }
        Phase::Rebooting => {
            if let Some(d) = reboot_moot(c, r, p, x, b) {
                return d;
            }
            if let Some(d) = ladder::rebooting(c, r, p, x, b) {
                return d;
            }
            return reboot_proven(c, r, p, x, b);
        }
        _ => {}
    }
    if !bad {
        return recovered(c, r, p, x, b);
    }
    if r.phase == Phase::Probation {
        return relapse(r, p, cfg, now);
    }
    by_phase(c, r, p, x, b)
}

/// A node we hold that the policy no longer selects. Its record is stored state: it may hold the
/// node back, never start or go on with a step on it (issue 76, principle 1: a record sealed with a
/// stolen key once brought in a node outside the selection, and the drainer rebooted it). Held as it
/// is while its problem lasts; released once it cleared (a drain under way stops: the node is no
/// longer ours to drain).
fn left_selection(c: &Candidate, r: &Record, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    if !p.held.is_empty() || !p.pending.is_empty() {
        return (Why::LeftSelection { released: false }, Effect::Nothing);
    }
    if let Some(h) = paused(x.gates) {
        return h;
    }
    let released = release(c, r, "the node left the selection", x.now, b);
    (
        Why::LeftSelection { released: true },
        Effect::Release(released),
    )
}

/// The hold of a pause on the drainer's Lease: nothing is written.
fn paused(gates: &Gates) -> Option<Decided> {
    gates
        .pause
        .as_ref()
        .map(|p| (Why::Paused { pause: p.clone() }, Effect::Nothing))
}

/// A reboot proven: what a recovery gets (probation, or the uncordon), said as the reboot's proof,
/// its attempt succeeded.
fn reboot_proven(c: &Candidate, r: &Record, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    use crate::model::attempt::{Attempt, Outcome, with};
    let (why, effect) = recovered(c, r, p, x, b);
    match effect {
        Effect::Probation(mut next) => {
            let step = r.step.unwrap_or(crate::model::ladder::Step::Reboot);
            let a = Attempt::new(step, Outcome::Succeeded, r.step_at, x.now, "");
            next.ended = with(next.ended, a);
            let w = Why::Ladder(LadderWhy::RebootProven {
                probation_until: next.probation_until,
            });
            (w, Effect::Probation(next))
        }
        Effect::Uncordon(r) => {
            let w = Why::Ladder(LadderWhy::RebootProven {
                probation_until: None,
            });
            (w, Effect::Uncordon(r))
        }
        other => (why, other),
    }
}

/// A reboot or power-cycle asked for whose problem cleared before the node booted again: its
/// request went with the problem (`fleet::totals`: stored state never keeps one standing for a node
/// with no problem), so there is no proof to await, and no next step may be taken on a node with
/// no problem (the ladder once went on to power-cycle a node that had recovered). The attempt is
/// cancelled and the node recovers as any node (a recovery hold, probation, the uncordon); a
/// power-cycle, which no request withdrawal stops, at its deadline.
fn reboot_moot(
    c: &Candidate,
    r: &Record,
    p: &Problem,
    x: &Context,
    b: &mut Budgets,
) -> Option<Decided> {
    use crate::model::attempt::{Attempt, Outcome, with};
    if ladder::rebooted(c, r) || !p.held.is_empty() || !p.pending.is_empty() {
        return None;
    }
    let step = r.step.unwrap_or(crate::model::ladder::Step::Reboot);
    // A power-cycle is asked of a provider outside the cluster, which may still carry it out: its
    // proof is awaited until its deadline (the node stays held meanwhile), and only then is it over.
    if step.asks().is_none() && r.step_until.is_some_and(|until| x.now < until) {
        return None;
    }
    let mut after = r.clone();
    let why = "the problem cleared before the node booted again";
    after.ended = with(
        r.ended.clone(),
        Attempt::new(step, Outcome::Cancelled, r.step_at, x.now, why),
    );
    after.phase = Phase::Drained;
    after.taints.retain(|t| t != ladder::FENCE_TAINT);
    ladder::step_over(c, b);
    Some(recovered(c, &after, p, x, b))
}

/// `r` released (`why` its step under way, if any, is cancelled): nothing of ours is left on the
/// node (the executor lifts what remains), its place in the budgets given back.
fn release(c: &Candidate, r: &Record, why: &str, now: Timestamp, b: &mut Budgets) -> Record {
    let mut released = r.clone();
    released.ended = cancelled(r, why, now);
    released.phase = Phase::Released;
    released.cordoned = false;
    released.taints.clear();
    released.probation_until = None;
    b.uncordoned(c.domain);
    if r.phase == Phase::Draining {
        b.draining -= 1;
    }
    released
}

/// The attempts of `r` once its hold goes for `why`: a step under way is cancelled.
fn cancelled(r: &Record, why: &str, now: Timestamp) -> Vec<crate::model::attempt::Attempt> {
    use crate::model::attempt::{Attempt, Outcome, with};
    if !matches!(
        r.phase,
        Phase::Restarting | Phase::Rebooting | Phase::Replacing
    ) {
        return r.ended.clone();
    }
    let step = r.step.unwrap_or(crate::model::ladder::Step::Reboot);
    with(
        r.ended.clone(),
        Attempt::new(step, Outcome::Cancelled, r.step_at, now, why),
    )
}

/// A node we hold whose problem cleared: wait while it might come back, finish a drain in
/// progress, then probation (`--uncordon-after`) and the uncordon.
fn recovered(c: &Candidate, r: &Record, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    let Context { gates, cfg, now } = *x;
    if !p.pending.is_empty() {
        let pending = p.pending.iter().map(|(d, _)| d.clone()).collect();
        return (Why::ProblemBack { pending }, Effect::Nothing);
    }
    if let Some(left) = p.recovering {
        return (Why::Recovering { left }, Effect::Nothing);
    }
    if r.phase == Phase::Draining {
        // Finish what was started: evictions already went out.
        let job = Effect::Drain(DrainJob::pending());
        return (Why::FinishingDrain, job);
    }
    if let Some(h) = paused(gates) {
        return h;
    }
    let probation = cfg.remedy.uncordon_after;
    match r.probation_until {
        Some(until) if until > now => {
            return (Why::Probation { until }, Effect::Nothing);
        }
        None if !probation.is_zero() => {
            let until = add(now, probation);
            return (
                Why::StartProbation { until },
                Effect::Probation(start_probation(r, until, cfg)),
            );
        }
        _ => {}
    }
    b.uncordoned(c.domain);
    let why = match r.phase {
        Phase::Probation => Why::ProbationPassed,
        phase => Why::Uncordon {
            during_buffer: phase == Phase::Cordoned,
        },
    };
    (why, Effect::Uncordon(r.clone()))
}

/// The record of a probation until `until`: with `--probation-taint`, the cordon and the problem
/// taints give way to that taint; without, the node stays held as it is.
fn start_probation(r: &Record, until: Timestamp, cfg: &Config) -> Record {
    let mut next = r.clone();
    next.phase = Phase::Probation;
    next.probation_until = Some(until);
    next.step_until = None;
    next.taints.retain(|t| t != ladder::FENCE_TAINT);
    if let Some(t) = &cfg.remedy.probation_taint {
        next.cordoned = false;
        next.taints = vec![t.to_string()];
    }
    next
}

/// The problem came back during probation: held again at once, with the problem's cordon and
/// taints, and drained again without a new buffer (work may have come back during probation).
/// A ladder goes on from the step it had reached: drained again, then its next step.
fn relapse(r: &Record, p: &Problem, cfg: &Config, now: Timestamp) -> Decided {
    let problem = p.held.join(", ");
    let next = Record {
        owner: r.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Cordoned,
        cordoned_at: now,
        drain_at: now,
        cordoned: cfg.remedy.cordon,
        taints: cfg.remedy.taints.iter().map(ToString::to_string).collect(),
        ladder: r.ladder,
        step: r.step,
        step_at: r.step_at,
        ..Default::default()
    };
    (Why::Relapse { problem }, Effect::Relapse(next))
}

/// A problem node we cordoned: what its record's phase calls for now.
fn by_phase(c: &Candidate, r: &Record, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    let Context { gates, cfg, now } = *x;
    let problem = p.held.join(", ");
    if r.phase == Phase::Drained && ladder::ladder_of(r, p).is_some() {
        return ladder::drained(c, r, p, x, b);
    }
    match r.phase {
        Phase::NeedsPerson => ladder::waiting(r),
        Phase::Draining => (
            Why::Draining { problem },
            Effect::Drain(DrainJob::pending()),
        ),
        Phase::Drained => match (cfg.after_drain.delete_after, r.finished_at) {
            (Some(after), Some(finished)) => {
                let at = add(finished, after);
                if at > now {
                    return (Why::DeleteDrained { at, problem }, Effect::Nothing);
                }
                if let Some(left) = ladder::pods_left(c) {
                    return ladder::escalate(r, format!("{left} ({problem})"), now);
                }
                if let Some(why) = gates.hold(c) {
                    return (why, Effect::Nothing);
                }
                (Why::DeleteDrained { at, problem }, Effect::DeleteNode)
            }
            _ => (Why::Drained { problem }, Effect::Nothing),
        },
        Phase::Cordoned if cfg.skip_drain => (Why::SkipDrain { problem }, Effect::Nothing),
        Phase::Cordoned | Phase::Failed => start_drain(c, r, problem, x, b),
        Phase::Released
        | Phase::Probation
        | Phase::Restarting
        | Phase::Rebooting
        | Phase::Replacing => {
            unreachable!("handled by decide_node")
        }
    }
}

/// A cordoned node whose drain (or its retry) may be due: held, waiting for its time, a window
/// or a budget, or started now.
fn start_drain(
    c: &Candidate,
    r: &Record,
    problem: String,
    x: &Context,
    b: &mut Budgets,
) -> Decided {
    let Context { gates, cfg, now } = *x;
    let failed = r.phase == Phase::Failed;
    let due = if failed {
        r.retry_at.unwrap_or(r.drain_at)
    } else {
        r.drain_at
    };
    if due > now {
        let why = if failed {
            Why::RetryScheduled { at: due, problem }
        } else {
            Why::DrainScheduled { at: due, problem }
        };
        return (why, Effect::Nothing);
    }
    if let Some(why) = gates.hold(c) {
        return (why, Effect::Nothing);
    }
    if let Err(next) = gates.window {
        let why = Why::OutsideDrainWindow { next, problem };
        return (why, Effect::Nothing);
    }
    if b.draining >= cfg.max_drains_in_flight {
        let why = Why::DrainBudget {
            used: b.draining,
            limit: cfg.max_drains_in_flight,
        };
        return (why, Effect::Nothing);
    }
    if let Some(next) = b.last_drain_start.map(|last| add(last, cfg.drain_buffer))
        && next > now
    {
        return (Why::DrainSpacing { next }, Effect::Nothing);
    }
    b.draining += 1;
    b.prior_drain_start = b.last_drain_start;
    b.last_drain_start = Some(now);
    (
        Why::StartDrain { problem },
        Effect::Drain(DrainJob::pending()),
    )
}

/// A node without a record of ours.
fn decide_new(c: &Candidate, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    let Context { gates, cfg, .. } = *x;
    if p.held.is_empty() {
        if !p.pending.is_empty() {
            let pending = p.pending.iter().map(|(d, _)| d.clone()).collect();
            return (Why::NotHeldLongEnough { pending }, Effect::Nothing);
        }
        if !p.exempted.is_empty() {
            let why = Why::KosmosExempt {
                conditions: p.exempted.clone(),
            };
            return (why, Effect::Nothing);
        }
        return (Why::Healthy, Effect::Nothing);
    }
    let problem = p.held.join(", ");
    // Someone else's cordon is theirs (in taint-only mode the node's schedulability is not ours).
    if c.node.unschedulable && cfg.remedy.cordon {
        return (Why::CordonedBySomeoneElse { problem }, Effect::Nothing);
    }
    if let Some(why) = gates.hold(c) {
        return (why, Effect::Nothing);
    }
    // A restart holds the node too (its fence): within the same budgets as a cordon.
    if let Some(why) = over_budget(c, gates, cfg, b, &problem) {
        return (why, Effect::Nothing);
    }
    let first = ladder::restart(c, p, x, b);
    if !matches!(&first, Some((_, Effect::Nothing))) {
        b.cordoned += 1;
        if let Some(d) = c.domain {
            *b.domain_cordoned.entry(ArcStr::from(d)).or_default() += 1;
        }
    }
    first.unwrap_or_else(|| cordon(c, p, x, None))
}

/// Cordon a node whose problem is held, its place in the budgets taken (`after`: the record of the
/// restart that did not help, whose place it keeps and whose ladder and step go on).
fn cordon(
    c: &Candidate,
    p: &Problem,
    x: &Context,
    after: Option<(&Record, (crate::model::attempt::Outcome, &str))>,
) -> Decided {
    let Context { gates, cfg, now } = *x;
    let problem = p.held.join(", ");
    if after.is_some() {
        if let Some(why) = gates.hold(c) {
            return (why, Effect::Nothing);
        }
        if c.node.unschedulable && cfg.remedy.cordon {
            return (Why::CordonedBySomeoneElse { problem }, Effect::Nothing);
        }
    }
    let record = Record {
        owner: cfg.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Cordoned,
        cordoned_at: now,
        drain_at: add(now, cfg.drain_buffer),
        cordoned: cfg.remedy.cordon,
        taints: cfg.remedy.taints.iter().map(ToString::to_string).collect(),
        ladder: after.and_then(|(r, _)| r.ladder),
        step: after.and_then(|(r, _)| r.step),
        step_at: after.and_then(|(r, _)| r.step_at),
        ended: after
            .map(|(r, e)| restart_ended(r, e, now))
            .unwrap_or_default(),
        ..Default::default()
    };
    let drain_at = (!cfg.skip_drain).then_some(record.drain_at);
    (Why::Cordon { problem, drain_at }, Effect::Cordon(record))
}

/// The attempts of `r`, a restart's record, with the restart's own, ended as `ended` says.
fn restart_ended(
    r: &Record,
    (outcome, why): (crate::model::attempt::Outcome, &str),
    now: Timestamp,
) -> Vec<crate::model::attempt::Attempt> {
    use crate::model::attempt::{Attempt, with};
    let step = r.step.unwrap_or(crate::model::ladder::Step::RestartKubelet);
    with(
        r.ended.clone(),
        Attempt::new(step, outcome, r.step_at, now, why),
    )
}

/// Why a new cordon must wait for the domain's or the fleet's cordon budget, if it must.
fn over_budget(
    c: &Candidate,
    gates: &Gates,
    cfg: &Config,
    b: &Budgets,
    problem: &str,
) -> Option<Why> {
    if let (Some(d), Some(budget)) = (c.domain, &cfg.safety.max_cordoned_per_domain) {
        let size = gates.domains.get(d).map_or(1, |t| t.size);
        let (used, limit) = (
            b.domain_cordoned.get(d).copied().unwrap_or(0),
            budget.limit(size),
        );
        if used >= limit {
            return Some(Why::DomainBudget {
                domain: d.to_string(),
                used,
                limit,
                problem: problem.to_string(),
            });
        }
    }
    (b.cordoned >= b.cordon_limit).then(|| Why::CordonBudget {
        used: b.cordoned,
        limit: b.cordon_limit,
        problem: problem.to_string(),
    })
}
