//! The remediation ladder of a problem condition (`KernelDeadlock=True,10m: drain, reboot,
//! replace`) and the limits every ladder runs within. Pure.
//!
//! The steps come in one order, each stronger than the one before: the drain (what a condition
//! without a ladder gets, as draino does), a reboot proven by a new `bootID`, the replacement of
//! the Node. Every ladder starts with the drain (nothing is rebooted with work on it) and ends with
//! *needs a person*: the node stays cordoned and people are told. A condition written without a
//! ladder keeps draino's behaviour: cordon, drain, then wait for the problem to clear.

use std::time::Duration;

/// One step of a ladder.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Drain,
    Reboot,
    Replace,
}

impl Step {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Step::Drain => "drain",
            Step::Reboot => "reboot",
            Step::Replace => "replace",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The steps of a condition's ladder past the drain (which every ladder starts with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Ladder {
    pub(crate) reboot: bool,
    pub(crate) replace: bool,
}

/// A ladder that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LadderError {
    #[error("{step:?} is not a step (the steps are drain, reboot and replace)")]
    Unknown { step: String },
    #[error("no steps after ':' (write the steps, e.g. \"drain, reboot\", or leave the ':' out)")]
    Empty,
    #[error(
        "a ladder starts with drain (nothing is rebooted or replaced with work on it): \"drain, {first}\""
    )]
    NoDrainFirst { first: Step },
    #[error("{step} comes twice")]
    Twice { step: Step },
    #[error(
        "{later} comes after {earlier}: the steps go drain, reboot, replace, each stronger than the last"
    )]
    OutOfOrder { earlier: Step, later: Step },
}

impl Ladder {
    /// The steps in order, the drain first.
    pub(crate) fn steps(self) -> impl Iterator<Item = Step> {
        [
            Some(Step::Drain),
            self.reboot.then_some(Step::Reboot),
            self.replace.then_some(Step::Replace),
        ]
        .into_iter()
        .flatten()
    }

    /// The step after `step` on this ladder (None: the end, a person).
    pub(crate) fn after(self, step: Step) -> Option<Step> {
        self.steps().find(|s| *s > step)
    }
}

impl std::fmt::Display for Ladder {
    /// As written after the condition's ':' (`drain, reboot, replace`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let steps: Vec<&str> = self.steps().map(Step::as_str).collect();
        f.write_str(&steps.join(", "))
    }
}

impl std::str::FromStr for Ladder {
    type Err = LadderError;

    /// `drain, reboot, replace` (commas, spaces or both between steps).
    fn from_str(s: &str) -> Result<Ladder, LadderError> {
        let mut steps = Vec::new();
        for word in s.split([',', ' ']).filter(|w| !w.is_empty()) {
            let step = match word.to_ascii_lowercase().as_str() {
                "drain" => Step::Drain,
                "reboot" => Step::Reboot,
                "replace" => Step::Replace,
                _ => return Err(LadderError::Unknown { step: word.into() }),
            };
            if steps.contains(&step) {
                return Err(LadderError::Twice { step });
            }
            if let Some(&earlier) = steps.last()
                && earlier > step
            {
                return Err(LadderError::OutOfOrder {
                    earlier,
                    later: step,
                });
            }
            steps.push(step);
        }
        match steps.first() {
            None => Err(LadderError::Empty),
            Some(&first) if first != Step::Drain => Err(LadderError::NoDrainFirst { first }),
            Some(_) => Ok(Ladder {
                reboot: steps.contains(&Step::Reboot),
                replace: steps.contains(&Step::Replace),
            }),
        }
    }
}

/// What every ladder runs within (flags and `--config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A reboot is proven when the node comes back with a new `bootID`, Ready, the problem clear,
    /// within this long of the request (`--reboot-deadline`, default 20m).
    pub(crate) reboot_deadline: Duration,
    /// A replacement is proven when the Node is gone within this long (`--replace-deadline`,
    /// default 30m).
    pub(crate) replace_deadline: Duration,
    /// At most this many reboots of one node in 24 hours (`--max-reboots-per-node-per-day`,
    /// default 1); past it the ladder goes on to its next step.
    pub(crate) max_reboots_per_day: u32,
    /// At most this many Nodes replaced in any hour, over the whole fleet
    /// (`--max-replacements-per-hour`, default 2, as draino's DataDog fork).
    pub(crate) max_replacements_per_hour: u32,
    /// How each failure domain earns the width of its slow start (`decide::gates::slow_start`).
    pub(crate) pacing: Pacing,
}

/// How a failure domain earns width: a remediated node must stay healthy `dwell` after its proof
/// (`--slow-start-dwell`, default 5m), and widenings are `cooldown` apart (`--slow-start-cooldown`,
/// default 5m).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    pub(crate) dwell: Duration,
    pub(crate) cooldown: Duration,
}

impl Default for Pacing {
    fn default() -> Pacing {
        Pacing {
            dwell: Duration::from_secs(300),
            cooldown: Duration::from_secs(300),
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            reboot_deadline: Duration::from_secs(20 * 60),
            replace_deadline: Duration::from_secs(30 * 60),
            max_reboots_per_day: 1,
            max_replacements_per_hour: 2,
            pacing: Pacing::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_in_order_from_the_drain() {
        let l: Ladder = "drain, reboot, replace".parse().unwrap();
        assert_eq!(
            l,
            Ladder {
                reboot: true,
                replace: true
            }
        );
        assert_eq!(l.to_string(), "drain, reboot, replace");
        assert_eq!(
            "drain,replace".parse::<Ladder>().unwrap().to_string(),
            "drain, replace"
        );
        assert_eq!(
            "Drain Reboot".parse::<Ladder>().unwrap().to_string(),
            "drain, reboot"
        );
        assert_eq!("drain".parse::<Ladder>().unwrap(), Ladder::default());
        assert_eq!(l.after(Step::Drain), Some(Step::Reboot));
        assert_eq!(l.after(Step::Reboot), Some(Step::Replace));
        assert_eq!(l.after(Step::Replace), None);
        let skip: Ladder = "drain, replace".parse().unwrap();
        assert_eq!(skip.after(Step::Drain), Some(Step::Replace));
        assert_eq!(
            skip.after(Step::Reboot),
            Some(Step::Replace),
            "a reboot past its limit goes on"
        );
    }

    #[test]
    fn a_ladder_that_is_not_one_says_why() {
        let err = |s: &str| s.parse::<Ladder>().unwrap_err().to_string();
        assert_eq!(
            err("drain, rebot"),
            "\"rebot\" is not a step (the steps are drain, reboot and replace)"
        );
        assert!(err(" ").starts_with("no steps after ':'"));
        assert!(
            err("reboot").starts_with("a ladder starts with drain"),
            "{}",
            err("reboot")
        );
        assert_eq!(err("drain, reboot, reboot"), "reboot comes twice");
        assert!(err("drain, replace, reboot").starts_with("reboot comes after replace"));
    }
}
