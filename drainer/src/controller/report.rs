//! What a round saw, told, I/O: the history file, the fleet-wide changes (their Events), what is
//! kept outside (the breaker, the memory, the reboot requests), the gauges, stale pods, the
//! symptoms, and each decision that changed, logged.

use k8s_openapi::jiff::Timestamp;

use super::{Controller, Tap, lease_reference};
use crate::decide::decision::Said;
use crate::decide::{Action, NodeDecision, Why};
use crate::model::cluster::Cluster;
use crate::model::occurrence::Occurrence;

impl<C: Cluster> Controller<C> {
    /// What the round saw, told: the history file, the fleet-wide changes, what is kept outside
    /// (the breaker, the memory, the reboot requests), the gauges, stale pods and the symptoms.
    pub(super) async fn report(&mut self, decided: usize, now: Timestamp) {
        self.record_history();
        self.record.metrics().decided.inc_by(decided as u64);
        self.report_fleet(now).await;
        self.publish_breaker();
        self.publish_records(now);
        self.publish_reboots();
        self.gauges();
        self.stale_readiness(now).await;
        self.report_symptoms(now).await;
    }

    /// The fleet-wide changes first (the breaker opening explains the holds that follow), then
    /// the records refused.
    async fn report_fleet(&mut self, now: Timestamp) {
        for event in self.fleet.take_events() {
            let regarding = self.read_lease(lease_reference);
            self.record.fleet(&event, regarding).await;
            self.tap(Tap::Fleet { at: now, event });
        }
        for (node, why) in self.fleet.take_rejected() {
            let why = why.to_string();
            self.record
                .node(&node, Occurrence::RecordRejected { why })
                .await;
        }
    }

    fn gauges(&self) {
        let m = &self.record.metrics();
        m.breaker_open.set(self.fleet.breaker().is_open() as i64);
        m.domain_outages.set(self.fleet.outages().len() as i64);
        m.held.set(self.fleet.held() as i64);
        m.paused.set(self.fleet.paused().is_some() as i64);
        m.needs_person.set(self.fleet.needs_person() as i64);
    }

    /// Log a decision when it changes (numbers and durations aside); a node that stays healthy is
    /// not news, and holds for a fleet-wide reason are logged once, by that reason's own line.
    pub(super) fn log_decision(&mut self, d: &NodeDecision) {
        let previous = self.fleet.note(&d.node, d.why.kind());
        let changed = previous != Some(d.why.kind());
        let fleet_wide = matches!(
            d.why,
            Why::BreakerOpen { .. } | Why::DomainOutage { .. } | Why::Paused { .. }
        );
        if !changed
            || (d.action() == Action::None && previous.is_none())
            || d.why == Why::NotSelected
        {
            return;
        }
        let Said { action, reason } = d.said(self.cfg.dry_run);
        if fleet_wide {
            tracing::debug!(node = %d.node, %action, %reason, "decision");
        } else {
            tracing::info!(node = %d.node, %action, %reason, "decision");
        }
    }
}
