//! The PodsNotStarting and PodsNotTerminating conditions, I/O: every [`SYMPTOMS_EVERY`] the pods
//! waiting to start or to go are assessed (`decide::symptoms`, pure) off the loop's thread, and
//! the Executor writes the conditions that changed on the selected Nodes (`act::symptoms`), each
//! with its Event, log line and metric. Written even when
//! no decision reads them (reporting); the drainer acts on them only when its conditions name them.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;

use super::Controller;
use crate::decide::symptoms::{self, CONDITIONS, Found, SymptomSettings};
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::observe::Observed;

/// How often the symptoms are assessed: minutes matter here, not milliseconds.
pub(super) const SYMPTOMS_EVERY: Duration = Duration::from_secs(30);

/// Assess the symptoms as of `now` from the caches: gathering the pods and assessing them are
/// a function of the caches' state, and may take a while with many pods stuck.
fn assess(observed: &Observed, settings: &SymptomSettings, now: Timestamp) -> Found {
    let (pods, last_start) = observed.troubled_pods();
    let sandbox = match settings.not_starting_after {
        None => Default::default(),
        Some(after) => {
            let since = nodemedic_common::time::sub(now, after);
            let nodes: HashSet<&ArcStr> = pods.iter().filter_map(|p| p.node.as_ref()).collect();
            nodes
                .into_iter()
                .filter_map(|n| Some((n.clone(), observed.sandbox.since(n, since)?)))
                .collect()
        }
    };
    let evidence = symptoms::Evidence {
        pods: &pods,
        last_start: &last_start,
        sandbox: &sandbox,
    };
    symptoms::assess(now, &evidence, settings)
}

impl<C: Cluster> Controller<C> {
    /// Write what the last assessment found once it is done, and start the next when it is due.
    /// The assessment runs on the blocking pool (inline in a simulation): with hundreds of
    /// thousands of pods stuck (a bad image on a big Deployment) it takes hundreds of
    /// milliseconds, which a cordon decided meanwhile must not wait for (issue 39). The pool's
    /// thread wakes the loop when it is done; its result is written by the round after.
    pub(super) async fn report_symptoms(&mut self, now: Timestamp) {
        if self
            .chores
            .symptoms
            .as_ref()
            .is_some_and(|t| t.is_finished())
        {
            let task = self.chores.symptoms.take().expect("checked above");
            match task.await {
                Ok(found) => self.write_symptoms(found, now).await,
                Err(e) => tracing::error!("assessing the pods' symptoms failed: {e}"),
            }
        }
        if self.chores.symptoms.is_some()
            || self
                .chores
                .last_symptoms
                .is_some_and(|t| add(t, SYMPTOMS_EVERY) > now)
        {
            return;
        }
        // Not before the kubelets' sandbox Events are in: their words would be missing from a
        // message that is not rewritten while its reason stays. (`drainer simulate` runs no such
        // watch: nothing to wait for.)
        if !self.observed.sandbox.settled() {
            return;
        }
        // Nor before every pod is listed: a node's waiting pods would look like none.
        if !self.observed.synced() {
            return;
        }
        self.chores.last_symptoms = Some(now);
        let (observed, settings) = (self.observed.clone(), self.cfg.symptoms);
        if !self.mode.offload {
            let found = assess(&observed, &settings, now);
            return self.write_symptoms(found, now).await;
        }
        self.chores.symptoms = Some(tokio::task::spawn_blocking(move || {
            let found = assess(&observed, &settings, now);
            observed.changed.notify_one();
            found
        }));
    }

    /// Write the conditions that `found` changes on the selected nodes, each with its Event.
    async fn write_symptoms(&mut self, found: Found, now: Timestamp) {
        // First what counts: a symptom condition is a problem only where this pass found it.
        self.fleet.symptoms_found(&found, now);
        for (condition, ..) in CONDITIONS {
            let n = found
                .values()
                .filter(|s| s.iter().any(|s| s.condition == condition))
                .count();
            self.record.metrics().symptom_nodes(condition, n);
        }
        // Only the nodes a symptom was found on and those carrying one we set can need a write:
        // walking (and sorting) every selected node here held the loop's thread for tens of
        // milliseconds at 50,000 nodes every 30 s, and a cordon decided meanwhile waited.
        let fleet = &self.fleet;
        let candidates: std::collections::BTreeSet<&ArcStr> =
            found.keys().chain(fleet.symptomatic()).collect();
        let selected = (candidates.into_iter())
            .filter(|n| fleet.selected(n))
            .filter_map(|n| fleet.view(n).map(|v| &**v));
        let planned = symptoms::writes(&found, selected, &self.cfg.kosmos_label);
        for (node, write) in planned {
            self.exec.symptom(&node, write, now).await;
        }
    }
}
