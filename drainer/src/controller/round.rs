//! One round of the controller, I/O around the pure core: bring the fleet up to date with the
//! caches, decide what is due, report fleet-wide changes, carry out each effect, start drains; and
//! when a drain's evictions end, decide its record and have it written.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use super::laps::{Laps, Part};
use super::tail::{Tail, WaitNote};
use super::{Controller, Done, Tap, WRITE_CONCURRENCY, YIELD_EVERY};
use crate::act::FollowUp;
use crate::decide::fleet::Fleet;
use crate::decide::gates::pause;
use crate::decide::ladder::notes::{PaceNote, ended_now, pace_note};
use crate::decide::{Effect, NodeDecision};
use crate::model::cluster::Cluster;
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
    /// One pass: catch up with the caches, decide what is due, report what the fleet saw, carry
    /// out each decision's effect.
    pub(crate) async fn round(&mut self) {
        self.drains_ended();
        self.take_noted();
        let now = self.clock.now();
        let mut laps = Laps::start();
        self.fleet
            .set_pause(self.read_lease(pause::pause_of).flatten());
        self.fleet.set_kured(self.kured_lock(now));
        let relisted = self.catch_up(now).await;
        self.follow_remediations(now).await;
        let pending = self.fleet.pending();
        laps.end(Part::CatchUp);
        let decisions = self.decide(now).await;
        laps.end(Part::Decide);
        let decided_n = decisions.len();
        self.report(decided_n, now).await;
        laps.end(Part::Report);
        let decided = match self.tap {
            Some(_) => held_by_gates(decisions.iter().map(|(d, _)| d)),
            None => Vec::new(),
        };
        let (done, writes_n) = self.carry_out(decisions, now, &mut laps).await;
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

    /// Carry out the round's decisions: every node's hold written (together), then the drains
    /// started, then the rest written by the tail while the next rounds go on. What was done, and
    /// how many writes.
    async fn carry_out(
        &mut self,
        decisions: Vec<(NodeDecision, Arc<NodeView>)>,
        now: Timestamp,
        laps: &mut Laps,
    ) -> (Vec<Done>, usize) {
        let mut work = self.sort(decisions, now);
        work.waits = self.wait_notes(now);
        let writes_n = work.writes.len();
        let written = self.write_all(work.writes).await;
        // The drains start once the round's holds are written: a burst's cordons do not share the
        // API server with a hundred drains' evictions (their Done first, as decided).
        let mut done = self.start_drains(work.drains, now);
        laps.end(Part::Write);
        let mut then = Vec::new();
        for (w, ok, follow_up) in written {
            let node = w.decision.node;
            then.extend(follow_up.map(|f| (node.clone(), f)));
            if let (true, Some(note)) = (ok, &w.pace) {
                self.paced(&node, note, now).await;
            }
            for attempt in w.ended.into_iter().filter(|_| ok) {
                let o = Occurrence::AttemptEnded { attempt };
                self.record.node(&node, o).await;
            }
            self.written(&node, &w.decision.effect, ok, now);
            if self.tap.is_some() {
                done.push(Done {
                    node,
                    why: w.decision.why,
                    effect: w.decision.effect,
                    ok,
                });
            }
        }
        self.tails.current = Tail::start(
            self.tails.current.take(),
            &self.exec,
            &self.record,
            then,
            work.waits,
            &self.tails.noted.0,
            WRITE_CONCURRENCY,
        );
        if !self.mode.detach_tail {
            self.settle().await;
        }
        (done, writes_n)
    }

    /// Sort the round's decisions into what it writes, starts and says (each changed one logged).
    fn sort(&mut self, decisions: Vec<(NodeDecision, Arc<NodeView>)>, now: Timestamp) -> Work {
        let mut work = Work::default();
        for (d, view) in decisions {
            self.log_decision(&d);
            if let Some(b) = d.why.budget() {
                self.record.metrics().budget_wait(b);
            }
            match d.effect {
                Effect::Nothing => {}
                Effect::Drain(_) => work.drains.push(d),
                // A ladder step waits for the drain's own last write (its record), which would
                // overwrite the step's; decided again once it is done.
                Effect::Reboot(_) | Effect::Replace(_) | Effect::Escalate(_)
                    if self.drains.running.contains_key(&*d.node) =>
                {
                    let again = nodemedic_common::time::add(now, STEP_AFTER_DRAIN);
                    self.fleet.wake_at(&d.node, again);
                }
                _ => {
                    // What its writing makes known, worked out for what is written only.
                    let pace = pace_note(&d, &view, &self.cfg);
                    let ended = ended_now(&d, &view, &self.cfg, now);
                    let view = latest_to_write(view, self.observed.node(&d.node));
                    work.writes.push(Write {
                        decision: d,
                        view,
                        pace,
                        ended,
                    })
                }
            }
        }
        work
    }

    /// A written ladder decision moves its domain's slow start (and a proof is said).
    async fn paced(&mut self, node: &str, note: &PaceNote, now: Timestamp) {
        match note {
            PaceNote::Proven(step) => {
                self.fleet.step_proven(node, now);
                let o = match step {
                    Some(step) => Occurrence::RestartProven { step: *step },
                    None => Occurrence::RebootProven,
                };
                self.record.node(node, o).await;
            }
            PaceNote::Failed(why) => self.fleet.step_failed(node, why, now),
        }
    }

    /// Writes to different nodes go out together (a burst of bad nodes is one round trip, not one
    /// per node); budgets were settled by the decision. Each node's hold only: what follows it is
    /// returned, written once every node of the round is held.
    async fn write_all(&self, writes: Vec<Write>) -> Vec<(Write, bool, Option<FollowUp>)> {
        let (exec, cfg, tails) = (&self.exec, &self.cfg, &self.tails);
        // The nodes an earlier round's tail still writes for go last: waiting, each would hold one
        // of the places in flight that the others need.
        let mut writes = writes;
        writes.sort_by_key(|w| tails.wait_for(&w.decision.node).is_some());
        // The drains under way send nothing new until these are written (`act::turns`).
        let _first = (!writes.is_empty()).then(|| exec.turns.holding());
        futures::stream::iter(writes)
            .map(|w| async move {
                // After what an earlier round still writes for this node.
                if let Some(earlier) = tails.wait_for(&w.decision.node) {
                    earlier.await;
                }
                let (ok, then) = exec.apply_first(&w.view, &w.decision, cfg).await;
                (w, ok, then)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await
    }

    /// Wait until every round's tail is written, and take its notes.
    pub(super) async fn settle(&mut self) {
        if let Some(tail) = self.tails.current.take() {
            tail.finish().await;
        }
        self.take_noted();
    }

    /// Decide what is due. A large round (the resync, or many changes at once) runs on the blocking
    /// pool, so the runtime's one thread keeps serving the guard and the watches meanwhile.
    async fn decide(&mut self, now: Timestamp) -> Vec<(NodeDecision, Arc<NodeView>)> {
        if !self.mode.offload || self.fleet.pending() < YIELD_EVERY {
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
                self.chores.last_resync = None;
                Vec::new()
            }
        }
    }

    /// Lay what was written over the node until the watch shows it. A failed write is tried again
    /// after [`WRITE_RETRY`] (not in dry-run, which writes nothing).
    fn written(&mut self, node: &str, effect: &Effect, ok: bool, now: Timestamp) {
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
            | Effect::Escalate(record) => self.fleet.wrote(node, Some(record), now),
            Effect::Uncordon(_) | Effect::Forget => self.fleet.wrote(node, None, now),
            Effect::Nothing | Effect::Drain(_) | Effect::DeleteNode => {}
        }
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

/// A round's decisions sorted: the writes, the drains to start, the budget waits to say.
#[derive(Default)]
struct Work {
    writes: Vec<Write>,
    drains: Vec<NodeDecision>,
    waits: Vec<WaitNote>,
}

/// A decision to write, whole, with what its writing makes known: the view it is written against,
/// the slow start's news and the attempts it ends (said once it is written).
struct Write {
    decision: NodeDecision,
    view: Arc<NodeView>,
    pace: Option<PaceNote>,
    ended: Vec<crate::model::attempt::Attempt>,
}
