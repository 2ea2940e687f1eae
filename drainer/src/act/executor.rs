//! The executor and its node writes (cordon, uncordon, the record, deleting a drained node), I/O
//! through the gated [`Cluster`]; each says what happened through the [`Recorder`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nodemedic_common::clock::Clock;
use nodemedic_common::keys;
use nodemedic_common::status::Status;
use nodemedic_common::time::rfc3339 as ts;

use crate::config::{AfterDrain, Config};
use crate::decide::Effect;
use crate::model::cluster::{ApiError, Cluster, ConditionPatch, Gated, NodePatch};
use crate::model::node::NodeView;
use crate::model::occurrence::Occurrence;
use crate::model::record::Record;
use crate::record::Recorder;

/// Performs the effects of decisions. Cheap to clone (drains run with clones).
#[derive(Clone)]
pub struct Executor<C> {
    pub(super) cluster: Gated<C>,
    pub(super) record: Recorder<C>,
    /// Shared by the clones drains run with; a config reload can turn it on or off.
    dry_run: Arc<AtomicBool>,
    pub(super) clock: Clock,
}

impl<C: Cluster> Executor<C> {
    pub fn new(cluster: Gated<C>, record: Recorder<C>, dry_run: bool, clock: Clock) -> Self {
        Executor {
            cluster,
            record,
            dry_run: Arc::new(AtomicBool::new(dry_run)),
            clock,
        }
    }

    /// Turn dry-run mode on or off (a config reload changed it).
    pub fn set_dry_run(&self, on: bool) {
        self.dry_run.store(on, Ordering::Relaxed);
    }

    pub(super) fn dry_run(&self) -> bool {
        self.dry_run.load(Ordering::Relaxed)
    }

    pub fn recorder(&self) -> &Recorder<C> {
        &self.record
    }

    /// Carry out a write effect decided for `view` (`reason`: the decision's, for the uncordon's
    /// Event). True when it was written. A drain is started by the controller, not here.
    pub async fn apply(
        &self,
        view: &NodeView,
        effect: &Effect,
        reason: &str,
        cfg: &Config,
    ) -> bool {
        let node = view.name.as_str();
        match effect {
            Effect::Cordon(record) => self.cordon(view, record, cfg.skip_drain).await,
            Effect::Uncordon => self.uncordon(node, reason, &cfg.after_drain).await,
            Effect::DeleteNode => self.delete_node(view).await,
            Effect::Release(record) => {
                tracing::info!(%node, "uncordoned by a person: released for this problem episode");
                self.set_record(node, Some(record)).await.is_ok()
            }
            Effect::Forget => self.set_record(node, None).await.is_ok(),
            Effect::Nothing | Effect::Drain(_) => true,
        }
    }

    /// Cordon with the record; the node's resourceVersion makes the patch fail (409) if it changed
    /// since it was observed, so we never act on stale state. Then DrainScheduled, unless
    /// `skip_drain`. True when the cordon and record were written.
    async fn cordon(&self, node: &NodeView, record: &Record, skip_drain: bool) -> bool {
        let name = node.name.as_str();
        let problem = record.reason.clone();
        self.record
            .node(name, Occurrence::CordonStarting { problem })
            .await;
        if self.dry_run() {
            tracing::info!(node = %name, reason = %record.reason, "dry-run: would cordon");
            return false;
        }
        let patch = NodePatch {
            resource_version: Some(node.resource_version.to_string()),
            unschedulable: Some(true),
            ..Default::default()
        }
        .annotation(keys::DRAIN_RECORD_ANNOTATION, Some(record.to_annotation()))
        .annotation(
            keys::DRAINO_CONDITIONS_ANNOTATION,
            Some(record.reason.clone()),
        );
        let o = match self.cluster.patch_node(name, &patch).await {
            Ok(()) => Occurrence::Cordoned {
                problem: record.reason.clone(),
            },
            Err(e) => Occurrence::CordonFailed {
                error: e.to_string(),
            },
        };
        let cordoned = matches!(o, Occurrence::Cordoned { .. });
        self.record.node(name, o).await;
        if !cordoned || skip_drain {
            return cordoned;
        }
        let message = format!("Drain activity scheduled {}", ts(record.drain_at));
        let o = match self.drain_scheduled(name, message).await {
            Ok(()) => Occurrence::DrainScheduled {
                at: record.drain_at,
            },
            Err(e) => Occurrence::DrainSchedulingFailed {
                error: e.to_string(),
            },
        };
        self.record.node(name, o).await;
        true
    }

    /// Uncordon, removing the record, DrainScheduled and the after-drain `marks`. True when written.
    async fn uncordon(&self, node: &str, why: &str, marks: &AfterDrain) -> bool {
        let starting = Occurrence::UncordonStarting { why: why.into() };
        self.record.node(node, starting).await;
        if self.dry_run() {
            tracing::info!(%node, %why, "dry-run: would uncordon");
            return false;
        }
        if !marks.is_empty()
            && let Err(e) = self.set_marks(node, marks, false).await
        {
            tracing::warn!(%node, error = %e, "cannot remove the after-drain marks");
        }
        let patch = NodePatch {
            unschedulable: Some(false),
            ..Default::default()
        }
        .annotation(keys::DRAIN_RECORD_ANNOTATION, None)
        .annotation(keys::DRAINO_CONDITIONS_ANNOTATION, None);
        if let Err(e) = self.cluster.patch_node(node, &patch).await {
            let error = e.to_string();
            self.record
                .node(node, Occurrence::UncordonFailed { error })
                .await;
            return false;
        }
        let remove = ConditionPatch::Remove {
            type_: keys::DRAIN_SCHEDULED_CONDITION.into(),
        };
        if let Err(e) = self.cluster.patch_node_status(node, &remove).await {
            tracing::warn!(%node, error = %e, "cannot remove the DrainScheduled condition");
        }
        let why = why.to_string();
        self.record.node(node, Occurrence::Uncordoned { why }).await;
        true
    }

    /// Delete a drained Node (`--delete-drained-node-after`), only as observed (its
    /// resourceVersion). True when deleted.
    async fn delete_node(&self, node: &NodeView) -> bool {
        let name = node.name.as_str();
        if self.dry_run() {
            tracing::info!(node = %name, "dry-run: would delete the drained node");
            return false;
        }
        if !self.cluster.leading() {
            return false;
        }
        let o = match self
            .cluster
            .delete_node(name, &node.resource_version.to_string())
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

    /// Store (or with `None` remove) the record only.
    pub async fn set_record(&self, node: &str, record: Option<&Record>) -> Result<(), ApiError> {
        if self.dry_run() {
            return Ok(());
        }
        let value = record.map(Record::to_annotation);
        let patch = NodePatch::default().annotation(keys::DRAIN_RECORD_ANNOTATION, value);
        self.cluster.patch_node(node, &patch).await
    }

    /// Set draino's DrainScheduled condition with `message`, now.
    pub(super) async fn drain_scheduled(
        &self,
        node: &str,
        message: String,
    ) -> Result<(), ApiError> {
        let patch = ConditionPatch::Set {
            type_: keys::DRAIN_SCHEDULED_CONDITION.into(),
            status: Status::True,
            reason: "Draino".into(),
            message,
            at: self.clock.now(),
        };
        self.cluster.patch_node_status(node, &patch).await
    }
}
