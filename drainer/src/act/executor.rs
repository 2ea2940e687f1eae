//! The executor and its node writes (cordon, uncordon, the record, deleting a drained node), I/O
//! through the gated [`Cluster`]; each says what happened through the [`Recorder`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nodemedic_common::clock::Clock;
use nodemedic_common::keys;
use nodemedic_common::status::Status;
use nodemedic_common::time::rfc3339 as ts;

use super::hold::{Hold, TAINT_TRIES, as_seen, edit_taints, taints_and_version};
use super::turns::Turns;
use crate::config::Config;
use crate::decide::{Effect, NodeDecision};
use crate::model::cluster::{ApiError, Cluster, ConditionPatch, Gated, NodePatch, NodeVersion};
use crate::model::lifecycle::{self, Stage};
use crate::model::node::NodeView;
use crate::model::occurrence::Occurrence;
use crate::model::record::{Checked, Record};
use crate::model::seal::RecordTrust;
use crate::record::Recorder;

/// What is left to write once an effect's hold is written ([`Executor::apply_first`]).
pub(crate) enum FollowUp {
    /// draino's DrainScheduled condition, and its Event, for the drain `Record` schedules.
    ScheduleDrain(Record),
}

/// Performs the effects of decisions. Cheap to clone (drains run with clones).
#[derive(Clone)]
pub(crate) struct Executor<C> {
    pub(super) cluster: Gated<C>,
    pub(super) record: Recorder<C>,
    /// Shared by the clones drains run with; a config reload can turn it on or off.
    dry_run: Arc<AtomicBool>,
    pub(super) clock: Clock,
    /// Whose requests go first: the round's holds, then the drains' (shared by every clone).
    pub(crate) turns: Turns,
}

impl<C: Cluster> Executor<C> {
    /// The cluster, for the reads the controller makes itself (the detector DaemonSet).
    pub(crate) fn cluster(&self) -> &Gated<C> {
        &self.cluster
    }

    pub(crate) fn new(cluster: Gated<C>, record: Recorder<C>, dry_run: bool, clock: Clock) -> Self {
        Executor {
            cluster,
            record,
            dry_run: Arc::new(AtomicBool::new(dry_run)),
            clock,
            turns: Turns::default(),
        }
    }

    /// Turn dry-run mode on or off (a config reload changed it).
    pub(crate) fn set_dry_run(&self, on: bool) {
        self.dry_run.store(on, Ordering::Relaxed);
    }

    pub(super) fn dry_run(&self) -> bool {
        self.dry_run.load(Ordering::Relaxed)
    }

    pub(crate) fn recorder(&self) -> &Recorder<C> {
        &self.record
    }

    /// Carry out a write effect decided for `view` (with a reason for the Events that say it: an
    /// uncordon, a replacement), its follow-up included. True when it was written. A drain is
    /// started by the controller, not here; the controller writes a round's holds first, then their
    /// follow-ups.
    #[cfg(test)]
    pub(crate) async fn apply(&self, view: &NodeView, effect: &Effect, cfg: &Config) -> bool {
        let d = crate::decide::NodeDecision {
            node: view.name.clone(),
            why: crate::decide::Why::Healthy,
            effect: effect.clone(),
            pods: Vec::new(),
            wake: None,
        };
        let (ok, then) = self.apply_first(view, &d, cfg).await;
        if let Some(then) = then {
            self.follow_up(&view.name, then).await;
        }
        ok
    }

    /// Carry out the decision `d` made on `view` up to the write that holds or frees the node;
    /// what is left of it is returned for [`Executor::follow_up`], which a burst's other holds need
    /// not wait for. Under a dry run nothing is written, whatever the effect ([`Executor::would`]).
    pub(crate) async fn apply_first(
        &self,
        view: &NodeView,
        d: &NodeDecision,
        cfg: &Config,
    ) -> (bool, Option<FollowUp>) {
        if self.dry_run() {
            self.would(&view.name, d).await;
            return (false, None);
        }
        let node = view.name.as_str();
        let effect = &d.effect;
        let ok = match effect {
            Effect::Cordon(record) => self.cordon(view, record, cfg).await,
            Effect::Relapse(record) => self.relapse(view, record, cfg).await,
            Effect::Uncordon(record) => self.uncordon(node, record, &d.reason(), cfg).await,
            Effect::DeleteNode => self.delete_node(view).await,
            Effect::Release(record) => self.release(view, record, cfg).await,
            Effect::Probation(record) => self.probation(view, record, cfg).await,
            Effect::Forget => self.set_record(node, None, &cfg.records).await.is_ok(),
            Effect::Reboot(record) => self.reboot(view, record, cfg).await,
            Effect::Replace(record) => self.replace(view, record, &d.reason(), cfg).await,
            Effect::Escalate(record) => self.escalate(view, record, cfg).await,
            Effect::Nothing | Effect::Drain(_) => true,
        };
        let then = match effect {
            Effect::Cordon(record) | Effect::Relapse(record) if ok && !cfg.skip_drain => {
                Some(FollowUp::ScheduleDrain(record.clone()))
            }
            _ => None,
        };
        (ok, then)
    }

    /// A dry run's decision: nothing written; the round's log line already says what would be
    /// done (`NodeDecision::said`), and draino's Events that announce a cordon or an uncordon go
    /// out marked as a dry run, as draino's do.
    async fn would(&self, node: &str, d: &NodeDecision) {
        let o = match &d.effect {
            Effect::Cordon(r) => Occurrence::CordonStarting {
                problem: r.reason.clone(),
                dry_run: true,
            },
            Effect::Uncordon(r) if r.phase != crate::model::record::Phase::Restarting => {
                Occurrence::UncordonStarting {
                    why: d.reason(),
                    dry_run: true,
                }
            }
            _ => return,
        };
        self.record.node(node, o).await;
    }

    /// Write what is left of an effect once its hold is written.
    pub(crate) async fn follow_up(&self, node: &str, then: FollowUp) {
        match then {
            FollowUp::ScheduleDrain(record) => self.schedule_drain(node, &record).await,
        }
    }

    /// Cordon (unless `--cordon=false`) and taint as `record` says, with the record, in one patch;
    /// the node's resourceVersion makes it fail (409) if it changed since it was observed, so we
    /// never act on stale state. True when written (its follow-up: DrainScheduled).
    async fn cordon(&self, node: &NodeView, record: &Record, cfg: &Config) -> bool {
        let name = node.name.as_str();
        let problem = record.reason.clone();
        let starting = self.record.node(
            name,
            Occurrence::CordonStarting {
                problem,
                dry_run: false,
            },
        );
        // After a restart that did not help, its fence goes with the cordon.
        let will = record.held_taints();
        let was = match record.step.is_some_and(|s| s.restarts()) {
            true => ours(node, cfg).held_taints(),
            false => Vec::new(),
        };
        let hold = Hold {
            unschedulable: record.cordoned.then_some(true),
            untaint: was.into_iter().filter(|t| !will.contains(t)).collect(),
            taint: will.clone(),
            record: Some(Some(record)),
            draino: Some(Some(record.reason.clone())),
            seen: Some(node),
        };
        // The Event goes out with the cordon, not before it: a burst's cordons wait for no Event.
        let ((), written) = tokio::join!(starting, self.hold(name, &hold, &cfg.records));
        let o = match written {
            Ok(()) => held(record),
            Err(e) => Occurrence::CordonFailed {
                error: e.to_string(),
            },
        };
        let cordoned = !matches!(o, Occurrence::CordonFailed { .. });
        self.record.node(name, o).await;
        cordoned
    }

    /// Set DrainScheduled for `record`'s drain, and say so.
    async fn schedule_drain(&self, node: &str, record: &Record) {
        let message = format!("Drain activity scheduled {}", ts(record.drain_at));
        let o = match self.drain_scheduled(node, message, Vec::new()).await {
            Ok(()) => Occurrence::DrainScheduled {
                at: record.drain_at,
            },
            Err(e) => Occurrence::DrainSchedulingFailed {
                error: e.to_string(),
            },
        };
        self.record.node(node, o).await;
    }

    /// Uncordon (if we hold the cordon) and take our taints off, removing the record, draino's
    /// annotation, DrainScheduled and the after-drain `marks`. True when written.
    async fn uncordon(&self, node: &str, record: &Record, why: &str, cfg: &Config) -> bool {
        if record.phase == crate::model::record::Phase::Restarting {
            return self.restart_over(node, record, cfg).await;
        }
        let marks = &cfg.after_drain;
        let starting = Occurrence::UncordonStarting {
            why: why.into(),
            dry_run: false,
        };
        self.record.node(node, starting).await;
        if !marks.is_empty()
            && let Err(e) = self.set_marks(node, marks, false).await
        {
            tracing::warn!(%node, error = %e, "cannot remove the after-drain marks");
        }
        let hold = Hold {
            unschedulable: record.cordoned.then_some(false),
            untaint: record.held_taints(),
            record: Some(None),
            draino: Some(None),
            ..Default::default()
        };
        if let Err(e) = self.hold(node, &hold, &cfg.records).await {
            let error = e.to_string();
            self.record
                .node(node, Occurrence::UncordonFailed { error })
                .await;
            return false;
        }
        let mut remove = vec![ConditionPatch::Remove {
            type_: keys::DRAIN_SCHEDULED_CONDITION.into(),
        }];
        remove.extend(self.lifecycle(Stage::Ended, cfg));
        if let Err(e) = self.cluster.patch_node_status(node, &remove).await {
            tracing::warn!(%node, error = %e, "cannot remove the DrainScheduled condition");
        }
        let why = why.to_string();
        self.record.node(node, Occurrence::Uncordoned { why }).await;
        true
    }

    /// A restart proven: its fence taint and the record go (nothing was cordoned, drained or
    /// marked). True when written; the proof is said by the controller.
    async fn restart_over(&self, node: &str, record: &Record, cfg: &Config) -> bool {
        let hold = Hold {
            untaint: record.held_taints(),
            record: Some(None),
            ..Default::default()
        };
        match self.hold(node, &hold, &cfg.records).await {
            Ok(()) => true,
            Err(e) => {
                let (step, error) = ("restart", e.to_string());
                let o = Occurrence::LadderWriteFailed { step, error };
                self.record.node(node, o).await;
                false
            }
        }
    }

    /// A person lifted our cordon or a taint of ours: store the record as released and lift what
    /// is left of our hold (the record on the node says what we held). True when written.
    async fn release(&self, node: &NodeView, released: &Record, cfg: &Config) -> bool {
        let name = node.name.as_str();
        tracing::info!(node = %name, "hold lifted by a person: released for this problem episode");
        let held = ours(node, cfg);
        let hold = Hold {
            unschedulable: (held.cordoned && node.unschedulable).then_some(false),
            untaint: held.held_taints(),
            record: Some(Some(released)),
            ..Default::default()
        };
        self.hold(name, &hold, &cfg.records).await.is_ok()
    }

    /// Probation starts: the record, and with a probation taint the cordon and the problem's
    /// taints swapped for it. True when written.
    async fn probation(&self, node: &NodeView, next: &Record, cfg: &Config) -> bool {
        let name = node.name.as_str();
        let held = ours(node, cfg);
        let hold = swap(&held, next, Some(node));
        let o = match self.hold(name, &hold, &cfg.records).await {
            Ok(()) => Occurrence::ProbationStarted {
                until: next.probation_until.unwrap_or_default(),
                taint: (!next.cordoned && held.cordoned).then(|| next.taints.join(", ")),
            },
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "cannot start probation; retrying");
                return false;
            }
        };
        self.record.node(name, o).await;
        true
    }

    /// The problem came back during probation: held again as `next` says (its follow-up: the
    /// drain scheduled at once). True when written.
    async fn relapse(&self, node: &NodeView, next: &Record, cfg: &Config) -> bool {
        let name = node.name.as_str();
        let held = ours(node, cfg);
        let mut hold = swap(&held, next, Some(node));
        hold.draino = Some(Some(next.reason.clone()));
        let o = match self.hold(name, &hold, &cfg.records).await {
            Ok(()) => Occurrence::Relapsed {
                problem: next.reason.clone(),
            },
            Err(e) => Occurrence::CordonFailed {
                error: e.to_string(),
            },
        };
        let written = matches!(o, Occurrence::Relapsed { .. });
        self.record.node(name, o).await;
        written
    }

    /// Delete a drained Node (`--delete-drained-node-after`), only as observed (its
    /// resourceVersion). True when deleted.
    async fn delete_node(&self, node: &NodeView) -> bool {
        let name = node.name.as_str();
        if !self.cluster.leading() {
            return false;
        }
        let o = match self
            .cluster
            .delete_node(
                name,
                &NodeVersion::Version(node.resource_version.to_string()),
            )
            .await
        {
            Ok(()) => Occurrence::NodeDeleted,
            Err(e) => Occurrence::NodeDeleteFailed {
                error: e.to_string(),
            },
        };
        let deleted = o == Occurrence::NodeDeleted;
        self.record.node(name, o).await;
        deleted
    }

    /// Store (or with `None` remove) the record only, sealed under `trust`.
    pub(crate) async fn set_record(
        &self,
        node: &str,
        record: Option<&Record>,
        trust: &RecordTrust,
    ) -> Result<(), ApiError> {
        if self.dry_run() {
            return Ok(());
        }
        let value = record.map(|r| r.to_annotation(trust));
        let patch = NodePatch::default().annotation(keys::DRAIN_RECORD_ANNOTATION, value);
        self.cluster.patch_node(node, &patch).await
    }

    /// Set draino's DrainScheduled condition with `message`, now, with `also` (KEP-5683's
    /// conditions, [`Executor::lifecycle`]) in the same write.
    pub(super) async fn drain_scheduled(
        &self,
        node: &str,
        message: String,
        also: Vec<ConditionPatch>,
    ) -> Result<(), ApiError> {
        let mut patches = vec![ConditionPatch::Set {
            type_: keys::DRAIN_SCHEDULED_CONDITION.into(),
            status: Status::True,
            reason: "Draino".into(),
            message,
            at: self.clock.now(),
        }];
        patches.extend(also);
        self.cluster.patch_node_status(node, &patches).await
    }

    /// KEP-5683's conditions for `stage` now, when they are written (`--lifecycle-conditions`).
    pub(super) fn lifecycle(&self, stage: Stage<'_>, cfg: &Config) -> Vec<ConditionPatch> {
        match cfg.lifecycle_conditions {
            true => lifecycle::patches(stage, self.clock.now()),
            false => Vec::new(),
        }
    }
}

/// The hold our record on `node` says we have: nothing unless the record is ours and authentic, so
/// a cordon or taint is lifted only when we can prove we put it on.
pub(super) fn ours(node: &NodeView, cfg: &Config) -> Record {
    match Record::check(node, &cfg.records, &cfg.owner) {
        Checked::Authentic(r) => r,
        _ => Record {
            cordoned: false,
            ..Default::default()
        },
    }
}

/// What a record's hold is once written: cordoned, tainted, or both.
fn held(record: &Record) -> Occurrence {
    let problem = record.reason.clone();
    if record.taints.is_empty() {
        return Occurrence::Cordoned { problem };
    }
    Occurrence::Tainted {
        problem,
        taints: record.taints.join(", "),
        cordoned: record.cordoned,
    }
}

/// The write from the hold `held` records to the one `next` records: the cordon set or lifted,
/// taints swapped, the record replaced.
pub(super) fn swap<'a>(held: &Record, next: &'a Record, seen: Option<&'a NodeView>) -> Hold<'a> {
    let (was, will) = (held.held_taints(), next.held_taints());
    Hold {
        unschedulable: (held.cordoned != next.cordoned).then_some(next.cordoned),
        untaint: was.iter().filter(|t| !will.contains(t)).cloned().collect(),
        taint: will.iter().filter(|t| !was.contains(t)).cloned().collect(),
        record: Some(Some(next)),
        draino: None,
        seen,
    }
}

impl<C: Cluster> Executor<C> {
    /// Write `h` in one patch. A node's taints are one list the API replaces whole, so when ours
    /// change the list is read fresh and written back with its resourceVersion; without taints to
    /// change nothing is read first. A conflict (409) reads the node and tries again, against the
    /// decision's view only if the node's state is still that view's ([`as_seen`]): a heartbeat
    /// between the decision and the write does not cost the node a retry seconds later.
    pub(super) async fn hold(
        &self,
        node: &str,
        h: &Hold<'_>,
        trust: &RecordTrust,
    ) -> Result<(), ApiError> {
        let mut patch = NodePatch {
            resource_version: h.seen.map(|v| v.resource_version.to_string()),
            unschedulable: h.unschedulable,
            ..Default::default()
        };
        if let Some(r) = h.record {
            let value = r.map(|r| r.to_annotation(trust));
            patch = patch.annotation(keys::DRAIN_RECORD_ANNOTATION, value);
        }
        if let Some(d) = &h.draino {
            patch = patch.annotation(keys::DRAINO_CONDITIONS_ANNOTATION, d.clone());
        }
        let taints = !(h.taint.is_empty() && h.untaint.is_empty());
        let mut attempt = 1;
        loop {
            if taints || attempt > 1 {
                let now = self.cluster.read_node(node).await?;
                if let Some(seen) = h.seen {
                    as_seen(seen, &now)?;
                }
                let (current, version) = taints_and_version(now);
                patch.resource_version = Some(version);
                if taints {
                    patch.taints = Some(edit_taints(current, &h.untaint, &h.taint));
                }
            }
            match self.cluster.patch_node(node, &patch).await {
                Err(e) if e.is_conflict() && attempt < TAINT_TRIES => attempt += 1,
                other => return other,
            }
        }
    }
}
