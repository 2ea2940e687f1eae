//! The controller loop, I/O: while leading, take what changed from the caches ([`Observed`]),
//! decide the nodes it concerns ([`Fleet`], pure) and hand each effect to the [`Executor`], which
//! alone writes; a drain's outcome comes back here, where its record is decided. Changes are
//! debounced a few milliseconds so a burst is one round; every [`RESYNC`] every view is taken again
//! from the cache and the nodes not at rest are decided again (a safety net: nothing is expected to
//! change then; a healthy node changes only with its view). New settings from a config reload are
//! taken between rounds ([`Controller::reconfigure`]). Generic over the [`Cluster`]: `drainer run`
//! runs it against the API server, `drainer simulate` against a cluster in memory.
//!
//! ```text
//!  mod     the loop, settings, the breaker kept on the Lease
//!  round   one round: catch up with the caches, decide, write, start and finish drains
//!  chores  the waits' Events, stale pod readiness, the watchdog, which rounds do the periodic chores
//!  laps    how long a round's parts took: a slow one says so
//!  walk    the watchdog's walk over the nodes, kept between rounds
//!  tail    what a round writes after its holds, written while the next rounds go on
//!  symptoms  the PodsNotStarting and PodsNotTerminating conditions
//! ```

mod chores;
mod laps;
mod memory;
mod round;
mod symptoms;
mod tail;
#[cfg(test)]
mod tests;
mod walk;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::act::{DrainRun, Executor};
use crate::config::Config;
use crate::decide::fleet::{Fleet, FleetEvent};
use crate::decide::gates::breaker;
use crate::decide::schedule::{BudgetWaits, StaleSchedule};
use crate::metrics::Metrics;
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::model::record::DrainOutcome;
use crate::observe::Observed;
use crate::observe::interest::Interest;
use crate::record::Recorder;

/// Changes arriving within this time after the first are decided in one round: a burst (a zone's
/// nodes going NotReady together) is seen whole by the gates, not a watch poll's worth at a time.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(5);
/// Nodes handled between two yields to the runtime by the resync and the watchdog's walk (and the
/// size from which a round is decided on the blocking pool).
pub(super) const YIELD_EVERY: usize = 256;
/// Every node is decided again this often, changed or not.
pub const RESYNC: Duration = Duration::from_secs(60);
/// Writes of one round in flight at once.
const WRITE_CONCURRENCY: usize = 16;

/// What reading the detector DaemonSet gave ([`Controller::watch_detectors`]).
type PlacementRead =
    Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, crate::model::cluster::ApiError>;
type PlacementTask =
    tokio::task::JoinHandle<((String, String), PlacementRead, tokio::time::Instant)>;

/// What the controller did, for an observer ([`Controller::with_tap`]): `drainer simulate` builds
/// its report from these.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tap {
    /// A fleet-wide change, in the round at `at`.
    Fleet { at: Timestamp, event: FleetEvent },
    /// A round at `at`, what it carried out, and the nodes it decided on: each with why a gate
    /// holds it (`None`: none does).
    Round {
        at: Timestamp,
        done: Vec<Done>,
        decided: Vec<(String, Option<String>)>,
    },
    /// A drain attempt ended (its record decided and being written).
    DrainEnded {
        at: Timestamp,
        node: String,
        outcome: DrainOutcome,
    },
}

/// One effect of a round, carried out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Done {
    pub(crate) node: String,
    pub(crate) did: Did,
    /// The decision's reason.
    pub(crate) reason: String,
    /// Written (or, for a drain, started).
    pub(crate) ok: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Did {
    Cordon,
    /// Held by taints alone (`--cordon=false`).
    Taint,
    /// Let go of a hold by taints alone: the taints taken off.
    Untaint,
    Drain,
    Uncordon,
    Release,
    Forget,
    DeleteNode,
    Probation,
    /// Held again after a relapse during probation.
    Relapse,
    /// A ladder step: a reboot requested.
    Reboot,
    /// A ladder step: the Node deleted for its replacement.
    Replace,
    /// The ladder ended with a person.
    Escalate,
}

use nodemedic_common::reboot::Requests as Reboots;

pub(crate) struct Controller<C: Cluster> {
    cfg: Arc<Config>,
    observed: Observed,
    fleet: Fleet,
    exec: Executor<C>,
    record: Recorder<C>,
    metrics: Metrics,
    health: Health,
    leader: watch::Receiver<bool>,
    /// Drains (and the writing of how they ended) running in this process, by node.
    drains: HashMap<String, JoinHandle<()>>,
    /// Drains whose evictions ended, for their records to be decided here.
    ended: (
        mpsc::UnboundedSender<DrainRun>,
        mpsc::UnboundedReceiver<DrainRun>,
    ),
    /// Nodes waiting for a budget and their notes.
    waits: BudgetWaits,
    /// The rounds' tails still being written, and where their budget notes' Event names come back.
    tail: Option<tail::Tail>,
    noted: (
        mpsc::UnboundedSender<tail::Noted>,
        mpsc::UnboundedReceiver<tail::Noted>,
    ),
    /// A round returns before its tail is written (`drainer run`); otherwise (a round called
    /// alone, a simulation) it writes everything first.
    detach_tail: bool,
    /// Stale pods' reports and eviction attempts.
    stale: StaleSchedule,
    /// The time each round decides at.
    clock: Clock,
    last_resync: Option<Timestamp>,
    /// The nodes the periodic resync has yet to take again (it gives way to changes).
    resync_left: Vec<ArcStr>,
    /// Whether a resync stops for changes that come in meanwhile (`drainer run`; a simulation
    /// keeps whole rounds).
    resync_gives_way: bool,
    /// Validated settings from config reloads.
    configs: Option<mpsc::Receiver<Reloaded>>,
    /// The drainer's Lease as the election last read it (the pause, the breaker kept there).
    lease: Option<watch::Receiver<Option<Lease>>>,
    /// The breaker state for the election to keep on the Lease (see `leader::LeaseData`).
    breaker_out: Option<watch::Sender<Option<Option<String>>>>,
    /// What was last handed to `breaker_out`.
    published_breaker: Option<Option<String>>,
    /// The record memory's ConfigMaps (`memory`): read back when leadership begins, then kept.
    memory: Option<crate::act::recall::Memory>,
    /// Where the reboot requests go (`act::reboots` writes them to their ConfigMap while leading;
    /// a simulation carries them out).
    reboots_out: Option<watch::Sender<Reboots>>,
    /// Leading at the last loop turn (a new leadership reads the breaker back first).
    was_leading: bool,
    /// The settings' summary is to be logged after the next round (at start, after a reload).
    summary_due: bool,
    /// The nodes-listed-pods-coming line was logged.
    said_nodes_only: bool,
    /// The detector placement's first reading was logged.
    placement_said: bool,
    /// When the watchdog last checked, and last read the detector DaemonSet.
    last_watchdog: Option<Timestamp>,
    /// The watchdog's walk under way (it gives way to changes, as the resync does).
    watchdog_walk: Option<walk::Walk>,
    /// Since when rounds with changes have left the periodic chores (the resync, the watchdog's
    /// walk) to the next round.
    chores_waiting: Option<Timestamp>,
    /// When the pods' symptoms were last assessed.
    last_symptoms: Option<Timestamp>,
    /// The assessment under way on the blocking pool.
    symptoms: Option<tokio::task::JoinHandle<crate::decide::symptoms::Found>>,
    last_placement: Option<Timestamp>,
    /// The read of the detector DaemonSet under way: which it is, what it gave, when it ended.
    placement_task: Option<PlacementTask>,
    /// Writing `--history-file` fails (said once).
    history_failing: bool,
    /// Large rounds and the symptoms are worked out on the blocking pool (off in simulations:
    /// paused time).
    offload: bool,
    tap: Option<mpsc::UnboundedSender<Tap>>,
}

impl<C: Cluster> Controller<C> {
    pub(crate) fn new(
        cfg: Config,
        observed: Observed,
        exec: Executor<C>,
        health: Health,
        leader: watch::Receiver<bool>,
        clock: Clock,
    ) -> Controller<C> {
        let cfg = Arc::new(cfg);
        let record = exec.recorder().clone();
        observed.set_interest(Interest::of(&cfg));
        Controller {
            fleet: Fleet::new(cfg.clone()),
            cfg,
            observed,
            metrics: record.metrics().clone(),
            record,
            exec,
            health,
            leader,
            drains: HashMap::new(),
            ended: mpsc::unbounded_channel(),
            waits: BudgetWaits::default(),
            tail: None,
            noted: mpsc::unbounded_channel(),
            detach_tail: false,
            stale: StaleSchedule::default(),
            clock,
            last_resync: None,
            resync_left: Vec::new(),
            resync_gives_way: false,
            configs: None,
            lease: None,
            breaker_out: None,
            published_breaker: None,
            memory: None,
            reboots_out: None,
            was_leading: false,
            summary_due: true,
            placement_said: false,
            said_nodes_only: false,
            last_watchdog: None,
            watchdog_walk: None,
            chores_waiting: None,
            last_symptoms: None,
            symptoms: None,
            last_placement: None,
            placement_task: None,
            history_failing: false,
            offload: true,
            tap: None,
        }
    }

    /// Read the pause and the breaker from the Lease, and keep the breaker's state there.
    pub(crate) fn with_lease(
        mut self,
        lease: watch::Receiver<Option<Lease>>,
        breaker_out: watch::Sender<Option<Option<String>>>,
    ) -> Controller<C> {
        self.lease = Some(lease);
        self.breaker_out = Some(breaker_out);
        self
    }

    /// Hand the reboot requests the records stand for to `out` whenever they change.
    pub(crate) fn with_reboot_requests(mut self, out: watch::Sender<Reboots>) -> Controller<C> {
        self.reboots_out = Some(out);
        self
    }

    /// Hand the reboot requests on when they changed.
    pub(super) fn publish_reboots(&mut self) {
        // A dry run writes nothing: the requests wait until it ends.
        if self.cfg.dry_run {
            return;
        }
        let Some(reboots) = self.fleet.reboots_changed() else {
            return;
        };
        if let Some(tx) = &self.reboots_out {
            tx.send_if_modified(|old| {
                let changed = *old != reboots;
                *old = reboots;
                changed
            });
        }
    }

    /// Take new settings from `configs` (validated by the reloader) between rounds.
    pub(crate) fn with_reloads(mut self, configs: mpsc::Receiver<Reloaded>) -> Controller<C> {
        self.configs = Some(configs);
        self
    }

    /// Tell `tap` what each round did; decide every round on the runtime's thread (a simulation on
    /// paused time has no blocking pool to wait for).
    pub(crate) fn with_tap(mut self, tap: mpsc::UnboundedSender<Tap>) -> Controller<C> {
        self.tap = Some(tap);
        self.offload = false;
        self
    }

    fn tap(&self, t: Tap) {
        if let Some(tx) = &self.tap {
            let _ = tx.send(t);
        }
    }

    /// What `f` reads of the Lease as last seen, without copying it (a round reads it every time).
    fn read_lease<T>(&self, f: impl FnOnce(&Lease) -> T) -> Option<T> {
        self.lease.as_ref().and_then(|l| l.borrow().as_ref().map(f))
    }

    /// The annotation `key` of the Lease as last seen.
    fn lease_annotation(&self, key: &str) -> Option<String> {
        self.read_lease(|l| l.metadata.annotations.as_ref()?.get(key).cloned())
            .flatten()
    }

    /// A new leadership continues the breaker the previous leader kept on the Lease.
    fn restore_breaker(&mut self) {
        let raw = self.lease_annotation(breaker::BREAKER_ANNOTATION);
        let breaker = match raw.as_deref().map(breaker::Breaker::from_annotation) {
            None => breaker::Breaker::default(),
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "unreadable breaker state on the Lease; starting closed");
                breaker::Breaker::default()
            }
        };
        if breaker.is_open() {
            let reason = breaker.trip.as_ref().map(ToString::to_string);
            let reason = reason.unwrap_or_default();
            tracing::warn!(%reason, "the circuit breaker was open: it stays open");
        }
        self.fleet.restore_breaker(breaker);
        self.published_breaker = None;
        self.publish_breaker();
    }

    fn publish_breaker(&mut self) {
        let b = self.fleet.breaker();
        let state = b.is_open().then(|| b.to_annotation());
        if self.published_breaker.as_ref() != Some(&state) {
            if let Some(tx) = &self.breaker_out {
                tx.send_replace(Some(state.clone()));
            }
            self.published_breaker = Some(state);
        }
    }

    /// Decide with new settings from the next round on, leading or not (a follower that becomes
    /// leader uses what the file says now). Drains already running finish under the settings they
    /// started with. Logs what changed.
    pub(crate) fn reconfigure(&mut self, mut new: Config) {
        new.owner = self.cfg.owner.clone();
        new.records = self.cfg.records.clone();
        let changes = self.cfg.changes_said(&new);
        if changes.is_empty() {
            tracing::info!("config file changed; the settings did not");
            return;
        }
        tracing::info!(changes = %changes.join("; "), "config reloaded: new settings apply from this round");
        if new.dry_run != self.cfg.dry_run {
            self.exec.set_dry_run(new.dry_run);
        }
        if new.watchdog.daemonset != self.cfg.watchdog.daemonset {
            // The next walk begins with where the DaemonSet now named runs, not with the old
            // one's placement (read up to a resync period ago).
            self.last_placement = None;
        }
        let cfg = Arc::new(new);
        self.observed.set_interest(Interest::of(&cfg));
        self.cfg = cfg.clone();
        self.summary_due = true;
        for (node, error) in self.fleet.reconfigure(cfg) {
            self.metrics.selector_errors.inc();
            tracing::warn!(%node, %error, "the node selector failed on this node; not selected");
        }
    }

    /// Run until `stop`: a round after each change (debounced), each clock wake-up, each `tick`.
    pub(crate) async fn run(
        mut self,
        changed: Arc<Notify>,
        tick: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let beat = self.health.register("controller", Duration::from_secs(60));
        // Simulations (on paused time, told each round) keep whole rounds.
        self.detach_tail = self.offload;
        self.resync_gives_way = self.offload;
        // Cordons need only the nodes (as draino's did): rounds start once they are listed, and
        // hold what evicts until every pod is (a new leader at 650,000 pods lists them for tens
        // of seconds).
        while !self.observed.nodes_synced() {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let mut ready = self.say_synced();
        loop {
            // Sleep until a change, the next clock wake-up, the tick (waits and stale pods), or a
            // drain's end.
            let now = self.clock.now();
            let until_wake = self
                .fleet
                .next_wake()
                .map(|at| {
                    let ms = at.as_millisecond().saturating_sub(now.as_millisecond());
                    Duration::from_millis(ms.max(1) as u64)
                })
                .unwrap_or(tick);
            tokio::select! {
                _ = stop.changed() => return,
                _ = changed.notified() => {
                    let asked = std::time::Instant::now();
                    tokio::time::sleep(DEBOUNCE).await;
                    laps::late_wake(DEBOUNCE, asked.elapsed());
                }
                _ = tokio::time::sleep(tick.min(until_wake)) => {}
                Some(r) = next_config(&mut self.configs) => match r {
                    Reloaded::Config(cfg) => self.reconfigure(*cfg),
                    Reloaded::Refused(why) => {
                        let lease = self.read_lease(lease_reference);
                        self.record.config_refused(&why, lease).await;
                    }
                },
                Some(run) = self.ended.1.recv() => self.drain_ended(run),
                r = crate::act::recall::answer(&mut self.memory) => self.memory_answered(r),
            }
            beat.beat();
            if !ready {
                ready = self.say_synced();
            }
            let leading = *self.leader.borrow();
            self.metrics.leader.set(leading as i64);
            let newly_leading = leading && !self.was_leading;
            self.was_leading = leading;
            if !leading {
                continue;
            }
            if newly_leading {
                self.restore_breaker();
                self.ask_memory();
            }
            if self.waiting_for_memory() {
                continue;
            }
            self.round().await;
            if self.summary_due {
                self.summary_due = false;
                self.say_summary();
            }
        }
    }

    /// Say how far the caches are (the nodes listed; the pods too, or still coming) and tell the
    /// fleet; ready (`/readyz`) once both are listed. Whether they are.
    fn say_synced(&mut self) -> bool {
        // Called on every wake-up until the pods are listed: count only when there is something
        // to say.
        let synced = self.observed.synced();
        self.fleet.set_pods_listed(synced);
        if synced {
            self.health.set_ready(true);
            let (nodes, pods) = (self.observed.node_count(), self.observed.pod_count());
            tracing::info!(nodes, pods, "node and pod caches synced");
        } else if !self.said_nodes_only {
            self.said_nodes_only = true;
            tracing::info!(
                nodes = self.observed.node_count(),
                "nodes listed: cordons may start; drains wait until every pod is listed"
            );
        }
        synced
    }

    /// Log what the settings watch and select, and what looks like a mistake in them.
    fn say_summary(&self) {
        let s = crate::decide::summary::summarize(&self.cfg, self.fleet.selections());
        tracing::info!(
            conditions = %s.conditions.join(", "),
            selector = %s.selector,
            "watching {} condition(s); selected {} of {} nodes",
            s.conditions.len(),
            s.selected,
            s.nodes
        );
        for w in &s.warnings {
            tracing::warn!("{w}");
        }
    }
}

/// What an edit of the config file came to.
#[derive(Debug)]
pub(crate) enum Reloaded {
    /// Valid: decide with it from the next round (boxed: a Config is large, refusals are small).
    Config(Box<Config>),
    /// Refused (the errors, in an operator's words): the running settings stay.
    Refused(Vec<String>),
}

/// The Lease as the object fleet-wide Events are about (`kubectl describe lease` shows them).
fn lease_reference(l: &Lease) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("coordination.k8s.io/v1".into()),
        kind: Some("Lease".into()),
        name: l.metadata.name.clone(),
        namespace: l.metadata.namespace.clone(),
        uid: l.metadata.uid.clone(),
        ..Default::default()
    }
}

/// The next config from the reloader; pending forever without one (or once it is gone).
async fn next_config(configs: &mut Option<mpsc::Receiver<Reloaded>>) -> Option<Reloaded> {
    match configs {
        Some(rx) => match rx.recv().await {
            Some(c) => Some(c),
            None => {
                *configs = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}
