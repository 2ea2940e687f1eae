//! The running detector's wiring: the operations listener, the Node read back, the checkpoint, the
//! monitors under their supervisor (`supervise`), and the writer (`report::writer`). I/O: the wiring.
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

use axum::Json;
use axum::routing::get;
use nodemedic_common::conditions;
use nodemedic_common::health::Health;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::checkpoint::Checkpoint;
use crate::config;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::monitor::{Context, Outcome};
use crate::problem::Condition;
use crate::report::aggregate::{Aggregator, Limits};
use crate::report::kube::KubeReporter;
use crate::report::sync::{SyncState, backoff};
use crate::report::writer::{Snapshot, Writer};
use crate::supervise::{Monitors, Supervisor};

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
    /// A second address serving the same endpoints (NPD's `--address`/`--port`).
    pub extra_listen: Option<SocketAddr>,
    /// lastHeartbeatTime refresh (NPD: 5 min).
    pub heartbeat: Duration,
    pub events: Limits,
    /// How often the reporter looks for work when nothing arrives.
    pub report_tick: Duration,
    /// More directories exec checks may run from (`--check-dir`).
    pub check_dirs: Vec<PathBuf>,
    /// Checks that ask for root may have it (`--allow-root-checks`).
    pub allow_root_checks: bool,
    /// Which credential it runs with; what that credential may write is found out at start and
    /// said in the log and `/healthz` ([`crate::report::confinement`]).
    pub credential: nodemedic_common::client::Credential,
    /// The API server's URL, named when it cannot be reached.
    pub api_server: String,
    /// Carrying out the drainer's reboot requests (`--reboot-requests`; None: never).
    pub reboot: Option<crate::reboot::Options>,
    /// NPD system stats monitor files (`--config.system-stats-monitor`), read and checked.
    pub stats: Vec<crate::stats::StatsSettings>,
}

/// A started detector.
pub struct Running {
    pub addr: SocketAddr,
    pub health: Health,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    monitors: Monitors,
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

/// Load rules, read the Node, start everything. Returns once the monitors are running.
pub async fn start(opts: Options, client: kube::Client) -> Result<Running> {
    let rules = config::load_paths(&opts.rules)?;
    if rules.monitors.is_empty() {
        return Err(Error::NoRules(opts.rules.clone()));
    }
    for note in &rules.notes {
        tracing::warn!(%note, "not carried over from an NPD file");
    }

    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let stats = crate::stats::Exposition::new(opts.stats.len());
    if !opts.stats.is_empty() {
        registry.register_collector(Box::new(stats.clone()));
    }
    let health = Health::default();
    let snapshot: Snapshot = Arc::default();
    let addr = serve(&opts, registry, health.clone(), snapshot.clone()).await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let reporter = KubeReporter::new(client.clone(), &opts.node_name);
    let node = read_node_until_ok(&reporter, &opts, stop_rx.clone()).await?;
    say_confinement(&reporter, opts.credential, &health).await;
    let owned = conditions::owned_types(&node);
    let restored = restored(&node, &rules, &owned);

    let checkpoint = Checkpoint::load(&opts.state_file);
    let mut events = Aggregator::new(opts.events, &opts.node_name);
    events.restore(checkpoint.events.clone());
    let ctx = Context {
        inputs: crate::source::Context {
            kmsg_path: opts.kmsg_path.clone(),
            journalctl: opts.journalctl.clone(),
            journal_dir: opts.journal_dir.clone(),
            boot_id: crate::source::kmsg::boot_id(),
            health: health.clone(),
            check_dirs: check_dirs(&opts.rules, &opts.check_dirs)
                .allowing_root(opts.allow_root_checks),
        },
        metrics: metrics.clone(),
        clock: nodemedic_common::clock::Clock::system(),
    };
    let (out_tx, out_rx) = mpsc::channel::<Outcome>(4096);
    let sync = SyncState::new(
        opts.heartbeat,
        owned,
        rules.monitors.iter().map(|m| m.name.clone()),
    );
    let shared_checkpoint = Arc::new(Mutex::new(checkpoint));
    let mut supervisor = Supervisor::new(ctx, snapshot.clone(), shared_checkpoint.clone(), out_tx);
    supervisor.start(rules, &restored).await;
    let monitors = supervisor.monitors.clone();

    let writer = Writer {
        reporter,
        sync,
        events,
        pending: BTreeMap::new(),
        unconfirmed: BTreeMap::new(),
        checkpoint: shared_checkpoint,
        state_file: opts.state_file.clone(),
        snapshot,
        metrics: metrics.clone(),
        health: health.clone(),
        tick: opts.report_tick,
        gauges: BTreeMap::new(),
        clock: nodemedic_common::clock::Clock::system(),
        failing: Default::default(),
    };
    // Loading the rules twice (checked in `main`, then here) and compiling them freed most of what
    // they took; it stays in the RSS for the detector's whole idle life unless given back.
    crate::supervise::give_back_memory("started");
    let mut tasks = vec![
        tokio::spawn(watch_stalls(
            health.clone(),
            metrics.clone(),
            stop_rx.clone(),
        )),
        tokio::spawn(writer.run(out_rx, stop_rx.clone())),
        tokio::spawn(supervisor.watch(opts.rules.clone(), stop_rx.clone())),
    ];
    tasks.extend(spawn_stats(&opts.stats, &stats, &stop_rx));
    if let Some(reboot) = opts.reboot.clone() {
        tasks.extend(spawn_reboots(
            client,
            opts.node_name.clone(),
            reboot,
            stop_rx,
        ));
    }
    Ok(Running {
        addr,
        health,
        stop: stop_tx,
        tasks,
        monitors,
    })
}

/// Carrying out the drainer's requests, and keeping the evidence before a replacement too (the
/// drainer deletes the Node from outside).
fn spawn_reboots(
    client: kube::Client,
    node: String,
    reboot: crate::reboot::Options,
    stop: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(evidence) = reboot.evidence.clone() {
        let (client, node, boot) = (client.clone(), node.clone(), reboot.boot_id_file.clone());
        let watch = crate::replaced::run(client, node, evidence, boot, stop.clone());
        tasks.push(tokio::spawn(watch));
    }
    tasks.push(tokio::spawn(crate::reboot::run(client, node, reboot, stop)));
    tasks
}

/// One collection task per system stats monitor file, each into its slot of `exposition`.
fn spawn_stats(
    files: &[crate::stats::StatsSettings],
    exposition: &crate::stats::Exposition,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    (files.iter().cloned().enumerate())
        .map(|(slot, s)| tokio::spawn(crate::stats::run(s, slot, exposition.clone(), stop.clone())))
        .collect()
}

/// The conditions True on `node` the detector carries on with: those set during this boot (one
/// found before a reboot is about what the reboot ended; said in the log when the rules own it).
/// Says which types it owns (`owned`) and keeps True.
fn restored(
    node: &k8s_openapi::api::core::v1::Node,
    rules: &config::RuleSet,
    owned: &[String],
) -> Vec<Condition> {
    let (restored, before_boot) = Condition::true_this_boot(node, crate::source::kmsg::booted_at());
    let ours = rules.condition_types();
    for c in before_boot.iter().filter(|c| ours.contains(&c.type_)) {
        tracing::info!(condition = %c.type_, since = %c.transition,
            "True since before this machine booted: starting again from the rules' default");
    }
    let kept: Vec<&str> = (restored.iter())
        .filter(|c| ours.contains(&c.type_))
        .map(|c| c.type_.as_str())
        .collect();
    let owned: Vec<&str> = owned.iter().map(String::as_str).collect();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    tracing::info!(node = %name, owned = %owned.join(", "), kept_true = %kept.join(", "), "read the node back");
    restored
}

/// Serve /metrics, /healthz, /readyz and /conditions on `--listen` (and NPD's address, if given).
async fn serve(
    opts: &Options,
    registry: Registry,
    health: Health,
    snapshot: Snapshot,
) -> Result<SocketAddr> {
    let app = nodemedic_common::serve::router(Arc::new(registry), health).route(
        "/conditions",
        get(move || async move { Json(snapshot.lock().unwrap().clone()) }),
    );
    if let Some(extra) = opts.extra_listen {
        let addr = nodemedic_common::serve::spawn(extra, app.clone())
            .await
            .map_err(|source| Error::Listen {
                addr: extra,
                source,
            })?;
        tracing::info!(%addr, "also serving the same endpoints (NPD's --address/--port)");
    }
    let addr = nodemedic_common::serve::spawn(opts.listen, app)
        .await
        .map_err(|source| Error::Listen {
            addr: opts.listen,
            source,
        })?;
    tracing::info!(%addr, "serving /metrics /healthz /readyz /conditions");
    Ok(addr)
}

/// Say when a loop stalls and when it recovers (/healthz shows it; this logs and counts it).
async fn watch_stalls(health: Health, metrics: Metrics, mut stop: watch::Receiver<bool>) {
    let mut stuck = std::collections::BTreeSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let (stalled, recovered) = Health::changes(&mut stuck, &health.stuck());
        for s in &stalled {
            let silent = Duration::from_secs(s.silent_for_secs);
            crate::occurrence::Occurrence::Stalled {
                name: &s.name,
                silent,
            }
            .emit(&metrics);
        }
        for name in &recovered {
            crate::occurrence::Occurrence::Recovered { name }.emit(&metrics);
        }
    }
}

async fn read_node_until_ok(
    reporter: &KubeReporter,
    opts: &Options,
    mut stop: watch::Receiver<bool>,
) -> Result<k8s_openapi::api::core::v1::Node> {
    let (node, api_server) = (&opts.node_name, &opts.api_server);
    let mut failures = 0;
    loop {
        match reporter.read_node().await {
            Ok(n) => return Ok(n),
            Err(e) => {
                failures += 1;
                let wait = backoff(failures);
                tracing::warn!(%node, %api_server, error = %e, retry_in = %humantime::format_duration(wait), "cannot read this node from the API server");
                tokio::select! {
                    _ = stop.changed() => return Err(Error::Stopped),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Where exec checks may run from: the shipped checks' directories, the rules' own (a rules
/// directory, or a rule file's directory: the ConfigMap's mount), and those `--check-dir` adds.
fn check_dirs(rules: &[PathBuf], more: &[PathBuf]) -> crate::source::exec::CheckDirs {
    let own = rules.iter().map(|r| {
        if r.is_dir() {
            r.clone()
        } else {
            r.parent().map(PathBuf::from).unwrap_or_default()
        }
    });
    let shipped = crate::source::exec::DEFAULT_CHECK_DIRS.map(PathBuf::from);
    let dirs = shipped.into_iter().chain(own).chain(more.iter().cloned());
    crate::source::exec::CheckDirs::new(dirs)
}

/// Find out what the credential may write, and say it once: a warning when it may write other
/// Nodes (or when that could not be found out), and a `/healthz` note either way.
async fn say_confinement(
    reporter: &KubeReporter,
    credential: nodemedic_common::client::Credential,
    health: &Health,
) {
    use crate::report::confinement::{Confinement, ProbeAnswer};
    let own = reporter.probe_confinement().await;
    let other = match (&own, credential) {
        (ProbeAnswer::Accepted, nodemedic_common::client::Credential::Kubeconfig) => {
            reporter.probe_other_node().await
        }
        _ => None,
    };
    let confinement = Confinement::of(credential, &own, other.as_ref());
    let said = confinement.describe();
    if confinement.writes_other_nodes() {
        tracing::warn!(credential = %said, "the detector's credential may write other Nodes");
    } else if confinement.is_warning() {
        tracing::warn!(credential = %said, "what the detector's credential may write is not known");
    } else {
        tracing::info!(credential = %said, "what the detector's credential may write");
    }
    health.note("credential", Some(said));
}
