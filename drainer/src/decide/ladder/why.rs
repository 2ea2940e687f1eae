//! Why the remediation ladder is where it is, with the facts as values, and the words people read
//! (`Display`). Pure.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION;
use nodemedic_common::time::rfc3339 as ts;

use crate::config::ladder::Step;

/// Why the ladder is where it is, with the facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LadderWhy {
    /// Its problem held, the ladder's first step: restart the component (`step`) now, before any
    /// cordon (the proof is due by `until`).
    Restart {
        step: Step,
        until: Timestamp,
        problem: String,
    },
    /// Restarting: waiting for Ready and the problem to clear until `until`; then cordon and drain.
    AwaitingRestart { step: Step, until: Timestamp },
    /// Ready and the problem clear after the restart: the fence and the record go.
    RestartProven { step: Step },
    /// Drained: reboot it now (the proof is due by `until`).
    Reboot { until: Timestamp, problem: String },
    /// Drained, or its own reboot not proven: reboot it from outside through `provider` now (the
    /// proof is due by `until`).
    PowerCycle {
        until: Timestamp,
        problem: String,
        provider: String,
    },
    /// Rebooting: waiting for the proof (`booted`: a new bootID is seen, Ready or the problem not
    /// yet).
    AwaitingReboot {
        until: Timestamp,
        booted: bool,
        next: Option<Step>,
    },
    /// A step under way whose request the node's detector carries out, withdrawn while `hold`
    /// holds it (stored state keeps no request standing past the gates, issue 76): the deadline
    /// `until` does not end it; once nothing holds it, a step withheld past its deadline starts
    /// again.
    RequestHeld {
        step: Step,
        hold: String,
        until: Timestamp,
    },
    /// Back with a new bootID, Ready and the problem clear: probation until then (None:
    /// uncordoned now).
    RebootProven { probation_until: Option<Timestamp> },
    /// Drained: delete the Node so the cluster replaces it; `skipped`: why a reboot the ladder
    /// names before it was passed over.
    Replace {
        until: Timestamp,
        problem: String,
        skipped: Option<String>,
    },
    /// Replacing: waiting for the Node to go.
    AwaitingReplacement { until: Timestamp },
    /// The replacement budget of the last hour is used up; the next one is possible at `next`.
    ReplaceBudget {
        used: usize,
        limit: u32,
        next: Option<Timestamp>,
    },
    /// The ladder ends here: a person is needed, for `why`.
    NeedsPerson { why: String },
    /// Waiting for a person since `since` (the node stays cordoned).
    WaitingForPerson {
        why: String,
        since: Option<Timestamp>,
    },
    /// The node vetoes its remediation: the ladder stops before `step`.
    Vetoed { step: Step },
    /// A Kosmos leaf is never rebooted nor replaced.
    KosmosLeaf,
    /// The slow start of the node's failure domain ("" for none) allows `width` steps at once
    /// and `used` are under way.
    SlowStart {
        domain: String,
        used: usize,
        width: u32,
    },
}

impl LadderWhy {
    /// When the clock alone changes the decision: a step's deadline, the replacement budget's
    /// next slot, a probation's end.
    pub(crate) fn wake(&self) -> Option<Timestamp> {
        match self {
            LadderWhy::AwaitingReboot { until, .. }
            | LadderWhy::AwaitingReplacement { until }
            | LadderWhy::AwaitingRestart { until, .. } => Some(*until),
            LadderWhy::ReplaceBudget { next, .. } => *next,
            LadderWhy::RebootProven { probation_until } => *probation_until,
            _ => None,
        }
    }
}

impl LadderWhy {
    /// The restart's words, and the slow start's.
    fn fmt_restart_and_pace(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LadderWhy::Restart {
                step,
                until,
                problem,
            } => write!(
                f,
                "{step} first, by the node's detector (not cordoned): proven by Ready and the problem clear by {}, else cordoned and drained ({problem})",
                ts(*until)
            ),
            LadderWhy::AwaitingRestart { step, until } => write!(
                f,
                "{step} requested; waiting for Ready and the problem to clear until {}; cordon and drain then",
                ts(*until)
            ),
            LadderWhy::RestartProven { step } => write!(
                f,
                "{step} proven: Ready and the problem clear; the fence and the record go"
            ),
            LadderWhy::SlowStart {
                domain,
                used,
                width,
            } => {
                let domain = if domain.is_empty() {
                    "nodes without a failure domain"
                } else {
                    domain
                };
                write!(
                    f,
                    "slow start: {used} of {width} remediation(s) under way in {domain}; it widens as remediated nodes stay healthy"
                )
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for LadderWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LadderWhy::Restart { .. }
            | LadderWhy::AwaitingRestart { .. }
            | LadderWhy::RestartProven { .. } => self.fmt_restart_and_pace(f),
            LadderWhy::Reboot { until, problem } => write!(
                f,
                "drained; rebooting it: proven by a new bootID, Ready and the problem clear by {} ({problem})",
                ts(*until)
            ),
            LadderWhy::PowerCycle {
                until,
                problem,
                provider,
            } => write!(
                f,
                "power-cycling it through {provider}: proven by a new bootID, Ready and the problem clear by {} ({problem})",
                ts(*until)
            ),
            LadderWhy::AwaitingReboot {
                until,
                booted,
                next,
            } => {
                let seen = if *booted {
                    "back with a new bootID; waiting for Ready and the problem to clear"
                } else {
                    "reboot requested; waiting for a new bootID"
                };
                let then = next.map_or("a person is needed".to_string(), |s| format!("{s} then"));
                write!(f, "{seen} until {}; {then}", ts(*until))
            }
            LadderWhy::RequestHeld { step, hold, until } => write!(
                f,
                "{step} under way, its request withdrawn while {hold}: the node's detector carries out nothing meanwhile; if still held at {} it starts again once nothing holds it",
                ts(*until)
            ),
            LadderWhy::RebootProven { probation_until } => {
                f.write_str("reboot proven: a new bootID, Ready and the problem clear; ")?;
                match probation_until {
                    Some(t) => write!(f, "probation until {}", ts(*t)),
                    None => f.write_str("uncordoning"),
                }
            }
            LadderWhy::Replace {
                until,
                problem,
                skipped,
            } => {
                f.write_str("drained; ")?;
                if let Some(s) = skipped {
                    write!(f, "no reboot: {s}; ")?;
                }
                write!(
                    f,
                    "deleting the Node so the cluster replaces it (gone by {}) ({problem})",
                    ts(*until)
                )
            }
            LadderWhy::AwaitingReplacement { until } => write!(
                f,
                "replacement requested: the Node is deleted; a person is needed if it is still here at {}",
                ts(*until)
            ),
            LadderWhy::ReplaceBudget { used, limit, next } => {
                write!(
                    f,
                    "replacement budget used: {used} of {limit} in the last hour"
                )?;
                match next {
                    Some(at) => write!(f, "; next possible at {}", ts(*at)),
                    None => Ok(()),
                }
            }
            LadderWhy::NeedsPerson { why } => write!(f, "needs a person: {why}"),
            LadderWhy::WaitingForPerson { why, since } => {
                write!(f, "needs a person")?;
                if let Some(t) = since {
                    write!(f, " since {}", ts(*t))?;
                }
                write!(f, ": {why}; stays cordoned")
            }
            LadderWhy::Vetoed { step } => write!(
                f,
                "{DO_NOT_REMEDIATE_ANNOTATION} is set: no {step}; stays cordoned for a person"
            ),
            LadderWhy::KosmosLeaf => {
                f.write_str("a Kosmos leaf node is never rebooted nor replaced; stays cordoned")
            }
            LadderWhy::SlowStart { .. } => self.fmt_restart_and_pace(f),
        }
    }
}
