//! The report writer: the one task that writes to the API server (I/O shell). It folds the monitors'
//! outcomes into the condition state (`sync`) and the Event aggregator (`aggregate`), writes what is
//! due through a [`Reporter`] (the Kubernetes one in `report::kube`, an in-memory one in tests),
//! keeps the problem gauges, and saves the checkpoint only for positions whose conditions and Events
//! have landed.

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
use crate::report::aggregate::{AfterFailure, Aggregator, Key};
use crate::report::reporter::Reporter;
use crate::report::sync::SyncState;

/// The conditions as last reported, shared with /conditions and the reload supervisor.
pub(crate) type Snapshot = Arc<Mutex<Vec<Condition>>>;

pub(crate) struct Writer<R> {
    pub(crate) reporter: R,
    pub(crate) sync: SyncState,
    pub(crate) events: Aggregator,
    /// Positions received but not yet safe to checkpoint.
    pub(crate) pending: BTreeMap<String, Position>,
    /// Event occurrences each monitor sent since its last Progress (confirmed by the next one).
    pub(crate) unconfirmed: BTreeMap<String, BTreeMap<Key, i32>>,
    pub(crate) checkpoint: Arc<Mutex<Checkpoint>>,
    pub(crate) state_file: PathBuf,
    pub(crate) snapshot: Snapshot,
    pub(crate) metrics: Metrics,
    pub(crate) health: Health,
    pub(crate) tick: Duration,
    /// problem_gauge labels last set to 1, by condition type.
    pub(crate) gauges: BTreeMap<String, String>,
    /// The time conditions and Events are judged due at.
    pub(crate) clock: nodemedic_common::clock::Clock,
    /// Failed writes are logged once, then at most once a minute while they go on (by kind).
    pub(crate) failing: [nodemedic_common::throttle::Throttle; 2],
}

impl<R: Reporter> Writer<R> {
    pub(crate) async fn run(
        mut self,
        mut rx: mpsc::Receiver<Outcome>,
        mut stop: watch::Receiver<bool>,
    ) {
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
                monitor,
                source,
                severity,
                reason,
                message,
                at,
            } => {
                if self
                    .events
                    .observe(&source, severity, &reason, &message, at)
                {
                    let n = self
                        .unconfirmed
                        .entry(monitor)
                        .or_default()
                        .entry((source, reason))
                        .or_default();
                    *n = n.saturating_add(1);
                } else {
                    self.metrics.events_dropped.inc();
                }
            }
            Outcome::Progress { monitor, position } => {
                for (key, n) in self.unconfirmed.remove(&monitor).unwrap_or_default() {
                    self.events.confirm(&key, n);
                }
                self.pending.insert(monitor, position);
            }
            Outcome::Added { monitor } => self.sync.expect_monitor(&monitor),
            Outcome::Rules { revision } => self.sync.set_revision(&revision),
            Outcome::Removed { monitor } => {
                self.sync.remove_monitor(&monitor);
                self.pending.remove(&monitor);
                self.unconfirmed.remove(&monitor);
            }
        }
    }

    async fn flush(&mut self) {
        let now = self.clock.now();
        let stalled: std::collections::BTreeSet<String> = self
            .health
            .stuck()
            .into_iter()
            .filter_map(|s| s.name.strip_prefix("input:").map(String::from))
            .collect();
        if self.sync.set_stalled(&stalled, now) {
            let stalled = listed(stalled.iter().map(String::as_str));
            tracing::warn!(%stalled, "inputs stalled or back: their monitors' healthy conditions are reported Unknown while stalled");
        }
        if let Some(plan) = self.sync.plan(now) {
            match self.reporter.patch(&plan, now).await {
                Ok(()) => {
                    tracing::debug!(set = plan.set.len(), removed = ?plan.remove, "node conditions written");
                    if !plan.remove.is_empty() {
                        let removed = plan
                            .remove
                            .iter()
                            .map(|c| c.as_str())
                            .collect::<Vec<_>>()
                            .join(", ");
                        tracing::info!(%removed, "removed conditions that no rule file declares any more");
                    }
                    self.sync.succeeded(&plan, now);
                    self.health.set_ready(true);
                    self.failing[0].reset();
                }
                Err(e) => {
                    let retry = self.sync.failed(now, e.is_refusal());
                    Occurrence::ReportFailed {
                        kind: Report::Conditions,
                        error: &e.to_string(),
                        retry_in: Some(retry),
                        log: self.failing[0].allow(std::time::Instant::now()),
                    }
                    .emit(&self.metrics);
                    if self.sync.refusals() == crate::report::sync::GIVE_UP_AFTER {
                        Occurrence::ReportGivenUp {
                            kind: Report::Conditions,
                            error: &e.to_string(),
                            tries: self.sync.refusals(),
                        }
                        .emit(&self.metrics);
                    }
                }
            }
        }
        let due = self.events.due(now);
        if due.iter().any(|w| w.create) {
            self.reserve_names();
        }
        for w in due {
            match self.reporter.write_event(&w).await {
                Ok(()) => {
                    self.events.written(&w, now);
                    self.failing[1].reset();
                }
                Err(e) if e.is_not_found() && !w.create => self.events.recreate(&w),
                Err(e) => {
                    let error = format!("{}: {e}", w.event.reason);
                    match self.events.failed(&w, now, e.is_refusal()) {
                        AfterFailure::RetryIn(retry) => Occurrence::ReportFailed {
                            kind: Report::Events,
                            error: &error,
                            retry_in: Some(retry),
                            log: self.failing[1].allow(std::time::Instant::now()),
                        },
                        AfterFailure::GivenUp { tries } => Occurrence::ReportGivenUp {
                            kind: Report::Events,
                            error: &error,
                            tries,
                        },
                    }
                    .emit(&self.metrics);
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
            if let Some(old) = self.gauges.get(&c.type_)
                && old != &c.reason
            {
                self.metrics.set_problem_gauge(&c.type_, old, 0);
            }
            self.metrics.set_problem_gauge(&c.type_, &c.reason, active);
            self.gauges.insert(c.type_.clone(), c.reason.clone());
        }
        *self.snapshot.lock().unwrap() = conditions;
    }

    /// Put the names of Events about to be created in the state file first (positions and counts
    /// unchanged), so that a kill -9 right after a create cannot lead to a second Event.
    fn reserve_names(&mut self) {
        let reserved = self.events.reservations();
        if reserved.is_empty() {
            return;
        }
        let mut cp = self.checkpoint.lock().unwrap();
        cp.events.extend(reserved);
        if let Err(e) = cp.save(&self.state_file) {
            tracing::warn!(path = %self.state_file.display(), error = %e, "cannot write the state file");
        }
    }

    /// Save the positions reached with the Event counts they account for (see `report::aggregate`).
    /// Conditions must have landed first (they are read back from the Node at start), unless their
    /// writes have been failing for a minute: then the positions move on anyway, so a refusing API
    /// server does not make the whole backlog be read again after a restart.
    fn save_checkpoint(&mut self) {
        if self.pending.is_empty() || !(self.sync.in_sync() || self.sync.given_up()) {
            return;
        }
        let mut cp = self.checkpoint.lock().unwrap();
        cp.monitors.extend(std::mem::take(&mut self.pending));
        cp.events = self.events.saved();
        if let Err(e) = cp.save(&self.state_file) {
            tracing::warn!(path = %self.state_file.display(), error = %e, "cannot write the state file");
        }
    }
}

/// Names for a log line, as people list them: `a, b` (`none` for none).
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        "none".to_string()
    } else {
        all.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU16, Ordering};

    use k8s_openapi::jiff::Timestamp;
    use nodemedic_common::events::Severity;

    use super::*;
    use crate::report::aggregate::{Limits, Write};
    use crate::report::reporter::Error;
    use crate::report::sync::Plan;

    /// The writes a writer made, and the status code the next writes fail with (0: they succeed).
    #[derive(Clone, Default)]
    struct Memory {
        patches: Arc<Mutex<Vec<Plan>>>,
        events: Arc<Mutex<Vec<(bool, String)>>>,
        fail_with: Arc<AtomicU16>,
    }

    impl Memory {
        fn outcome(&self) -> Result<(), Error> {
            match self.fail_with.load(Ordering::SeqCst) {
                0 => Ok(()),
                code => {
                    let status = kube::core::Status {
                        code,
                        ..kube::core::Status::failure("refused", "Forbidden")
                    };
                    Err(Error::Api(kube::Error::Api(status.boxed())))
                }
            }
        }
    }

    impl Reporter for Memory {
        async fn patch(&self, plan: &Plan, _now: Timestamp) -> Result<(), Error> {
            self.outcome()?;
            self.patches.lock().unwrap().push(plan.clone());
            Ok(())
        }

        async fn write_event(&self, w: &Write) -> Result<(), Error> {
            self.outcome()?;
            let reason = w.event.reason.clone();
            self.events.lock().unwrap().push((w.create, reason));
            Ok(())
        }
    }

    fn writer(memory: &Memory, dir: &std::path::Path) -> Writer<Memory> {
        let mut registry = prometheus_client::registry::Registry::default();
        let start = Timestamp::from_second(1_700_000_000).unwrap();
        Writer {
            reporter: memory.clone(),
            sync: SyncState::new(Duration::from_secs(300), Vec::new(), ["m".to_string()]),
            events: Aggregator::new(Limits::default(), "node-1"),
            pending: BTreeMap::new(),
            unconfirmed: BTreeMap::new(),
            checkpoint: Arc::default(),
            state_file: dir.join("state.json"),
            snapshot: Arc::default(),
            metrics: Metrics::register(&mut registry),
            health: Health::default(),
            tick: Duration::from_secs(1),
            gauges: BTreeMap::new(),
            clock: nodemedic_common::clock::Clock::tokio_at(start),
            failing: Default::default(),
        }
    }

    fn condition(status: Status) -> Condition {
        Condition {
            type_: "KernelDeadlock".into(),
            status,
            reason: "DockerHung".into(),
            message: "task docker blocked".into(),
            transition: Timestamp::from_second(1_700_000_000).unwrap(),
        }
    }

    fn position(seq: u64) -> Position {
        Position::Kmsg {
            boot_id: "b".into(),
            seq,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_position_is_saved_only_once_the_conditions_before_it_have_landed() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::default();
        let mut w = writer(&memory, dir.path());
        memory.fail_with.store(403, Ordering::SeqCst);
        w.apply(Outcome::Conditions {
            monitor: "m".into(),
            conditions: vec![condition(Status::True)],
        });
        w.apply(Outcome::Progress {
            monitor: "m".into(),
            position: position(7),
        });
        w.flush().await;
        w.save_checkpoint();
        assert!(memory.patches.lock().unwrap().is_empty());
        assert!(w.checkpoint.lock().unwrap().monitors.is_empty());
        let errors = w
            .metrics
            .report_errors
            .get_or_create(&crate::metrics::KindLabel {
                kind: Report::Conditions,
            })
            .get();
        assert_eq!(errors, 1);

        memory.fail_with.store(0, Ordering::SeqCst);
        // Retried once the backoff has passed, not before.
        w.flush().await;
        assert!(memory.patches.lock().unwrap().is_empty());
        tokio::time::advance(Duration::from_secs(60)).await;
        w.flush().await;
        w.save_checkpoint();
        let patches = memory.patches.lock().unwrap().clone();
        assert_eq!(patches.len(), 1);
        assert_eq!(patches[0].set[0].type_, "KernelDeadlock");
        assert_eq!(patches[0].owned, ["KernelDeadlock"]);
        let cp = w.checkpoint.lock().unwrap().clone();
        assert_eq!(cp.monitors.get("m"), Some(&position(7)));
        assert_eq!(w.snapshot.lock().unwrap()[0].status, Status::True);
        let saved = crate::checkpoint::Checkpoint::load(&w.state_file);
        assert_eq!(saved.monitors.get("m"), Some(&position(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_is_written_once_and_a_quiet_writer_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::default();
        let mut w = writer(&memory, dir.path());
        w.apply(Outcome::Conditions {
            monitor: "m".into(),
            conditions: vec![condition(Status::False)],
        });
        w.apply(Outcome::Event {
            monitor: "m".into(),
            source: "kernel-monitor".into(),
            severity: Severity::Warning,
            reason: "OOMKilling".into(),
            message: "Killed process 1".into(),
            at: Timestamp::from_second(1_700_000_000).unwrap(),
        });
        w.apply(Outcome::Progress {
            monitor: "m".into(),
            position: position(1),
        });
        w.flush().await;
        assert_eq!(
            memory.events.lock().unwrap().clone(),
            [(true, "OOMKilling".to_string())]
        );
        assert_eq!(memory.patches.lock().unwrap().len(), 1);
        // Nothing new and within the heartbeat: no write at all.
        tokio::time::advance(Duration::from_secs(10)).await;
        w.flush().await;
        assert_eq!(memory.events.lock().unwrap().len(), 1);
        assert_eq!(memory.patches.lock().unwrap().len(), 1);
    }
}
