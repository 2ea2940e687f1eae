//! A node's decision as data (pure): what to do ([`Action`]), why, with the facts ([`Why`]), and
//! what the shell must write ([`Effect`]). `Display` of [`Why`] is the reason people read.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::evictions::PodPlan;
use super::facts::{Outage, Pause, Trip};
use crate::config::policy::PolicyAction;
use crate::model::intern::ArcStr;
use crate::model::ladder::Step;
use crate::model::pod::PodInfo;
use crate::model::record::{Phase, Record};

/// What the plan says for a node (the `action` of `drainer plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Action {
    None,
    Cordon,
    Drain,
    Uncordon,
    Wait,
    Skip,
    /// Held back by a fleet safety gate (breaker, outage, flapping, pause).
    Hold,
    /// Delete the drained Node (`--delete-drained-node-after`).
    Delete,
    /// Recovered: probation starts (`--uncordon-after`).
    Probation,
    /// A ladder's first step: the node's detector restarts a component (before any cordon).
    Restart,
    /// A ladder step: the node's detector reboots it.
    Reboot,
    /// A ladder step: the node is rebooted from outside, through the configured provider.
    PowerCycle,
    /// A ladder step: the Node is deleted so the cluster replaces it.
    Replace,
    /// The ladder ended: a person is needed.
    Escalate,
}

impl Action {
    /// The action a decision takes: what its effect does, or, when it does nothing, what its
    /// reason says the node is doing (skipped, waiting, held, or nothing to do). Derived, never
    /// stored beside the decision.
    pub(crate) fn of(why: &Why, effect: &Effect) -> Action {
        match effect {
            Effect::Cordon(_) | Effect::Relapse(_) => Action::Cordon,
            Effect::Drain(_) => Action::Drain,
            Effect::Uncordon(_) => Action::Uncordon,
            Effect::Probation(_) => Action::Probation,
            Effect::DeleteNode => Action::Delete,
            Effect::Reboot(r) => Action::of_step(r.step.unwrap_or(Step::Reboot)),
            Effect::Replace(_) => Action::Replace,
            Effect::Escalate(_) => Action::Escalate,
            Effect::Release(_) | Effect::Forget => Action::None,
            Effect::Nothing => why.at_rest(),
        }
    }

    /// What taking the ladder step `s` is.
    pub(crate) fn of_step(s: Step) -> Action {
        match s {
            Step::RestartKubelet | Step::RestartContainerd => Action::Restart,
            Step::Drain => Action::Drain,
            Step::Reboot => Action::Reboot,
            Step::PowerCycle => Action::PowerCycle,
            Step::Replace => Action::Replace,
        }
    }

    /// Whether carrying it out writes to the cluster (a dry run then only says it would).
    pub(crate) fn writes(self) -> bool {
        !matches!(
            self,
            Action::None | Action::Wait | Action::Skip | Action::Hold
        )
    }

    /// The action as every place that shows a decision says it: `cordon`, or under a dry run
    /// `would cordon` (the log, `plan`, `explain` and the Events say it the same way).
    pub(crate) fn said(self, dry_run: bool) -> String {
        if dry_run && self.writes() {
            format!("would {self}")
        } else {
            self.to_string()
        }
    }

    /// As `drainer plan` writes it (`none`, `cordon`, ...).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Cordon => "cordon",
            Action::Drain => "drain",
            Action::Uncordon => "uncordon",
            Action::Wait => "wait",
            Action::Skip => "skip",
            Action::Hold => "hold",
            Action::Delete => "delete",
            Action::Probation => "probation",
            Action::Restart => "restart",
            Action::Reboot => "reboot",
            Action::PowerCycle => "power-cycle",
            Action::Replace => "replace",
            Action::Escalate => "escalate",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the controller must write besides the action itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    Nothing,
    /// Cordon and store this record.
    Cordon(Record),
    /// Start (or resume) the drain: everything the drain needs.
    Drain(DrainJob),
    /// Uncordon (if we hold the cordon), remove our taints, the record and the DrainScheduled
    /// condition: the record as it is on the node.
    Uncordon(Record),
    /// A person lifted our cordon or a taint of ours: store the record as released, and lift the
    /// rest of our hold (a half-held node would surprise whoever released it).
    Release(Record),
    /// Probation starts: store this record, with its cordon and taints (a probation taint may
    /// replace the cordon and the problem's taints).
    Probation(Record),
    /// The problem came back during probation: cordon and taint again as this record says.
    Relapse(Record),
    /// The problem is gone and the node is not cordoned by us: remove the record.
    Forget,
    /// Delete the Node object (drained long enough ago).
    DeleteNode,
    /// A ladder step that reboots, as the record's step says: the node's own (phase `rebooting`,
    /// with the fence taint; the request its detector reads follows from it) or a power-cycle
    /// from outside (the provider is asked once the record is stored).
    Reboot(Record),
    /// A ladder step: store this record (phase `replacing`), then delete the Node.
    Replace(Record),
    /// The ladder ended: store this record (phase `needsperson`) and tell people.
    Escalate(Record),
}

/// Why the decision is what it is, with the facts behind it as values; `Display` gives the human text
/// (the `reason` of `drainer plan`). The shell matches on variants to choose metrics and Events, and
/// logs a decision when its [`Why::kind`] changes (the text ages with durations every round).
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// Opted out by `label` (`KEY=VALUE`).
    Excluded {
        label: String,
    },
    NotSelected,
    /// The record belongs to another drainer (its Lease name).
    OwnedByOther(String),
    Healthy,
    /// A Kosmos leaf node: these held conditions do not count.
    KosmosExempt {
        conditions: Vec<String>,
    },
    /// Matching conditions, not held their min duration yet.
    NotHeldLongEnough {
        pending: Vec<String>,
    },
    CordonedBySomeoneElse {
        problem: String,
    },
    CordonBudget {
        used: usize,
        limit: usize,
        problem: String,
    },
    /// Cordon now; drain at `drain_at` (`None`: `--skip-drain`).
    Cordon {
        problem: String,
        drain_at: Option<Timestamp>,
    },
    ReleasedEpisode,
    ForgetReleased,
    /// A person lifted our hold (`what`: uncordoned, or which taint was removed).
    ManualUncordon {
        what: String,
    },
    /// A node we hold that the policy no longer selects: no step is taken on it. `released`: its
    /// problem cleared, so our hold goes; else it is held as it is.
    LeftSelection {
        released: bool,
    },
    ProblemBack {
        pending: Vec<String>,
    },
    Recovering {
        left: Duration,
    },
    FinishingDrain,
    /// Recovered: uncordon (`during_buffer`: before the drain started).
    Uncordon {
        during_buffer: bool,
    },
    /// Recovered: healthy until `until` and it is uncordoned (`--uncordon-after`).
    StartProbation {
        until: Timestamp,
    },
    /// In probation until `until`.
    Probation {
        until: Timestamp,
    },
    /// Healthy through its probation: uncordon.
    ProbationPassed,
    /// The problem came back during probation: held again, drained without a new buffer.
    Relapse {
        problem: String,
    },
    Draining {
        problem: String,
    },
    Drained {
        problem: String,
    },
    /// Drained this long ago: the Node is deleted (or at `at`).
    DeleteDrained {
        at: Timestamp,
        problem: String,
    },
    SkipDrain {
        problem: String,
    },
    DrainScheduled {
        at: Timestamp,
        problem: String,
    },
    RetryScheduled {
        at: Timestamp,
        problem: String,
    },
    DrainBudget {
        used: usize,
        limit: usize,
    },
    DrainSpacing {
        next: Timestamp,
    },
    StartDrain {
        problem: String,
    },
    BlockedByPods {
        pods: Vec<String>,
    },
    /// A new leader's pod list is still coming: the drain (or the ladder step) waits for it, as
    /// `what` says.
    PodsNotListed {
        what: &'static str,
    },
    /// The circuit breaker is open: why, and when it closes if the counts stay under the
    /// thresholds.
    BreakerOpen {
        trip: Trip,
        closing_at: Option<Timestamp>,
        /// The common cause reported for the nodes failing now, if one was.
        cause: Option<String>,
    },
    /// The node's failure domain is in an outage.
    DomainOutage {
        outage: Outage,
    },
    /// The domain's cordon budget is full.
    DomainBudget {
        domain: String,
        used: usize,
        limit: usize,
        problem: String,
    },
    /// Its watched conditions flap: nothing until stable.
    Flapping {
        changes: usize,
        window: Duration,
        stable_at: Timestamp,
    },
    /// Paused through the drainer's Lease (who, since when, why).
    Paused {
        pause: Pause,
    },
    /// Another remediator has taken the node (`how`: what it does, and the mark that says so).
    TakenByPeer {
        peer: super::facts::Peer,
        how: String,
    },
    /// A reboot or power-cycle waits for another remediator's reboots (`why`: whose, and how many
    /// its lock allows).
    WaitingForPeer {
        why: String,
    },
    /// Cordoned; drains start only inside a drain window (`None`: none opens within a week).
    OutsideDrainWindow {
        next: Option<Timestamp>,
        problem: String,
    },
    /// Where the node is on its remediation ladder (`decide::ladder`).
    Ladder(super::ladder::why::LadderWhy),
}

impl Why {
    /// The decision without its facts (what decides whether a decision is news).
    pub fn kind(&self) -> std::mem::Discriminant<Why> {
        std::mem::discriminant(self)
    }

    /// Whether a gate holds the node back from what it would otherwise get (a budget, the
    /// breaker, an outage, flapping, a pause, a window, pods that block its drain).
    /// The action of a decision for this reason that does nothing this round.
    fn at_rest(&self) -> Action {
        use super::ladder::why::LadderWhy as L;
        match self {
            Why::Excluded { .. }
            | Why::NotSelected
            | Why::OwnedByOther(_)
            | Why::KosmosExempt { .. } => Action::Skip,
            Why::PodsNotListed { .. }
            | Why::LeftSelection { released: false }
            | Why::BreakerOpen { .. }
            | Why::DomainOutage { .. }
            | Why::Flapping { .. }
            | Why::Paused { .. }
            | Why::TakenByPeer { .. }
            | Why::Ladder(L::RequestHeld { .. }) => Action::Hold,
            Why::NotHeldLongEnough { .. }
            | Why::CordonBudget { .. }
            | Why::DomainBudget { .. }
            | Why::ProblemBack { .. }
            | Why::Recovering { .. }
            | Why::Probation { .. }
            | Why::DrainScheduled { .. }
            | Why::RetryScheduled { .. }
            | Why::DrainBudget { .. }
            | Why::DrainSpacing { .. }
            | Why::BlockedByPods { .. }
            | Why::OutsideDrainWindow { .. }
            | Why::WaitingForPeer { .. }
            | Why::Ladder(
                L::AwaitingReboot { .. }
                | L::AwaitingRestart { .. }
                | L::AwaitingReplacement { .. }
                | L::ReplaceBudget { .. }
                | L::SlowStart { .. },
            ) => Action::Wait,
            _ => Action::None,
        }
    }

    /// The budget a node waits for that its WaitingForBudget Event and metric name (`None`: none,
    /// or a wait without one: a domain's budget, the slow start).
    pub(crate) fn budget(&self) -> Option<crate::metrics::Budget> {
        match self {
            Why::CordonBudget { .. } => Some(crate::metrics::Budget::Cordons),
            Why::DrainBudget { .. } => Some(crate::metrics::Budget::Drains),
            _ => None,
        }
    }

    pub(crate) fn is_gate(&self) -> bool {
        matches!(
            self,
            Why::CordonBudget { .. }
                | Why::DrainBudget { .. }
                | Why::DrainSpacing { .. }
                | Why::BlockedByPods { .. }
                | Why::PodsNotListed { .. }
                | Why::BreakerOpen { .. }
                | Why::DomainOutage { .. }
                | Why::DomainBudget { .. }
                | Why::Flapping { .. }
                | Why::Paused { .. }
                | Why::TakenByPeer { .. }
                | Why::WaitingForPeer { .. }
                | Why::OutsideDrainWindow { .. }
        )
    }
}

/// What a drain needs: the node's record as read, and the pods to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainJob {
    pub(crate) record: Record,
    pub(crate) evict: Vec<ToEvict>,
    /// The node's pods the drain leaves running, `namespace/name (why)` (finished pods aside).
    pub(crate) kept: Vec<String>,
}

/// A pod a drain evicts, and the pod policy that has it waited for or deleted, if one does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToEvict {
    pub(crate) pod: PodInfo,
    /// The policy's name, and its action (`Wait` or `Delete`; a plain eviction has none).
    pub(crate) policy: Option<(String, PolicyAction)>,
}

impl ToEvict {
    /// Evicted as the built-in rules say.
    #[cfg(test)]
    pub fn plain(pod: PodInfo) -> ToEvict {
        ToEvict { pod, policy: None }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeDecision {
    pub node: ArcStr,
    pub why: Why,
    pub(crate) effect: Effect,
    /// For cordon and drain: what would happen to each pod.
    pub(crate) pods: Vec<PodPlan>,
    /// When the clock alone changes this decision (a min duration or drain time reached).
    pub(crate) wake: Option<Timestamp>,
}

impl NodeDecision {
    /// What it does ([`Action::of`] its reason and effect).
    pub(crate) fn action(&self) -> Action {
        Action::of(&self.why, &self.effect)
    }

    /// Why, in the words every form shows (the log line, `plan`, `explain`, the Events that say
    /// the decision): derived from [`Why`], never stored beside it.
    pub(crate) fn reason(&self) -> String {
        self.why.to_string()
    }

    /// The action and the reason as every form shows them: under a dry run, "would" before an
    /// action that writes.
    pub(crate) fn said(&self, dry_run: bool) -> Said {
        Said {
            action: self.action().said(dry_run),
            reason: self.reason(),
        }
    }
}

/// A decision as shown: [`NodeDecision::said`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) action: String,
    pub(crate) reason: String,
}

impl DrainJob {
    /// Filled in by the round once the node's pods are decided.
    pub(crate) fn pending() -> DrainJob {
        DrainJob {
            record: Record {
                phase: Phase::Draining,
                ..Default::default()
            },
            evict: Vec::new(),
            kept: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_action_is_said_as_the_plan_writes_it() {
        use super::Action;
        for a in [
            Action::None,
            Action::Cordon,
            Action::Hold,
            Action::Probation,
        ] {
            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json.as_str(), Some(a.to_string().as_str()));
        }
    }
}
