//! Carrying out decisions: the drainer's only writes, behind the leadership gate. Each writes the node
//! annotation record first or together with the change, so a new leader sees what was done; what
//! happens is emitted as an `Occurrence` (log, metric and draino's Event together). Dry-run: Events only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use nodemedic_common::events::{NodeEvent, NodeEvents, Severity};
use nodemedic_common::evict::{Evicted, evict};
use nodemedic_common::keys;
use nodemedic_common::time::rfc3339 as ts;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::{AfterDrain, Config};
use crate::decide::DrainJob;
use crate::decide::fleet::FleetEvent;
use crate::decide::stale::Stale;
use crate::metrics::Metrics;
use crate::model::node::NodeView;
use crate::model::occurrence::{EvictionFor, Occurrence, PodOccurrence};
use crate::model::pod::PodInfo;
use crate::model::record::EvictError;
use crate::model::record::{DrainOutcome, Record};
use crate::notify::{ConditionNote, Notification, Notifier};
use crate::observe::Observed;
use crate::occurrence::SafetyOccurrence;

/// Every API call the drainer makes, as RBAC (the shipped roles must grant exactly this): watch Nodes
/// and Pods, patch Nodes (cordon, record) and their status (DrainScheduled), evict Pods (drains and
/// stale readiness; their going is seen through the watch), write Events, and hold its Lease in its
/// own namespace.
/// Granted only with `--delete-drained-node-after` (its own ClusterRole: `deploy/delete-drained-nodes`,
/// or the chart when `drainer.config.deleteDrainedNodeAfter` is set).
pub const DELETE_NODES_PERMISSIONS: &[nodemedic_common::rbac::Permission] =
    &[nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes",
        verbs: &["delete"],
        namespaced: false,
    }];

/// Granted only with `--allow-force-delete` (its own ClusterRole: `deploy/allow-force-delete`, or the
/// chart when `drainer.config.allowForceDelete` is set).
pub const FORCE_DELETE_PERMISSIONS: &[nodemedic_common::rbac::Permission] =
    &[nodemedic_common::rbac::Permission {
        group: "",
        resource: "pods",
        verbs: &["delete"],
        namespaced: false,
    }];

pub const PERMISSIONS: &[nodemedic_common::rbac::Permission] = &[
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes",
        verbs: &["get", "list", "watch", "patch"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "pods",
        // No get: a drain waits for evicted pods through the watch.
        verbs: &["list", "watch"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "pods/eviction",
        verbs: &["create"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "events",
        // patch: one Event per wait or per blocked node whose count grows
        verbs: &["create", "patch"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "create", "update"],
        namespaced: true,
    },
];

/// Event source component of the drainer's Events.
pub const SOURCE: &str = "nodemedic-drainer";
/// Wait between retries of an eviction refused by a PodDisruptionBudget (draino and kubectl: 5s).
pub const PDB_RETRY: Duration = Duration::from_secs(5);

/// Performs the decisions. Every write goes through the leadership gate ([`Actor::leading`]): the
/// one place that checks we still hold the Lease.
#[derive(Clone)]
pub struct Actor {
    client: kube::Client,
    nodes: Api<Node>,
    pub metrics: Metrics,
    /// Shared by the clones drains run with; a config reload can turn it on or off.
    dry_run: Arc<AtomicBool>,
    leader: watch::Receiver<bool>,
    /// The pod cache a drain waits on for evicted pods to go.
    observed: Observed,
    /// Where notifications go (`--notify-url`).
    notifier: Notifier,
    /// This drainer's name in notifications (its Lease name).
    owner: String,
}

/// The writes the controller makes, as a seam: [`Actor`] performs them against the API server; a
/// test double records them (the controller loop is tested with one next to the HTTP scenarios).
pub trait Act: Clone + Send + Sync + 'static {
    /// Cordon with the record (and DrainScheduled unless `skip_drain`), against the node as observed.
    /// True when the cordon and record were written.
    fn cordon(
        &self,
        node: &NodeView,
        record: &Record,
        skip_drain: bool,
    ) -> impl std::future::Future<Output = bool> + Send;
    /// Uncordon, removing the record, DrainScheduled and the after-drain `marks`. True when written.
    fn uncordon(
        &self,
        node: &str,
        why: &str,
        marks: &AfterDrain,
    ) -> impl std::future::Future<Output = bool> + Send;
    /// Delete a drained Node (`--delete-drained-node-after`), only as observed (its
    /// resourceVersion). True when deleted.
    fn delete_node(&self, node: &NodeView) -> impl std::future::Future<Output = bool> + Send;
    /// Store (or with `None` remove) the record only.
    fn set_record(
        &self,
        node: &str,
        record: Option<&Record>,
    ) -> impl std::future::Future<Output = Result<(), kube::Error>> + Send;
    /// Run one drain attempt to its end; `job.record` is the record of the attempt (draining).
    fn drain(
        &self,
        node: &str,
        job: DrainJob,
        cfg: &Config,
    ) -> impl std::future::Future<Output = ()> + Send;
    /// Report a stale pod: a Warning Event on the pod.
    fn report_stale(
        &self,
        stale: &Stale,
        message: String,
    ) -> impl std::future::Future<Output = ()> + Send;
    /// Evict a stale pod (one attempt; a PDB's refusal is retried by the caller later).
    fn evict_stale(&self, stale: &Stale) -> impl std::future::Future<Output = ()> + Send;
    /// Write `ev` as the Event named `existing` (count grown) or a new one; returns its name.
    fn note_episode(
        &self,
        node: &str,
        existing: Option<String>,
        ev: &NodeEvent,
    ) -> impl std::future::Future<Output = Option<String>> + Send;
    /// Turn dry-run mode on or off (a config reload changed it).
    fn set_dry_run(&self, on: bool);
    /// A fleet-wide change (breaker, outage) or a node starting to flap: log, count, notify, and
    /// write an Event about `regarding` (the drainer's Lease) or the node.
    fn fleet_event(
        &self,
        ev: &FleetEvent,
        regarding: Option<k8s_openapi::api::core::v1::ObjectReference>,
    ) -> impl std::future::Future<Output = ()> + Send;
}

fn not_leading() -> kube::Error {
    kube::Error::Service("not leading: write skipped".into())
}

impl Actor {
    pub fn new(
        client: kube::Client,
        metrics: Metrics,
        dry_run: bool,
        leader: watch::Receiver<bool>,
        observed: Observed,
    ) -> Actor {
        Actor {
            nodes: Api::all(client.clone()),
            client,
            metrics,
            dry_run: Arc::new(AtomicBool::new(dry_run)),
            leader,
            observed,
            notifier: Notifier::disabled(),
            owner: crate::config::DEFAULT_OWNER.into(),
        }
    }

    /// Notify `notifier` of what happens, as `owner`.
    pub fn with_notifier(mut self, notifier: Notifier, owner: &str) -> Actor {
        self.notifier = notifier;
        self.owner = owner.to_string();
        self
    }

    /// Add (`on`) or remove the after-drain labels, annotations and taints. Taints are a list the
    /// API replaces whole, so they are read and written back with the node's resourceVersion
    /// (retried on a conflict).
    async fn set_marks(&self, node: &str, m: &AfterDrain, on: bool) -> Result<(), kube::Error> {
        if !self.leading() {
            return Err(not_leading());
        }
        let value = |v: &str| {
            if on {
                Value::String(v.into())
            } else {
                Value::Null
            }
        };
        let labels: serde_json::Map<String, Value> = m
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect();
        let annotations: serde_json::Map<String, Value> = m
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect();
        if !labels.is_empty() || !annotations.is_empty() {
            self.patch_node(
                node,
                json!({"metadata": {"labels": labels, "annotations": annotations}}),
            )
            .await?;
        }
        if m.taints.is_empty() {
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            let current = self.nodes.get(node).await?;
            let mut taints = current
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            let ours = |t: &k8s_openapi::api::core::v1::Taint| {
                m.taints
                    .iter()
                    .any(|x| x.key == t.key && x.effect == t.effect)
            };
            taints.retain(|t| !ours(t));
            if on {
                taints.extend(m.taints.iter().map(|t| k8s_openapi::api::core::v1::Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                    time_added: None,
                }));
            }
            let body = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"taints": taints},
            });
            match self.patch_node(node, body).await {
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    /// Notify what matters to people on call about `node` (its conditions as the cache has them).
    fn notify(&self, node: &str, o: &Occurrence) {
        let event = match o {
            Occurrence::Cordoned { .. } => "cordoned",
            Occurrence::DrainStarting { .. } => "drain_started",
            Occurrence::Drained => "drained",
            Occurrence::DrainFailed { .. } => "drain_failed",
            Occurrence::Uncordoned { .. } => "uncordoned",
            _ => return,
        };
        let reason = match o {
            Occurrence::Cordoned { problem } => problem.clone(),
            Occurrence::Uncordoned { why } => why.clone(),
            other => other.message(),
        };
        let mut n = Notification::new(event, Some(node.to_string()), None, reason, &self.owner);
        if let Some(v) = self.observed.node(node) {
            n.conditions = v
                .conditions
                .iter()
                .map(|c| ConditionNote {
                    type_: c.type_.to_string(),
                    status: c.status.to_string(),
                    reason: c
                        .reason
                        .as_deref()
                        .map(|r| r.to_string())
                        .unwrap_or_default(),
                    since: ts(c.since),
                })
                .collect();
        }
        self.notifier.send(n);
    }

    fn dry_run(&self) -> bool {
        self.dry_run.load(Ordering::Relaxed)
    }

    /// The leadership gate: no write unless we hold the Lease now.
    fn leading(&self) -> bool {
        let leading = *self.leader.borrow();
        if !leading {
            tracing::debug!("not leading: write skipped");
        }
        leading
    }

    async fn event(&self, node: &str, severity: Severity, reason: &str, message: String) {
        if !self.leading() {
            return;
        }
        let now = Timestamp::now();
        let ev = NodeEvent {
            source: SOURCE.into(),
            severity,
            reason: reason.into(),
            message,
            count: 1,
            first_seen: now,
            last_seen: now,
        };
        if let Err(e) = NodeEvents::new(self.client.clone(), node).create(&ev).await {
            tracing::warn!(%node, %reason, error = %e, "cannot write event");
        }
    }

    /// Log, count, notify and write the Event of an occurrence on `node`, together.
    async fn emit(&self, node: &str, o: Occurrence) {
        o.log(node);
        o.count(&self.metrics);
        if self.leading() {
            self.notify(node, &o);
        }
        self.event(node, o.severity(), o.reason(), o.message())
            .await;
    }

    /// A Normal Event explaining a decision that changes nothing (e.g. a node waiting for a budget).
    pub async fn note(&self, node: &str, reason: &str, message: &str) {
        self.event(node, Severity::Normal, reason, message.to_string())
            .await;
    }

    async fn patch_node(&self, node: &str, body: Value) -> Result<(), kube::Error> {
        if !self.leading() {
            return Err(not_leading());
        }
        self.nodes
            .patch(node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .map(|_| ())
    }

    async fn drain_scheduled(
        &self,
        node: &str,
        message: &str,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        if !self.leading() {
            return Err(not_leading());
        }
        let body = json!({"status": {"conditions": [{
            "type": keys::DRAIN_SCHEDULED_CONDITION, "status": "True", "reason": "Draino", "message": message,
            "lastHeartbeatTime": ts(now), "lastTransitionTime": ts(now),
        }]}});
        self.nodes
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .map(|_| ())
    }

    /// Evict `pod` and wait until it is gone. With `force` (draino's `--allow-force-delete`), a pod
    /// whose eviction kept failing other than by a PodDisruptionBudget, or that is still there at
    /// the deadline, is deleted with grace 0; a budget's refusal is never deleted around.
    async fn evict_and_wait(
        &self,
        pod: &PodInfo,
        max_grace: Duration,
        deadline: tokio::time::Instant,
        force: bool,
    ) -> Result<(), EvictError> {
        let (ns, name, uid) = (pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
        // Pod default when unset: 30s.
        let own = pod.grace_period_seconds.unwrap_or(30);
        let grace = own.min(max_grace.as_secs() as i64);
        let id = format!("{ns}/{name}");
        loop {
            if !self.leading() {
                return Err(EvictError::LeadershipLost { pod: id });
            }
            let answer = evict(&self.client, &ns, &name, Some(grace)).await;
            PodOccurrence::of(&answer).emit(&id, EvictionFor::Drain, &self.metrics);
            let refused = matches!(answer, Ok(Evicted::Refused(_)));
            match answer {
                Ok(Evicted::Accepted) => break,
                Ok(Evicted::Gone) => return Ok(()),
                _ => {}
            }
            if tokio::time::Instant::now() + PDB_RETRY > deadline {
                if force && !refused {
                    return self.force_delete(pod, id).await;
                }
                return Err(EvictError::NotEvicted { pod: id });
            }
            tokio::time::sleep(PDB_RETRY).await;
        }
        // Wait until the pod cache says it is gone (deleted, or replaced by a pod with another UID):
        // the watch tells us, no polling.
        if self
            .observed
            .wait_gone(&ns, &name, uid.as_ref(), deadline)
            .await
        {
            Ok(())
        } else if force {
            self.force_delete(pod, id).await
        } else {
            Err(EvictError::StillPresent { pod: id })
        }
    }

    /// Delete `pod` with grace 0 (only this pod: its UID is a precondition), behind the leadership
    /// gate; said loudly: a warning, `evictions_total{result="force_deleted"}` and a Warning Event.
    async fn force_delete(&self, pod: &PodInfo, id: String) -> Result<(), EvictError> {
        if !self.leading() {
            return Err(EvictError::LeadershipLost { pod: id });
        }
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace);
        let params = kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: pod.uid.as_ref().map(|u| kube::api::Preconditions {
                uid: Some(u.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let answer = api.delete(&pod.name, &params).await;
        // 404: gone meanwhile; 409: the precondition failed, so this pod is gone and another took
        // its name.
        let gone =
            |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
        match answer {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
        .map_err(|e| EvictError::ForceDeleteFailed {
            pod: id.clone(),
            error: e.to_string(),
        })?;
        PodOccurrence::ForceDeleted.emit(&id, EvictionFor::Drain, &self.metrics);
        if let Some(node) = &pod.node {
            let message = format!(
                "Pod {id} force-deleted (grace period 0, --allow-force-delete): its eviction did not complete by the drain's deadline"
            );
            self.event(node, Severity::Warning, "PodForceDeleted", message)
                .await;
        }
        Ok(())
    }
}

/// The after-drain marks in words (for the Event).
fn describe_marks(m: &AfterDrain) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(m.labels.iter().map(|(k, v)| format!("label {k}={v}")));
    parts.extend(
        m.annotations
            .iter()
            .map(|(k, v)| format!("annotation {k}={v}")),
    );
    parts.extend(m.taints.iter().map(|t| match &t.value {
        Some(v) => format!("taint {}={v}:{}", t.key, t.effect),
        None => format!("taint {}:{}", t.key, t.effect),
    }));
    parts.join(", ")
}

impl Act for Actor {
    fn set_dry_run(&self, on: bool) {
        self.dry_run.store(on, Ordering::Relaxed);
    }

    async fn fleet_event(
        &self,
        ev: &FleetEvent,
        regarding: Option<k8s_openapi::api::core::v1::ObjectReference>,
    ) {
        let s = SafetyOccurrence::of(ev);
        s.log();
        self.metrics.safety_event(s.metric);
        if !self.leading() {
            return;
        }
        self.notifier.send(Notification::new(
            s.notify,
            s.node.clone(),
            s.domain.clone(),
            s.message.clone(),
            &self.owner,
        ));
        let now = Timestamp::now();
        let event = NodeEvent {
            source: SOURCE.into(),
            severity: s.severity,
            reason: s.reason.into(),
            message: s.message.clone(),
            count: 1,
            first_seen: now,
            last_seen: now,
        };
        let written = match (&s.node, regarding) {
            (Some(node), _) => NodeEvents::new(self.client.clone(), node)
                .create(&event)
                .await
                .map(|_| ()),
            (None, Some(lease)) => {
                let ns = lease.namespace.clone().unwrap_or_default();
                nodemedic_common::events::create_for(self.client.clone(), &ns, lease, "", &event)
                    .await
                    .map(|_| ())
            }
            (None, None) => Ok(()),
        };
        if let Err(e) = written {
            tracing::warn!(reason = s.reason, error = %e, "cannot write event");
        }
    }

    async fn report_stale(&self, s: &Stale, message: String) {
        if !self.leading() {
            return;
        }
        let id = format!("{}/{}", s.namespace, s.name);
        tracing::warn!(pod = %id, node = %s.node, "{message}");
        let now = Timestamp::now();
        let ev = NodeEvent {
            source: SOURCE.into(),
            severity: Severity::Warning,
            reason: crate::model::occurrence::reason::POD_READINESS_STALE.into(),
            message,
            count: 1,
            first_seen: now,
            last_seen: now,
        };
        let regarding = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(s.name.clone()),
            namespace: Some(s.namespace.clone()),
            uid: s.uid.clone(),
            ..Default::default()
        };
        if let Err(e) = nodemedic_common::events::create_for(
            self.client.clone(),
            &s.namespace,
            regarding,
            &s.node,
            &ev,
        )
        .await
        {
            tracing::warn!(pod = %id, error = %e, "cannot write the PodReadinessStale event");
        }
    }

    async fn evict_stale(&self, s: &Stale) {
        if !self.leading() || s.exempt.is_some() || self.dry_run() {
            return;
        }
        let id = format!("{}/{}", s.namespace, s.name);
        let answer = evict(&self.client, &s.namespace, &s.name, None).await;
        PodOccurrence::of(&answer).emit(&id, EvictionFor::StaleReadiness, &self.metrics);
    }

    /// Write `ev` as the Event named `existing` (its count grown), or as a new one; returns the name
    /// to update next time (None when the write failed: the next note creates a fresh Event).
    async fn note_episode(
        &self,
        node: &str,
        existing: Option<String>,
        ev: &NodeEvent,
    ) -> Option<String> {
        if !self.leading() {
            return existing;
        }
        let events = NodeEvents::new(self.client.clone(), node);
        if let Some(name) = existing {
            match events.update(&name, ev).await {
                Ok(()) => return Some(name),
                Err(e) => {
                    tracing::debug!(%node, reason = %ev.reason, error = %e, "cannot update event; creating a new one")
                }
            }
        }
        match events.create(ev).await {
            Ok(name) => Some(name),
            Err(e) => {
                tracing::warn!(%node, reason = %ev.reason, error = %e, "cannot write event");
                None
            }
        }
    }
    /// Cordon with the record; `resource_version` makes the patch fail (409) if the node changed since
    /// it was observed, so we never act on stale state.
    async fn cordon(&self, node: &NodeView, record: &Record, skip_drain: bool) -> bool {
        let name = node.name.clone();
        let problem = record.reason.clone();
        self.emit(&name, Occurrence::CordonStarting { problem })
            .await;
        if self.dry_run() {
            tracing::info!(node = %name, reason = %record.reason, "dry-run: would cordon");
            return false;
        }
        let body = json!({
            "metadata": {
                "resourceVersion": node.resource_version,
                "annotations": {
                    keys::DRAIN_RECORD_ANNOTATION: record.to_annotation(),
                    keys::DRAINO_CONDITIONS_ANNOTATION: record.reason,
                },
            },
            "spec": {"unschedulable": true},
        });
        match self.patch_node(&name, body).await {
            Ok(()) => {
                let problem = record.reason.clone();
                self.emit(&name, Occurrence::Cordoned { problem }).await;
            }
            Err(e) => {
                let error = e.to_string();
                self.emit(&name, Occurrence::CordonFailed { error }).await;
                return false;
            }
        }
        if skip_drain {
            return true;
        }
        let msg = format!("Drain activity scheduled {}", ts(record.drain_at));
        match self.drain_scheduled(&name, &msg, Timestamp::now()).await {
            Ok(()) => {
                let at = record.drain_at;
                self.emit(&name, Occurrence::DrainScheduled { at }).await;
            }
            Err(e) => {
                let error = e.to_string();
                self.emit(&name, Occurrence::DrainSchedulingFailed { error })
                    .await;
            }
        }
        true
    }
    async fn delete_node(&self, node: &NodeView) -> bool {
        let name = node.name.as_str();
        if self.dry_run() {
            tracing::info!(node = %name, "dry-run: would delete the drained node");
            return false;
        }
        if !self.leading() {
            return false;
        }
        let dp = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: Some(node.resource_version.clone()),
                uid: None,
            }),
            ..Default::default()
        };
        match self.nodes.delete(name, &dp).await {
            Ok(_) => {
                self.emit(name, Occurrence::NodeDeleted).await;
                true
            }
            Err(e) => {
                let error = e.to_string();
                self.emit(name, Occurrence::NodeDeleteFailed { error })
                    .await;
                false
            }
        }
    }

    async fn uncordon(&self, node: &str, why: &str, marks: &AfterDrain) -> bool {
        let w = why.to_string();
        self.emit(node, Occurrence::UncordonStarting { why: w })
            .await;
        if self.dry_run() {
            tracing::info!(%node, %why, "dry-run: would uncordon");
            return false;
        }
        if !marks.is_empty()
            && let Err(e) = self.set_marks(node, marks, false).await
        {
            tracing::warn!(%node, error = %e, "cannot remove the after-drain marks");
        }
        let body = json!({
            "metadata": {"annotations": {keys::DRAIN_RECORD_ANNOTATION: null, keys::DRAINO_CONDITIONS_ANNOTATION: null}},
            "spec": {"unschedulable": false},
        });
        match self.patch_node(node, body).await {
            Ok(()) => {
                let remove = json!({"status": {"conditions": [{"type": keys::DRAIN_SCHEDULED_CONDITION, "$patch": "delete"}]}});
                if let Err(e) = self
                    .nodes
                    .patch_status(node, &PatchParams::default(), &Patch::Strategic(remove))
                    .await
                {
                    tracing::warn!(%node, error = %e, "cannot remove the DrainScheduled condition");
                }
                let why = why.to_string();
                self.emit(node, Occurrence::Uncordoned { why }).await;
                true
            }
            Err(e) => {
                let error = e.to_string();
                self.emit(node, Occurrence::UncordonFailed { error }).await;
                false
            }
        }
    }
    /// Store (or with `None` remove) the record only.
    async fn set_record(&self, node: &str, record: Option<&Record>) -> Result<(), kube::Error> {
        if self.dry_run() {
            return Ok(());
        }
        let value = record
            .map(|r| Value::String(r.to_annotation()))
            .unwrap_or(Value::Null);
        self.patch_node(
            node,
            json!({"metadata": {"annotations": {keys::DRAIN_RECORD_ANNOTATION: value}}}),
        )
        .await
    }
    /// Drain `node` as `job` says: record the attempt, evict its pods (in parallel, bounded), wait
    /// until they are gone, record the outcome ([`Record::draining`] and [`Record::finished`] decide
    /// the record). Stops early, recording nothing more, if leadership is lost (the next leader
    /// resumes).
    async fn drain(&self, node: &str, job: DrainJob, cfg: &Config) {
        let started = Timestamp::now();
        let record = job.record;
        let pods = job.evict;
        self.emit(node, Occurrence::DrainStarting { pods: pods.len() })
            .await;
        if self.dry_run() {
            tracing::info!(%node, pods = pods.len(), "dry-run: would drain");
            return;
        }
        if let Err(e) = self.set_record(node, Some(&record)).await {
            tracing::warn!(%node, error = %e, "cannot record the drain start; not draining now");
            return;
        }
        let deadline = tokio::time::Instant::now() + cfg.max_grace_period + cfg.eviction_headroom;
        let results: Vec<Result<(), EvictError>> = futures::stream::iter(pods)
            .map(|pod| async move {
                self.evict_and_wait(&pod, cfg.max_grace_period, deadline, cfg.allow_force_delete)
                    .await
            })
            .buffer_unordered(cfg.eviction_concurrency.max(1))
            .collect()
            .await;
        if !*self.leader.borrow() {
            tracing::warn!(%node, "lost leadership during the drain; the next leader resumes it");
            return;
        }
        let now = Timestamp::now();
        self.metrics
            .drain_duration
            .observe(((now.as_millisecond() - started.as_millisecond()).max(0)) as f64 / 1000.0);
        let failures: Vec<EvictError> = results.into_iter().filter_map(Result::err).collect();
        let outcome = if failures.is_empty() {
            DrainOutcome::Drained
        } else {
            DrainOutcome::Failed(failures)
        };
        let record = record.finished(&outcome, now, cfg.retry_base, cfg.retry_max);
        let scheduled = format!("Drain activity scheduled {}", ts(record.drain_at));
        let _ = self.set_record(node, Some(&record)).await;
        match &outcome {
            DrainOutcome::Drained => {
                let _ = self
                    .drain_scheduled(node, &format!("{scheduled} | Completed: {}", ts(now)), now)
                    .await;
                self.emit(node, Occurrence::Drained).await;
                let marks = &cfg.after_drain;
                if !marks.is_empty() && !self.dry_run() {
                    let o = match self.set_marks(node, marks, true).await {
                        Ok(()) => Occurrence::Marked {
                            marks: describe_marks(marks),
                        },
                        Err(e) => Occurrence::MarkFailed {
                            error: e.to_string(),
                        },
                    };
                    self.emit(node, o).await;
                }
            }
            DrainOutcome::Failed(failures) => {
                let retry_in = record
                    .retry_at
                    .map(|r| Duration::from_secs(r.duration_since(now).as_secs().max(0) as u64))
                    .unwrap_or_default();
                let _ = self
                    .drain_scheduled(node, &format!("{scheduled} | Failed: {}", ts(now)), now)
                    .await;
                let failures = failures.iter().map(ToString::to_string).collect();
                self.emit(node, Occurrence::DrainFailed { retry_in, failures })
                    .await;
            }
        }
    }
}
