//! The controller's following of the remediation objects its medik8s power-cycles made, I/O:
//! every [`FOLLOW_EVERY`] while one may exist, ours are listed, the fleet is told
//! (`decide::fleet::follow`: a remediator that gave up sends the ladder on at once), and those
//! whose attempt is over are deleted by the executor.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;

use super::Controller;
use crate::config::ladder::PowerCycle;
use crate::model::cluster::Cluster;

/// How often the remediation objects are read.
const FOLLOW_EVERY: Duration = Duration::from_secs(10);

impl<C: Cluster> Controller<C> {
    /// Follow our remediation objects, when the provider is medik8s and one may exist (a node is
    /// power-cycling, or the last list found some).
    pub(super) async fn follow_remediations(&mut self, now: Timestamp) {
        let Some(PowerCycle::Medik8s(template)) = &self.cfg.ladder.power_cycle else {
            return;
        };
        let due = (self.chores.last_follow).is_none_or(|t| add(t, FOLLOW_EVERY) <= now);
        if !due || !(self.chores.remediations_left || self.fleet.power_cycling()) {
            return;
        }
        self.chores.last_follow = Some(now);
        let template = template.clone();
        let listed = match self.exec.cluster().remediations(&template).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(template = %template, error = %e, "cannot list the remediation objects of the power-cycles; tried again in {}s", FOLLOW_EVERY.as_secs());
                return;
            }
        };
        self.chores.remediations_left = !listed.is_empty();
        for r in self.fleet.follow(listed, now) {
            self.exec.remediation_over(&template, &r).await;
        }
    }
}
