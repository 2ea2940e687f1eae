//! The [`Cluster`] in memory, no I/O: Nodes and Pods held as objects, each write applied to them
//! and shown at once to the drainer's caches ([`Observed`]), as a watch would. `drainer simulate`
//! runs the real controller over it, and the executor's and controller's tests read back what was
//! written ([`Write`]). Evicted pods go after a set termination time (tokio's clock: paused in
//! simulations and tests), or never for pods a PodDisruptionBudget protects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::NodeEvent;
use nodemedic_common::evict::Evicted;
use nodemedic_common::status::Status;

use crate::model::cluster::PowerTarget;
use crate::model::cluster::{
    ApiError, Cluster, ConditionPatch, Data, EventTarget, Kept, MachineMark, NodePatch,
    NodeVersion, PowerCycleError, PowerCycleRequest,
};
use crate::model::pod::{PodInfo, Uid};
use crate::observe::Observed;

/// One call that reached the cluster, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Write {
    /// One of the drainer's own ConfigMaps written.
    ConfigMap {
        name: String,
    },
    Node {
        name: String,
        patch: NodePatch,
    },
    Status {
        name: String,
        patch: ConditionPatch,
    },
    DeleteNode {
        name: String,
    },
    Evict {
        pod: String,
        grace: Option<i64>,
    },
    DeletePod {
        pod: String,
        grace: i64,
    },
    Event {
        about: String,
        event: NodeEvent,
        existing: Option<String>,
    },
    /// The power-cycle provider asked to reboot `node` (booted `boot_id`) from outside.
    PowerCycle {
        node: String,
        boot_id: String,
    },
}

mod changes;
#[cfg(test)]
mod knobs;
mod remediators;

type PodKey = (String, String);

/// The requests a test can make slow ([`MemoryCluster::set_delay`]): Events, evictions, patches
/// that cordon, patches of a node's status, reads of a DaemonSet.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slow {
    Events,
    Evictions,
    Cordons,
    Status,
    DaemonSets,
}

#[derive(Default)]
struct State {
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<PodKey, Pod>,
    version: u64,
    writes: Vec<Write>,
    /// Evictions refused as by a PodDisruptionBudget.
    protected: BTreeSet<PodKey>,
    /// How long an evicted pod takes to go.
    termination: Duration,
    events: u64,
    /// How long each kind of request takes ([`Slow`]; an API server slow to answer).
    delays: [Duration; 5],
    /// The evictions under way: now, and at most.
    evicting: (usize, usize),
    /// Changes are kept from the caches until [`MemoryCluster::deliver`] (a watch running late).
    lagging: bool,
    daemon_sets: BTreeMap<(String, String), k8s_openapi::api::apps::v1::DaemonSet>,
    /// The drainer's own ConfigMaps, by name: their data.
    configmaps: BTreeMap<String, Data>,
    /// The power-cycles asked of the provider: (node, the bootID it was asked for).
    power_cycles: Vec<(String, String)>,
    /// The nodes whose power-cycle the provider gives up on, and the medik8s remediation objects.
    outside: remediators::Outside,
}

impl State {
    fn bump(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }
}

/// Nodes and Pods in memory, shown to `observed` as they change. Cheap to clone (shared).
#[derive(Clone)]
pub(crate) struct MemoryCluster {
    state: Arc<Mutex<State>>,
    observed: Observed,
    /// Counts the writes of the drainer's own ConfigMaps (what reads them, as a detector reads
    /// its reboot requests, waits on it).
    configmap_writes: Arc<tokio::sync::watch::Sender<u64>>,
}

fn status(code: u16, text: String) -> ApiError {
    ApiError::Status { code, text }
}

fn node_missing(name: &str) -> ApiError {
    status(404, format!("nodes \"{name}\" not found"))
}

fn modified(kind: &str, name: &str) -> ApiError {
    let text = format!(
        "Operation cannot be fulfilled on {kind} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    );
    status(409, text)
}

impl MemoryCluster {
    /// An empty cluster showing its objects to `observed`.
    pub(crate) fn new(observed: Observed) -> MemoryCluster {
        MemoryCluster {
            state: Arc::default(),
            observed,
            configmap_writes: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// One of the drainer's own ConfigMaps as it holds it: its data.
    pub(crate) fn configmap(&self, name: &str) -> Option<Data> {
        self.state().configmaps.get(name).cloned()
    }

    /// Someone else writes the ConfigMap `name` (a test's attacker with the drainer's token).
    #[cfg(test)]
    pub(crate) fn write_configmap(&self, name: &str, data: Data) {
        self.state().configmaps.insert(name.to_string(), data);
    }

    /// The power-cycle provider gives up on `node`.
    pub(crate) fn power_cycle_fails(&self, node: &str) {
        self.state().outside.fails.insert(node.to_string());
    }

    /// The power-cycles asked so far: (node, the bootID each was asked for).
    pub(crate) fn power_cycles(&self) -> Vec<(String, String)> {
        self.state().power_cycles.clone()
    }

    /// Changes with every write of the drainer's own ConfigMaps.
    pub(crate) fn configmap_writes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.configmap_writes.subscribe()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add (or replace) a node; shown to the caches at once unless they are not synced yet.
    pub(crate) fn put_node(&self, mut node: Node) {
        let mut s = self.state();
        node.metadata.resource_version = Some(s.bump());
        let name = node.metadata.name.clone().unwrap_or_default();
        if self.observed.nodes_synced() {
            self.observed.apply_node(&node);
        }
        s.nodes.insert(name, node);
    }

    /// Add (or replace) a pod.
    pub(crate) fn put_pod(&self, mut pod: Pod) {
        let mut s = self.state();
        pod.metadata.resource_version = Some(s.bump());
        let key = key_of(&pod);
        if self.observed.synced() {
            self.observed.apply_pod(PodInfo::from_pod(&pod, None));
        }
        s.pods.insert(key, pod);
    }

    /// The caches list what is here (as the watches' first list): from now on they see each change.
    pub(crate) fn sync(&self) {
        let s = self.state();
        let views = s.nodes.values().map(|node| {
            let view = crate::model::node::NodeView::of(node);
            (view.name.clone(), Arc::new(view))
        });
        self.observed.replace_nodes(views.collect());
        let pods = s.pods.values().map(|p| PodInfo::from_pod(p, None));
        self.observed.replace_pods(pods.collect::<Vec<_>>());
    }

    /// The pod's phase becomes `phase` (a Job's pod finishing).
    pub(crate) fn set_pod_phase(&self, namespace: &str, name: &str, phase: &str) {
        let mut s = self.state();
        let lagging = s.lagging;
        let Some(p) = s.pods.get_mut(&(namespace.into(), name.into())) else {
            return;
        };
        p.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        if !lagging && self.observed.synced() {
            self.observed.apply_pod(PodInfo::from_pod(p, None));
        }
    }

    /// Evictions of this pod are refused, as a PodDisruptionBudget would.
    pub(crate) fn protect(&self, namespace: &str, name: &str) {
        self.state()
            .protected
            .insert((namespace.into(), name.into()));
    }

    /// Evicted pods go this long after their eviction (0: at once).
    pub(crate) fn set_termination(&self, d: Duration) {
        self.state().termination = d;
    }

    /// The calls so far, taken (the next call starts a new list).
    pub(crate) fn take_writes(&self) -> Vec<Write> {
        std::mem::take(&mut self.state().writes)
    }

    fn remove_pod(&self, key: &PodKey) {
        if self.state().pods.remove(key).is_some() {
            self.observed.delete_pod(&key.0, &key.1);
        }
    }
}

fn key_of(pod: &Pod) -> PodKey {
    let m = &pod.metadata;
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

/// A condition as a node's kubelet or detector first writes it.
fn condition(type_: &str, status: Status, at: Timestamp) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.as_str().into(),
        last_transition_time: Some(Time(at)),
        last_heartbeat_time: Some(Time(at)),
        ..Default::default()
    }
}

/// `patch` applied to `node`.
fn apply(node: &mut Node, patch: &NodePatch) {
    let m = &mut node.metadata;
    for (map, changes) in [
        (&mut m.labels, &patch.labels),
        (&mut m.annotations, &patch.annotations),
    ] {
        let map = map.get_or_insert_with(BTreeMap::new);
        for (k, v) in changes {
            match v {
                Some(v) => map.insert(k.clone(), v.clone()),
                None => map.remove(k),
            };
        }
    }
    let spec = node.spec.get_or_insert_with(Default::default);
    if let Some(u) = patch.unschedulable {
        spec.unschedulable = Some(u);
    }
    if let Some(t) = &patch.taints {
        spec.taints = (!t.is_empty()).then(|| t.clone());
    }
}

impl Cluster for MemoryCluster {
    async fn read_configmap(&self, name: &str) -> Result<Option<Data>, ApiError> {
        Ok(self.state().configmaps.get(name).cloned())
    }

    async fn keep_configmap(
        &self,
        name: &str,
        wanted: &Data,
        same: fn(&Data, &Data) -> bool,
    ) -> Result<Kept, ApiError> {
        let mut s = self.state();
        match s.configmaps.get(name) {
            Some(held) if same(held, wanted) => Ok(Kept::Unchanged),
            None if wanted.is_empty() => Ok(Kept::Unchanged),
            _ => {
                s.configmaps.insert(name.to_string(), wanted.clone());
                s.writes.push(Write::ConfigMap {
                    name: name.to_string(),
                });
                drop(s);
                self.configmap_writes.send_modify(|n| *n += 1);
                Ok(Kept::Written)
            }
        }
    }

    async fn daemon_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, ApiError> {
        let delay = self.state().delays[Slow::DaemonSets as usize];
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let key = (namespace.to_string(), name.to_string());
        Ok(self.state().daemon_sets.get(&key).cloned())
    }

    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), ApiError> {
        let delay = self.state().delays[Slow::Cordons as usize];
        if patch.unschedulable == Some(true) && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut s = self.state();
        s.writes.push(Write::Node {
            name: name.into(),
            patch: patch.clone(),
        });
        let (version, lagging) = (s.bump(), s.lagging);
        let node = s.nodes.get_mut(name).ok_or_else(|| node_missing(name))?;
        if patch
            .resource_version
            .as_ref()
            .is_some_and(|rv| node.metadata.resource_version.as_ref() != Some(rv))
        {
            return Err(modified("nodes", name));
        }
        apply(node, patch);
        node.metadata.resource_version = Some(version);
        if !lagging {
            self.observed.apply_node(node);
        }
        Ok(())
    }

    async fn patch_node_status(
        &self,
        name: &str,
        patches: &[ConditionPatch],
    ) -> Result<(), ApiError> {
        let delay = self.state().delays[Slow::Status as usize];
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut s = self.state();
        s.writes.extend(patches.iter().map(|patch| Write::Status {
            name: name.into(),
            patch: patch.clone(),
        }));
        let (version, lagging) = (s.bump(), s.lagging);
        let node = s.nodes.get_mut(name).ok_or_else(|| node_missing(name))?;
        let conditions = node
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        for patch in patches {
            condition_patched(conditions, patch);
        }
        node.metadata.resource_version = Some(version);
        if !lagging {
            self.observed.apply_node(node);
        }
        Ok(())
    }

    async fn read_node(&self, name: &str) -> Result<Node, ApiError> {
        let s = self.state();
        s.nodes.get(name).cloned().ok_or_else(|| node_missing(name))
    }

    async fn mark_machine(
        &self,
        _namespace: &str,
        _name: &str,
        _node: &str,
        _node_uid: &str,
    ) -> Result<MachineMark, ApiError> {
        // No Cluster API in memory: a replacement deletes the Node.
        Ok(MachineMark::Missing)
    }

    async fn power_cycle(
        &self,
        target: &PowerTarget,
        request: &PowerCycleRequest,
    ) -> Result<(), PowerCycleError> {
        let mut s = self.state();
        s.writes.push(Write::PowerCycle {
            node: request.node.clone(),
            boot_id: request.boot_id.clone(),
        });
        if !s.outside.asked(target, request)? {
            return Ok(());
        }
        s.power_cycles
            .push((request.node.clone(), request.boot_id.clone()));
        // What simulates the machines waits on the drainer's writes.
        self.configmap_writes.send_modify(|n| *n += 1);
        Ok(())
    }

    async fn remediations(
        &self,
        _template: &crate::model::medik8s::Template,
    ) -> Result<Vec<crate::model::medik8s::Remediation>, ApiError> {
        Ok(self.state().outside.objects.clone())
    }

    async fn delete_remediation(
        &self,
        _template: &crate::model::medik8s::Template,
        r: &crate::model::medik8s::Remediation,
    ) -> Result<(), ApiError> {
        self.state().outside.objects.retain(|o| o.uid != r.uid);
        Ok(())
    }

    async fn delete_node(&self, name: &str, only: &NodeVersion) -> Result<(), ApiError> {
        let mut s = self.state();
        s.writes.push(Write::DeleteNode { name: name.into() });
        let node = s.nodes.get(name).ok_or_else(|| node_missing(name))?;
        let same = match only {
            NodeVersion::Version(v) => node.metadata.resource_version.as_deref() == Some(v),
            // As the drainer keeps UIDs (a file's non-UUID ones hashed): compared the same way.
            NodeVersion::Uid(u) => {
                let uid = node.metadata.uid.as_deref().unwrap_or_default();
                crate::model::node::Uid::parse(uid) == crate::model::node::Uid::parse(u)
            }
        };
        if !same {
            return Err(modified("nodes", name));
        }
        s.nodes.remove(name);
        self.observed.delete_node(name);
        Ok(())
    }

    async fn evict(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
    ) -> Result<Evicted, ApiError> {
        let key: PodKey = (namespace.into(), name.into());
        let delay = {
            let mut s = self.state();
            s.evicting.0 += 1;
            s.evicting.1 = s.evicting.1.max(s.evicting.0);
            s.delays[Slow::Evictions as usize]
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.state().evicting.0 -= 1;
        let termination = {
            let mut s = self.state();
            let pod = format!("{namespace}/{name}");
            s.writes.push(Write::Evict {
                pod,
                grace: grace_seconds,
            });
            if !s.pods.contains_key(&key) {
                return Ok(Evicted::Gone);
            }
            if s.protected.contains(&key) {
                let why = "Cannot evict pod as it would violate the pod's disruption budget.";
                return Ok(Evicted::Refused(why.into()));
            }
            s.termination
        };
        if termination.is_zero() {
            self.remove_pod(&key);
        } else {
            let me = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(termination).await;
                me.remove_pod(&key);
            });
        }
        Ok(Evicted::Accepted)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        grace_seconds: i64,
    ) -> Result<(), ApiError> {
        let key: PodKey = (namespace.into(), name.into());
        {
            let mut s = self.state();
            let pod = format!("{namespace}/{name}");
            s.writes.push(Write::DeletePod {
                pod,
                grace: grace_seconds,
            });
            let found = s
                .pods
                .get(&key)
                .ok_or_else(|| status(404, format!("pods \"{name}\" not found")))?;
            let theirs = found.metadata.uid.as_deref().map(Uid::parse);
            if uid.is_some_and(|u| theirs.as_ref() != Some(u)) {
                return Err(modified("pods", name));
            }
        }
        self.remove_pod(&key);
        Ok(())
    }

    async fn pod_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        deadline: tokio::time::Instant,
        or_finished: bool,
    ) -> bool {
        self.observed
            .wait_gone(namespace, name, uid, deadline, or_finished)
            .await
    }

    async fn event(
        &self,
        target: &EventTarget,
        ev: &NodeEvent,
        existing: Option<&str>,
    ) -> Result<String, ApiError> {
        let about = match target {
            EventTarget::Node(n) => n.clone(),
            EventTarget::Object { regarding, .. } => format!(
                "{}/{}",
                regarding.namespace.as_deref().unwrap_or_default(),
                regarding.name.as_deref().unwrap_or_default()
            ),
        };
        let delay = self.state().delays[Slow::Events as usize];
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut s = self.state();
        s.events += 1;
        let name = existing.map_or_else(|| format!("{about}.{}", s.events), String::from);
        s.writes.push(Write::Event {
            about,
            event: ev.clone(),
            existing: existing.map(String::from),
        });
        Ok(name)
    }
}

/// `patch` applied to a Node's `conditions`.
fn condition_patched(conditions: &mut Vec<NodeCondition>, patch: &ConditionPatch) {
    match patch {
        ConditionPatch::Set {
            type_,
            status,
            reason,
            message,
            at,
        } => {
            conditions.retain(|c| c.type_ != *type_);
            let mut c = condition(type_, *status, *at);
            c.reason = Some(reason.clone());
            c.message = Some(message.clone());
            conditions.push(c);
        }
        ConditionPatch::Remove { type_ } => conditions.retain(|c| c.type_ != *type_),
    }
}
