//! What a ladder decision tells the rest once it is written (pure): the slow start's news (a
//! proof, a step that failed) and the attempts it ended (`model::attempt`), for the Events and the
//! metrics.

use super::LadderWhy;
use crate::config::Config;
use crate::decide::decision::{Effect, NodeDecision, Why};
use crate::model::attempt::{Attempt, Outcome};
use crate::model::ladder::Step;
use crate::model::node::NodeView;
use crate::model::record::{Phase, Record};

/// What a ladder decision tells the slow start once written.
pub(crate) enum PaceNote {
    /// A reboot (None) or a restart (its step) proven.
    Proven(Option<Step>),
    Failed(String),
}

/// The slow start's news in `d` for the node as `view` shows it: a reboot proven, a step that
/// failed (the ladder goes on from a reboot or a replacement), or a problem back after one.
pub(crate) fn pace_note(d: &NodeDecision, view: &NodeView, cfg: &Config) -> Option<PaceNote> {
    if let Why::Ladder(LadderWhy::RebootProven { .. }) = d.why {
        return Some(PaceNote::Proven(None));
    }
    if let Why::Ladder(LadderWhy::RestartProven { step }) = d.why {
        return Some(PaceNote::Proven(Some(step)));
    }
    match &d.effect {
        // A restart not proven by its deadline: cordoned as the ladder goes on.
        Effect::Cordon(r) if r.step.is_some_and(Step::restarts) => {
            return Some(PaceNote::Failed(
                "its restart did not clear the problem".into(),
            ));
        }
        Effect::Relapse(r) if r.step.is_some() => {
            return Some(PaceNote::Failed(
                "its problem came back after its remediation".into(),
            ));
        }
        // Only a step's end reads what the node's record was (a seal check: not one for every
        // decision of every round).
        Effect::Replace(_) | Effect::Escalate(_) => {}
        _ => return None,
    }
    let was = Record::of(view, &cfg.records, &cfg.owner)?;
    match (&d.effect, was.phase) {
        (Effect::Replace(_) | Effect::Escalate(_), Phase::Rebooting) => {
            Some(PaceNote::Failed("its reboot was not proven".into()))
        }
        (Effect::Escalate(_), Phase::Replacing) => {
            Some(PaceNote::Failed("its replacement did not happen".into()))
        }
        _ => None,
    }
}

/// The attempts `d` ends, once written: those its record adds to the node's (a proof that ends
/// the record, the reboot's or the restart's, too).
pub(crate) fn ended_now(
    d: &NodeDecision,
    view: &NodeView,
    cfg: &Config,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<Attempt> {
    let record = match &d.effect {
        Effect::Cordon(r)
        | Effect::Relapse(r)
        | Effect::Release(r)
        | Effect::Probation(r)
        | Effect::Reboot(r)
        | Effect::Replace(r)
        | Effect::Escalate(r) => r,
        Effect::Uncordon(r) => {
            let proven = matches!(
                d.why,
                Why::Ladder(LadderWhy::RebootProven { .. } | LadderWhy::RestartProven { .. })
            );
            return match (proven, r.step) {
                (true, Some(step)) => {
                    vec![Attempt::new(step, Outcome::Succeeded, r.step_at, now, "")]
                }
                _ => Vec::new(),
            };
        }
        _ => return Vec::new(),
    };
    if record.ended.is_empty() {
        return Vec::new();
    }
    let was = Record::of(view, &cfg.records, &cfg.owner)
        .map(|r| r.ended)
        .unwrap_or_default();
    (record.ended.iter())
        .filter(|a| !was.contains(a))
        .cloned()
        .collect()
}
