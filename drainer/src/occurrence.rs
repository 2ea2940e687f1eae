//! Logging and counting what happens ([`crate::model::occurrence`]): one place per kind of
//! occurrence for its log line and its metric; the actor writes its Event and notification with
//! them, so the four never drift apart. I/O (logs, metrics).

use std::time::Duration;

use nodemedic_common::events::Severity;

use crate::metrics::{Metrics, Outcome};
use crate::model::occurrence::{EvictionFor, Occurrence, PodOccurrence, reason};

impl Occurrence {
    /// The log line for `node` (the starting steps are logged by their outcome).
    pub fn log(&self, node: &str) {
        use Occurrence::*;
        match self {
            Cordoned { problem } => tracing::info!(%node, reason = %problem, "cordoned"),
            CordonFailed { error } => tracing::warn!(%node, %error, "cordon failed"),
            DrainSchedulingFailed { error } => {
                tracing::warn!(%node, %error, "cannot set DrainScheduled")
            }
            Drained => tracing::info!(%node, "drained"),
            DrainFailed { retry_in, failures } => {
                tracing::warn!(%node, ?failures, ?retry_in, "drain failed")
            }
            Uncordoned { why } => tracing::info!(%node, %why, "uncordoned"),
            UncordonFailed { error } => tracing::warn!(%node, %error, "uncordon failed"),
            Marked { marks } => tracing::info!(%node, %marks, "marked drained"),
            MarkFailed { error } => tracing::warn!(%node, %error, "cannot mark drained"),
            NodeDeleted => tracing::info!(%node, "deleted the drained node"),
            NodeDeleteFailed { error } => {
                tracing::warn!(%node, %error, "cannot delete the drained node")
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
    pub fn count(&self, m: &Metrics) {
        use Occurrence::*;
        match self {
            Cordoned { .. } => m.cordoned(Outcome::Succeeded),
            CordonFailed { .. } => m.cordoned(Outcome::Failed),
            DrainScheduled { .. } => m.drain_scheduled(Outcome::Succeeded),
            DrainSchedulingFailed { .. } => m.drain_scheduled(Outcome::Failed),
            Drained => m.drained(Outcome::Succeeded),
            DrainFailed { .. } => m.drained(Outcome::Failed),
            Uncordoned { .. } => m.uncordoned(Outcome::Succeeded),
            UncordonFailed { .. } => m.uncordoned(Outcome::Failed),
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

/// A fleet-wide change, or a node starting to flap, as one log line, metric, Event and
/// notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetyOccurrence {
    pub reason: &'static str,
    pub severity: Severity,
    pub message: String,
    pub metric: crate::metrics::SafetyEvent,
    /// The notification's `event`.
    pub notify: &'static str,
    pub node: Option<String>,
    pub domain: Option<String>,
}

impl SafetyOccurrence {
    pub fn of(ev: &crate::decide::fleet::FleetEvent) -> SafetyOccurrence {
        use crate::decide::fleet::FleetEvent::*;
        use crate::metrics::SafetyEvent as M;
        let (reason, severity, message, metric, notify, node, domain) = match ev {
            BreakerOpened { trip: why } => (
                reason::BREAKER_OPENED,
                Severity::Warning,
                format!(
                    "Circuit breaker opened ({why}): nothing new is cordoned or drained until it closes"
                ),
                M::BreakerOpened,
                "breaker_opened",
                None,
                None,
            ),
            BreakerClosed { open_for } => (
                reason::BREAKER_CLOSED,
                Severity::Normal,
                format!(
                    "Circuit breaker closed after {}: remediation resumes",
                    humantime::format_duration(Duration::from_secs(open_for.as_secs()))
                ),
                M::BreakerClosed,
                "breaker_closed",
                None,
                None,
            ),
            OutageStarted(o) => (
                reason::OUTAGE_STARTED,
                Severity::Warning,
                format!("Domain {o}: treated as a partition, nothing in it is cordoned or drained"),
                M::OutageStarted,
                "outage_started",
                None,
                Some(o.domain.clone()),
            ),
            OutageEnded { domain } => (
                reason::OUTAGE_ENDED,
                Severity::Normal,
                format!("Outage in {domain} ended: its nodes are decided one by one again"),
                M::OutageEnded,
                "outage_ended",
                None,
                Some(domain.clone()),
            ),
            Flapping { node, changes } => (
                reason::NODE_FLAPPING,
                Severity::Warning,
                format!(
                    "Node conditions changed {changes} times in a short while: not cordoned or drained until stable"
                ),
                M::NodeFlapping,
                "node_flapping",
                Some(node.clone()),
                None,
            ),
        };
        SafetyOccurrence {
            reason,
            severity,
            message,
            metric,
            notify,
            node,
            domain,
        }
    }

    pub fn log(&self) {
        match self.severity {
            Severity::Warning => tracing::warn!(
                reason = self.reason,
                node = self.node.as_deref().unwrap_or(""),
                domain = self.domain.as_deref().unwrap_or(""),
                "{}",
                self.message
            ),
            Severity::Normal => tracing::info!(
                reason = self.reason,
                node = self.node.as_deref().unwrap_or(""),
                domain = self.domain.as_deref().unwrap_or(""),
                "{}",
                self.message
            ),
        }
    }
}

impl PodOccurrence {
    /// Log and count it for `pod` (namespace/name).
    pub fn emit(&self, pod: &str, what: EvictionFor, m: &Metrics) {
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
        };
        match what {
            EvictionFor::Drain => m.eviction(result),
            EvictionFor::StaleReadiness => m.stale_eviction(result),
        }
    }
}
