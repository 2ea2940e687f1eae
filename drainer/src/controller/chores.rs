//! The controller's chores besides decisions, I/O: one WaitingForBudget Event per wait (its count
//! refreshed), stale pod readiness reported and, when configured, evicted, and the detector
//! watchdog's placement read at each resync. When is decided by `decide::schedule` and
//! `decide::watchdog` (pure); this reads and writes what they say.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::{NodeEvent, Severity};

use super::Controller;
use crate::decide::watchdog::Placement;
use crate::metrics::Budget;
use crate::model::cluster::Cluster;
use crate::model::occurrence::{SOURCE, reason};

impl<C: Cluster> Controller<C> {
    /// At each resync: read where the detector DaemonSet runs, then check every selected node's
    /// detector (the fleet reports those that fell silent or were heard again). A DaemonSet that
    /// cannot be read leaves only the nodes whose detector reported before watched; said once.
    pub(super) async fn watch_detectors(&mut self, now: Timestamp) {
        let w = &self.cfg.watchdog;
        if w.silent_after.is_none() {
            return;
        }
        let placement = match &w.daemonset {
            None => Placement::Everywhere,
            Some((ns, name)) => match self.exec.cluster().daemon_set(ns, name).await {
                Ok(Some(ds)) => Placement::of(&ds),
                Ok(None) => {
                    if self.fleet.placement() != &Placement::Unknown || !self.placement_said {
                        tracing::warn!(daemonset = %format!("{ns}/{name}"), "the detector DaemonSet does not exist: only nodes whose detector reported before are watched for silence (set --detector-daemonset)");
                    }
                    Placement::Unknown
                }
                Err(e) => {
                    if self.fleet.placement() != &Placement::Unknown || !self.placement_said {
                        tracing::warn!(daemonset = %format!("{ns}/{name}"), error = %e, "cannot read the detector DaemonSet: only nodes whose detector reported before are watched for silence");
                    }
                    Placement::Unknown
                }
            },
        };
        self.placement_said = true;
        if self.fleet.set_placement(placement) {
            tracing::info!(placement = ?self.fleet.placement(), "detector placement read");
        }
        self.fleet.watch_detectors(now);
        self.metrics
            .silent_detectors
            .set(self.fleet.silent_count() as i64);
    }

    /// Note a node's wait for a budget when [`BudgetWaits`](crate::decide::schedule::BudgetWaits)
    /// says so (one Event per wait).
    pub(super) async fn budget_wait(&mut self, node: &str, budget: Option<Budget>, now: Timestamp) {
        if let Some(b) = budget {
            self.metrics.budget_wait(b);
        }
        let Some(note) = self
            .waits
            .observe(node, budget, now, self.cfg.event_refresh)
        else {
            return;
        };
        let ev = NodeEvent {
            source: SOURCE.into(),
            severity: Severity::Normal,
            reason: reason::WAITING_FOR_BUDGET.into(),
            message: note.message().into(),
            count: note.count,
            first_seen: note.first_seen,
            last_seen: now,
        };
        let written = self.record.episode(node, note.existing, &ev).await;
        self.waits.noted(node, written);
    }

    /// Report pods whose readiness a node flap left stale, and evict them when configured, as
    /// [`StaleSchedule`](crate::decide::schedule::StaleSchedule) says. Looks only at pods whose own
    /// readiness is stale (kept apart by the cache), on nodes this drainer selects (another drainer
    /// has its own).
    pub(super) async fn stale_readiness(&mut self, now: Timestamp) {
        let Some(threshold) = self.cfg.stale_readiness else {
            return;
        };
        let candidates = self.observed.stale_pods();
        let fleet = &self.fleet;
        let stale = crate::decide::stale::stale_among(
            candidates.iter().map(|p| &**p),
            |n| {
                fleet
                    .view(n)
                    .filter(|_| fleet.selected(n))
                    .and_then(|v| v.ready_since())
            },
            threshold,
            now,
        );
        self.metrics.stale_pods.set(stale.len() as i64);
        let evict = self.cfg.evict_stale_pods;
        let due = self.stale.plan(stale, now, evict, crate::act::PDB_RETRY);
        for d in due {
            if d.evict {
                self.exec.evict_stale(&d.stale).await;
            }
            if !d.report {
                continue;
            }
            self.metrics.stale_reported.inc();
            let action = match (&d.stale.exempt, evict) {
                (Some(why), _) => format!("never evicted ({why})"),
                (None, true) => "evicting it so its controller recreates it".to_string(),
                (None, false) => "not evicted (enable with --evict-stale-pods)".to_string(),
            };
            let message = format!(
                "Pod is Ready=False although all its containers are ready, and its node {} has been Ready for over {}: \
                 the readiness is stale (left from a node flap) and Services exclude the pod; {action}",
                d.stale.node,
                humantime::format_duration(threshold)
            );
            self.record.stale(&d.stale, message).await;
        }
    }
}
