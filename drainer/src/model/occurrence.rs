//! What happens to a node, as values (pure): each occurrence knows its Event reason (draino's where
//! draino has one), its severity and its text. The record layer logs, counts, notifies and writes
//! the Event of each, together (vector's `internal_events` is the model).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::Severity;
use nodemedic_common::time::rfc3339;

/// Event source component of the drainer's Events.
pub(crate) const SOURCE: &str = "nodemedic-drainer";

/// Event reasons, draino's where draino has one.
pub mod reason {
    pub(crate) const CORDON_STARTING: &str = "CordonStarting";
    pub(crate) const CORDON_SUCCEEDED: &str = "CordonSucceeded";
    pub(crate) const CORDON_FAILED: &str = "CordonFailed";
    pub(crate) const DRAIN_SCHEDULED: &str = "DrainScheduled";
    pub(crate) const DRAIN_SCHEDULING_FAILED: &str = "DrainSchedulingFailed";
    pub(crate) const DRAIN_STARTING: &str = "DrainStarting";
    pub(crate) const DRAIN_SUCCEEDED: &str = "DrainSucceeded";
    pub(crate) const DRAIN_FAILED: &str = "DrainFailed";
    pub(crate) const UNCORDON_STARTING: &str = "UncordonStarting";
    pub(crate) const UNCORDON_SUCCEEDED: &str = "UncordonSucceeded";
    pub(crate) const UNCORDON_FAILED: &str = "UncordonFailed";
    pub(crate) const MARKED_DRAINED: &str = "MarkedDrained";
    pub(crate) const MARK_FAILED: &str = "MarkDrainedFailed";
    pub(crate) const NODE_DELETED: &str = "DeletingDrainedNode";
    pub(crate) const NODE_DELETE_FAILED: &str = "DeleteDrainedNodeFailed";
    pub(crate) const WAITING_FOR_BUDGET: &str = "WaitingForBudget";
    pub(crate) const POD_READINESS_STALE: &str = "PodReadinessStale";
    pub(crate) const POD_DELETION_BLOCKED: &str = "PodDeletionBlocked";
    pub(crate) const BREAKER_OPENED: &str = "CircuitBreakerOpened";
    pub(crate) const BREAKER_CLOSED: &str = "CircuitBreakerClosed";
    pub(crate) const OUTAGE_STARTED: &str = "DomainOutageStarted";
    pub(crate) const OUTAGE_ENDED: &str = "DomainOutageEnded";
    pub(crate) const NODE_FLAPPING: &str = "NodeFlapping";
    pub(crate) const POD_FORCE_DELETED: &str = "PodForceDeleted";
    pub(crate) const TAINT_SUCCEEDED: &str = "TaintSucceeded";
    pub(crate) const PROBATION_STARTED: &str = "ProbationStarted";
    pub(crate) const RELAPSED: &str = "ProblemBackInProbation";
    pub(crate) const POD_DELETED_BY_POLICY: &str = "PodDeletedByPolicy";
    pub(crate) const DETECTOR_SILENT: &str = "DetectorSilent";
    pub(crate) const DETECTOR_HEARD: &str = "DetectorHeardAgain";
    pub(crate) const COMMON_CAUSE: &str = "CommonCause";
    pub(crate) const RECORD_REJECTED: &str = "DrainRecordRejected";
    pub(crate) const CONFIG_REFUSED: &str = "ConfigReloadRefused";
    pub(crate) const STARTED_LOOSER: &str = "StartedLooser";
    pub(crate) const SYMPTOM_WRITE_FAILED: &str = "PodSymptomWriteFailed";
    pub(crate) const REBOOT_REQUESTED: &str = "RebootRequested";
    pub(crate) const RESTART_REQUESTED: &str = "RestartRequested";
    pub(crate) const RESTART_PROVEN: &str = "RestartProven";
    pub(crate) const POWER_CYCLE_REQUESTED: &str = "PowerCycleRequested";
    pub(crate) const POWER_CYCLE_FAILED: &str = "PowerCycleFailed";
    pub(crate) const ATTEMPT_ENDED: &str = "RemediationAttemptEnded";
    pub(crate) const REMEDIATION_DELETED: &str = "RemediationObjectDeleted";
    pub(crate) const REMEDIATION_DELETE_FAILED: &str = "RemediationObjectDeleteFailed";
    pub(crate) const SLOW_START_WIDENED: &str = "SlowStartWidened";
    pub(crate) const SLOW_START_NARROWED: &str = "SlowStartNarrowed";
    pub(crate) const DOMAIN_KEPT: &str = "FailureDomainKept";
    pub(crate) const LEFT_TO_PEER: &str = "LeftToAnotherRemediator";
    pub(crate) const REBOOT_PROVEN: &str = "RebootProven";
    pub(crate) const REPLACING: &str = "ReplacingNode";
    pub(crate) const MACHINE_MARKED: &str = "MarkedMachineForRemediation";
    pub(crate) const REPLACE_FAILED: &str = "ReplaceNodeFailed";
    pub(crate) const NEEDS_PERSON: &str = "NeedsPerson";
    pub(crate) const LADDER_WRITE_FAILED: &str = "RemediationWriteFailed";
}

/// How an Event of a dry run begins (`--dry-run`: nothing was changed).
pub(crate) const DRY_RUN: &str = "Dry run (nothing changed):";

/// Something that happened to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Occurrence {
    /// `dry_run`: nothing is written; the Event says the drainer would.
    CordonStarting {
        problem: String,
        dry_run: bool,
    },
    Cordoned {
        problem: String,
    },
    /// Held with taints (`taints`, as `KEY[=VALUE]:EFFECT`), and cordoned unless `--cordon=false`.
    Tainted {
        problem: String,
        taints: String,
        cordoned: bool,
    },
    CordonFailed {
        error: String,
    },
    DrainScheduled {
        at: Timestamp,
    },
    DrainSchedulingFailed {
        error: String,
    },
    DrainStarting {
        /// `namespace/name` of each pod to evict.
        pods: Vec<String>,
    },
    Drained {
        /// The node's pods the drain leaves running (`namespace/name (why)`): DaemonSet, mirror
        /// and protected pods.
        kept: Vec<String>,
    },
    DrainFailed {
        retry_in: Duration,
        failures: Vec<String>,
    },
    UncordonStarting {
        why: String,
        dry_run: bool,
    },
    Uncordoned {
        why: String,
    },
    UncordonFailed {
        error: String,
    },
    /// The after-drain labels, annotations and taints were set.
    Marked {
        marks: String,
    },
    MarkFailed {
        error: String,
    },
    NodeDeleted,
    NodeDeleteFailed {
        error: String,
    },
    /// The problem cleared: uncordoned at `until` if the node stays healthy; meanwhile it carries
    /// `taint` instead of the cordon, if one is configured.
    ProbationStarted {
        until: Timestamp,
        taint: Option<String>,
    },
    /// The problem came back during probation: held again.
    Relapsed {
        problem: String,
    },
    /// The drain record on the node is not one this drainer wrote for it (`why`): ignored.
    RecordRejected {
        why: String,
    },
    /// The node's pods say it is broken (`decide::symptoms`): `condition` set True with `reason`.
    Symptom {
        condition: &'static str,
        reason: &'static str,
        message: String,
    },
    /// That symptom is gone: `condition` set False with `reason`.
    SymptomCleared {
        condition: &'static str,
        reason: &'static str,
        message: &'static str,
    },
    /// A symptom's condition could not be written (retried at the next pass).
    SymptomWriteFailed {
        condition: &'static str,
        error: String,
    },
    /// A ladder step: the node's detector is asked to reboot it (its bootID now `boot_id`); the
    /// proof is due by `until`.
    /// A ladder's first step: the node's detector is asked to restart a component (`step`), proven
    /// by `until`.
    RestartRequested {
        step: crate::model::ladder::Step,
        until: Timestamp,
        problem: String,
    },
    /// Ready and the problem clear after the restart.
    RestartProven {
        step: crate::model::ladder::Step,
    },
    RebootRequested {
        boot_id: String,
        until: Timestamp,
        problem: String,
    },
    /// A ladder step: the power-cycle provider (`provider`, as it may be shown) accepted to reboot
    /// the node from outside (its bootID now `boot_id`); the proof is due by `until`.
    PowerCycleRequested {
        provider: String,
        boot_id: String,
        until: Timestamp,
        problem: String,
    },
    /// The power-cycle provider could not be asked, or refused: the node waits out the step's
    /// deadline, then the ladder goes on.
    PowerCycleFailed {
        provider: String,
        error: String,
        /// Past its retries for a passing reason (the step waits out its deadline), or refused.
        transient: bool,
    },
    /// A ladder step's attempt ended (`model::attempt`).
    AttemptEnded {
        attempt: super::attempt::Attempt,
    },
    /// Back with a new bootID, Ready and the problem clear.
    RebootProven,
    /// A ladder step: the Node is deleted so the cluster replaces it (gone by `until`); `why`: the
    /// decision in its words (a reboot passed over says why there).
    Replacing {
        until: Timestamp,
        why: String,
    },
    /// The medik8s remediation object `object` of an attempt that is over was deleted (its
    /// remediator lifts what it put on the node); `outcome`: what the remediator had said.
    RemediationDeleted {
        object: String,
        outcome: String,
    },
    /// It could not be (tried again at the next follow).
    RemediationDeleteFailed {
        object: String,
        error: String,
    },
    /// The node's Cluster API Machine was marked for its MachineHealthCheck to remediate.
    MachineMarked {
        machine: String,
    },
    /// The Node could not be deleted for its replacement.
    ReplaceFailed {
        error: String,
    },
    /// The ladder ended: the node waits for a person.
    NeedsPerson {
        why: String,
    },
    /// A ladder step's record could not be written (tried again).
    LadderWriteFailed {
        step: &'static str,
        error: String,
    },
}

impl Occurrence {
    pub(crate) fn reason(&self) -> &'static str {
        use Occurrence::*;
        match self {
            CordonStarting { .. } => reason::CORDON_STARTING,
            Cordoned { .. } => reason::CORDON_SUCCEEDED,
            Tainted { cordoned: true, .. } => reason::CORDON_SUCCEEDED,
            Tainted { .. } => reason::TAINT_SUCCEEDED,
            ProbationStarted { .. } => reason::PROBATION_STARTED,
            Relapsed { .. } => reason::RELAPSED,
            CordonFailed { .. } => reason::CORDON_FAILED,
            DrainScheduled { .. } => reason::DRAIN_SCHEDULED,
            DrainSchedulingFailed { .. } => reason::DRAIN_SCHEDULING_FAILED,
            DrainStarting { .. } => reason::DRAIN_STARTING,
            Drained { .. } => reason::DRAIN_SUCCEEDED,
            DrainFailed { .. } => reason::DRAIN_FAILED,
            UncordonStarting { .. } => reason::UNCORDON_STARTING,
            Uncordoned { .. } => reason::UNCORDON_SUCCEEDED,
            UncordonFailed { .. } => reason::UNCORDON_FAILED,
            Marked { .. } => reason::MARKED_DRAINED,
            MarkFailed { .. } => reason::MARK_FAILED,
            NodeDeleted => reason::NODE_DELETED,
            NodeDeleteFailed { .. } => reason::NODE_DELETE_FAILED,
            RecordRejected { .. } => reason::RECORD_REJECTED,
            Symptom { reason, .. } | SymptomCleared { reason, .. } => reason,
            SymptomWriteFailed { .. } => reason::SYMPTOM_WRITE_FAILED,
            RebootRequested { .. } => reason::REBOOT_REQUESTED,
            RestartRequested { .. } => reason::RESTART_REQUESTED,
            RestartProven { .. } => reason::RESTART_PROVEN,
            PowerCycleRequested { .. } => reason::POWER_CYCLE_REQUESTED,
            PowerCycleFailed { .. } => reason::POWER_CYCLE_FAILED,
            AttemptEnded { .. } => reason::ATTEMPT_ENDED,
            RebootProven => reason::REBOOT_PROVEN,
            Replacing { .. } => reason::REPLACING,
            ReplaceFailed { .. } => reason::REPLACE_FAILED,
            MachineMarked { .. } => reason::MACHINE_MARKED,
            RemediationDeleted { .. } => reason::REMEDIATION_DELETED,
            RemediationDeleteFailed { .. } => reason::REMEDIATION_DELETE_FAILED,
            NeedsPerson { .. } => reason::NEEDS_PERSON,
            LadderWriteFailed { .. } => reason::LADDER_WRITE_FAILED,
        }
    }

    pub(crate) fn severity(&self) -> Severity {
        use Occurrence::*;
        match self {
            CordonFailed { .. }
            | DrainSchedulingFailed { .. }
            | DrainFailed { .. }
            | UncordonFailed { .. }
            | MarkFailed { .. }
            | NodeDeleteFailed { .. }
            | RecordRejected { .. }
            | Symptom { .. }
            | SymptomWriteFailed { .. }
            | ReplaceFailed { .. }
            | PowerCycleFailed { .. }
            | AttemptEnded { .. }
            | RemediationDeleteFailed { .. }
            | NeedsPerson { .. }
            | LadderWriteFailed { .. }
            | Relapsed { .. } => Severity::Warning,
            _ => Severity::Normal,
        }
    }

    /// The Event text of the remediation ladder's reboots and replacements.
    fn ladder_message(&self) -> Option<String> {
        use Occurrence::*;
        Some(match self {
            RestartRequested {
                step,
                until,
                problem,
            } => format!(
                "Asking the node's detector to {step} (remediation ladder, before any cordon): proven by Ready and the problem clear by {}, else cordoned and drained ({problem})",
                rfc3339(*until)
            ),
            RestartProven { step } => {
                format!(
                    "{step} proven: Ready and the problem clear; the fence taint and the record removed"
                )
            }
            RebootRequested {
                boot_id,
                until,
                problem,
            } => format!(
                "Rebooting the drained node through its detector (remediation ladder): proven by a bootID other than {boot_id}, Ready and the problem clear by {} ({problem})",
                rfc3339(*until)
            ),
            PowerCycleRequested {
                provider,
                boot_id,
                until,
                problem,
            } => format!(
                "Power-cycling the drained node from outside through {provider} (remediation ladder): proven by a bootID other than {boot_id}, Ready and the problem clear by {} ({problem})",
                rfc3339(*until)
            ),
            PowerCycleFailed {
                provider,
                error,
                transient: true,
            } => format!(
                "Cannot power-cycle the node through {provider}: {error} (after its retries); the ladder goes on at the step's deadline, as the provider may still act"
            ),
            PowerCycleFailed {
                provider, error, ..
            } => format!(
                "Cannot power-cycle the node through {provider}: {error} (refused); the ladder goes on now"
            ),
            AttemptEnded { attempt } => format!("Remediation attempt: {attempt}"),
            RebootProven => "Reboot proven: a new bootID, Ready and the problem clear".into(),
            Replacing { until, why } => format!(
                "Replacing the node (remediation ladder): {why}. Where it names its Cluster API Machine, that Machine is marked for remediation instead; a person is needed if the Node is still here at {}",
                rfc3339(*until)
            ),
            _ => return None,
        })
    }

    /// The Event text (draino's wording).
    pub(crate) fn message(&self) -> String {
        use Occurrence::*;
        match self {
            RebootRequested { .. }
            | RestartRequested { .. }
            | RestartProven { .. }
            | PowerCycleRequested { .. }
            | PowerCycleFailed { .. }
            | AttemptEnded { .. }
            | RebootProven
            | Replacing { .. } => self.ladder_message().unwrap_or_default(),
            CordonStarting {
                problem,
                dry_run: false,
            } => format!("Cordoning node: {problem}"),
            CordonStarting { problem, .. } => {
                format!("{DRY_RUN} would cordon node: {problem}")
            }
            Cordoned { .. } => "Cordoned node".into(),
            Tainted {
                taints,
                cordoned: true,
                ..
            } => format!("Cordoned node and tainted it {taints}"),
            Tainted { taints, .. } => {
                format!("Tainted node {taints} (not cordoned: --cordon=false)")
            }
            ProbationStarted { until, taint } => format!(
                "Problem cleared: uncordoned at {} if the node stays healthy (probation, --uncordon-after){}",
                rfc3339(*until),
                taint
                    .as_ref()
                    .map(|t| format!("; meanwhile tainted {t} instead of cordoned"))
                    .unwrap_or_default()
            ),
            Relapsed { problem } => format!(
                "Problem back during probation: held again and drained without a new buffer ({problem})"
            ),
            CordonFailed { error } => format!("Cordoning failed: {error}"),
            DrainScheduled { at } => format!("Will drain node after {}", rfc3339(*at)),
            DrainSchedulingFailed { error } => format!("Failed to schedule the drain: {error}"),
            DrainStarting { pods } => format!(
                "Draining node: {} to evict{}",
                plural(pods.len(), "pod"),
                some_of(pods)
            ),
            Drained { kept } if kept.is_empty() => "Drained node".into(),
            Drained { kept } => format!(
                "Drained node; left running: {}{}",
                plural(kept.len(), "pod"),
                some_of(kept)
            ),
            DrainFailed { retry_in, failures } => format!(
                "Draining failed (retry in {}): {}",
                humantime::format_duration(*retry_in),
                failures.join("; ")
            ),
            UncordonStarting {
                why,
                dry_run: false,
            } => format!("Uncordoning node: {why}"),
            UncordonStarting { why, .. } => format!("{DRY_RUN} would uncordon node: {why}"),
            Uncordoned { .. } => "Uncordoned node".into(),
            UncordonFailed { error } => format!("Uncordoning failed: {error}"),
            Marked { marks } => format!("Marked the drained node for replacement: {marks}"),
            MarkFailed { error } => format!("Cannot mark the drained node: {error}"),
            NodeDeleted => "Deleting the drained node (--delete-drained-node-after)".into(),
            NodeDeleteFailed { error } => format!("Cannot delete the drained node: {error}"),
            RecordRejected { why } => format!(
                "Ignored the drain record (nodemedic.io/drain) on this node: {why}. The node is decided from its conditions as if it had no record; no cordon or taint is lifted on its word"
            ),
            Symptom {
                condition, message, ..
            } => format!("{condition}: {message}"),
            SymptomCleared {
                condition, message, ..
            } => format!("{condition} cleared: {message}"),
            SymptomWriteFailed { condition, error } => {
                format!("Cannot write the {condition} condition: {error}")
            }
            RemediationDeleted { object, outcome } => format!(
                "Deleted {object}, its power-cycle attempt over ({outcome}): its remediator lifts what it put on the node"
            ),
            RemediationDeleteFailed { object, error } => {
                format!("Cannot delete {object}, its power-cycle attempt over: {error}")
            }
            MachineMarked { machine } => format!(
                "Marked Machine {machine} for remediation (cluster.x-k8s.io/remediate-machine): its MachineHealthCheck replaces it"
            ),
            ReplaceFailed { error } => {
                format!("Cannot delete the Node for its replacement: {error}")
            }
            NeedsPerson { why } => format!(
                "Needs a person: {why}. The node stays cordoned and drained; uncordon it when fixed (or delete it)"
            ),
            LadderWriteFailed { step, error } => {
                format!("Cannot record the {step} step on the node: {error}")
            }
        }
    }
}

/// `1 pod`, `3 pods`.
fn plural(n: usize, what: &str) -> String {
    nodemedic_common::cli::counted(n, what)
}

/// `: a, b, c` and, past the first five, how many more.
fn some_of(names: &[String]) -> String {
    const SHOWN: usize = 5;
    if names.is_empty() {
        return String::new();
    }
    let mut s = format!(": {}", names[..names.len().min(SHOWN)].join(", "));
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

/// Why a pod is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvictionFor {
    Drain,
    StaleReadiness,
}

/// What happened to one eviction: logged and counted (a node's Events tell its drain's story; one
/// Event per PDB refusal would be a storm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodOccurrence {
    Evicted,
    RefusedByBudget {
        message: String,
    },
    EvictionFailed {
        error: String,
    },
    /// Deleted with grace 0 after its eviction did not complete (`--allow-force-delete`).
    ForceDeleted,
    /// Deleted (with its grace period) by a pod policy, once PodDisruptionBudgets had refused its
    /// eviction for `refused_for`.
    DeletedByPolicy {
        policy: String,
        refused_for: Duration,
    },
}

impl PodOccurrence {
    /// From the API server's answer.
    pub(crate) fn of(
        answer: &Result<nodemedic_common::evict::Evicted, super::cluster::ApiError>,
    ) -> PodOccurrence {
        use nodemedic_common::evict::Evicted;
        match answer {
            Ok(Evicted::Accepted | Evicted::Gone) => PodOccurrence::Evicted,
            Ok(Evicted::Refused(message)) => PodOccurrence::RefusedByBudget {
                message: message.clone(),
            },
            Err(e) => PodOccurrence::EvictionFailed {
                error: e.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_warnings_with_draino_reasons() {
        let o = Occurrence::DrainFailed {
            retry_in: Duration::from_secs(60),
            failures: vec!["default/web: not evicted before the deadline".into()],
        };
        assert_eq!(
            (o.reason(), o.severity()),
            ("DrainFailed", Severity::Warning)
        );
        assert_eq!(
            o.message(),
            "Draining failed (retry in 1m): default/web: not evicted before the deadline"
        );
        assert_eq!(
            Occurrence::Cordoned {
                problem: "x".into()
            }
            .severity(),
            Severity::Normal
        );
    }
}
