//! The seam to the API server, pure (a trait and the writes as typed values; no I/O here): every
//! write the drainer makes goes through [`Cluster`], which the Kubernetes client implements for
//! `drainer run` and an in-memory cluster implements for `drainer simulate` and the executor's unit
//! tests. [`Gated`] puts the leadership gate in front of any of them: one place that refuses every
//! write while this replica does not hold the Lease.

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::NodeEvent;
use nodemedic_common::evict::Evicted;
use nodemedic_common::status::Status;
use tokio::sync::watch;

use super::pod::Uid;

/// What an API call can answer besides success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApiError {
    /// The leadership gate refused the write: this replica does not hold the Lease.
    #[error("not leading: write skipped")]
    NotLeading,
    /// The API server answered with an error status (`text` is what the client said of it).
    #[error("{text}")]
    Status { code: u16, text: String },
    /// No answer (connection, timeout, decoding).
    #[error("{0}")]
    Transport(String),
}

impl ApiError {
    /// 409: a precondition (resourceVersion, uid) no longer holds.
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Status { code: 409, .. })
    }

    /// 404: the object is gone.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Status { code: 404, .. })
    }
}

/// A change to a Node's metadata and spec (a strategic merge patch on the wire).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodePatch {
    /// Refused with a conflict (409) unless the node is still at this version.
    pub(crate) resource_version: Option<String>,
    /// `None` removes the key.
    pub(crate) labels: BTreeMap<String, Option<String>>,
    pub(crate) annotations: BTreeMap<String, Option<String>>,
    pub(crate) unschedulable: Option<bool>,
    /// The whole taint list: the API replaces it whole (so it goes with `resource_version`).
    pub(crate) taints: Option<Vec<Taint>>,
}

impl NodePatch {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.annotations.is_empty()
            && self.unschedulable.is_none()
            && self.taints.is_none()
    }

    pub(crate) fn annotation(mut self, key: &str, value: Option<String>) -> NodePatch {
        self.annotations.insert(key.to_string(), value);
        self
    }
}

/// A change to one condition in a Node's status, found by its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConditionPatch {
    Set {
        type_: String,
        status: Status,
        reason: String,
        message: String,
        at: Timestamp,
    },
    Remove {
        type_: String,
    },
}

/// What an Event is about: a Node (namespace `default`, as the kubelet writes them) or any object
/// in its namespace, with the node it concerns as the source host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EventTarget {
    Node(String),
    Object {
        regarding: ObjectReference,
        host: String,
    },
}

/// `Node NAME`, or the object's kind and `namespace/name`: what a log line says it is about.
impl std::fmt::Display for EventTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventTarget::Node(name) => write!(f, "Node {name}"),
            EventTarget::Object { regarding: r, .. } => {
                write!(f, "{} ", r.kind.as_deref().unwrap_or("object"))?;
                if let Some(ns) = &r.namespace {
                    write!(f, "{ns}/")?;
                }
                write!(f, "{}", r.name.as_deref().unwrap_or(""))
            }
        }
    }
}

/// The writes the drainer makes (and the one read a write needs), as a seam. Implemented over the
/// Kubernetes client for `drainer run`, and in memory for `drainer simulate` and tests.
/// What a power-cycle provider is asked, as JSON (docs/operator-guide.md): the node as the drainer
/// saw it when the step began, and one operation ID for the node's boot, the same on a retry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PowerCycleRequest {
    pub(crate) action: &'static str,
    pub(crate) node: String,
    pub(crate) uid: String,
    #[serde(rename = "bootID")]
    pub(crate) boot_id: String,
    pub(crate) requested: String,
    pub(crate) until: String,
    #[serde(rename = "operationID")]
    pub(crate) operation_id: String,
}

/// Where a power-cycle is asked (no `Debug`: the endpoint's URL and token are secrets).
pub(crate) enum PowerTarget {
    /// An HTTP endpoint, with the bearer token and the CA certificates (DER) trusted for it
    /// instead of the system's.
    Http {
        url: String,
        token: Option<String>,
        ca: Option<Vec<Vec<u8>>>,
    },
    /// Metal3's BareMetalHost, by its reboot annotation: the one behind the Cluster API Machine
    /// `namespace/machine`, which must name `node` (as decided on, `node_uid`) back
    /// (`super::capi::names_node`).
    Metal3 {
        namespace: String,
        machine: String,
        node: String,
        node_uid: String,
    },
    /// A medik8s remediation object made from `template` for `node`, once per attempt
    /// (`operation`).
    Medik8s {
        template: super::medik8s::Template,
        node: String,
        operation: String,
    },
}

/// Why a power-cycle provider did not take the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PowerCycleError {
    #[error("no answer within {0}s")]
    Timeout(u64),
    #[error("{0}")]
    Transport(String),
    #[error("it answered HTTP {0}")]
    Status(u16),
    /// The way to the node's BareMetalHost is not there, or does not lead back to the node.
    #[error("{0}")]
    NoHost(String),
    #[error("{0}")]
    Api(ApiError),
}

impl PowerCycleError {
    /// A failure that asking again may get past (no answer, a timeout, a server's 5xx or 429):
    /// retried within the budget under the same operation ID, then the step waits out its
    /// deadline (the provider may still act). Anything else is a refusal: the ladder goes on.
    pub(crate) fn is_transient(&self) -> bool {
        let busy = |code: u16| code == 429 || code >= 500;
        match self {
            PowerCycleError::Timeout(_) | PowerCycleError::Transport(_) => true,
            PowerCycleError::Status(code) => busy(*code),
            PowerCycleError::Api(ApiError::Transport(_)) => true,
            PowerCycleError::Api(ApiError::Status { code, .. }) => busy(*code),
            PowerCycleError::Api(ApiError::NotLeading) | PowerCycleError::NoHost(_) => false,
        }
    }
}

/// What marking a Cluster API Machine for remediation came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MachineMark {
    /// Annotated: its MachineHealthCheck remediates it.
    Marked,
    /// There is no such Machine (or no Cluster API here).
    Missing,
    /// It does not name this Node back (why, in an operator's words): not marked.
    OtherNode(String),
}

/// The annotation a MachineHealthCheck remediates a Machine for, whatever its checks say.
pub(crate) const REMEDIATE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/remediate-machine";
/// The annotations Cluster API puts on a Node: its Machine, and that Machine's namespace.
pub(crate) const MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
pub(crate) const MACHINE_NAMESPACE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-namespace";

/// A ConfigMap's data.
pub(crate) type Data = BTreeMap<String, String>;

/// What keeping a ConfigMap did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// It already held what was wanted (or it is missing and nothing is wanted): no write.
    Unchanged,
    Written,
}

/// Which Node a deletion may delete: the precondition it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeVersion {
    /// Only at this resourceVersion (nothing changed since it was decided on).
    Version(String),
    /// Only this object (`metadata.uid`), whatever changed since: a Node of the same name created
    /// meanwhile is never deleted.
    Uid(String),
}

pub(crate) trait Cluster: Clone + Send + Sync + 'static {
    fn patch_node(
        &self,
        name: &str,
        patch: &NodePatch,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Change conditions of a Node's status, in one write.
    fn patch_node_status(
        &self,
        name: &str,
        patch: &[ConditionPatch],
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// A Node read fresh from the API server: taints are written back whole, and a write refused
    /// as a conflict is tried again only if the node's state is still the one decided on.
    fn read_node(&self, name: &str) -> impl Future<Output = Result<Node, ApiError>> + Send;
    /// Mark the Cluster API Machine `namespace/name` for remediation (the annotation its
    /// MachineHealthCheck honours), only if it names `node` back (`super::capi::names_node`: its
    /// nodeRef's name, its UID where kept, its provider ID the Node's): what came of it.
    fn mark_machine(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        node_uid: &str,
    ) -> impl Future<Output = Result<MachineMark, ApiError>> + Send;
    /// Ask the power-cycle provider `target` to reboot a node from outside.
    fn power_cycle(
        &self,
        target: &PowerTarget,
        request: &PowerCycleRequest,
    ) -> impl Future<Output = Result<(), PowerCycleError>> + Send;
    /// Our medik8s remediation objects of `template`'s kind (a read: the ladder follows them).
    fn remediations(
        &self,
        template: &super::medik8s::Template,
    ) -> impl Future<Output = Result<Vec<super::medik8s::Remediation>, ApiError>> + Send;
    /// Delete our remediation object `r` (that object only), its attempt over.
    fn delete_remediation(
        &self,
        template: &super::medik8s::Template,
        r: &super::medik8s::Remediation,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Delete a Node, only as `only` says (that version of it, or that object).
    fn delete_node(
        &self,
        name: &str,
        only: &NodeVersion,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Evict a pod through the Eviction API (PodDisruptionBudgets honoured).
    fn evict(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
    ) -> impl Future<Output = Result<Evicted, ApiError>> + Send;
    /// Delete a pod with this grace period, only this one (`uid` as a precondition).
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        grace_seconds: i64,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Wait until the pod is gone (or replaced by one with another uid), or with `or_finished` has
    /// finished (Succeeded or Failed), or `deadline`. True when it did. Not a write: answered from
    /// what the drainer observes.
    fn pod_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        deadline: tokio::time::Instant,
        or_finished: bool,
    ) -> impl Future<Output = bool> + Send;
    /// Write `ev` as the Event named `existing` (its count grown) or as a new one; its name.
    fn event(
        &self,
        target: &EventTarget,
        ev: &NodeEvent,
        existing: Option<&str>,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;
    /// The data of the drainer's own ConfigMap `name` (in its Lease's namespace), None when it
    /// does not exist. A read.
    fn read_configmap(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Data>, ApiError>> + Send;
    /// Make the drainer's own ConfigMap `name` hold `wanted`, unless `same(held, wanted)` says it
    /// does already (no write that changes nothing); made with the drainer's labels when missing,
    /// unless nothing is wanted. The one way the drainer writes its ConfigMaps (its settings, its
    /// reboot requests, its record memory).
    fn keep_configmap(
        &self,
        name: &str,
        wanted: &Data,
        same: fn(&Data, &Data) -> bool,
    ) -> impl Future<Output = Result<Kept, ApiError>> + Send;
    /// The DaemonSet `namespace/name`, if it exists (a read: where the detector runs, for the
    /// watchdog).
    fn daemon_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, ApiError>> + Send;
}

/// The leadership gate in front of a [`Cluster`]: every write is refused with
/// [`ApiError::NotLeading`] unless this replica holds the Lease at that moment.
#[derive(Clone)]
pub(crate) struct Gated<C> {
    inner: C,
    leader: watch::Receiver<bool>,
}

impl<C: Cluster> Gated<C> {
    pub(crate) fn new(inner: C, leader: watch::Receiver<bool>) -> Gated<C> {
        Gated { inner, leader }
    }

    /// Leadership as it changes (for a task that writes only while leading).
    pub(crate) fn leader(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// Whether we hold the Lease now.
    pub(crate) fn leading(&self) -> bool {
        *self.leader.borrow()
    }

    fn gate(&self) -> Result<(), ApiError> {
        if self.leading() {
            Ok(())
        } else {
            tracing::debug!("not leading: write skipped");
            Err(ApiError::NotLeading)
        }
    }
}

impl<C: Cluster> Cluster for Gated<C> {
    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), ApiError> {
        self.gate()?;
        self.inner.patch_node(name, patch).await
    }
    async fn patch_node_status(
        &self,
        name: &str,
        patch: &[ConditionPatch],
    ) -> Result<(), ApiError> {
        self.gate()?;
        self.inner.patch_node_status(name, patch).await
    }
    async fn read_node(&self, name: &str) -> Result<Node, ApiError> {
        self.gate()?;
        self.inner.read_node(name).await
    }
    async fn mark_machine(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        node_uid: &str,
    ) -> Result<MachineMark, ApiError> {
        self.gate()?;
        self.inner
            .mark_machine(namespace, name, node, node_uid)
            .await
    }
    async fn delete_node(&self, name: &str, only: &NodeVersion) -> Result<(), ApiError> {
        self.gate()?;
        self.inner.delete_node(name, only).await
    }
    async fn power_cycle(
        &self,
        target: &PowerTarget,
        request: &PowerCycleRequest,
    ) -> Result<(), PowerCycleError> {
        // A follower asks nothing: the leader does.
        self.gate()
            .map_err(|e| PowerCycleError::Transport(e.to_string()))?;
        self.inner.power_cycle(target, request).await
    }
    async fn remediations(
        &self,
        template: &super::medik8s::Template,
    ) -> Result<Vec<super::medik8s::Remediation>, ApiError> {
        self.inner.remediations(template).await
    }
    async fn delete_remediation(
        &self,
        template: &super::medik8s::Template,
        r: &super::medik8s::Remediation,
    ) -> Result<(), ApiError> {
        self.gate()?;
        self.inner.delete_remediation(template, r).await
    }
    async fn evict(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
    ) -> Result<Evicted, ApiError> {
        self.gate()?;
        self.inner.evict(namespace, name, grace_seconds).await
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        grace_seconds: i64,
    ) -> Result<(), ApiError> {
        self.gate()?;
        self.inner
            .delete_pod(namespace, name, uid, grace_seconds)
            .await
    }
    async fn pod_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        deadline: tokio::time::Instant,
        or_finished: bool,
    ) -> bool {
        self.inner
            .pod_gone(namespace, name, uid, deadline, or_finished)
            .await
    }
    async fn event(
        &self,
        target: &EventTarget,
        ev: &NodeEvent,
        existing: Option<&str>,
    ) -> Result<String, ApiError> {
        self.gate()?;
        self.inner.event(target, ev, existing).await
    }
    async fn daemon_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, ApiError> {
        self.inner.daemon_set(namespace, name).await
    }
    async fn read_configmap(&self, name: &str) -> Result<Option<Data>, ApiError> {
        self.inner.read_configmap(name).await
    }
    async fn keep_configmap(
        &self,
        name: &str,
        wanted: &Data,
        same: fn(&Data, &Data) -> bool,
    ) -> Result<Kept, ApiError> {
        self.gate()?;
        self.inner.keep_configmap(name, wanted, same).await
    }
}
