//! The running detector: wires rule files, monitors, the reporter and the operations listener.
//!
//! Start-up order matters for "nothing lost, nothing repeated": the Node is read first (conditions that
//! are True stay True; the ownership annotation says which types we may remove), then the checkpoint,
//! then the monitors start from there. The reporter writes a position to the checkpoint only once the
//! conditions derived from the lines before it are on the Node and their Events were created.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::Json;
use axum::routing::get;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::conditions;
use nodemedic_common::health::Health;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::checkpoint::{Checkpoint, Position};
use crate::config::{self, Monitor, RuleSet};
use crate::metrics::Metrics;
use crate::monitor::{self, Context, Handle, Outcome};
use crate::problem::{Condition, Status};
use crate::report::aggregate::{Aggregator, Limits};
use crate::report::kube::KubeReporter;
use crate::report::sync::{SyncState, backoff};

/// Everything the daemon is configured with.
#[derive(Debug, Clone)]
pub struct Options {
    pub node_name: String,
    /// Rule files or directories (watched for changes).
    pub rules: Vec<PathBuf>,
    pub kmsg_path: PathBuf,
    pub journalctl: PathBuf,
    pub journal_dir: Option<PathBuf>,
    pub state_file: PathBuf,
    pub listen: SocketAddr,
    /// lastHeartbeatTime refresh (NPD: 5 min).
    pub heartbeat: Duration,
    pub events: Limits,
    /// How often the reporter looks for work when nothing arrives.
    pub report_tick: Duration,
}

/// A started detector.
pub struct Running {
    pub addr: SocketAddr,
    pub health: Health,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    monitors: Arc<tokio::sync::Mutex<BTreeMap<String, Handle>>>,
}

impl Running {
    /// Stop every monitor, flush a last checkpoint, and wait.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let monitors = std::mem::take(&mut *self.monitors.lock().await);
        for (_, h) in monitors {
            h.stop().await;
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Shared between the reporter and /conditions.
type Snapshot = Arc<Mutex<Vec<Condition>>>;

/// Load rules, read the Node, start everything. Returns once the monitors are running.
pub async fn start(opts: Options, client: kube::Client) -> anyhow::Result<Running> {
    let rules =
        config::load_paths(&opts.rules).map_err(|e| anyhow::anyhow!("invalid rule files:\n{e}"))?;
    anyhow::ensure!(
        !rules.monitors.is_empty(),
        "no rule files found in {:?}",
        opts.rules
    );

    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Health::default();
    let snapshot: Snapshot = Arc::default();
    let snap = snapshot.clone();
    let app = nodemedic_common::serve::router(Arc::new(registry), health.clone()).route(
        "/conditions",
        get(move || async move { Json(snap.lock().unwrap().clone()) }),
    );
    let addr = nodemedic_common::serve::spawn(opts.listen, app)
        .await
        .with_context(|| format!("cannot listen on {}", opts.listen))?;
    tracing::info!(%addr, "serving /metrics /healthz /readyz /conditions");

    let (stop_tx, stop_rx) = watch::channel(false);
    let reporter = KubeReporter::new(client, &opts.node_name);
    let node = read_node_until_ok(&reporter, &opts.node_name, stop_rx.clone()).await?;
    let owned = conditions::owned_types(&node);
    let restored: Vec<Condition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| Condition {
            status: Status::parse(&c.status),
            reason: c.reason.unwrap_or_default(),
            message: c.message.unwrap_or_default(),
            transition: c
                .last_transition_time
                .map(|t| t.0)
                .unwrap_or_else(Timestamp::now),
            type_: c.type_,
        })
        .filter(|c| c.status == Status::True)
        .collect();
    let kept: Vec<&str> = restored
        .iter()
        .filter(|c| rules.condition_types().contains(&c.type_))
        .map(|c| c.type_.as_str())
        .collect();
    tracing::info!(node = %opts.node_name, owned = ?owned, kept_true = ?kept, "read the node back");

    let checkpoint = Checkpoint::load(&opts.state_file);
    let ctx = Context {
        kmsg_path: opts.kmsg_path.clone(),
        journalctl: opts.journalctl.clone(),
        journal_dir: opts.journal_dir.clone(),
        boot_id: crate::source::kmsg::boot_id(),
        health: health.clone(),
        metrics: metrics.clone(),
    };
    let (out_tx, out_rx) = mpsc::channel::<Outcome>(4096);
    let sync = SyncState::new(
        opts.heartbeat,
        owned,
        rules.monitors.iter().map(|m| m.name.clone()),
    );
    let monitors = Arc::new(tokio::sync::Mutex::new(BTreeMap::new()));
    {
        let mut map = monitors.lock().await;
        for m in &rules.monitors {
            let cp = checkpoint.monitors.get(&m.name).cloned();
            map.insert(
                m.name.clone(),
                monitor::spawn(
                    Arc::new(m.clone()),
                    &ctx,
                    restored.clone(),
                    cp,
                    out_tx.clone(),
                ),
            );
        }
    }
    let shared_checkpoint = Arc::new(Mutex::new(checkpoint));

    let report_loop = ReportLoop {
        reporter,
        sync,
        events: Aggregator::new(opts.events),
        pending: BTreeMap::new(),
        checkpoint: shared_checkpoint.clone(),
        state_file: opts.state_file.clone(),
        snapshot: snapshot.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        tick: opts.report_tick,
        gauges: BTreeMap::new(),
    };
    let mut tasks = vec![tokio::spawn(report_loop.run(out_rx, stop_rx.clone()))];
    tasks.push(tokio::spawn(reload::watch(
        opts.rules.clone(),
        rules,
        monitors.clone(),
        ctx,
        snapshot,
        shared_checkpoint,
        out_tx,
        stop_rx,
    )));
    Ok(Running {
        addr,
        health,
        stop: stop_tx,
        tasks,
        monitors,
    })
}

async fn read_node_until_ok(
    reporter: &KubeReporter,
    node: &str,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<k8s_openapi::api::core::v1::Node> {
    let mut failures = 0;
    loop {
        match reporter.read_node().await {
            Ok(n) => return Ok(n),
            Err(e) => {
                failures += 1;
                let wait = backoff(failures);
                tracing::warn!(%node, error = %e, retry_in = ?wait, "cannot read this node from the API server");
                tokio::select! {
                    _ = stop.changed() => anyhow::bail!("stopped before the node could be read"),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

struct ReportLoop {
    reporter: KubeReporter,
    sync: SyncState,
    events: Aggregator,
    /// Positions received but not yet safe to checkpoint.
    pending: BTreeMap<String, Position>,
    checkpoint: Arc<Mutex<Checkpoint>>,
    state_file: PathBuf,
    snapshot: Snapshot,
    metrics: Metrics,
    health: Health,
    tick: Duration,
    /// problem_gauge labels last set to 1, by condition type.
    gauges: BTreeMap<String, String>,
}

impl ReportLoop {
    async fn run(mut self, mut rx: mpsc::Receiver<Outcome>, mut stop: watch::Receiver<bool>) {
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
        let now = Timestamp::now();
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
                    self.metrics.report_error("conditions");
                    let retry = self.sync.failed(now);
                    tracing::warn!(error = %e, retry_in = ?retry, "writing node conditions failed; will retry with the latest state");
                }
            }
        }
        for w in self.events.due(now) {
            match self.reporter.write_event(&w).await {
                Ok(name) => self.events.written(&w, name, now),
                Err(e) if e.is_not_found() && w.existing.is_some() => self.events.forget_name(&w),
                Err(e) => {
                    self.metrics.report_error("events");
                    tracing::warn!(reason = %w.event.reason, error = %e, "writing an event failed; will retry");
                    self.events.failed(&w, now, Duration::from_secs(5));
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

mod reload {
    //! Hot reload: the rule paths are watched (directories, not files: a ConfigMap volume swaps its
    //! `..data` symlink, which a watch on the file would not survive). A change of content (not a
    //! read) re-reads every file; a bad set is logged precisely and the last good rules stay in force.

    use super::*;

    /// Wait after a change so a burst of writes (an editor, a symlink swap) is read once.
    const DEBOUNCE: Duration = Duration::from_millis(300);

    #[allow(clippy::too_many_arguments)]
    pub async fn watch(
        paths: Vec<PathBuf>,
        mut current: RuleSet,
        monitors: Arc<tokio::sync::Mutex<BTreeMap<String, Handle>>>,
        ctx: Context,
        snapshot: Snapshot,
        checkpoint: Arc<Mutex<Checkpoint>>,
        outcomes: mpsc::Sender<Outcome>,
        mut stop: watch::Receiver<bool>,
    ) {
        // Content changes only (see common::filewatch): our own re-reads must not trigger reloads.
        let mut watch = match nodemedic_common::filewatch::ContentWatch::new(&paths, DEBOUNCE) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot watch the rule files; hot reload is off");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                r = watch.changed() => if r.is_none() { return },
            }
            match config::load_paths(&paths) {
                Err(errors) => {
                    ctx.metrics.reload("failure");
                    for e in &errors.0 {
                        tracing::error!(error = %e, "rule file rejected");
                    }
                    tracing::error!(
                        errors = errors.0.len(),
                        "reload failed; keeping the last good rules"
                    );
                }
                Ok(next) => {
                    ctx.metrics.reload("success");
                    apply(
                        &current,
                        &next,
                        &monitors,
                        &ctx,
                        &snapshot,
                        &checkpoint,
                        &outcomes,
                    )
                    .await;
                    tracing::info!(monitors = next.monitors.len(), "rule files reloaded");
                    current = next;
                }
            }
        }
    }

    async fn apply(
        current: &RuleSet,
        next: &RuleSet,
        monitors: &tokio::sync::Mutex<BTreeMap<String, Handle>>,
        ctx: &Context,
        snapshot: &Snapshot,
        checkpoint: &Mutex<Checkpoint>,
        outcomes: &mpsc::Sender<Outcome>,
    ) {
        let mut map = monitors.lock().await;
        let restored = snapshot.lock().unwrap().clone();
        for old in &current.monitors {
            if !next.monitors.iter().any(|m| m.name == old.name) {
                if let Some(h) = map.remove(&old.name) {
                    h.stop().await;
                }
                ctx.metrics.forget_monitor(old);
                tracing::info!(monitor = %old.name, "monitor removed");
                let _ = outcomes
                    .send(Outcome::Removed {
                        monitor: old.name.clone(),
                    })
                    .await;
            }
        }
        for m in &next.monitors {
            let m: Arc<Monitor> = Arc::new(m.clone());
            match map.get_mut(&m.name) {
                Some(h) if h.monitor.input == m.input => h.reconfigure(m),
                _ => {
                    if let Some(h) = map.remove(&m.name) {
                        h.stop().await;
                        tracing::info!(monitor = %m.name, "input changed; restarting the monitor");
                    } else {
                        tracing::info!(monitor = %m.name, "monitor added");
                    }
                    let _ = outcomes
                        .send(Outcome::Added {
                            monitor: m.name.clone(),
                        })
                        .await;
                    let cp = checkpoint.lock().unwrap().monitors.get(&m.name).cloned();
                    map.insert(
                        m.name.clone(),
                        monitor::spawn(m.clone(), ctx, restored.clone(), cp, outcomes.clone()),
                    );
                }
            }
        }
    }
}
