//! One node's decision (pure): opt-out label, selection, then either what our record says we did
//! (release after a manual uncordon, uncordon on recovery, drain when due, retry after failure) or
//! whether a new problem warrants a cordon, within the safety gates and the budgets.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;

use super::budget::Budgets;
use super::candidate::Candidate;
use super::decision::{Action, DrainJob, Effect, Why};
use super::gates::Gates;
use super::problem::Problem;
use crate::config::Config;
use crate::model::record::{Phase, Record};

pub(super) fn decide_node(
    c: &Candidate,
    record: Option<&Record>,
    p: &Problem,
    gates: &Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
    let (node, selected) = (c.node, c.selected);
    if node.label(&cfg.exclude_label.0) == Some(cfg.exclude_label.1.as_str()) {
        let label = format!("{}={}", cfg.exclude_label.0, cfg.exclude_label.1);
        return (Action::Skip, Why::Excluded { label }, Effect::Nothing);
    }
    if !selected && record.is_none() {
        return (Action::Skip, Why::NotSelected, Effect::Nothing);
    }
    let unschedulable = node.unschedulable;
    let bad = !p.held.is_empty();
    let pending = || p.pending.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
    let Some(r) = record else {
        return decide_new(c, unschedulable, p, gates, cfg, now, b);
    };
    // Paused: nothing is written (a drain already evicting finishes).
    let paused = || {
        gates.pause.as_ref().map(|p| {
            (
                Action::Hold,
                Why::Paused { pause: p.clone() },
                Effect::Nothing,
            )
        })
    };
    if r.phase == Phase::Released {
        return if bad && p.episode == r.episode {
            (Action::None, Why::ReleasedEpisode, Effect::Nothing)
        } else if !bad && p.pending.is_empty() {
            if let Some(h) = paused() {
                return h;
            }
            (Action::None, Why::ForgetReleased, Effect::Forget)
        } else {
            // A new episode: as if there were no record.
            decide_new(c, unschedulable, p, gates, cfg, now, b)
        };
    }
    if !unschedulable {
        if let Some(h) = paused() {
            return h;
        }
        let mut released = r.clone();
        released.phase = Phase::Released;
        b.uncordoned(c.domain);
        if r.phase == Phase::Draining {
            b.draining -= 1;
        }
        return (Action::None, Why::ManualUncordon, Effect::Release(released));
    }
    if !bad {
        if !p.pending.is_empty() {
            let why = Why::ProblemBack { pending: pending() };
            return (Action::Wait, why, Effect::Nothing);
        }
        if let Some(left) = p.recovering {
            return (Action::Wait, Why::Recovering { left }, Effect::Nothing);
        }
        if r.phase == Phase::Draining {
            // Finish what was started: evictions already went out.
            return (
                Action::Drain,
                Why::FinishingDrain,
                Effect::Drain(DrainJob::pending()),
            );
        }
        if let Some(h) = paused() {
            return h;
        }
        b.uncordoned(c.domain);
        let during_buffer = r.phase == Phase::Cordoned;
        return (
            Action::Uncordon,
            Why::Uncordon { during_buffer },
            Effect::Uncordon,
        );
    }
    by_phase(c, r, p, gates, cfg, now, b)
}

/// A problem node we cordoned: what its record's phase calls for now.
fn by_phase(
    c: &Candidate,
    r: &Record,
    p: &Problem,
    gates: &Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
    let problem = p.held.join(", ");
    match r.phase {
        Phase::Draining => (
            Action::Drain,
            Why::Draining { problem },
            Effect::Drain(DrainJob::pending()),
        ),
        Phase::Drained => match (cfg.after_drain.delete_after, r.finished_at) {
            (Some(after), Some(finished)) => {
                let at = add(finished, after);
                if at > now {
                    return (
                        Action::None,
                        Why::DeleteDrained { at, problem },
                        Effect::Nothing,
                    );
                }
                if let Some(why) = gates.hold(c) {
                    return (Action::Hold, why, Effect::Nothing);
                }
                (
                    Action::Delete,
                    Why::DeleteDrained { at, problem },
                    Effect::DeleteNode,
                )
            }
            _ => (Action::None, Why::Drained { problem }, Effect::Nothing),
        },
        Phase::Cordoned if cfg.skip_drain => {
            (Action::None, Why::SkipDrain { problem }, Effect::Nothing)
        }
        Phase::Cordoned | Phase::Failed => start_drain(c, r, problem, gates, cfg, now, b),
        Phase::Released => unreachable!("handled above"),
    }
}

/// A cordoned node whose drain (or its retry) may be due: held, waiting for its time, a window
/// or a budget, or started now.
fn start_drain(
    c: &Candidate,
    r: &Record,
    problem: String,
    gates: &Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
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
        return (Action::Wait, why, Effect::Nothing);
    }
    if let Some(why) = gates.hold(c) {
        return (Action::Hold, why, Effect::Nothing);
    }
    if let Err(next) = gates.window {
        let why = Why::OutsideDrainWindow { next, problem };
        return (Action::Wait, why, Effect::Nothing);
    }
    if b.draining >= cfg.max_drains_in_flight {
        let why = Why::DrainBudget {
            used: b.draining,
            limit: cfg.max_drains_in_flight,
        };
        return (Action::Wait, why, Effect::Nothing);
    }
    if let Some(next) = b.last_drain_start.map(|last| add(last, cfg.drain_buffer))
        && next > now
    {
        return (Action::Wait, Why::DrainSpacing { next }, Effect::Nothing);
    }
    b.draining += 1;
    b.prior_drain_start = b.last_drain_start;
    b.last_drain_start = Some(now);
    (
        Action::Drain,
        Why::StartDrain { problem },
        Effect::Drain(DrainJob::pending()),
    )
}

/// A node without a record of ours.
fn decide_new(
    c: &Candidate,
    unschedulable: bool,
    p: &Problem,
    gates: &Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
    if p.held.is_empty() {
        if !p.pending.is_empty() {
            let pending = p.pending.iter().map(|(d, _)| d.clone()).collect();
            return (
                Action::Wait,
                Why::NotHeldLongEnough { pending },
                Effect::Nothing,
            );
        }
        if !p.exempted.is_empty() {
            let why = Why::KosmosExempt {
                conditions: p.exempted.clone(),
            };
            return (Action::Skip, why, Effect::Nothing);
        }
        return (Action::None, Why::Healthy, Effect::Nothing);
    }
    let problem = p.held.join(", ");
    if unschedulable {
        return (
            Action::None,
            Why::CordonedBySomeoneElse { problem },
            Effect::Nothing,
        );
    }
    if let Some(why) = gates.hold(c) {
        return (Action::Hold, why, Effect::Nothing);
    }
    if let (Some(d), Some(budget)) = (c.domain, &cfg.safety.max_cordoned_per_domain) {
        let size = gates.domains.get(d).map_or(1, |t| t.size);
        let (used, limit) = (
            b.domain_cordoned.get(d).copied().unwrap_or(0),
            budget.limit(size),
        );
        if used >= limit {
            let why = Why::DomainBudget {
                domain: d.to_string(),
                used,
                limit,
                problem,
            };
            return (Action::Wait, why, Effect::Nothing);
        }
    }
    if b.cordoned >= b.cordon_limit {
        let why = Why::CordonBudget {
            used: b.cordoned,
            limit: b.cordon_limit,
            problem,
        };
        return (Action::Wait, why, Effect::Nothing);
    }
    b.cordoned += 1;
    if let Some(d) = c.domain {
        *b.domain_cordoned.entry(d.to_string()).or_default() += 1;
    }
    let record = Record {
        owner: cfg.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Cordoned,
        cordoned_at: now,
        drain_at: add(now, cfg.drain_buffer),
        drain_started: None,
        finished_at: None,
        attempts: 0,
        retry_at: None,
    };
    let drain_at = (!cfg.skip_drain).then_some(record.drain_at);
    (
        Action::Cordon,
        Why::Cordon { problem, drain_at },
        Effect::Cordon(record),
    )
}
