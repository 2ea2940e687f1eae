//! A remediation ladder as data (`KernelDeadlock=True,10m: drain, reboot, power-cycle, replace`):
//! its steps, in one order, each stronger than the one before, and how it is written and read.
//! A ladder may begin with a restart of a component (`restart kubelet, drain, ...`), which the
//! node's detector carries out before anything is cordoned or drained.
//! `reboot` is the node's own (its detector reboots it); `power-cycle` reboots it from outside,
//! through a provider the drainer is configured with, for a node too hung to reboot itself. Pure. Here on
//! the ground floor because a node's drain record names its ladder and step (`model::record`);
//! the limits every ladder runs within are settings (`config::ladder`).

/// One step of a ladder.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// The kubelet's unit restarted by the node's detector, before any drain.
    #[serde(rename = "restart kubelet")]
    RestartKubelet,
    /// The container runtime's unit restarted likewise.
    #[serde(rename = "restart containerd")]
    RestartContainerd,
    Drain,
    Reboot,
    #[serde(rename = "power-cycle")]
    PowerCycle,
    Replace,
}

impl Step {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Step::RestartKubelet => "restart kubelet",
            Step::RestartContainerd => "restart containerd",
            Step::Drain => "drain",
            Step::Reboot => "reboot",
            Step::PowerCycle => "power-cycle",
            Step::Replace => "replace",
        }
    }

    /// A reboot (the node's own or from outside), proven by a new bootID.
    pub(crate) fn reboots(self) -> bool {
        matches!(self, Step::Reboot | Step::PowerCycle)
    }

    /// A component's restart, before the drain: proven by its health check coming back.
    pub(crate) fn restarts(self) -> bool {
        matches!(self, Step::RestartKubelet | Step::RestartContainerd)
    }

    /// What the node's detector is asked for this step, if anything.
    pub(crate) fn asks(self) -> Option<nodemedic_common::reboot::Action> {
        use nodemedic_common::reboot::Action;
        match self {
            Step::RestartKubelet => Some(Action::RestartKubelet),
            Step::RestartContainerd => Some(Action::RestartContainerd),
            Step::Reboot => Some(Action::Reboot),
            Step::Drain | Step::PowerCycle | Step::Replace => None,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The steps of a condition's ladder around the drain (which every ladder has): a restart before
/// it, and those past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Ladder {
    /// `Step::RestartKubelet` or `Step::RestartContainerd`, first.
    pub(crate) restart: Option<Step>,
    pub(crate) reboot: bool,
    pub(crate) power_cycle: bool,
    pub(crate) replace: bool,
}

/// A ladder that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LadderError {
    #[error(
        "{step:?} is not a step (the steps are restart kubelet, restart containerd, drain, reboot, power-cycle and replace)"
    )]
    Unknown { step: String },
    #[error("\"restart\" names what it restarts: \"restart kubelet\" or \"restart containerd\"")]
    RestartWhat,
    #[error("no steps after ':' (write the steps, e.g. \"drain, reboot\", or leave the ':' out)")]
    Empty,
    #[error(
        "a ladder starts with drain, or a restart and then drain (nothing is rebooted or replaced with work on it): \"drain, {first}\""
    )]
    NoDrainFirst { first: Step },
    #[error("{step} comes twice")]
    Twice { step: Step },
    #[error(
        "{later} comes after {earlier}: the steps go restart, drain, reboot, power-cycle, replace, each stronger than the last (one restart at most)"
    )]
    OutOfOrder { earlier: Step, later: Step },
}

impl Ladder {
    /// The steps in order: a restart, the drain, then the rest.
    pub(crate) fn steps(self) -> impl Iterator<Item = Step> {
        [
            self.restart,
            Some(Step::Drain),
            self.reboot.then_some(Step::Reboot),
            self.power_cycle.then_some(Step::PowerCycle),
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
        let mut words = s.split([',', ' ']).filter(|w| !w.is_empty()).peekable();
        while let Some(word) = words.next() {
            let step = match word.to_ascii_lowercase().as_str() {
                "restart" => match words.next().map(str::to_ascii_lowercase).as_deref() {
                    Some("kubelet") => Step::RestartKubelet,
                    Some("containerd") => Step::RestartContainerd,
                    _ => return Err(LadderError::RestartWhat),
                },
                "restart-kubelet" => Step::RestartKubelet,
                "restart-containerd" => Step::RestartContainerd,
                "drain" => Step::Drain,
                "reboot" => Step::Reboot,
                "power-cycle" => Step::PowerCycle,
                "replace" => Step::Replace,
                _ => return Err(LadderError::Unknown { step: word.into() }),
            };
            if steps.contains(&step) {
                return Err(LadderError::Twice { step });
            }
            if let Some(&earlier) = steps.last()
                && (earlier > step || (earlier.restarts() && step.restarts()))
            {
                return Err(LadderError::OutOfOrder {
                    earlier,
                    later: step,
                });
            }
            steps.push(step);
        }
        let restart = steps.first().copied().filter(|s| s.restarts());
        let after_restart = &steps[restart.is_some() as usize..];
        match after_restart.first() {
            None if restart.is_none() => Err(LadderError::Empty),
            None => Err(LadderError::NoDrainFirst {
                first: restart.unwrap_or(Step::Drain),
            }),
            Some(&first) if first != Step::Drain => Err(LadderError::NoDrainFirst { first }),
            Some(_) => Ok(Ladder {
                restart,
                reboot: steps.contains(&Step::Reboot),
                power_cycle: steps.contains(&Step::PowerCycle),
                replace: steps.contains(&Step::Replace),
            }),
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
                restart: None,
                reboot: true,
                power_cycle: false,
                replace: true
            }
        );
        let out: Ladder = "drain, reboot, power-cycle, replace".parse().unwrap();
        assert_eq!(out.to_string(), "drain, reboot, power-cycle, replace");
        let first: Ladder = "restart containerd, drain, reboot".parse().unwrap();
        assert_eq!(first.restart, Some(Step::RestartContainerd));
        assert_eq!(first.to_string(), "restart containerd, drain, reboot");
        assert_eq!(first.after(Step::RestartContainerd), Some(Step::Drain));
        assert_eq!(first.after(Step::Drain), Some(Step::Reboot));
        assert_eq!(
            "Restart-Kubelet drain"
                .parse::<Ladder>()
                .unwrap()
                .to_string(),
            "restart kubelet, drain"
        );
        assert!(Step::RestartKubelet.restarts() && !Step::RestartKubelet.reboots());
        assert_eq!(out.after(Step::Reboot), Some(Step::PowerCycle));
        assert_eq!(out.after(Step::PowerCycle), Some(Step::Replace));
        assert!(Step::PowerCycle.reboots() && !Step::Replace.reboots());
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
            "\"rebot\" is not a step (the steps are restart kubelet, restart containerd, drain, reboot, power-cycle and replace)"
        );
        assert!(err(" ").starts_with("no steps after ':'"));
        assert!(
            err("reboot").starts_with("a ladder starts with drain"),
            "{}",
            err("reboot")
        );
        assert_eq!(err("drain, reboot, reboot"), "reboot comes twice");
        assert!(err("restart, drain").contains("\"restart kubelet\" or"));
        assert!(err("restart kubelet, reboot").starts_with("a ladder starts with drain"));
        assert!(err("restart kubelet").starts_with("a ladder starts with drain"));
        assert!(err("drain, restart kubelet").starts_with("restart kubelet comes after drain"));
        assert!(err("restart kubelet, restart containerd, drain").contains("one restart at most"));
        assert!(err("drain, replace, reboot").starts_with("reboot comes after replace"));
        assert!(err("drain, power-cycle, reboot").starts_with("reboot comes after power-cycle"));
    }
}
