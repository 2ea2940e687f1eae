//! The drainer's wiring: the metrics/health server, the observers (`observe`), the election
//! (`leader`), the guard, and the controller loop (`controller`), started together and stopped in
//! order by [`Running::shutdown`]. The shell: I/O wiring only, no decisions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use nodemedic_common::health::Health;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::act::{Executor, KubeCluster, publisher};
use crate::config::Config;
use crate::config::build as policy;
use crate::config::flags::PolicyArgs;
use crate::config::published::Published;
use crate::controller::Controller;
use crate::leader::{self, LeaseConfig};
use crate::metrics::Metrics;
use crate::model::cluster::Gated;
use crate::model::seal::RecordTrust;
use crate::observe::Observed;
use crate::record::Recorder;

/// A watch failing this long makes /healthz fail.
pub(crate) const WATCH_UNHEALTHY: Duration = Duration::from_secs(300);

pub struct Options {
    pub config: Config,
    pub listen: SocketAddr,
    pub lease: LeaseConfig,
    /// Re-plan at least this often (changes also trigger a plan at once).
    pub tick: Duration,
    /// The Kosmos eviction guard webhook (served by every replica, leader or not).
    pub guard: Option<crate::guard::server::GuardOptions>,
    /// The flags `config` was built from: when they name a config file, edits to it are applied
    /// in place (flags still override the file).
    pub reload: Option<PolicyArgs>,
    /// The settings to publish for `kubectl nodemedic` while leading (`config::published`); a
    /// reload publishes the file it accepted. None: nothing published.
    pub settings: Option<Published>,
    /// The key reboot requests are signed with (`--reboot-signing-key`); None: unsigned, and
    /// every detector refuses them.
    pub reboot_signing_key: Option<std::path::PathBuf>,
    /// The drain record key's file (`--record-key-file`), mounted from a Secret its token cannot
    /// read; None: the key is read (and filled at the first start) through the API.
    pub record_key_file: Option<std::path::PathBuf>,
    /// The previous record key's file during a rotation (`--record-key-previous-file`; may be
    /// absent): records it sealed are trusted too.
    pub record_key_previous_file: Option<std::path::PathBuf>,
    /// Refuse to start with settings looser than the ones last published (`--refuse-looser-start`);
    /// else such a start is logged, counted and told on the Lease.
    pub refuse_looser_start: bool,
}

pub struct Running {
    pub addr: SocketAddr,
    /// The guard's HTTPS address, when enabled.
    pub guard_addr: Option<SocketAddr>,
    pub leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    election: JoinHandle<()>,
}

impl Running {
    /// Stop: the controller and the watches first (no write after this), then the election, which
    /// releases the Lease if we hold it (bounded: a hung API server does not hold up the exit).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        let mut election = self.election;
        if tokio::time::timeout(Duration::from_secs(5), &mut election)
            .await
            .is_err()
        {
            election.abort();
        }
    }
}

/// The guard, where asked for, with the machines check under the drainer's key and name.
async fn guard(
    opts: &Options,
    client: &kube::Client,
    observed: &Observed,
    metrics: &Metrics,
    key: &Arc<crate::model::seal::SealKey>,
) -> crate::error::Result<Option<SocketAddr>> {
    let Some(g) = opts.guard.clone() else {
        return Ok(None);
    };
    let check = crate::guard::server::MachinesCheck {
        trust: RecordTrust::Sealed(key.clone()),
        owner: opts.lease.name.clone(),
        namespace: opts.lease.namespace.clone(),
    };
    let (o, m, c) = (observed.clone(), metrics.clone(), Some(client.clone()));
    Ok(Some(
        crate::guard::server::start(g, o, m, c, Some(check)).await?,
    ))
}

/// The metrics and health server on `listen`: its address, the metrics and the health it serves.
async fn serve(listen: SocketAddr) -> crate::error::Result<(SocketAddr, Metrics, Health)> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Health::default();
    let app = nodemedic_common::serve::router(Arc::new(registry), health.clone());
    let addr = nodemedic_common::serve::spawn(listen, app)
        .await
        .map_err(|source| crate::error::Error::Listen {
            addr: listen,
            source,
        })?;
    tracing::info!(%addr, "serving /metrics /healthz /readyz");
    Ok((addr, metrics, health))
}

pub async fn start(opts: Options, client: kube::Client) -> crate::error::Result<Running> {
    let (addr, metrics, health) = serve(opts.listen).await?;
    let key = own_objects_waiting(&client, &opts).await?;
    let loosened = looser_than_published(&client, &opts).await?;
    let signing = signing_key(&opts)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (leader_tx, leader_rx) = watch::channel(false);
    let observed = Observed::default();
    observed.count_with(metrics.clone());
    let mut tasks = vec![
        observed.spawn_nodes(Api::all(client.clone())),
        watchdog(observed.clone(), &health),
    ];
    let (keep_tx, keep_rx) = watch::channel(crate::decide::evictions::projection(&opts.config));
    let (relisted_tx, relisted_rx) = watch::channel(keep_rx.borrow().clone());
    tasks.push(observed.spawn_pods(Api::all(client.clone()), keep_rx, relisted_tx));
    let nodes = observed.clone();
    let known = move |n: &str| nodes.node(n).is_some();
    tasks.push(observed.sandbox.spawn(Api::all(client.clone()), known));
    let key = Arc::new(key);
    let guard_addr = guard(&opts, &client, &observed, &metrics, &key).await?;
    let (lease_read_tx, lease_read_rx) = watch::channel(None);
    let (breaker_tx, breaker_rx) = watch::channel(None);
    let (records_tx, records_rx) = watch::channel(None);
    let data = leader::LeaseData {
        records: records_rx,
        read: lease_read_tx,
        breaker: breaker_rx,
    };
    let election = leader::run(
        client.clone(),
        opts.lease.clone(),
        leader_tx,
        stop_rx.clone(),
        data,
    );
    let election = tokio::spawn(election);
    // One gate before every write: the Lease held now.
    let cluster = Gated::new(
        KubeCluster::new(client.clone(), observed.clone(), &opts.lease.namespace),
        leader_rx.clone(),
    );
    let clock = nodemedic_common::clock::Clock::system();
    let record = recorder(&cluster, &metrics, &observed, &opts, &mut tasks);
    let looser = (record.clone(), leader_rx.clone(), lease_read_rx.clone());
    tasks.extend(tell_looser(loosened, &metrics, looser));
    let writer = cluster.clone(); // its own ConfigMaps' publisher writes through the same gate
    let exec = Executor::new(cluster, record, opts.config.dry_run, clock);
    // What a reload may not loosen (the limits in force now) and what it compares with.
    let started = Started::of(&opts.config);
    // A drainer is known by its Lease name: its records carry it, and it acts only on its own, as
    // sealed with its key (see `model::seal`).
    let mut config = opts.config;
    config.owner = opts.lease.name.clone();
    config.records = RecordTrust::Sealed(key.clone());
    let changed = observed.changed.clone();
    // One publisher keeps the drainer's own ConfigMaps while leading (`act::publisher`).
    let owner = owner(&opts.lease, key);
    let (outbox, task) = publisher::spawn(writer, owner, signing, opts.settings);
    tasks.push(task);
    let settings_tx = outbox.settings;
    let kured = config.ladder.kured.clone();
    let mut controller = Controller::new(config, observed, exec, health, leader_rx.clone(), clock)
        .with_lease(lease_read_rx, breaker_tx)
        .with_record_memory(outbox.memory, records_tx)
        .with_reboot_requests(outbox.reboots);
    if let Some((namespace, name)) = kured {
        let (rx, task) = crate::observe::reboot_lock::spawn(client.clone(), &namespace, &name);
        tasks.push(task);
        controller = controller.with_kured(format!("{namespace}/{name}"), rx);
    }
    let controller = match opts.reload.filter(|a| a.config.is_some()) {
        None => controller,
        Some(args) => {
            let (tx, rx) = mpsc::channel(1);
            tasks.push(tokio::spawn(reload(
                args,
                started,
                keep_tx,
                relisted_rx,
                tx,
                metrics,
                settings_tx,
            )));
            controller.with_reloads(rx)
        }
    };
    tasks.push(tokio::spawn(controller.run(changed, opts.tick, stop_rx)));
    Ok(Running {
        addr,
        guard_addr,
        leader: leader_rx,
        stop: stop_tx,
        tasks,
        election,
    })
}

/// The first wait for an API server that cannot be reached at start; doubled after each failure.
const START_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two tries at start.
const START_RETRY_MAX: Duration = Duration::from_secs(30);

/// [`own_objects`], waiting with backoff while the API server cannot be reached or is not serving
/// yet (a drainer started with its control plane, or during an outage): not ready meanwhile, each
/// failed try said. A refusal (a 403, an object missing that it may not make) stops it at once.
async fn own_objects_waiting(
    client: &kube::Client,
    opts: &Options,
) -> crate::error::Result<crate::model::seal::SealKey> {
    let mut wait = START_RETRY;
    loop {
        match own_objects(client, opts).await {
            Err(e) if e.unreachable() => {
                let error = nodemedic_common::cli::error_chain(&e);
                let retry_in = humantime::format_duration(wait).to_string();
                tracing::warn!(%error, %retry_in, "cannot reach the API server (named above) at start: waiting for it, not ready meanwhile");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(START_RETRY_MAX);
            }
            other => return other,
        }
    }
}

/// The objects it keeps in its namespace (made where missing and allowed), then the record key:
/// without it no record can be trusted, so nothing starts.
async fn own_objects(
    client: &kube::Client,
    opts: &Options,
) -> crate::error::Result<crate::model::seal::SealKey> {
    let (namespace, lease) = (&opts.lease.namespace, &opts.lease.name);
    let file = opts.record_key_file.as_deref();
    let owned = crate::act::objects::owned(lease, opts.settings.is_some(), file.is_none());
    crate::act::objects::ensure(client, namespace, &owned).await?;
    let secret = crate::act::key::default_secret(lease);
    if let Some(path) = file {
        let previous = opts.record_key_previous_file.as_deref();
        return Ok(crate::act::key::from_file(path, previous, namespace, &secret).await?);
    }
    tracing::warn!(
        secret = %format!("{namespace}/{secret}"),
        "the drain record key is read through the API (no --record-key-file): whoever holds this drainer's token can read it and seal records it would act on; the shipped manifests mount it as a file its token cannot read"
    );
    Ok(crate::act::key::load(client.clone(), namespace, &secret).await?)
}

/// What these settings loosen of the ones the drainer last published (its settings ConfigMap, as
/// a leader wrote it): logged, and with `--refuse-looser-start` an error. A drainer restarted after
/// an edit of its ConfigMap that its reload refused would otherwise take the edit silently.
async fn looser_than_published(
    client: &kube::Client,
    opts: &Options,
) -> crate::error::Result<Vec<String>> {
    if opts.settings.is_none() {
        return Ok(Vec::new());
    }
    let name = crate::config::published::configmap_name(&opts.lease.name);
    let configmap = format!("{}/{name}", opts.lease.namespace);
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &opts.lease.namespace);
    let data = match api.get_opt(&name).await {
        Ok(cm) => cm.and_then(|c| c.data).unwrap_or_default(),
        Err(e) => {
            tracing::warn!(%configmap, error = %e, "cannot read the settings last published: a start looser than them is not looked for");
            return Ok(Vec::new());
        }
    };
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let loosened = match Published::from_data(&data) {
        Ok(p) => p.loosened_by(&opts.config),
        Err(e) => {
            tracing::warn!(%configmap, error = %e, "the settings last published do not read back: a start looser than them is not looked for");
            return Ok(Vec::new());
        }
    };
    if loosened.is_empty() {
        return Ok(loosened);
    }
    tracing::warn!(%configmap, loosened = %loosened.join("; "),
        refused = opts.refuse_looser_start,
        "these settings are looser than the ones last published (a restart took a ConfigMap edit a reload would have refused, or a rollout loosened them)");
    if opts.refuse_looser_start {
        return Err(crate::error::Error::LooserStart {
            configmap,
            loosened,
        });
    }
    Ok(loosened)
}

/// A start looser than the settings last published (`loosened`, if anything): counted, and a
/// StartedLooser Event on the Lease once this replica leads (Events are written while leading).
fn tell_looser(
    loosened: Vec<String>,
    metrics: &Metrics,
    (record, mut leader, mut lease): (
        Recorder<KubeCluster>,
        watch::Receiver<bool>,
        watch::Receiver<Option<k8s_openapi::api::coordination::v1::Lease>>,
    ),
) -> Option<JoinHandle<()>> {
    if loosened.is_empty() {
        return None;
    }
    metrics.looser_starts.inc();
    Some(tokio::spawn(async move {
        if leader.wait_for(|l| *l).await.is_err() {
            return;
        }
        let reference = match lease.wait_for(|l| l.is_some()).await {
            Ok(l) => l.as_ref().map(crate::controller::lease_reference),
            Err(_) => None,
        };
        if let Some(reference) = reference {
            record.started_looser(&loosened, reference).await;
        }
    }))
}

/// The recorder: notifications sent and Events written behind the writes they tell of, each by
/// a task of its own (aborted with the other tasks at shutdown).
fn recorder(
    cluster: &Gated<KubeCluster>,
    metrics: &Metrics,
    observed: &Observed,
    opts: &Options,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Recorder<KubeCluster> {
    let (notifier, t_notify) =
        crate::notify::Notifier::start(opts.config.notify_urls.clone(), metrics.clone());
    tasks.extend(t_notify);
    let (events, t_events) = crate::record::event_queue::EventQueue::start(cluster.clone());
    tasks.extend(t_events);
    let clock = nodemedic_common::clock::Clock::system();
    Recorder::new(cluster.clone(), metrics.clone(), observed.clone(), clock)
        .with_notifier(notifier, &opts.lease.name)
        .with_event_queue(events)
}

/// /healthz fails once a watch has been failing for [`WATCH_UNHEALTHY`] (the API server unreachable
/// or refusing us that long: a restart may help; shorter outages are ridden out with backoff).
fn watchdog(observed: Observed, health: &Health) -> JoinHandle<()> {
    let beat = health.register("watches", WATCH_UNHEALTHY + Duration::from_secs(30));
    tokio::spawn(async move {
        loop {
            if observed
                .watch_failing_for()
                .is_none_or(|d| d < WATCH_UNHEALTHY)
            {
                beat.beat();
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
    })
}

/// Watch the config file (a ConfigMap's `..data` swap included) and hand each valid edit to the
/// controller; an invalid one is logged with its position and counted, and the running settings
/// stay. When the edit names other protected pod annotations, the pod cache is listed again with
/// them before the controller gets the settings, so it never decides on pods missing them.
/// What a reload compares with: the limits it may not loosen, and the settings the drainer started
/// with (an edit made before the file was first watched is one to take).
struct Started {
    ceilings: crate::config::ceilings::Ceilings,
    said: Vec<(String, String)>,
    notify_urls: Vec<crate::config::url::NotifyUrl>,
}

impl Started {
    fn of(cfg: &Config) -> Started {
        Started {
            ceilings: crate::config::ceilings::Ceilings::of(cfg),
            said: cfg.said.clone(),
            notify_urls: cfg.notify_urls.clone(),
        }
    }
}

async fn reload(
    args: PolicyArgs,
    started: Started,
    keep: watch::Sender<crate::model::pod::Projection>,
    mut relisted: watch::Receiver<crate::model::pod::Projection>,
    to_controller: mpsc::Sender<crate::controller::Reloaded>,
    metrics: Metrics,
    settings: watch::Sender<Option<Published>>,
) {
    let Some(path) = args.config.clone() else {
        return;
    };
    let mut watch = match nodemedic_common::filewatch::ContentWatch::new(
        std::slice::from_ref(&path),
        Duration::from_millis(500),
    ) {
        Ok(w) => {
            let checks = metrics.config_checks.clone();
            w.on_check(move || {
                checks.inc();
            })
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot watch the config file: edits take effect at the next restart");
            return;
        }
    };
    // The file as it is now may already differ from what the drainer started with (edited between
    // the start's read and this watch's first look, which it takes as the file's first content).
    let mut missed = match policy::build(&args) {
        Ok(cfg) => cfg.said != started.said || cfg.notify_urls != started.notify_urls,
        Err(_) => true,
    };
    let ceilings = started.ceilings;
    while std::mem::take(&mut missed) || watch.changed().await.is_some() {
        let cfg = match policy::build(&args) {
            Ok(cfg) => cfg,
            Err(errors) => {
                for e in &errors {
                    tracing::error!(error = %e, "config edit rejected: the running settings stay");
                }
                metrics.config_reload(crate::metrics::Reload::Failure);
                let why = errors.iter().map(ToString::to_string).collect();
                let refused = crate::controller::Reloaded::Refused(why);
                if to_controller.send(refused).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let loosened = ceilings.loosened_by(&cfg);
        if !loosened.is_empty() {
            for why in &loosened {
                tracing::error!(error = %why, "config edit rejected: the running settings stay");
            }
            metrics.config_reload(crate::metrics::Reload::Failure);
            let refused = crate::controller::Reloaded::Refused(loosened);
            if to_controller.send(refused).await.is_err() {
                return;
            }
            continue;
        }
        let kept = crate::decide::evictions::projection(&cfg);
        if *keep.borrow() != kept {
            tracing::info!(keep = %kept, "what the pod cache keeps changed (protected annotations, pod policies): listing the pods again before applying");
            keep.send_replace(kept.clone());
            while *relisted.borrow_and_update() != kept {
                if relisted.changed().await.is_err() {
                    return;
                }
            }
        }
        if to_controller
            .send(crate::controller::Reloaded::Config(Box::new(cfg)))
            .await
            .is_err()
        {
            return;
        }
        metrics.config_reload(crate::metrics::Reload::Success);
        // Published as accepted (read again: built a moment ago from the same file).
        if settings.borrow().is_some() {
            let text = std::fs::read_to_string(&path).ok();
            settings.send_replace(Some(Published::new(&args, text)));
        }
    }
}

/// Whose the drainer's own ConfigMaps are.
fn owner(lease: &LeaseConfig, key: Arc<crate::model::seal::SealKey>) -> publisher::Owner {
    publisher::Owner {
        namespace: lease.namespace.clone(),
        lease: lease.name.clone(),
        identity: lease.identity.clone(),
        key,
    }
}

/// The reboot requests' signing key, read at start (a file that is not one stops the drainer);
/// without one, a ladder that reboots is said to go unheard.
fn signing_key(
    opts: &Options,
) -> crate::error::Result<Option<nodemedic_common::reboot::SigningKey>> {
    let Some(path) = &opts.reboot_signing_key else {
        if opts.config.ladder_reboots() {
            tracing::warn!(
                "a remediation ladder reboots but no --reboot-signing-key is given: its reboot requests go unsigned and every detector refuses them (the ladder then goes on to its next step at the reboot deadline)"
            );
        }
        return Ok(None);
    };
    let key = nodemedic_common::reboot::SigningKey::read(path)?;
    tracing::info!(key = %path.display(), "reboot requests are signed");
    Ok(Some(key))
}
