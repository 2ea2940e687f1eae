//! The log line and the metric of each occurrence ([`crate::model::occurrence`]), one match per
//! kind, used by the [`Recorder`](super::Recorder) only. I/O (logs, metrics).

use crate::metrics::{LadderStep, Metrics, Outcome, StepResult};
use crate::model::occurrence::{EvictionFor, Occurrence, PodOccurrence};

impl Occurrence {
    /// The log line for `node` (the starting steps are logged by their outcome).
    pub(crate) fn log(&self, node: &str) {
        use Occurrence::*;
        match self {
            Cordoned { problem } => tracing::info!(%node, reason = %problem, "cordoned"),
            Tainted {
                problem,
                taints,
                cordoned,
            } => tracing::info!(%node, reason = %problem, %taints, cordoned, "tainted"),
            ProbationStarted { until, taint } => {
                tracing::info!(%node, %until, taint = taint.as_deref().unwrap_or(""), "probation started")
            }
            Relapsed { problem } => {
                tracing::warn!(%node, reason = %problem, "problem back during probation: held again")
            }
            CordonFailed { error } => tracing::warn!(%node, %error, "cordon failed"),
            DrainSchedulingFailed { error } => {
                tracing::warn!(%node, %error, "cannot set DrainScheduled")
            }
            Drained { kept } => tracing::info!(%node, left_running = kept.len(), "drained"),
            DrainFailed { retry_in, failures } => {
                tracing::warn!(%node, failures = %failures.join("; "), retry_in = %humantime::format_duration(*retry_in), "drain failed")
            }
            Uncordoned { why } => tracing::info!(%node, %why, "uncordoned"),
            UncordonFailed { error } => tracing::warn!(%node, %error, "uncordon failed"),
            Marked { marks } => tracing::info!(%node, %marks, "marked drained"),
            MarkFailed { error } => tracing::warn!(%node, %error, "cannot mark drained"),
            NodeDeleted => tracing::info!(%node, "deleted the drained node"),
            NodeDeleteFailed { error } => {
                tracing::warn!(%node, %error, "cannot delete the drained node")
            }
            RecordRejected { why } => {
                tracing::warn!(%node, %why, "drain record on the node is not ours: ignored")
            }
            Symptom {
                condition, message, ..
            } => tracing::warn!(%node, %condition, %message, "the node's pods say it is broken"),
            SymptomCleared { condition, .. } => {
                tracing::info!(%node, %condition, "symptom cleared")
            }
            SymptomWriteFailed { condition, error } => {
                tracing::warn!(%node, %condition, %error, "cannot write the symptom's condition")
            }
            RestartRequested { step, until, .. } => {
                tracing::info!(%node, %step, %until, "restart requested (remediation ladder)")
            }
            RestartProven { step } => tracing::info!(%node, %step, "restart proven"),
            RebootRequested { boot_id, until, .. } => {
                tracing::info!(%node, %boot_id, %until, "reboot requested (remediation ladder)")
            }
            PowerCycleRequested {
                provider,
                boot_id,
                until,
                ..
            } => {
                tracing::info!(%node, %provider, %boot_id, %until, "power-cycle requested (remediation ladder)")
            }
            PowerCycleFailed {
                provider,
                error,
                transient,
            } => {
                tracing::warn!(%node, %provider, %error, transient, "cannot power-cycle the node")
            }
            AttemptEnded { attempt } => {
                let (step, outcome) = (attempt.step, attempt.outcome);
                tracing::info!(%node, %step, %outcome, why = %attempt.why, "remediation attempt ended")
            }
            RebootProven => tracing::info!(%node, "reboot proven"),
            Replacing { until, why } => {
                tracing::info!(%node, %until, %why, "replacing the node (remediation ladder)")
            }
            ReplaceFailed { error } => {
                tracing::warn!(%node, %error, "cannot delete the Node for its replacement")
            }
            NeedsPerson { why } => tracing::warn!(%node, %why, "needs a person"),
            RemediationDeleted { object, outcome } => {
                tracing::info!(%node, %object, %outcome, "remediation object deleted, its attempt over")
            }
            RemediationDeleteFailed { object, error } => {
                tracing::warn!(%node, %object, %error, "cannot delete the remediation object")
            }
            MachineMarked { machine } => {
                tracing::info!(%node, %machine, "marked the Machine for remediation")
            }
            LadderWriteFailed { step, error } => {
                tracing::warn!(%node, %step, %error, "cannot record the ladder step; retrying")
            }
            CordonStarting { .. }
            | DrainScheduled { .. }
            | DrainStarting { .. }
            | UncordonStarting { .. } => {
                tracing::debug!(%node, reason = self.reason(), "{}", self.message())
            }
        }
    }

    /// Count it (draino's metric names).
    pub(crate) fn count(&self, m: &Metrics) {
        use Occurrence::*;
        match self {
            Cordoned { .. } | Tainted { .. } | Relapsed { .. } => m.cordoned(Outcome::Succeeded),
            ProbationStarted { .. } => {
                m.probations.inc();
            }
            RecordRejected { .. } => {
                m.records_rejected.inc();
            }
            // Counted as nodes with the condition after each pass (`symptom_nodes`).
            Symptom { .. } | SymptomCleared { .. } | SymptomWriteFailed { .. } => {}
            CordonFailed { .. } => m.cordoned(Outcome::Failed),
            DrainScheduled { .. } => m.drain_scheduled(Outcome::Succeeded),
            DrainSchedulingFailed { .. } => m.drain_scheduled(Outcome::Failed),
            Drained { .. } => m.drained(Outcome::Succeeded),
            DrainFailed { .. } => m.drained(Outcome::Failed),
            Uncordoned { .. } => m.uncordoned(Outcome::Succeeded),
            UncordonFailed { .. } => m.uncordoned(Outcome::Failed),
            RebootRequested { .. } => m.remediation(LadderStep::Reboot, StepResult::Started),
            RestartRequested { .. } => m.remediation(LadderStep::Restart, StepResult::Started),
            RestartProven { .. } => m.remediation(LadderStep::Restart, StepResult::Proven),
            PowerCycleRequested { .. } => {
                m.remediation(LadderStep::PowerCycle, StepResult::Started)
            }
            PowerCycleFailed { .. } => m.remediation(LadderStep::PowerCycle, StepResult::Failed),
            AttemptEnded { attempt } => m.attempt(attempt),
            RebootProven => m.remediation(LadderStep::Reboot, StepResult::Proven),
            Replacing { .. } => m.remediation(LadderStep::Replace, StepResult::Started),
            ReplaceFailed { .. } => m.remediation(LadderStep::Replace, StepResult::Failed),
            NeedsPerson { .. } => m.remediation(LadderStep::Person, StepResult::Started),
            LadderWriteFailed { .. }
            | MachineMarked { .. }
            | RemediationDeleted { .. }
            | RemediationDeleteFailed { .. } => {}
            CordonStarting { .. }
            | DrainStarting { .. }
            | UncordonStarting { .. }
            | Marked { .. }
            | MarkFailed { .. }
            | NodeDeleted
            | NodeDeleteFailed { .. } => {}
        }
    }
}

impl PodOccurrence {
    /// Log and count it for `pod` (namespace/name).
    pub(crate) fn log_and_count(&self, pod: &str, what: EvictionFor, m: &Metrics) {
        use crate::metrics::Eviction;
        let result = match self {
            PodOccurrence::Evicted => {
                tracing::debug!(%pod, ?what, "evicted");
                Eviction::Succeeded
            }
            PodOccurrence::RefusedByBudget { message } => {
                tracing::info!(%pod, ?what, %message, "eviction refused by a PodDisruptionBudget; retrying");
                Eviction::PdbRefused
            }
            PodOccurrence::EvictionFailed { error } => {
                tracing::warn!(%pod, ?what, %error, "eviction failed; retrying");
                Eviction::Failed
            }
            PodOccurrence::ForceDeleted => {
                tracing::warn!(%pod, ?what, "force-deleted (grace period 0): its eviction did not complete by the drain's deadline (--allow-force-delete)");
                Eviction::ForceDeleted
            }
            PodOccurrence::DeletedByPolicy {
                policy,
                refused_for,
            } => {
                tracing::warn!(%pod, %policy, refused_for = %humantime::format_duration(*refused_for), "deleted instead of evicted (pod policy): PodDisruptionBudgets kept refusing its eviction");
                m.pod_policy(crate::metrics::PolicyOutcome::Deleted);
                return;
            }
        };
        match what {
            EvictionFor::Drain => m.eviction(result),
            EvictionFor::StaleReadiness => m.stale_eviction(result),
        }
    }
}
