//! One round of the controller, I/O around the pure core: bring the fleet up to date with the
//! caches, decide what is due, report fleet-wide changes, carry out each effect, start drains; and
//! when a drain's evictions end, decide its record and have it written.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use super::chores::Chores;
use super::laps::{Laps, Part};
use super::tail::{Tail, WaitNote};
use super::{Controller, Did, Done, Tap, WRITE_CONCURRENCY, YIELD_EVERY, lease_reference};
use crate::act::{DrainRun, FollowUp};
use crate::decide::decision::Said;
use crate::decide::fleet::Fleet;
use crate::decide::gates::pause;
use crate::decide::{Action, DrainJob, Effect, NodeDecision, Why};
use crate::metrics::Budget;
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;
use crate::model::occurrence::Occurrence;

/// For the tap: each decided node, and why a gate holds it (`None`: none does).
fn held_by_gates<'a>(
    decisions: impl Iterator<Item = &'a NodeDecision>,
) -> Vec<(String, Option<String>)> {
    decisions
        .map(|d| {
            (
                d.node.to_string(),
                d.why.is_gate().then(|| d.why.to_string()),
            )
        })
        .collect()
}

/// A failed write is tried again after this long.
const WRITE_RETRY: Duration = Duration::from_secs(5);
/// A ladder step decided while the drain's last write is under way is decided again this much later.
const STEP_AFTER_DRAIN: Duration = Duration::from_millis(500);

impl<C: Cluster> Controller<C> {
    pub(crate) async fn round(&mut self) {
        // A drain's task ends after handing over its run: take those first, so a node whose drain
        // just ended is never taken for one whose drain is not running.
        while let Ok(run) = self.ended.1.try_recv() {
            self.drain_ended(run);
        }
        self.take_noted();
        self.drains.retain(|_, t| !t.is_finished());
        let now = self.clock.now();
        let mut laps = Laps::start();
        self.fleet
            .set_pause(self.read_lease(pause::pause_of).flatten());
        let relisted = self.catch_up(now).await;
        let pending = self.fleet.pending();
        laps.end(Part::CatchUp);
        let decisions = self.decide(now).await;
        laps.end(Part::Decide);
        let decided_n = decisions.len();
        self.record_history();
        self.metrics.decided.inc_by(decided_n as u64);
        self.report_fleet(now).await;
        self.publish_breaker();
        self.publish_records(now);
        self.publish_reboots();
        self.gauges();
        self.stale_readiness(now).await;
        self.report_symptoms(now).await;
        laps.end(Part::Report);
        let fleet = &self.fleet;
        self.waits.retain(|n| fleet.contains(n));
        let decided = match self.tap {
            Some(_) => held_by_gates(decisions.iter().map(|(d, _)| d)),
            None => Vec::new(),
        };
        let work = self.sort(decisions, now);
        let writes_n = work.writes.len();
        let written = self.write_all(work.writes).await;
        // The drains start once the round's holds are written: a burst's cordons do not share the
        // API server with a hundred drains' evictions (their Done first, as decided).
        let mut done = self.start_drains(work.drains, now);
        laps.end(Part::Write);
        let proven = work.proven;
        let mut then = Vec::new();
        for (node, effect, ok, reason, follow_up) in written {
            then.extend(follow_up.map(|f| (node.clone(), f)));
            let note = proven.iter().find(|(n, _)| *n == node).map(|(_, p)| p);
            if let (true, Some(note)) = (ok, note) {
                self.paced(&node, note, now).await;
            }
            if let Some(did) = did(&effect) {
                let node = node.to_string();
                done.push(Done {
                    node,
                    did,
                    reason,
                    ok,
                });
            }
            self.written(&node, effect, ok, now);
        }
        self.tail = Tail::start(
            self.tail.take(),
            &self.exec,
            &self.record,
            then,
            work.waits,
            &self.noted.0,
            WRITE_CONCURRENCY,
        );
        if !self.detach_tail {
            self.settle().await;
        }
        self.tap(Tap::Round {
            at: now,
            done,
            decided,
        });
        laps.end(Part::Rest);
        laps.report(pending, decided_n, writes_n, relisted);
        if relisted {
            // The first list (or a relist) and the round over every node freed the pages of the
            // watches' lists and the round's own decisions; they would stay in the RSS for good.
            if let Some(kib) = nodemedic_common::alloc::give_back() {
                tracing::debug!(
                    kib,
                    "gave freed memory back to the system after a full round"
                );
            }
        }
    }

    /// Sort the round's decisions into what it writes, starts and says (each changed one logged).
    fn sort(&mut self, decisions: Vec<(NodeDecision, Arc<NodeView>)>, now: Timestamp) -> Work {
        let mut work = Work::default();
        for (d, view) in decisions {
            self.log_decision(&d);
            let budget = match d.why {
                Why::CordonBudget { .. } => Some(Budget::Cordons),
                Why::DrainBudget { .. } => Some(Budget::Drains),
                _ => None,
            };
            work.waits.extend(self.budget_wait(&d.node, budget, now));
            if let Some(note) = pace_note(&d, &view, &self.cfg) {
                work.proven.push((d.node.clone(), note));
            }
            // The reason in words only for what is written (`NodeDecision::reason`, from `why`).
            match d.effect {
                Effect::Nothing => {}
                Effect::Drain(job) => work.drains.push((d.node, d.pods, job, d.why.to_string())),
                // A ladder step waits for the drain's own last write (its record), which would
                // overwrite the step's; decided again once it is done.
                Effect::Reboot(_) | Effect::Replace(_) | Effect::Escalate(_)
                    if self.drains.contains_key(&*d.node) =>
                {
                    let again = nodemedic_common::time::add(now, STEP_AFTER_DRAIN);
                    self.fleet.wake_at(&d.node, again);
                }
                effect => {
                    let view = latest_to_write(view, self.observed.node(&d.node));
                    let reason = d.why.to_string();
                    work.writes.push((d.node, effect, view, reason))
                }
            }
        }
        work
    }

    /// Start the drains decided; what was started.
    fn start_drains(&mut self, drains: Vec<DrainDecided>, now: Timestamp) -> Vec<Done> {
        let mut done = Vec::new();
        for (node, pods, job, reason) in drains {
            let started = self.drain_decided(&node, &pods, job, now);
            done.extend(started.then(|| Done {
                node: node.to_string(),
                did: Did::Drain,
                reason,
                ok: true,
            }));
        }
        done
    }

    /// The fleet-wide changes first (the breaker opening explains the holds that follow), then
    /// the records refused.
    async fn report_fleet(&mut self, now: Timestamp) {
        for event in self.fleet.take_events() {
            let regarding = self.read_lease(lease_reference);
            self.record.fleet(&event, regarding).await;
            self.tap(Tap::Fleet { at: now, event });
        }
        for (node, why) in self.fleet.take_rejected() {
            let why = why.to_string();
            self.record
                .node(&node, Occurrence::RecordRejected { why })
                .await;
        }
    }

    /// Start the drain decided for `node` with `pods`; whether it started.
    fn drain_decided(
        &mut self,
        node: &str,
        pods: &[crate::decide::PodPlan],
        job: DrainJob,
        now: Timestamp,
    ) -> bool {
        let ok = self.start_drain(node, job, now);
        // Pods a policy keeps out of the drain are counted as it starts.
        let skipped = (pods.iter())
            .filter(|p| p.policy.is_some() && p.action == crate::decide::PodAction::Skip);
        for _ in skipped.filter(|_| ok) {
            self.metrics
                .pod_policy(crate::metrics::PolicyOutcome::Skipped);
        }
        ok
    }

    /// A written ladder decision moves its domain's slow start (and a proof is said).
    async fn paced(&mut self, node: &str, note: &PaceNote, now: Timestamp) {
        match note {
            PaceNote::Proven => {
                self.fleet.step_proven(node, now);
                self.record.node(node, Occurrence::RebootProven).await;
            }
            PaceNote::Failed(why) => self.fleet.step_failed(node, why, now),
        }
    }

    fn gauges(&self) {
        let m = &self.metrics;
        m.breaker_open.set(self.fleet.breaker().is_open() as i64);
        m.domain_outages.set(self.fleet.outages().len() as i64);
        m.held.set(self.fleet.held() as i64);
        m.paused.set(self.fleet.paused().is_some() as i64);
        m.needs_person.set(self.fleet.needs_person() as i64);
    }

    /// Log a decision when it changes (numbers and durations aside); a node that stays healthy is
    /// not news, and holds for a fleet-wide reason are logged once, by that reason's own line.
    fn log_decision(&mut self, d: &NodeDecision) {
        let previous = self.fleet.note(&d.node, d.why.kind());
        let changed = previous != Some(d.why.kind());
        let fleet_wide = matches!(
            d.why,
            Why::BreakerOpen { .. } | Why::DomainOutage { .. } | Why::Paused { .. }
        );
        if !changed || (d.action == Action::None && previous.is_none()) || d.why == Why::NotSelected
        {
            return;
        }
        let Said { action, reason } = d.said(self.cfg.dry_run);
        if fleet_wide {
            tracing::debug!(node = %d.node, %action, %reason, "decision");
        } else {
            tracing::info!(node = %d.node, %action, %reason, "decision");
        }
    }

    /// Writes to different nodes go out together (a burst of bad nodes is one round trip, not one
    /// per node); budgets were settled by the decision. Each node's hold only: what follows it is
    /// returned, written once every node of the round is held.
    async fn write_all(
        &self,
        writes: Vec<(ArcStr, Effect, Arc<NodeView>, String)>,
    ) -> Vec<(ArcStr, Effect, bool, String, Option<FollowUp>)> {
        let (exec, cfg, tail) = (&self.exec, &self.cfg, &self.tail);
        // The nodes an earlier round's tail still writes for go last: waiting, each would hold one
        // of the places in flight that the others need.
        let mut writes = writes;
        writes.sort_by_key(|(node, ..)| tail.as_ref().is_some_and(|t| t.wait_for(node).is_some()));
        // The drains under way send nothing new until these are written (`act::turns`).
        let _first = (!writes.is_empty()).then(|| exec.turns.holding());
        futures::stream::iter(writes)
            .map(|(node, effect, view, reason)| async move {
                // After what an earlier round still writes for this node.
                if let Some(earlier) = tail.as_ref().and_then(|t| t.wait_for(&node)) {
                    earlier.await;
                }
                let (ok, then) = exec.apply_first(&view, &effect, &reason, cfg).await;
                (node, effect, ok, reason, then)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await
    }

    /// Wait until every round's tail is written, and take its notes.
    pub(super) async fn settle(&mut self) {
        if let Some(tail) = self.tail.take() {
            tail.finish().await;
        }
        self.take_noted();
    }

    /// Hand the fleet a node's view; and its pods, when the node is new to it or `with_pods`.
    fn observe(&mut self, view: Arc<NodeView>, with_pods: bool, now: Timestamp) {
        let name = view.name.clone();
        let with_pods = with_pods || !self.fleet.contains(&name);
        if let Some((node, error)) = self.fleet.observe(view, now) {
            self.metrics.selector_errors.inc();
            tracing::warn!(%node, %error, "the node selector failed on this node; not selected");
        }
        if with_pods {
            self.fleet.pods(&name, self.observed.pods_on(&name));
        }
    }

    /// Hand the fleet the node `name` as the cache holds it now (and its pods with `with_pods`), or
    /// drop it when the cache no longer has it.
    fn take_node(&mut self, name: &str, with_pods: bool, now: Timestamp) {
        match self.observed.node(name) {
            Some(v) => self.observe(v, with_pods, now),
            None => self.forget(name),
        }
    }

    /// Bring the fleet up to date with the caches: the changed nodes, or all of them after a relist
    /// and at every resync. True after a relist (or the first list): every node is decided.
    async fn catch_up(&mut self, now: Timestamp) -> bool {
        let changes = self.observed.take_changes();
        let first = self.last_resync.is_none();
        let chores = if changes.all || self.fleet.is_empty() {
            self.last_resync = Some(now);
            self.resync_left = Vec::new();
            self.resync(now).await;
            Chores::Whole
        } else {
            for n in changes.nodes {
                self.take_node(&n, false, now);
            }
            let chores = self.chores_now(changes.urgent, now);
            if chores != Chores::Later && self.resync_due(now) && self.resync_left.is_empty() {
                self.last_resync = Some(now);
                self.resync_left = self.resync_begin();
            }
            if chores != Chores::Later && !self.resync_left.is_empty() {
                self.resync_some(now, chores).await;
            }
            chores
        };
        for n in changes.pods_of {
            self.fleet.pods(&n, self.observed.pods_on(&n));
        }
        if chores != Chores::Later {
            self.watch_detectors(now, chores).await;
            if self.resync_left.is_empty() && self.watchdog_walk.is_none() {
                self.chores_waiting = None; // none pending any more
            }
        }
        changes.all || first
    }

    /// The periodic resync begins: the nodes the cache lost go from the fleet, decided or not (the
    /// fleet is what budgets count); the names of the others, to be taken again.
    fn resync_begin(&mut self) -> Vec<ArcStr> {
        let names = self.observed.names();
        let present: std::collections::HashSet<&str> = names.iter().map(ArcStr::as_str).collect();
        let gone: Vec<String> = (self.fleet.names())
            .filter(|n| !present.contains(n))
            .map(String::from)
            .collect();
        for n in gone {
            self.forget(&n);
        }
        names
    }

    /// Take again, from the cache as it is now, the views the periodic resync has left; then decide
    /// the nodes not at rest again (a node at rest changes only with its view, and a changed view
    /// is decided anyway). In `drainer run` the resync gives way: when a change comes in meanwhile
    /// it stops (after [`YIELD_EVERY`] nodes at least) so the change is decided at the next round,
    /// not after every node of the cluster (at 50,000 nodes a whole resync held a new condition's
    /// cordon up to 100 ms), and goes on at the rounds after.
    async fn resync_some(&mut self, now: Timestamp, chores: Chores) {
        while let Some(n) = self.resync_left.pop() {
            self.take_node(&n, false, now);
            if self.give_way(self.resync_left.len(), chores).await {
                return;
            }
        }
        self.resync_left = Vec::new();
        self.fleet.touch_restless();
        // Strings of nodes and pods gone since the last resync.
        crate::model::intern::purge();
    }

    /// In a walk over the nodes (the periodic resync, the watchdog's), `left` to go: every
    /// [`YIELD_EVERY`] nodes the runtime serves the watches and the guard; true when the walk
    /// gives way (`chores`) and a change that woke the controller came in meanwhile: the walk is to
    /// stop, the next round, woken now, takes the change, and the walk goes on after it.
    pub(super) async fn give_way(&self, left: usize, chores: Chores) -> bool {
        if left == 0 || !left.is_multiple_of(YIELD_EVERY) {
            return false;
        }
        tokio::task::yield_now().await;
        if chores == Chores::GivingWay && self.observed.has_urgent_changes() {
            self.observed.changed.notify_one();
            return true;
        }
        false
    }

    /// Every node again from the caches, each decided again, with its pods (after a relist, or
    /// the first list).
    async fn resync(&mut self, now: Timestamp) {
        // The selector runs on each view: let the guard and the watches in between. The pods of
        // every node are handed over again (the pod index was replaced).
        for (i, n) in self.resync_begin().iter().enumerate() {
            self.take_node(n, true, now);
            if i % YIELD_EVERY == YIELD_EVERY - 1 {
                tokio::task::yield_now().await;
            }
        }
        self.fleet.touch_all();
        // Strings of nodes and pods gone since the last resync.
        crate::model::intern::purge();
    }

    /// Decide what is due. A large round (the resync, or many changes at once) runs on the blocking
    /// pool, so the runtime's one thread keeps serving the guard and the watches meanwhile.
    async fn decide(&mut self, now: Timestamp) -> Vec<(NodeDecision, Arc<NodeView>)> {
        if !self.offload || self.fleet.pending() < YIELD_EVERY {
            return self.fleet.round(now);
        }
        let mut fleet = std::mem::replace(&mut self.fleet, Fleet::new(self.cfg.clone()));
        let task = tokio::task::spawn_blocking(move || {
            let d = fleet.round(now);
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
            Effect::Cordon(record)
            | Effect::Release(record)
            | Effect::Probation(record)
            | Effect::Relapse(record)
            | Effect::Reboot(record)
            | Effect::Replace(record)
            | Effect::Escalate(record) => self.fleet.wrote(node, Some(&record), now),
            Effect::Uncordon(_) | Effect::Forget => self.fleet.wrote(node, None, now),
            Effect::Nothing | Effect::Drain(_) | Effect::DeleteNode => {}
        }
    }

    /// Start (or resume) a drain as its own task, unless one runs for the node. True if started.
    fn start_drain(&mut self, node: &str, job: DrainJob, now: Timestamp) -> bool {
        if self.drains.contains_key(node) {
            return false;
        }
        // The record the drain writes first, laid over the node now so budgets count it.
        let job = DrainJob {
            record: job.record.draining(now),
            ..job
        };
        if !self.cfg.dry_run {
            self.fleet.wrote(node, Some(&job.record), now);
        }
        let (exec, cfg, name) = (self.exec.clone(), self.cfg.clone(), node.to_string());
        let ended = self.ended.0.clone();
        let earlier = self.tail.as_ref().and_then(|t| t.wait_for(node));
        let task = tokio::spawn(async move {
            // After its DrainScheduled, which an earlier round's tail may still be writing.
            if let Some(earlier) = earlier {
                earlier.await;
            }
            if let Some(run) = exec.drain(&name, job, &cfg).await {
                let _ = ended.send(run);
            }
        });
        self.drains.insert(node.to_string(), task);
        true
    }

    /// A drain's evictions ended: decide its record ([`crate::model::record::Record::finished`]),
    /// lay it over the node, and have it written (no new drain starts for the node until it is).
    pub(super) fn drain_ended(&mut self, run: DrainRun) {
        let cfg = self.cfg.clone();
        let finished = run
            .record
            .finished(&run.outcome, run.ended, cfg.retry_base, cfg.retry_max);
        self.fleet.wrote(&run.node, Some(&finished), run.ended);
        self.tap(Tap::DrainEnded {
            at: run.ended,
            node: run.node.clone(),
            outcome: run.outcome.clone(),
        });
        let exec = self.exec.clone();
        let node = run.node.clone();
        let task = tokio::spawn(async move { exec.finish_drain(&run, &finished, &cfg).await });
        self.drains.insert(node, task);
    }
}

/// The view a decision made on `decided` is written against: the cache's `latest` when only a
/// heartbeat lies between them (the same state, a newer resourceVersion: heartbeats do not reach the
/// fleet, and a write against the older version would fail its precondition every time), else the
/// decided one (a state change the next round decides; our own write not yet seen, whose
/// precondition fails and is retried).
pub(super) fn latest_to_write(
    decided: Arc<NodeView>,
    latest: Option<Arc<NodeView>>,
) -> Arc<NodeView> {
    match latest {
        Some(l) if l.same_state(&decided) => l,
        _ => decided,
    }
}

/// A drain decided: the node, its pods' plans, the job, the decision's reason.
type DrainDecided = (ArcStr, Vec<crate::decide::PodPlan>, DrainJob, String);

/// A round's decisions sorted: the writes, the drains to start, the slow start's news, the budget
/// waits to say.
#[derive(Default)]
struct Work {
    writes: Vec<(ArcStr, Effect, Arc<NodeView>, String)>,
    drains: Vec<DrainDecided>,
    proven: Vec<(ArcStr, PaceNote)>,
    waits: Vec<WaitNote>,
}

/// What a ladder decision tells the slow start once written.
enum PaceNote {
    Proven,
    Failed(String),
}

/// The slow start's news in `d` for the node as `view` shows it: a reboot proven, a step that
/// failed (the ladder goes on from a reboot or a replacement), or a problem back after one.
fn pace_note(d: &NodeDecision, view: &NodeView, cfg: &crate::config::Config) -> Option<PaceNote> {
    use crate::decide::ladder::LadderWhy;
    use crate::model::record::{Phase, Record};
    if let Why::Ladder(LadderWhy::RebootProven { .. }) = d.why {
        return Some(PaceNote::Proven);
    }
    let was = Record::of(view, &cfg.records, &cfg.owner)?;
    match (&d.effect, was.phase) {
        (Effect::Replace(_) | Effect::Escalate(_), Phase::Rebooting) => {
            Some(PaceNote::Failed("its reboot was not proven".into()))
        }
        (Effect::Escalate(_), Phase::Replacing) => {
            Some(PaceNote::Failed("its replacement did not happen".into()))
        }
        (Effect::Relapse(r), _) if r.step.is_some() => Some(PaceNote::Failed(
            "its problem came back after its remediation".into(),
        )),
        _ => None,
    }
}

fn did(effect: &Effect) -> Option<Did> {
    Some(match effect {
        Effect::Cordon(r) if !r.cordoned => Did::Taint,
        Effect::Cordon(_) => Did::Cordon,
        Effect::Drain(_) => Did::Drain,
        Effect::Uncordon(r) if !r.cordoned => Did::Untaint,
        Effect::Uncordon(_) => Did::Uncordon,
        Effect::Probation(_) => Did::Probation,
        Effect::Relapse(_) => Did::Relapse,
        Effect::Release(_) => Did::Release,
        Effect::Forget => Did::Forget,
        Effect::DeleteNode => Did::DeleteNode,
        Effect::Reboot(_) => Did::Reboot,
        Effect::Replace(_) => Did::Replace,
        Effect::Escalate(_) => Did::Escalate,
        Effect::Nothing => return None,
    })
}
