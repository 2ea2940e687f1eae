//! The report writer: the one task that writes to the API server. It folds the monitors' outcomes
//! into the condition state (`sync`) and the Event aggregator (`aggregate`), writes what is due
//! through [`KubeReporter`], keeps the problem gauges, and saves the checkpoint only for positions
//! whose conditions and Events have landed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodemedic_common::health::Health;
use tokio::sync::{mpsc, watch};

use crate::checkpoint::{Checkpoint, Position};
use crate::metrics::{Metrics, Report};
use crate::monitor::Outcome;
use crate::occurrence::Occurrence;
use crate::problem::{Condition, Status};
use crate::report::aggregate::Aggregator;
use crate::report::kube::KubeReporter;
use crate::report::sync::SyncState;

/// Wait before retrying a failed Event write.
const EVENT_RETRY: Duration = Duration::from_secs(5);

/// The conditions as last reported, shared with /conditions and the reload supervisor.
pub type Snapshot = Arc<Mutex<Vec<Condition>>>;

pub struct Writer {
    pub reporter: KubeReporter,
    pub sync: SyncState,
    pub events: Aggregator,
    /// Positions received but not yet safe to checkpoint.
    pub pending: BTreeMap<String, Position>,
    pub checkpoint: Arc<Mutex<Checkpoint>>,
    pub state_file: PathBuf,
    pub snapshot: Snapshot,
    pub metrics: Metrics,
    pub health: Health,
    pub tick: Duration,
    /// problem_gauge labels last set to 1, by condition type.
    pub gauges: BTreeMap<String, String>,
    /// The time conditions and Events are judged due at.
    pub clock: nodemedic_common::clock::Clock,
}

impl Writer {
    pub async fn run(mut self, mut rx: mpsc::Receiver<Outcome>, mut stop: watch::Receiver<bool>) {
        let beat = self.health.register("report", Duration::from_secs(60));
        let mut tick = tokio::time::interval(self.tick);
        let mut last_save = tokio::time::Instant::now();
        let mut stopping = false;
        loop {
            tokio::select! {
                _ = stop.changed() => stopping = true,
                _ = tick.tick() => {}
                o = rx.recv() => match o {
                    Some(o) => {
                        self.apply(o);
                        while let Ok(o) = rx.try_recv() { self.apply(o); }
                    }
                    None => stopping = true,
                }
            }
            beat.beat();
            self.flush().await;
            let now = tokio::time::Instant::now();
            if stopping || now.duration_since(last_save) >= Duration::from_secs(1) {
                self.save_checkpoint();
                last_save = now;
            }
            if stopping {
                return;
            }
        }
    }

    fn apply(&mut self, o: Outcome) {
        match o {
            Outcome::Conditions {
                monitor,
                conditions,
            } => self.sync.set_monitor(&monitor, conditions),
            Outcome::Event {
                source,
                severity,
                reason,
                message,
                at,
            } => {
                if !self
                    .events
                    .observe(&source, severity, &reason, &message, at)
                {
                    self.metrics.events_dropped.inc();
                }
            }
            Outcome::Progress { monitor, position } => {
                self.pending.insert(monitor, position);
            }
            Outcome::Added { monitor } => self.sync.expect_monitor(&monitor),
            Outcome::Removed { monitor } => {
                self.sync.remove_monitor(&monitor);
                self.pending.remove(&monitor);
            }
        }
    }

    async fn flush(&mut self) {
        let now = self.clock.now();
        if let Some(plan) = self.sync.plan(now) {
            match self.reporter.patch(&plan, now).await {
                Ok(()) => {
                    tracing::debug!(set = plan.set.len(), removed = ?plan.remove, "node conditions written");
                    if !plan.remove.is_empty() {
                        tracing::info!(removed = ?plan.remove, "removed conditions that no rule file declares any more");
                    }
                    self.sync.succeeded(&plan, now);
                    self.health.set_ready(true);
                }
                Err(e) => {
                    let retry = self.sync.failed(now);
                    Occurrence::ReportFailed {
                        kind: Report::Conditions,
                        error: &e.to_string(),
                        retry_in: Some(retry),
                    }
                    .emit(&self.metrics);
                }
            }
        }
        for w in self.events.due(now) {
            match self.reporter.write_event(&w).await {
                Ok(name) => self.events.written(&w, name, now),
                Err(e) if e.is_not_found() && w.existing.is_some() => self.events.forget_name(&w),
                Err(e) => {
                    Occurrence::ReportFailed {
                        kind: Report::Events,
                        error: &format!("{}: {e}", w.event.reason),
                        retry_in: Some(EVENT_RETRY),
                    }
                    .emit(&self.metrics);
                    self.events.failed(&w, now, EVENT_RETRY);
                }
            }
        }
        let conditions = self.sync.conditions();
        // Types no rule file declares any more lose their gauge series.
        self.gauges.retain(|type_, reason| {
            let kept = conditions.iter().any(|c| &c.type_ == type_);
            if !kept {
                self.metrics.forget_problem_gauge(type_, reason);
            }
            kept
        });
        for c in &conditions {
            let active = if c.status == Status::True { 1 } else { 0 };
            if let Some(old) = self.gauges.get(&c.type_) {
                if old != &c.reason {
                    self.metrics.set_problem_gauge(&c.type_, old, 0);
                }
            }
            self.metrics.set_problem_gauge(&c.type_, &c.reason, active);
            self.gauges.insert(c.type_.clone(), c.reason.clone());
        }
        *self.snapshot.lock().unwrap() = conditions;
    }

    fn save_checkpoint(&mut self) {
        if self.pending.is_empty() || !self.sync.in_sync() || !self.events.all_created() {
            return;
        }
        let mut cp = self.checkpoint.lock().unwrap();
        cp.monitors.extend(std::mem::take(&mut self.pending));
        if let Err(e) = cp.save(&self.state_file) {
            tracing::warn!(path = %self.state_file.display(), error = %e, "cannot write the state file");
        }
    }
}
