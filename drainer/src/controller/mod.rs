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
//!  mod       the loop, its state, settings
//!  round     one round: catch up, decide, report, write, start drains
//!  catch_up  the fleet brought up to date with the caches; the periodic resync
//!  drains    the drains running, and their records decided when they end
//!  report    what a round saw, told: Events, gauges, stale pods, symptoms, decisions logged
//!  publish   the breaker, the record memory, the reboot requests handed on to their writers
//!  chores    the waits' Events, stale pod readiness, the watchdog, when the periodic chores run
//!  laps      how long a round's parts took: a slow one says so
//!  state     the loop's state besides the fleet's (pure data)
//!  tail      what a round writes after its holds, written while the next rounds go on
//!  symptoms  the PodsNotStarting and PodsNotTerminating conditions
//! ```

mod catch_up;
mod chores;
mod drains;
mod laps;
mod publish;
mod remediations;
mod report;
mod round;
mod state;
mod symptoms;
mod tail;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use tokio::sync::{Notify, mpsc, watch};

use crate::act::Executor;
use crate::config::Config;
use crate::decide::fleet::{Fleet, FleetEvent};
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

/// One decision of a round, carried out: what was done is derived from its reason and effect
/// (`drainer simulate` words it from them), never kept beside them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Done {
    pub(crate) node: ArcStr,
    pub(crate) why: crate::decide::Why,
    pub(crate) effect: crate::decide::Effect,
    /// Written (or, for a drain, started).
    pub(crate) ok: bool,
}

/// The loop's state, each part with one owner: the decisions' state is the [`Fleet`]'s, the
/// periodic chores' [`state::Periodic`], what is kept on the Lease and in the drainer's own
/// ConfigMaps the [`state::Publisher`]'s, the drains running [`state::Drains`]'.
pub(crate) struct Controller<C: Cluster> {
    cfg: Arc<Config>,
    observed: Observed,
    fleet: Fleet,
    /// The only writer.
    exec: Executor<C>,
    record: Recorder<C>,
    health: Health,
    leading: Leading,
    drains: state::Drains,
    tails: tail::Tails,
    chores: state::Periodic,
    /// The time each round decides at.
    clock: Clock,
    /// Validated settings from config reloads.
    configs: Option<mpsc::Receiver<Reloaded>>,
    publish: state::Publisher,
    mode: Mode,
    tap: Option<mpsc::UnboundedSender<Tap>>,
}

/// Leadership as the election says it, and whether this replica led at the last loop turn (a new
/// leadership reads the breaker and the memory back first).
struct Leading {
    rx: watch::Receiver<bool>,
    was_leading: bool,
}

/// How the loop runs: `drainer run` offloads large work and detaches and gives way; a simulation
/// (paused time, told each round) keeps whole rounds on the runtime's thread.
struct Mode {
    /// Large rounds and the symptoms are worked out on the blocking pool.
    offload: bool,
    /// A round returns before its tail is written; otherwise it writes everything first.
    detach_tail: bool,
    /// A resync stops for changes that come in meanwhile.
    resync_gives_way: bool,
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
            record,
            exec,
            health,
            leading: Leading {
                rx: leader,
                was_leading: false,
            },
            drains: state::Drains::default(),
            tails: tail::Tails::default(),
            chores: state::Periodic {
                summary_due: true,
                ..Default::default()
            },
            clock,
            configs: None,
            publish: state::Publisher::default(),
            mode: Mode {
                offload: true,
                detach_tail: false,
                resync_gives_way: false,
            },
            tap: None,
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
        self.mode.offload = false;
        self
    }

    fn tap(&self, t: Tap) {
        if let Some(tx) = &self.tap {
            let _ = tx.send(t);
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
            self.chores.last_placement = None;
        }
        let cfg = Arc::new(new);
        self.observed.set_interest(Interest::of(&cfg));
        self.cfg = cfg.clone();
        self.chores.summary_due = true;
        for (node, error) in self.fleet.reconfigure(cfg) {
            self.record.metrics().selector_errors.inc();
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
        self.mode.detach_tail = self.mode.offload;
        self.mode.resync_gives_way = self.mode.offload;
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
                Some(run) = self.drains.ended.1.recv() => self.drain_ended(run),
                r = crate::act::recall::answer(&mut self.publish.memory) => self.memory_answered(r),
            }
            beat.beat();
            if !ready {
                ready = self.say_synced();
            }
            let leading = *self.leading.rx.borrow();
            self.record.metrics().leader.set(leading as i64);
            let newly_leading = leading && !self.leading.was_leading;
            self.leading.was_leading = leading;
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
            if self.chores.summary_due {
                self.chores.summary_due = false;
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
        } else if !self.chores.said_nodes_only {
            self.chores.said_nodes_only = true;
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
pub(crate) fn lease_reference(l: &Lease) -> k8s_openapi::api::core::v1::ObjectReference {
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
