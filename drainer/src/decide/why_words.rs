//! The words people read for each [`Why`] (pure): its `Display`, shown alike by the log line, the
//! Events, `plan` and `explain`.

use nodemedic_common::time::rfc3339 as ts;

use super::decision::Why;
use super::problem::fmt_d;

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use Why::*;
        match self {
            Excluded { .. }
            | NotSelected
            | OwnedByOther(_)
            | Healthy
            | KosmosExempt { .. }
            | NotHeldLongEnough { .. }
            | CordonedBySomeoneElse { .. }
            | CordonBudget { .. }
            | Cordon { .. } => self.fmt_new(f),
            DrainBudget { .. }
            | DrainSpacing { .. }
            | StartDrain { .. }
            | BlockedByPods { .. }
            | PodsNotListed { .. }
            | BreakerOpen { .. }
            | DomainOutage { .. }
            | DomainBudget { .. }
            | Flapping { .. }
            | Paused { .. }
            | TakenByPeer { .. }
            | WaitingForPeer { .. }
            | OutsideDrainWindow { .. } => self.fmt_held(f),
            Ladder(w) => write!(f, "{w}"),
            _ => self.fmt_recorded(f),
        }
    }
}

impl Why {
    /// A node without a record of ours.
    fn fmt_new(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Excluded { label } => write!(f, "excluded by label {label}"),
            Why::NotSelected => f.write_str("not selected by the node selector"),
            Why::OwnedByOther(owner) if owner.is_empty() => f.write_str(
                "its drain record names no drainer (written by an earlier release, or by hand); not touched",
            ),
            Why::OwnedByOther(owner) => {
                write!(f, "handled by another drainer ({owner}); not touched")
            }
            Why::Healthy => f.write_str("healthy"),
            Why::KosmosExempt { conditions } => write!(
                f,
                "Kosmos leaf node: not cordoned or drained for {}",
                conditions.join(", ")
            ),
            Why::NotHeldLongEnough { pending } => {
                write!(f, "condition not held long enough: {}", pending.join(", "))
            }
            Why::CordonedBySomeoneElse { problem } => {
                write!(
                    f,
                    "already cordoned by someone else; not touched ({problem})"
                )
            }
            Why::CordonBudget {
                used,
                limit,
                problem,
            } => write!(
                f,
                "cordon budget full: {used} of {limit} nodes cordoned ({problem})"
            ),
            Why::Cordon {
                problem,
                drain_at: Some(at),
            } => write!(f, "{problem}; drain at {}", ts(*at)),
            Why::Cordon {
                problem,
                drain_at: None,
            } => write!(f, "{problem}; drain skipped (--skip-drain)"),
            _ => Ok(()),
        }
    }

    /// A node with a record of ours.
    fn fmt_recorded(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::ReleasedEpisode => f.write_str(
                "uncordoned by a person during this problem episode; not cordoned again",
            ),
            Why::ForgetReleased => f.write_str("problem cleared; forgetting the released episode"),
            Why::LeftSelection { released: false } => f.write_str(
                "no longer selected by the node selector: held as it is, no further step taken, until its problem clears or a person lifts the hold",
            ),
            Why::LeftSelection { released: true } => f.write_str(
                "no longer selected by the node selector and its problem cleared: released",
            ),
            Why::ManualUncordon { what } => write!(
                f,
                "{what} by a person: released, not cordoned again for this problem episode"
            ),
            Why::ProblemBack { pending } => write!(
                f,
                "problem back before its min duration ({}); staying cordoned",
                pending.join(", ")
            ),
            Why::Recovering { left } => write!(f, "recovering; uncordon in {}", fmt_d(*left)),
            Why::FinishingDrain => {
                f.write_str("recovered while draining; finishing the drain in progress")
            }
            Why::Uncordon {
                during_buffer: true,
            } => f.write_str("recovered during the drain buffer: drain cancelled, uncordoning"),
            Why::Uncordon {
                during_buffer: false,
            } => f.write_str("conditions cleared: uncordoning"),
            Why::StartProbation { until } => write!(
                f,
                "conditions cleared: probation until {} (--uncordon-after), uncordoned then if still healthy",
                ts(*until)
            ),
            Why::Probation { until } => write!(
                f,
                "probation until {}: uncordoned then if still healthy",
                ts(*until)
            ),
            Why::ProbationPassed => f.write_str("healthy through its probation: uncordoning"),
            Why::Relapse { problem } => write!(
                f,
                "problem back during probation: held again, drained without a new buffer ({problem})"
            ),
            Why::Draining { problem } => write!(f, "drain in progress ({problem})"),
            Why::Drained { problem } => {
                write!(f, "drained; stays cordoned until recovery ({problem})")
            }
            Why::DeleteDrained { at, problem } => write!(
                f,
                "drained; the Node is deleted at {} (--delete-drained-node-after) ({problem})",
                ts(*at)
            ),
            Why::SkipDrain { problem } => {
                write!(f, "cordoned; drain skipped (--skip-drain) ({problem})")
            }
            Why::DrainScheduled { at, problem } => {
                write!(f, "drain scheduled at {} ({problem})", ts(*at))
            }
            Why::RetryScheduled { at, problem } => {
                write!(f, "drain failed; retry at {} ({problem})", ts(*at))
            }
            _ => Ok(()),
        }
    }

    /// Held back: budgets, spacing, protected pods, the safety gates.
    fn fmt_held(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::DrainBudget { used, limit } => {
                write!(f, "drain budget full: {used} of {limit} drains in flight")
            }
            Why::DrainSpacing { next } => write!(
                f,
                "drain starts are spaced by the buffer; next start at {}",
                ts(*next)
            ),
            Why::StartDrain { problem } => write!(f, "draining ({problem})"),
            Why::BlockedByPods { pods } => {
                write!(f, "drain blocked by protected pods: {}", pods.join(", "))
            }
            Why::PodsNotListed { what } => {
                write!(
                    f,
                    "{what} waits until every pod is listed (the drainer just started)"
                )
            }
            Why::BreakerOpen {
                trip,
                closing_at,
                cause,
            } => {
                write!(f, "breaker open: {trip}")?;
                if let Some(at) = closing_at {
                    write!(
                        f,
                        "; counts back under the thresholds, closing at {}",
                        ts(*at)
                    )?;
                }
                match cause {
                    Some(c) => write!(f, "; likely common cause: {c}"),
                    None => Ok(()),
                }
            }
            Why::DomainOutage { outage } => {
                write!(f, "{outage}; nothing in it is cordoned or drained")
            }
            Why::DomainBudget {
                domain,
                used,
                limit,
                problem,
            } => write!(
                f,
                "cordon budget of {domain} full: {used} of {limit} nodes cordoned ({problem})"
            ),
            Why::Flapping {
                changes,
                window,
                stable_at,
            } => write!(
                f,
                "flapping: {changes} condition changes within {}; not cordoned or drained until stable at {}",
                fmt_d(*window),
                ts(*stable_at)
            ),
            Why::Paused { pause } => write!(f, "{pause}"),
            Why::WaitingForPeer { why } => f.write_str(why),
            Why::TakenByPeer { peer, how } => write!(
                f,
                "left to {peer}, which is {how}: nothing new is started on it until {peer} lets go"
            ),
            Why::OutsideDrainWindow {
                next: Some(at),
                problem,
            } => write!(
                f,
                "cordoned; drains start inside the drain windows, next at {} ({problem})",
                ts(*at)
            ),
            Why::OutsideDrainWindow {
                next: None,
                problem,
            } => write!(
                f,
                "cordoned; no drain window opens within a week ({problem})"
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_that_names_no_drainer_is_said_so_not_as_an_empty_name() {
        let said = Why::OwnedByOther(String::new()).to_string();
        assert!(!said.contains("()"), "{said}");
        assert!(said.contains("names no drainer"), "{said}");
        assert_eq!(
            Why::OwnedByOther("edge".into()).to_string(),
            "handled by another drainer (edge); not touched"
        );
    }
}
