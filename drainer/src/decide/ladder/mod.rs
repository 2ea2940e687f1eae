//! The remediation ladder past the drain (pure): a drained node whose condition names steps is
//! rebooted, then replaced, then left to a person; each step has a proof and a deadline, and no
//! proof by the deadline goes on to the next step. Every step is taken only inside the drain
//! windows and the safety gates, never on a Kosmos leaf nor on a node that vetoes it
//! (`nodemedic.io/do-not-remediate`), and within the limits of [`crate::config::ladder::Limits`].
//!
//! What a step writes is the node's sealed record ([`Record`]): its phase (`rebooting`,
//! `replacing`, `needsperson`), the step, when it started and its deadline, and for a reboot the
//! `bootID` it must change. The reboot request the node's detector carries out is derived from
//! those records by the controller, never read back from anything a node can write.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION;
use nodemedic_common::time::{add, rfc3339 as ts};

use super::candidate::Candidate;
use super::context::Context;
use super::counts::Budgets;
use super::decision::{Effect, Why};
use super::gates::slow_start::NO_DOMAIN;
use super::problem::Problem;
use crate::config::Config;
use crate::config::ladder::{Ladder, Step};
use crate::model::attempt::{self, Attempt, Outcome};
use crate::model::node::{Status, Uid};
use crate::model::record::{Phase, Record};

pub(crate) use refused::{Refused, pods_left};
pub use why::LadderWhy;

pub(crate) mod notes;
pub(crate) mod refused;
pub(crate) mod why;

/// What a decision comes to.
type Decided = (Why, Effect);

/// The taint a node carries from its reboot request until the reboot is proven (or the ladder goes
/// on): nothing new is scheduled there meanwhile, and the node's detector reboots only a node that
/// carries it.
pub(crate) const FENCE_TAINT: &str = "nodemedic.io/remediation=reboot:NoSchedule";

fn why(w: LadderWhy) -> Why {
    Why::Ladder(w)
}

/// The ladder a held problem climbs: the record's once it started, else the first held
/// condition's (in the order the conditions are configured).
pub(super) fn ladder_of(r: &Record, p: &Problem) -> Option<Ladder> {
    r.ladder.or(p.ladder)
}

/// A drained node with its problem still held, on a ladder: the next step, or why not yet.
pub(super) fn drained(
    c: &Candidate,
    r: &Record,
    p: &Problem,
    x: &Context,
    b: &mut Budgets,
) -> Decided {
    let Context { cfg, now, .. } = *x;
    let Some(ladder) = ladder_of(r, p) else {
        unreachable!("drained() is asked only on a ladder")
    };
    let problem = p.held.join(", ");
    // A restart before the drain is behind it: the ladder goes on from the drain.
    let last = r.step.filter(|s| !s.restarts()).unwrap_or(Step::Drain);
    let mut reasons: Vec<String> = Vec::new();
    let mut next = ladder.after(last);
    // Each step's refusals (`refused::REFUSALS`): passed over, a person, or a wait.
    let step = loop {
        let Some(step) = next else {
            let end = if reasons.is_empty() {
                format!("the ladder ({ladder}) has no step after {last}")
            } else {
                reasons.join("; ")
            };
            return escalate(r, format!("{end} ({problem})"), now);
        };
        match refused::refused(step, c, x, b, &problem) {
            None => break step,
            Some(Refused::NextStep(reason)) => {
                if !reasons.contains(&reason) {
                    reasons.push(reason);
                }
                next = ladder.after(step);
            }
            Some(Refused::Person(reason)) => {
                return escalate(r, format!("{reason} ({problem})"), now);
            }
            Some(Refused::Wait(w)) => return (w, Effect::Nothing),
        }
    };
    let domain = c.domain.unwrap_or(NO_DOMAIN);
    let mut next = r.clone();
    next.ladder = Some(ladder);
    next.step = Some(step);
    next.step_at = Some(now);
    let counted = |b: &mut Budgets| *b.remediating.entry(domain.to_string()).or_default() += 1;
    match step {
        Step::Reboot | Step::PowerCycle => {
            counted(b);
            reboot(step, next, c, cfg, now, problem)
        }
        Step::Replace => {
            b.replaced.push(now);
            counted(b);
            let until = add(now, cfg.ladder.replace_deadline);
            next.phase = Phase::Replacing;
            next.step_until = Some(until);
            next.taints.retain(|t| t != FENCE_TAINT);
            let skipped = (!reasons.is_empty()).then(|| reasons.join("; "));
            let w = LadderWhy::Replace {
                until,
                problem,
                skipped,
            };
            (why(w), Effect::Replace(next))
        }
        Step::Drain | Step::RestartKubelet | Step::RestartContainerd => {
            unreachable!("a restart comes only before the drain, and the drain first after it")
        }
    }
}

/// A node whose problem is held and that has no record of ours: its ladder's restart first, if
/// it names one and may take it now (None: it does not, or may not; the cordon comes instead).
/// A restart is taken only by the node's detector, on a node with a bootID to bind it to, without
/// a veto, not on a Kosmos leaf; within the safety gates (the caller's) and its domain's slow start.
pub(super) fn restart(c: &Candidate, p: &Problem, x: &Context, b: &mut Budgets) -> Option<Decided> {
    let Context { cfg, now, .. } = *x;
    let ladder = p.ladder?;
    let step = ladder.restart?;
    let problem = p.held.join(", ");
    match refused::refused(step, c, x, b, &problem) {
        None => {}
        Some(Refused::Wait(w)) => return Some((w, Effect::Nothing)),
        // Passed over: the cordon comes instead (no restart goes to a person).
        Some(Refused::NextStep(_) | Refused::Person(_)) => return None,
    }
    let domain = c.domain.unwrap_or(NO_DOMAIN);
    *b.remediating.entry(domain.to_string()).or_default() += 1;
    let problem = p.held.join(", ");
    let until = add(now, cfg.ladder.restart_deadline);
    let next = Record {
        owner: cfg.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Restarting,
        cordoned_at: now,
        drain_at: now,
        cordoned: false,
        taints: vec![FENCE_TAINT.to_string()],
        ladder: Some(ladder),
        step: Some(step),
        step_at: Some(now),
        step_until: Some(until),
        boot_id: c.node.boot.to_string(),
        ..Default::default()
    };
    let w = LadderWhy::Restart {
        step,
        until,
        problem,
    };
    Some((why(w), Effect::Reboot(next)))
}

/// A node whose component's restart was requested: proven (Ready and the problem clear: the
/// record and the fence go), still awaited, or over with the problem held (Err: how the attempt
/// ended, and why; the caller cordons it, and the ladder goes on from its drain): past its
/// deadline, or superseded by a reboot that came meanwhile (its request is for a boot that is
/// gone: the detector will not carry it out).
pub(super) fn restarting(
    c: &Candidate,
    r: &Record,
    p: &Problem,
    x: &Context,
    b: &mut Budgets,
) -> Result<Decided, (Outcome, &'static str)> {
    let Context { now, .. } = *x;
    let step = r.step.unwrap_or(Step::RestartKubelet);
    let ready =
        (c.node.conditions.iter()).any(|k| &*k.type_ == "Ready" && k.status == Status::True);
    if ready && p.held.is_empty() && p.pending.is_empty() {
        let w = LadderWhy::RestartProven { step };
        return Ok((why(w), Effect::Uncordon(r.clone())));
    }
    let rebooted = rebooted(c, r);
    let until = r.step_until.unwrap_or(now);
    if !rebooted {
        if let Some(hold) = x.gates.resume_hold(c, false) {
            let w = LadderWhy::RequestHeld { step, hold, until };
            return Ok((why(w), Effect::Nothing));
        }
        // Withheld past its deadline: never carried out, so it is asked again, as a new one is.
        if now >= until && x.gates.was_withheld(c) {
            step_over(c, b);
            if let Some(d) = restart(c, p, x, b) {
                return Ok(d);
            }
        }
    }
    // A reboot that came meanwhile, the problem held: the restart is over before its deadline.
    let overtaken = rebooted && !p.held.is_empty();
    if now < until && !overtaken {
        let w = LadderWhy::AwaitingRestart { step, until };
        return Ok((why(w), Effect::Nothing));
    }
    if p.held.is_empty() {
        let pending = p.pending.iter().map(|(d, _)| d.clone()).collect();
        return Ok((Why::NotHeldLongEnough { pending }, Effect::Nothing));
    }
    step_over(c, b);
    Err(match rebooted {
        true => (
            Outcome::Superseded,
            "the node rebooted meanwhile, and its problem held",
        ),
        false => (
            Outcome::PermanentFailure,
            "the problem held past the restart's deadline",
        ),
    })
}

/// The reboot `step` (the node's own, or a power-cycle from outside) of `next`, the record the
/// step starts from: in phase `rebooting`, its proof due by the reboot deadline.
fn reboot(
    step: Step,
    mut next: Record,
    c: &Candidate,
    cfg: &Config,
    now: Timestamp,
    problem: String,
) -> Decided {
    let until = add(now, cfg.ladder.reboot_deadline);
    next.phase = Phase::Rebooting;
    next.step_until = Some(until);
    next.boot_id = c.node.boot.to_string();
    // The fence is for the node's detector, which reboots only a fenced node; a power-cycle comes
    // from outside, and the node holds no fence of ours through it.
    next.taints.retain(|t| t != FENCE_TAINT);
    let w = if step == Step::Reboot {
        next.taints.push(FENCE_TAINT.to_string());
        LadderWhy::Reboot { until, problem }
    } else {
        let provider = (cfg.ladder.power_cycle.as_ref())
            .map_or_else(|| "no provider configured".to_string(), |p| p.to_string());
        LadderWhy::PowerCycle {
            until,
            problem,
            provider,
        }
    };
    (why(w), Effect::Reboot(next))
}

/// Whether `c`'s node runs another boot than the one `r`'s step was asked for.
pub(super) fn rebooted(c: &Candidate, r: &Record) -> bool {
    !r.boot_id.is_empty() && c.node.boot != Uid::parse(&r.boot_id)
}

/// `c`'s step is over: it no longer counts against its domain's slow start.
pub(super) fn step_over(c: &Candidate, b: &mut Budgets) {
    let domain = c.domain.unwrap_or(NO_DOMAIN);
    if let Some(n) = b.remediating.get_mut(domain) {
        *n = n.saturating_sub(1);
    }
}

/// The ladder ends: the record says so, and a person is told.
pub(crate) fn escalate(r: &Record, reason: String, now: Timestamp) -> Decided {
    let mut next = r.clone();
    next.phase = Phase::NeedsPerson;
    next.step_at = Some(now);
    next.step_until = None;
    next.escalated = reason.clone();
    next.taints.retain(|t| t != FENCE_TAINT);
    let w = LadderWhy::NeedsPerson { why: reason };
    (why(w), Effect::Escalate(next))
}

/// A node whose reboot was requested: proven (the caller goes on as for a recovery), still
/// awaited, or past its deadline (the next step). `bad`: the problem is held.
pub(super) fn rebooting(
    c: &Candidate,
    r: &Record,
    p: &Problem,
    x: &Context,
    b: &mut Budgets,
) -> Option<Decided> {
    let Context { now, .. } = *x;
    let booted = rebooted(c, r);
    let ready = c
        .node
        .conditions
        .iter()
        .any(|k| &*k.type_ == "Ready" && k.status == Status::True);
    let clear = p.held.is_empty() && p.pending.is_empty();
    if booted && ready && clear {
        return None;
    }
    let until = r.step_until.unwrap_or(now);
    let vetoed = c
        .node
        .annotations
        .get(DO_NOT_REMEDIATE_ANNOTATION)
        .is_some();
    let step = r.step.unwrap_or(Step::Reboot);
    if !booted && step.asks().is_some() && !vetoed {
        if let Some(hold) = x.gates.resume_hold(c, true) {
            let w = LadderWhy::RequestHeld { step, hold, until };
            return Some((why(w), Effect::Nothing));
        }
        if now >= until && x.gates.was_withheld(c) {
            return Some(again(c, r, p, x, b));
        }
    }
    // A provider that refused, or a remediator that gave up on the power-cycle: the ladder goes on
    // now, not at the deadline.
    let refused = r.ended.iter().find(|a| {
        a.step == step && Some(a.started) == r.step_at && a.outcome == Outcome::PermanentFailure
    });
    let gave_up = (c
        .gave_up
        .map(|s| format!("its remediator gave up on the power-cycle ({s})")))
    .or_else(|| refused.map(|a| a.why.clone()))
    .filter(|_| !booted);
    if now < until && gave_up.is_none() {
        let next = ladder_of(r, p).and_then(|l| l.after(r.step.unwrap_or(Step::Reboot)));
        let w = LadderWhy::AwaitingReboot {
            until,
            booted,
            next,
        };
        return Some((why(w), Effect::Nothing));
    }
    let failed = if let Some(said) = gave_up {
        said
    } else if !booted {
        "no new bootID by the reboot deadline".into()
    } else if !ready {
        "back with a new bootID but not Ready by the reboot deadline".into()
    } else {
        "the problem survived the reboot".into()
    };
    if vetoed {
        // Its request was withdrawn with the veto: the ladder stops here, for a person (and the
        // node no longer holds its domain's slow start).
        let why = format!("{DO_NOT_REMEDIATE_ANNOTATION} was set during its reboot step");
        let mut cancelled = r.clone();
        let a = Attempt::new(step, Outcome::Cancelled, r.step_at, now, &why);
        cancelled.ended = attempt::with(cancelled.ended, a);
        return Some(escalate(&cancelled, why, now));
    }
    step_over(c, b);
    let mut after = r.clone();
    after.phase = Phase::Drained;
    after.taints.retain(|t| t != FENCE_TAINT);
    let a = Attempt::new(step, Outcome::PermanentFailure, r.step_at, now, &failed);
    after.ended = attempt::with(after.ended, a);
    after.reason = if p.held.is_empty() {
        r.reason.clone()
    } else {
        p.held.join(", ")
    };
    Some(said_after(drained(c, &after, p, x, b), &failed))
}

/// A reboot withheld past its deadline, nothing holding it now: not a failure (it was never
/// carried out), so it starts again from the drain, through every check a new step meets (the
/// day's count, the refusals, the gates, the slow start).
fn again(c: &Candidate, r: &Record, p: &Problem, x: &Context, b: &mut Budgets) -> Decided {
    step_over(c, b);
    let step = r.step.unwrap_or(Step::Reboot);
    let mut after = r.clone();
    after.phase = Phase::Drained;
    after.step = None;
    after.taints.retain(|t| t != FENCE_TAINT);
    let said = "its request was withheld past its deadline";
    let a = Attempt::new(step, Outcome::Withheld, r.step_at, x.now, said);
    after.ended = attempt::with(after.ended, a);
    // Not carried out: it is not one of the day's reboots (the memory forgets it once written).
    let mut c = c.clone();
    if step == Step::Reboot {
        c.reboots_today.0 = c.reboots_today.0.saturating_sub(1);
    }
    drained(&c, &after, p, x, b)
}

/// The next step's decision after a reboot that did not do (`failed`), saying why: in the
/// escalation's words, or before the next step's.
fn said_after(next: Decided, failed: &str) -> Decided {
    match next {
        (Why::Ladder(LadderWhy::NeedsPerson { why: w }), Effect::Escalate(mut e)) => {
            let reason = format!("{failed}; {w}");
            e.escalated = reason.clone();
            let w = LadderWhy::NeedsPerson { why: reason };
            (why(w), Effect::Escalate(e))
        }
        (
            Why::Ladder(LadderWhy::Replace {
                until,
                problem,
                skipped,
            }),
            e,
        ) => {
            let problem = format!("{failed}: {problem}");
            let w = LadderWhy::Replace {
                until,
                problem,
                skipped,
            };
            (why(w), e)
        }
        other => other,
    }
}

/// A node whose replacement was requested and that is still here: waiting, or past the deadline
/// (a person).
pub(super) fn replacing(r: &Record, now: Timestamp) -> Decided {
    let until = r.step_until.unwrap_or(now);
    if now < until {
        let w = LadderWhy::AwaitingReplacement { until };
        return (why(w), Effect::Nothing);
    }
    let why = format!(
        "the Node was deleted for its replacement and is still here at {} (a finalizer, or the deletion failed)",
        ts(until)
    );
    let mut failed = r.clone();
    let a = Attempt::new(
        Step::Replace,
        Outcome::PermanentFailure,
        r.step_at,
        now,
        &why,
    );
    failed.ended = attempt::with(failed.ended, a);
    escalate(&failed, why, now)
}

/// A node waiting for a person, its problem still held.
pub(super) fn waiting(r: &Record) -> Decided {
    let w = LadderWhy::WaitingForPerson {
        why: r.escalated.clone(),
        since: r.step_at,
    };
    (why(w), Effect::Nothing)
}
