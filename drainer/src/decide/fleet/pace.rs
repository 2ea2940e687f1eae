//! The fleet's side of the slow start (`decide::gates::slow_start`): the ladder steps the
//! controller saw proven or failed move their domain's pace, and the pace moves on with the clock.
//! Pure.

use k8s_openapi::jiff::Timestamp;

use super::{Fleet, FleetEvent};
use crate::decide::gates::slow_start::NO_DOMAIN;

impl Fleet {
    /// The domain `node` is paced in.
    fn pace_domain(&self, node: &str) -> String {
        self.nodes
            .get(node)
            .and_then(|e| e.domain.as_deref())
            .unwrap_or(NO_DOMAIN)
            .to_string()
    }

    /// A ladder step on `node` was proven at `now` (its dwell starts).
    pub(crate) fn step_proven(&mut self, node: &str, now: Timestamp) {
        let domain = self.pace_domain(node);
        self.records.seen.pace.proven(&domain, node, now);
        self.records.fleet_changed(true);
    }

    /// A ladder step on `node` failed, or its problem came back after it (`why`).
    pub(crate) fn step_failed(&mut self, node: &str, why: &str, now: Timestamp) {
        let domain = self.pace_domain(node);
        if let Some(change) = self.records.seen.pace.failed(&domain, node, why, now) {
            self.events.push(FleetEvent::SlowStart(change));
        }
        self.records.fleet_changed(true);
    }

    /// Dwells that passed by `now` widen their domains.
    pub(super) fn pace(&mut self, now: Timestamp) {
        let changes = self.records.seen.pace.tick(now, &self.cfg.ladder.pacing);
        self.records.fleet_changed(!changes.is_empty());
        self.events
            .extend(changes.into_iter().map(FleetEvent::SlowStart));
    }

    /// When the pace next moves by the clock.
    pub(super) fn pace_wake(&self) -> Option<Timestamp> {
        self.records.seen.pace.wake(&self.cfg.ladder.pacing)
    }
}
