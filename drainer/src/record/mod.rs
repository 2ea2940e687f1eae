//! Recording what happens, I/O: the [`Recorder`] is the one place that logs, counts, notifies and
//! writes the Event of each occurrence (a node's, a pod's, the fleet's, a wait, a stale pod), so
//! the four never drift apart (vector's `internal_events` is the model). Events go through the
//! gated [`Cluster`]: a follower logs and counts, and writes nothing.
//!
//! ```text
//!  event_queue   new Events written behind the decisions, in order per node
//!  log_lines     the log line and metric of each node and pod occurrence
//!  fleet_change  a fleet-wide change as its reason, severity, text, metric and notification kind
//! ```

pub(crate) mod event_queue;
pub mod fleet_change;
pub mod history_file;
pub mod log_lines;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::events::{NodeEvent, Severity};
use nodemedic_common::time::rfc3339;

use crate::decide::fleet::FleetEvent;
use crate::decide::gates::slow_start::Change;
use crate::decide::stale::Stale;
use crate::metrics::Metrics;
use crate::model::cluster::{Cluster, EventTarget, Gated};
use crate::model::occurrence::{EvictionFor, Occurrence, PodOccurrence, SOURCE, reason};
use crate::notify::{ConditionNote, Notification, Notifier, NotifyKind};
use crate::observe::Observed;
use event_queue::EventQueue;
use fleet_change::SafetyOccurrence;

/// Logs, counts, notifies and writes Events. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Recorder<C> {
    cluster: Gated<C>,
    metrics: Metrics,
    notifier: Notifier,
    /// This drainer's name in notifications (its Lease name).
    owner: String,
    /// A node's conditions for its notifications, as the cache has them.
    observed: Observed,
    clock: Clock,
    /// New Events' writer, when they go behind the decisions (`drainer run`).
    queue: Option<EventQueue>,
}

impl<C: Cluster> Recorder<C> {
    pub(crate) fn new(
        cluster: Gated<C>,
        metrics: Metrics,
        observed: Observed,
        clock: Clock,
    ) -> Self {
        Recorder {
            cluster,
            metrics,
            notifier: Notifier::disabled(),
            owner: crate::config::DEFAULT_OWNER.into(),
            observed,
            clock,
            queue: None,
        }
    }

    /// Write new Events through `queue` rather than before going on.
    pub(crate) fn with_event_queue(mut self, queue: EventQueue) -> Self {
        self.queue = Some(queue);
        self
    }

    /// Notify `notifier` of what happens, as `owner`.
    pub(crate) fn with_notifier(mut self, notifier: Notifier, owner: &str) -> Self {
        self.notifier = notifier;
        self.owner = owner.to_string();
        self
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Something happened to `node`: its log line, metric, notification and Event.
    pub(crate) async fn node(&self, node: &str, o: Occurrence) {
        o.log(node);
        o.count(&self.metrics);
        if self.cluster.leading() {
            self.notify(node, &o);
        }
        let target = EventTarget::Node(node.to_string());
        self.write(target, o.severity(), o.reason(), o.message())
            .await;
    }

    /// Something happened to an eviction of `pod` (namespace/name) on `node`: logged and counted; a
    /// force deletion also gets a Warning Event on the node.
    pub(crate) async fn pod(
        &self,
        pod: &str,
        node: Option<&str>,
        o: &PodOccurrence,
        why: EvictionFor,
    ) {
        o.log_and_count(pod, why, &self.metrics);
        if let (
            PodOccurrence::DeletedByPolicy {
                policy,
                refused_for,
            },
            Some(node),
        ) = (o, node)
        {
            let message = format!(
                "Pod {pod} deleted instead of evicted (pod policy {policy}): PodDisruptionBudgets refused its eviction for {}",
                humantime::format_duration(*refused_for)
            );
            let target = EventTarget::Node(node.to_string());
            let r = reason::POD_DELETED_BY_POLICY;
            self.write(target, Severity::Warning, r, message).await;
        }
        if let (PodOccurrence::ForceDeleted, Some(node)) = (o, node) {
            let message = format!(
                "Pod {pod} force-deleted (grace period 0, --allow-force-delete): its eviction did not complete by the drain's deadline"
            );
            let target = EventTarget::Node(node.to_string());
            self.write(
                target,
                Severity::Warning,
                reason::POD_FORCE_DELETED,
                message,
            )
            .await;
        }
    }

    /// A fleet-wide change or a node starting to flap; its Event is about the node, or else about
    /// `regarding` (the drainer's Lease: `kubectl describe lease` shows it).
    pub(crate) async fn fleet(&self, ev: &FleetEvent, regarding: Option<ObjectReference>) {
        let s = SafetyOccurrence::of(ev);
        log_safety(&s);
        self.metrics.safety_event(s.metric);
        match ev {
            FleetEvent::SlowStart(Change::Widened { domain, width }) => {
                self.metrics.slow_start_width(domain, *width)
            }
            FleetEvent::SlowStart(Change::Narrowed { domain, .. }) => {
                self.metrics.slow_start_width(domain, 1)
            }
            _ => {}
        }
        if !self.cluster.leading() {
            return;
        }
        let now = self.clock.now();
        self.notifier.send(Notification::new(
            s.notify,
            s.node.clone(),
            s.domain.clone(),
            s.message.clone(),
            &self.owner,
            now,
        ));
        let target = match (&s.node, regarding) {
            (Some(node), _) => EventTarget::Node(node.clone()),
            (None, Some(lease)) => EventTarget::Object {
                regarding: lease,
                host: String::new(),
            },
            (None, None) => return,
        };
        self.write(target, s.severity, s.reason, s.message).await;
    }

    /// A wait's Event: `ev` written as the Event named `existing` (its count grown), or as a new
    /// one. The name to update next time (None when the write failed: the next creates one).
    pub(crate) async fn episode(
        &self,
        node: &str,
        existing: Option<String>,
        ev: &NodeEvent,
    ) -> Option<String> {
        if !self.cluster.leading() {
            return existing;
        }
        let target = EventTarget::Node(node.to_string());
        if let Some(name) = existing {
            match self.cluster.event(&target, ev, Some(&name)).await {
                Ok(name) => return Some(name),
                Err(e) => {
                    tracing::debug!(%node, reason = %ev.reason, error = %e, "cannot update event; creating a new one")
                }
            }
        }
        match self.cluster.event(&target, ev, None).await {
            Ok(name) => Some(name),
            Err(e) => {
                tracing::warn!(%node, reason = %ev.reason, error = %e, "cannot write event");
                None
            }
        }
    }

    /// An edit of the config file was refused (`why`: its errors; already logged and counted by
    /// the reloader): a Warning Event on the drainer's Lease says so where `kubectl describe lease`
    /// shows it.
    pub(crate) async fn config_refused(&self, why: &[String], lease: Option<ObjectReference>) {
        let Some(lease) = lease else {
            return;
        };
        let message = format!(
            "Config edit refused, the running settings stay: {}",
            why.join("; ")
        );
        let r = crate::model::occurrence::reason::CONFIG_REFUSED;
        self.lease_warning(lease, r, message).await;
    }

    /// A Warning Event on the drainer's Lease, where `kubectl describe lease` shows it.
    async fn lease_warning(&self, lease: ObjectReference, reason: &str, message: String) {
        let target = EventTarget::Object {
            regarding: lease,
            host: String::new(),
        };
        self.write(target, Severity::Warning, reason, message).await;
    }

    /// The drainer started with settings looser than the ones it last published (`what`; already
    /// logged and counted at start): a Warning Event on its Lease, once it leads.
    pub(crate) async fn started_looser(&self, what: &[String], lease: ObjectReference) {
        let message = format!(
            "Started with settings looser than the ones last published (a restart took an edit a reload would have refused?): {}",
            what.join("; ")
        );
        let r = crate::model::occurrence::reason::STARTED_LOOSER;
        self.lease_warning(lease, r, message).await;
    }

    /// A stale pod: a warning and a Warning Event on the pod.
    pub(crate) async fn stale(&self, s: &Stale, message: String) {
        if !self.cluster.leading() {
            return;
        }
        let id = format!("{}/{}", s.namespace, s.name);
        tracing::warn!(pod = %id, node = %s.node, "{message}");
        let target = EventTarget::Object {
            regarding: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(s.name.clone()),
                namespace: Some(s.namespace.clone()),
                uid: s.uid.clone(),
                ..Default::default()
            },
            host: s.node.clone(),
        };
        let r = reason::POD_READINESS_STALE;
        self.write(target, Severity::Warning, r, message).await;
    }

    /// Write one new Event (count 1, now): queued behind the decisions when the drainer runs
    /// with an [`EventQueue`], else at once.
    async fn write(&self, target: EventTarget, severity: Severity, reason: &str, message: String) {
        let ev = event(severity, reason, message, self.clock.now());
        match &self.queue {
            Some(queue) => queue.send(target, ev).await,
            None => event_queue::write(&self.cluster, &target, &ev).await,
        }
    }

    /// Notify what matters to people on call about `node` (its conditions as the cache has them).
    fn notify(&self, node: &str, o: &Occurrence) {
        let (kind, reason) = match o {
            Occurrence::Cordoned { problem } => (NotifyKind::Cordoned, problem.clone()),
            Occurrence::DrainStarting { .. } => (NotifyKind::DrainStarted, o.message()),
            Occurrence::Drained { .. } => (NotifyKind::Drained, o.message()),
            Occurrence::DrainFailed { .. } => (NotifyKind::DrainFailed, o.message()),
            Occurrence::Uncordoned { why } => (NotifyKind::Uncordoned, why.clone()),
            Occurrence::RebootRequested { .. } => (NotifyKind::RebootRequested, o.message()),
            Occurrence::Replacing { .. } => (NotifyKind::Replacing, o.message()),
            Occurrence::NeedsPerson { why } => (NotifyKind::NeedsPerson, why.clone()),
            _ => return,
        };
        let now = self.clock.now();
        let mut n = Notification::new(kind, Some(node.to_string()), None, reason, &self.owner, now);
        if let Some(v) = self.observed.node(node) {
            n.conditions = v
                .conditions
                .iter()
                .map(|c| ConditionNote {
                    type_: c.type_.to_string(),
                    status: c.status.to_string(),
                    reason: c.reason.as_deref().map(String::from).unwrap_or_default(),
                    since: rfc3339(c.since),
                })
                .collect();
        }
        self.notifier.send(n);
    }
}

/// One occurrence as an Event of the drainer's (count 1).
pub(crate) fn event(
    severity: Severity,
    reason: &str,
    message: String,
    now: Timestamp,
) -> NodeEvent {
    NodeEvent {
        source: SOURCE.into(),
        severity,
        reason: reason.into(),
        message,
        count: 1,
        first_seen: now,
        last_seen: now,
    }
}

fn log_safety(s: &SafetyOccurrence) {
    let node = s.node.as_deref().unwrap_or("");
    let domain = s.domain.as_deref().unwrap_or("");
    match s.severity {
        Severity::Warning => tracing::warn!(reason = s.reason, node, domain, "{}", s.message),
        Severity::Normal => tracing::info!(reason = s.reason, node, domain, "{}", s.message),
    }
}
