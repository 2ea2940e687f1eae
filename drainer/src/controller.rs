//! The controller loop: while leading, take what changed from the caches ([`Observed`]), decide the
//! nodes it concerns ([`Fleet`], pure) and hand each effect to the [`Act`] (act), which alone writes.
//! Changes are debounced a few milliseconds so a burst is one round; every [`RESYNC`] all nodes are
//! decided again (a safety net: nothing is expected to change then). It logs a decision when it
//! changes and keeps one WaitingForBudget Event per wait. New settings from a config reload are
//! taken between rounds ([`Controller::reconfigure`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::act::Act;
use crate::config::Config;
use crate::decide::fleet::Fleet;
use crate::decide::gates::{breaker, pause};
use crate::decide::schedule::{BudgetWaits, StaleSchedule};
use crate::decide::{Action, DrainJob, Effect, Why};
use crate::metrics::{Budget, Metrics};
use crate::model::node::NodeView;
use crate::observe::Observed;
use k8s_openapi::api::coordination::v1::Lease;

/// Changes arriving within this time after the first are decided in one round.
pub const DEBOUNCE: Duration = Duration::from_millis(5);
/// Every node is decided again this often, changed or not.
pub const RESYNC: Duration = Duration::from_secs(60);
/// A failed write is tried again after this long.
const WRITE_RETRY: Duration = Duration::from_secs(5);
/// Nodes handled between two yields to the runtime (and the size from which a round is decided on
/// the blocking pool).
const YIELD_EVERY: usize = 256;
/// Writes of one round in flight at once.
const WRITE_CONCURRENCY: usize = 16;

pub(crate) struct Controller<A: Act> {
    cfg: Arc<Config>,
    observed: Observed,
    fleet: Fleet,
    actor: A,
    metrics: Metrics,
    health: Health,
    leader: watch::Receiver<bool>,
    /// Drains running in this process, by node.
    drains: HashMap<String, JoinHandle<()>>,
    /// Last decision per node, without its numbers (decisions are logged when they change).
    last_why: HashMap<String, std::mem::Discriminant<Why>>,
    /// Nodes waiting for a budget and their notes.
    waits: BudgetWaits,
    /// Stale pods' reports and eviction attempts.
    stale: StaleSchedule,
    /// The time each round decides at.
    clock: Clock,
    last_resync: Option<Timestamp>,
    /// Validated settings from config reloads.
    configs: Option<mpsc::Receiver<Config>>,
    /// The drainer's Lease as the election last read it (the pause, the breaker kept there).
    lease: Option<watch::Receiver<Option<Lease>>>,
    /// The breaker state for the election to keep on the Lease (see `leader::LeaseData`).
    breaker_out: Option<watch::Sender<Option<Option<String>>>>,
    /// What was last handed to `breaker_out`.
    published_breaker: Option<Option<String>>,
    /// Leading at the last loop turn (a new leadership reads the breaker back first).
    was_leading: bool,
}

impl<A: Act> Controller<A> {
    pub(crate) fn new(
        cfg: Config,
        observed: Observed,
        actor: A,
        metrics: Metrics,
        health: Health,
        leader: watch::Receiver<bool>,
        clock: Clock,
    ) -> Controller<A> {
        let cfg = Arc::new(cfg);
        Controller {
            fleet: Fleet::new(cfg.clone()),
            cfg,
            observed,
            actor,
            metrics,
            health,
            leader,
            drains: HashMap::new(),
            last_why: HashMap::new(),
            waits: BudgetWaits::default(),
            stale: StaleSchedule::default(),
            clock,
            last_resync: None,
            configs: None,
            lease: None,
            breaker_out: None,
            published_breaker: None,
            was_leading: false,
        }
    }

    /// Read the pause and the breaker from the Lease, and keep the breaker's state there.
    pub(crate) fn with_lease(
        mut self,
        lease: watch::Receiver<Option<Lease>>,
        breaker_out: watch::Sender<Option<Option<String>>>,
    ) -> Controller<A> {
        self.lease = Some(lease);
        self.breaker_out = Some(breaker_out);
        self
    }

    fn lease(&self) -> Option<Lease> {
        self.lease.as_ref().and_then(|l| l.borrow().clone())
    }

    /// A new leadership continues the breaker the previous leader kept on the Lease.
    fn restore_breaker(&mut self) {
        let raw = self.lease().and_then(|l| {
            l.metadata
                .annotations
                .and_then(|a| a.get(breaker::BREAKER_ANNOTATION).cloned())
        });
        let breaker = match raw.as_deref().map(breaker::Breaker::from_annotation) {
            None => breaker::Breaker::default(),
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "unreadable breaker state on the Lease; starting closed");
                breaker::Breaker::default()
            }
        };
        if breaker.is_open() {
            let reason = breaker
                .trip
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
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

    /// Take new settings from `configs` (validated by the reloader) between rounds.
    pub(crate) fn with_reloads(mut self, configs: mpsc::Receiver<Config>) -> Controller<A> {
        self.configs = Some(configs);
        self
    }

    /// Decide with new settings from the next round on, leading or not (a follower that becomes
    /// leader uses what the file says now). Drains already running finish under the settings they
    /// started with. Logs what changed.
    pub(crate) fn reconfigure(&mut self, mut new: Config) {
        new.owner = self.cfg.owner.clone();
        let changes = self.cfg.changes(&new);
        if changes.is_empty() {
            tracing::info!("config file changed; the settings did not");
            return;
        }
        tracing::info!(changes = %changes.join("; "), "config reloaded: new settings apply from this round");
        if new.dry_run != self.cfg.dry_run {
            self.actor.set_dry_run(new.dry_run);
        }
        let cfg = Arc::new(new);
        self.cfg = cfg.clone();
        for (node, error) in self.fleet.reconfigure(cfg) {
            self.metrics.selector_errors.inc();
            tracing::warn!(%node, %error, "the node selector failed on this node; not selected");
        }
    }

    pub(crate) async fn run(
        mut self,
        changed: Arc<Notify>,
        tick: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let beat = self.health.register("controller", Duration::from_secs(60));
        while !self.observed.synced() {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        self.health.set_ready(true);
        tracing::info!(
            nodes = self.observed.nodes().len(),
            pods = self.observed.pod_count(),
            "node and pod caches synced"
        );
        loop {
            // Sleep until a change, the next clock wake-up, or the tick (waits and stale pods).
            let now = self.clock.now();
            let until_wake = self
                .fleet
                .next_wake()
                .map(|at| {
                    Duration::from_millis(
                        (at.as_millisecond().saturating_sub(now.as_millisecond())).max(1) as u64,
                    )
                })
                .unwrap_or(tick);
            tokio::select! {
                _ = stop.changed() => return,
                _ = changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                _ = tokio::time::sleep(tick.min(until_wake)) => {}
                Some(cfg) = next_config(&mut self.configs) => self.reconfigure(cfg),
            }
            beat.beat();
            let leading = *self.leader.borrow();
            self.metrics.leader.set(leading as i64);
            let newly_leading = leading && !self.was_leading;
            self.was_leading = leading;
            if !leading {
                continue;
            }
            if newly_leading {
                self.restore_breaker();
            }
            self.round().await;
        }
    }

    /// Note a node's wait for a budget when [`BudgetWaits`] says so (one Event per wait).
    async fn budget_wait(&mut self, node: &str, budget: Option<Budget>, now: Timestamp) {
        if let Some(b) = budget {
            self.metrics.budget_wait(b);
        }
        let Some(note) = self
            .waits
            .observe(node, budget, now, self.cfg.event_refresh)
        else {
            return;
        };
        let ev = nodemedic_common::events::NodeEvent {
            source: crate::model::occurrence::SOURCE.into(),
            severity: nodemedic_common::events::Severity::Normal,
            reason: crate::model::occurrence::reason::WAITING_FOR_BUDGET.into(),
            message: note.message().into(),
            count: note.count,
            first_seen: note.first_seen,
            last_seen: now,
        };
        let written = self.actor.note_episode(node, note.existing, &ev).await;
        self.waits.noted(node, written);
    }

    /// Report pods whose readiness a node flap left stale, and evict them when configured, as
    /// [`StaleSchedule`] says. Looks only at pods whose own readiness is stale (kept apart by the
    /// cache), on nodes this drainer selects (another drainer has its own).
    async fn stale_readiness(&mut self, now: Timestamp) {
        let Some(threshold) = self.cfg.stale_readiness else {
            return;
        };
        let candidates = self.observed.stale_pods();
        let fleet = &self.fleet;
        let stale = crate::decide::stale::stale_among(
            candidates.iter().map(|p| &**p),
            |n| {
                fleet
                    .view(n)
                    .filter(|_| fleet.selected(n))
                    .and_then(|v| v.ready_since())
            },
            threshold,
            now,
        );
        self.metrics.stale_pods.set(stale.len() as i64);
        let due = self
            .stale
            .plan(stale, now, self.cfg.evict_stale_pods, crate::act::PDB_RETRY);
        for d in due {
            if d.evict {
                self.actor.evict_stale(&d.stale).await;
            }
            if !d.report {
                continue;
            }
            self.metrics.stale_reported.inc();
            let action = match (&d.stale.exempt, self.cfg.evict_stale_pods) {
                (Some(why), _) => format!("never evicted ({why})"),
                (None, true) => "evicting it so its controller recreates it".to_string(),
                (None, false) => "not evicted (enable with --evict-stale-pods)".to_string(),
            };
            let message = format!(
                "Pod is Ready=False although all its containers are ready, and its node {} has been Ready for over {}: \
                 the readiness is stale (left from a node flap) and Services exclude the pod; {action}",
                d.stale.node,
                humantime::format_duration(threshold)
            );
            self.actor.report_stale(&d.stale, message).await;
        }
    }

    fn observe(&mut self, view: Arc<NodeView>, now: Timestamp) {
        if let Some((node, error)) = self.fleet.observe(view, now) {
            self.metrics.selector_errors.inc();
            tracing::warn!(%node, %error, "the node selector failed on this node; not selected");
        }
    }

    /// Bring the fleet up to date with the caches: the changed nodes, or all of them after a relist
    /// and at every resync.
    async fn catch_up(&mut self, now: Timestamp) {
        let changes = self.observed.take_changes();
        let resync = self.fleet.is_empty()
            || self
                .last_resync
                .is_none_or(|t| nodemedic_common::time::add(t, RESYNC) <= now);
        if changes.all || resync {
            self.last_resync = Some(now);
            let views = self.observed.nodes();
            let present: std::collections::HashSet<&str> =
                views.iter().map(|v| v.name.as_str()).collect();
            // The fleet is what budgets count: a node it holds that the cache lost goes, decided
            // or not.
            let gone: Vec<String> = self
                .fleet
                .names()
                .filter(|n| !present.contains(n))
                .map(String::from)
                .collect();
            for n in gone {
                self.forget(&n);
            }
            // The selector runs on each changed view: let the guard and the watches in between.
            for (i, v) in views.into_iter().enumerate() {
                self.observe(v, now);
                if i % YIELD_EVERY == YIELD_EVERY - 1 {
                    tokio::task::yield_now().await;
                }
            }
            self.fleet.touch_all();
            // Strings of nodes and pods gone since the last resync.
            crate::model::intern::purge();
        } else {
            for n in changes.nodes {
                match self.observed.node(&n) {
                    Some(v) => self.observe(v, now),
                    None => self.forget(&n),
                }
            }
        }
        for n in changes.pods_of {
            self.fleet.touch(&n);
        }
    }

    /// Decide what is due. A large round (the resync, or many changes at once) runs on the blocking
    /// pool, so the runtime's one thread keeps serving the guard and the watches meanwhile.
    async fn decide(
        &mut self,
        now: Timestamp,
    ) -> Vec<(crate::decide::NodeDecision, Arc<NodeView>)> {
        let observed = self.observed.clone();
        if self.fleet.pending() < YIELD_EVERY {
            return self
                .fleet
                .round(|n| observed.node(n), |n| observed.pods_on(n), now);
        }
        let mut fleet = std::mem::replace(&mut self.fleet, Fleet::new(self.cfg.clone()));
        let task = tokio::task::spawn_blocking(move || {
            let d = fleet.round(|n| observed.node(n), |n| observed.pods_on(n), now);
            (fleet, d)
        });
        match task.await {
            Ok((fleet, d)) => {
                self.fleet = fleet;
                d
            }
            Err(e) => {
                // Its state is rebuilt from the caches at the next round.
                tracing::error!(error = %e, "a decision round failed; resyncing");
                self.last_resync = None;
                Vec::new()
            }
        }
    }

    fn forget(&mut self, node: &str) {
        self.fleet.remove(node);
        self.last_why.remove(node);
    }

    pub(crate) async fn round(&mut self) {
        self.drains.retain(|_, t| !t.is_finished());
        let now = self.clock.now();
        let lease = self.lease();
        self.fleet
            .set_pause(lease.as_ref().and_then(pause::pause_of));
        self.catch_up(now).await;
        let decisions = self.decide(now).await;
        self.metrics.decided.inc_by(decisions.len() as u64);
        // The fleet-wide changes first (the breaker opening explains the holds that follow).
        let regarding = lease.as_ref().map(lease_reference);
        for ev in self.fleet.take_events() {
            self.actor.fleet_event(&ev, regarding.clone()).await;
        }
        self.publish_breaker();
        self.metrics
            .breaker_open
            .set(self.fleet.breaker().is_open() as i64);
        self.metrics
            .domain_outages
            .set(self.fleet.outages().len() as i64);
        self.metrics.held.set(self.fleet.held() as i64);
        self.metrics
            .paused
            .set(self.fleet.paused().is_some() as i64);
        self.stale_readiness(now).await;
        let fleet = &self.fleet;
        self.waits.retain(|n| fleet.contains(n));
        let mut writes = Vec::new();
        for (d, view) in decisions {
            // Log a decision when it changes (numbers and durations aside); a node that stays
            // healthy is not news.
            let previous = self.last_why.insert(d.node.clone(), d.why.kind());
            let changed = previous != Some(d.why.kind());
            // Holds for a fleet-wide reason are logged once, by that reason's own line.
            let fleet_wide = matches!(
                d.why,
                Why::BreakerOpen { .. } | Why::DomainOutage { .. } | Why::Paused { .. }
            );
            if changed
                && (d.action != Action::None || previous.is_some())
                && d.why != Why::NotSelected
            {
                if fleet_wide {
                    tracing::debug!(node = %d.node, action = ?d.action, reason = %d.reason, "decision");
                } else {
                    tracing::info!(node = %d.node, action = ?d.action, reason = %d.reason, "decision");
                }
            }
            let budget = match d.why {
                Why::CordonBudget { .. } => Some(Budget::Cordons),
                Why::DrainBudget { .. } => Some(Budget::Drains),
                _ => None,
            };
            self.budget_wait(&d.node, budget, now).await;
            match d.effect {
                Effect::Nothing => {}
                Effect::Drain(job) => self.start_drain(&d.node, job, now),
                effect => writes.push((d.node, effect, view, d.reason)),
            }
        }
        // Writes to different nodes go out together (a burst of bad nodes is one round trip, not
        // one per node); budgets were settled by the decision.
        let (actor, cfg) = (self.actor.clone(), self.cfg.clone());
        let results: Vec<(String, Effect, bool)> = futures::stream::iter(writes)
            .map(|(node, effect, view, reason)| {
                let (actor, cfg) = (actor.clone(), cfg.clone());
                async move {
                    let ok = write(&actor, &effect, &view, &reason, &cfg).await;
                    (node, effect, ok)
                }
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for (node, effect, ok) in results {
            self.written(&node, effect, ok, now);
        }
    }

    /// Lay what was written over the node until the watch shows it. A failed write is tried again
    /// after [`WRITE_RETRY`] (not in dry-run, which writes nothing).
    fn written(&mut self, node: &str, effect: Effect, ok: bool, now: Timestamp) {
        if !ok {
            if !self.cfg.dry_run {
                self.fleet
                    .wake_at(node, nodemedic_common::time::add(now, WRITE_RETRY));
            }
            return;
        }
        match effect {
            Effect::Cordon(record) => self.fleet.wrote(node, Some(&record), Some(true), now),
            Effect::Uncordon => self.fleet.wrote(node, None, Some(false), now),
            Effect::Release(record) => self.fleet.wrote(node, Some(&record), None, now),
            Effect::Forget => self.fleet.wrote(node, None, None, now),
            Effect::Nothing | Effect::Drain(_) | Effect::DeleteNode => {}
        }
    }

    /// Start (or resume) a drain as its own task, unless one runs for the node.
    fn start_drain(&mut self, node: &str, job: DrainJob, now: Timestamp) {
        if self.drains.contains_key(node) {
            return;
        }
        // The record the drain writes first, laid over the node now so budgets count it.
        let job = DrainJob {
            record: job.record.draining(now),
            evict: job.evict,
        };
        if !self.cfg.dry_run {
            self.fleet.wrote(node, Some(&job.record), None, now);
        }
        let (actor, cfg, name) = (self.actor.clone(), self.cfg.clone(), node.to_string());
        let task = tokio::spawn(async move { actor.drain(&name, job, &cfg).await });
        self.drains.insert(node.to_string(), task);
    }
}

/// Carry out a write effect; true when it was written.
async fn write<A: Act>(
    actor: &A,
    effect: &Effect,
    view: &NodeView,
    reason: &str,
    cfg: &Config,
) -> bool {
    let node = view.name.as_str();
    match effect {
        Effect::Cordon(record) => actor.cordon(view, record, cfg.skip_drain).await,
        Effect::Uncordon => actor.uncordon(node, reason, &cfg.after_drain).await,
        Effect::DeleteNode => actor.delete_node(view).await,
        Effect::Release(record) => {
            tracing::info!(%node, "uncordoned by a person: released for this problem episode");
            actor.set_record(node, Some(record)).await.is_ok()
        }
        Effect::Forget => actor.set_record(node, None).await.is_ok(),
        Effect::Nothing | Effect::Drain(_) => true,
    }
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
async fn next_config(configs: &mut Option<mpsc::Receiver<Config>>) -> Option<Config> {
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

#[cfg(test)]
mod tests {
    //! The loop with an in-memory double for its writes: what it asks for, round by round, as the
    //! node store changes under it.

    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::Node;
    use nodemedic_common::events::NodeEvent;
    use serde_json::json;

    use super::*;
    use crate::decide::DrainJob;
    use crate::model::record::{Phase, Record};

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Call {
        Cordon(String),
        Uncordon(String),
        SetRecord(String, Option<Phase>),
        Drain(String, Vec<String>),
        Note(String, String, i32),
        Stale(String, bool),
        DryRun(bool),
        Fleet(String),
        Delete(String),
    }

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Call>>>);

    impl Recorder {
        fn take(&self) -> Vec<Call> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    impl Act for Recorder {
        fn set_dry_run(&self, on: bool) {
            self.0.lock().unwrap().push(Call::DryRun(on));
        }
        async fn fleet_event(
            &self,
            ev: &crate::decide::fleet::FleetEvent,
            _regarding: Option<k8s_openapi::api::core::v1::ObjectReference>,
        ) {
            self.0.lock().unwrap().push(Call::Fleet(format!("{ev:?}")));
        }
        async fn cordon(&self, node: &NodeView, _record: &Record, _skip: bool) -> bool {
            self.0.lock().unwrap().push(Call::Cordon(node.name.clone()));
            true
        }
        async fn delete_node(&self, node: &NodeView) -> bool {
            self.0.lock().unwrap().push(Call::Delete(node.name.clone()));
            true
        }
        async fn uncordon(
            &self,
            node: &str,
            _why: &str,
            _marks: &crate::config::AfterDrain,
        ) -> bool {
            self.0.lock().unwrap().push(Call::Uncordon(node.into()));
            true
        }
        async fn set_record(&self, node: &str, r: Option<&Record>) -> Result<(), kube::Error> {
            let phase = r.map(|r| r.phase);
            self.0
                .lock()
                .unwrap()
                .push(Call::SetRecord(node.into(), phase));
            Ok(())
        }
        async fn drain(&self, node: &str, job: DrainJob, _cfg: &Config) {
            let pods = job.evict.iter().map(|p| p.name.to_string()).collect();
            self.0.lock().unwrap().push(Call::Drain(node.into(), pods));
        }
        async fn report_stale(&self, s: &crate::decide::stale::Stale, _message: String) {
            self.0
                .lock()
                .unwrap()
                .push(Call::Stale(s.name.clone(), false));
        }
        async fn evict_stale(&self, s: &crate::decide::stale::Stale) {
            self.0
                .lock()
                .unwrap()
                .push(Call::Stale(s.name.clone(), true));
        }
        async fn note_episode(
            &self,
            node: &str,
            existing: Option<String>,
            ev: &NodeEvent,
        ) -> Option<String> {
            let call = Call::Note(node.into(), ev.reason.clone(), ev.count);
            self.0.lock().unwrap().push(call);
            existing.or(Some(format!("{node}.event")))
        }
    }

    fn ago(secs: i64) -> String {
        (Timestamp::now() - std::time::Duration::from_secs(secs as u64))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    fn node(name: &str, rv: &str, bad: bool, record: Option<&Record>) -> Node {
        let mut v = json!({"metadata": {"name": name, "resourceVersion": rv, "annotations": {}},
            "status": {"conditions": [
                {"type": "KernelDeadlock", "status": if bad { "True" } else { "False" }, "lastTransitionTime": ago(3600)}]}});
        if let Some(r) = record {
            v["metadata"]["annotations"][nodemedic_common::keys::DRAIN_RECORD_ANNOTATION] =
                json!(r.to_annotation());
            v["spec"] = json!({"unschedulable": true});
        }
        serde_json::from_value(v).unwrap()
    }

    fn controller(max_cordoned: usize) -> (Controller<Recorder>, Observed, Recorder) {
        controller_with(Config {
            safety: crate::config::safety::Safety::off(),
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            drain_buffer: std::time::Duration::ZERO,
            max_cordoned: crate::config::Budget::Count(max_cordoned),
            ..Default::default()
        })
    }

    fn controller_with(cfg: Config) -> (Controller<Recorder>, Observed, Recorder) {
        let observed = Observed::default();
        observed.replace_nodes(Default::default());
        observed.replace_pods(Vec::new());
        let (_ltx, leader) = watch::channel(true);
        let recorder = Recorder::default();
        let mut registry = prometheus_client::registry::Registry::default();
        let c = Controller::new(
            cfg,
            observed.clone(),
            recorder.clone(),
            Metrics::register(&mut registry),
            Health::default(),
            leader,
            Clock::tokio(),
        );
        (c, observed, recorder)
    }

    fn apply(w: &mut Observed, n: Node) {
        w.apply_node(&n);
    }

    #[tokio::test]
    async fn a_selector_that_fails_on_a_node_counts_once_per_view_and_selects_nothing() {
        let (mut c, mut w, rec) = controller_with(Config {
            conditions: vec!["KernelDeadlock=True".parse().unwrap()],
            // A node whose name is not a number makes this expression fail (a missing key would
            // not: that is "not selected", as in draino).
            selector: crate::config::select::Selector::cel("int(metadata.name) > 0").unwrap(),
            ..Default::default()
        });
        apply(&mut w, node("unlabelled", "1", true, None));
        c.round().await;
        c.round().await;
        assert_eq!(
            c.metrics.selector_errors.get(),
            1,
            "once for the view, not per round"
        );
        assert_eq!(rec.take(), vec![], "not selected: nothing done");
    }

    #[tokio::test]
    async fn the_loop_cordons_once_then_drains_once_the_record_is_seen() {
        let (mut c, mut w, rec) = controller(10);
        apply(&mut w, node("bad", "1", true, None));
        apply(&mut w, node("ok", "1", false, None));
        c.round().await;
        assert_eq!(rec.take(), vec![Call::Cordon("bad".into())]);
        // Our write is not in the store yet (same resourceVersion): not cordoned again.
        c.round().await;
        assert_eq!(rec.take(), vec![]);
        // The store catches up with the record (buffer 0: the drain is due).
        let record = Record {
            owner: crate::config::DEFAULT_OWNER.into(),
            episode: "e".into(),
            reason: "KernelDeadlock=True".into(),
            phase: Phase::Cordoned,
            cordoned_at: Timestamp::now(),
            drain_at: Timestamp::now(),
            drain_started: None,
            finished_at: None,
            attempts: 0,
            retry_at: None,
        };
        apply(&mut w, node("bad", "2", true, Some(&record)));
        c.round().await;
        // The drain runs as a task: let it record its call.
        for _ in 0..100 {
            if !rec.0.lock().unwrap().is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(rec.take(), vec![Call::Drain("bad".into(), vec![])]);
    }

    #[tokio::test]
    async fn a_node_waiting_for_the_budget_gets_one_event_not_one_per_round() {
        let (mut c, mut w, rec) = controller(1);
        apply(&mut w, node("first", "1", true, None));
        apply(&mut w, node("second", "1", true, None));
        c.round().await;
        c.round().await;
        c.round().await;
        let calls = rec.take();
        let notes: Vec<&Call> = calls
            .iter()
            .filter(|c| matches!(c, Call::Note(..)))
            .collect();
        assert_eq!(
            notes,
            vec![&Call::Note("second".into(), "WaitingForBudget".into(), 1)],
            "{calls:?}"
        );
        assert!(calls.contains(&Call::Cordon("first".into())));
    }

    #[tokio::test]
    async fn nothing_is_written_while_not_leading() {
        let (mut c, mut w, rec) = controller(10);
        let (ltx, leader) = watch::channel(false);
        c.leader = leader;
        apply(&mut w, node("bad", "1", true, None));
        let (stop_tx, stop) = watch::channel(false);
        let changed = Arc::new(Notify::new());
        let task = tokio::spawn(c.run(changed.clone(), std::time::Duration::from_millis(5), stop));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(
            rec.take(),
            vec![],
            "a follower plans nothing and writes nothing"
        );
        ltx.send(true).unwrap();
        changed.notify_one();
        for _ in 0..1000 {
            if !rec.0.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(rec.take(), vec![Call::Cordon("bad".into())]);
        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_stale_pod_is_reported_once_not_every_round() {
        let (mut c, mut w, rec) = controller(10);
        let mut n = node("flapped", "1", false, None);
        n.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(
                serde_json::from_value(
                    json!({"type": "Ready", "status": "True", "lastTransitionTime": ago(600)}),
                )
                .unwrap(),
            );
        apply(&mut w, n);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "app", "uid": "u1"},
            "spec": {"nodeName": "flapped", "containers": []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]}}))
        .unwrap();
        w.apply_pod(crate::model::pod::PodInfo::from_pod(&pod, None));
        c.round().await;
        c.round().await;
        assert_eq!(rec.take(), vec![Call::Stale("web".into(), false)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_wait_refreshes_its_event_count_once_a_minute() {
        // Paused time: the minute passes without sleeping.
        let (mut c, mut w, rec) = controller(1);
        apply(&mut w, node("first", "1", true, None));
        apply(&mut w, node("second", "1", true, None));
        c.round().await;
        tokio::time::advance(std::time::Duration::from_secs(30)).await;
        c.round().await;
        tokio::time::advance(std::time::Duration::from_secs(31)).await;
        c.round().await;
        let notes: Vec<Call> = rec
            .take()
            .into_iter()
            .filter(|c| matches!(c, Call::Note(..)))
            .collect();
        assert_eq!(
            notes,
            vec![
                Call::Note("second".into(), "WaitingForBudget".into(), 1),
                Call::Note("second".into(), "WaitingForBudget".into(), 2),
            ]
        );
    }
}
