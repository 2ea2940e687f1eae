//! Observe: the drainer's view of the cluster, kept compact and told what changed.
//!
//! Two watchers (kube's `watcher`, retried with backoff) feed one [`Observed`]: nodes as
//! [`NodeView`]s by name, pods as [`PodInfo`]s by (namespace, name) and by node. Full objects are
//! dropped as soon as they are projected. Each change that a decision could see marks its node dirty
//! and wakes the controller (a change of nothing decisions read only marks it, for the next
//! round); a kubelet heartbeat (a Node whose view is unchanged) or a pod update
//! that leaves its `PodInfo` equal marks nothing, so the controller's work follows what changed, not
//! how often the API server writes. The caches are plain data behind locks; the watches that fill
//! them (`watches`) are the I/O.
//!
//! ```text
//!  interest  what of a node decisions read (a change of anything else wakes nothing)
//!  pod_index  the pod index (by name, by node, the stale ones, the waiting ones)
//!  watches  the Node and Pod watches
//!  sandbox  the kubelets' sandbox failure Events, by node
//!  reboot_lock  kured's DaemonSet, for its reboot lock
//!  watch_errors  a failing watch, said in operator words at most once a minute
//! ```

pub(crate) mod interest;
mod pod_index;
pub(crate) mod reboot_lock;
pub(crate) mod sandbox;
mod watch_errors;
mod watches;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use tokio::sync::{Notify, watch};

use crate::model::intern::ArcStr;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::pod::Uid;
use interest::Interest;
use pod_index::Pods;

/// Nodes by name. Every watch event looks its node up here, so the hasher is a fast one.
pub type NodeMap = HashMap<ArcStr, Arc<NodeView>, foldhash::fast::RandomState>;

/// What changed since the controller last looked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Everything may have changed (a relist): decide every node.
    pub(crate) all: bool,
    /// Nodes whose view changed, appeared or went.
    pub(crate) nodes: HashSet<ArcStr>,
    /// Nodes whose pods changed.
    pub(crate) pods_of: HashSet<ArcStr>,
    /// Among them a change that woke the controller (not only changes of nothing decisions read,
    /// which wait for the next round).
    pub(crate) urgent: bool,
}

/// The drainer's caches, shared by the controller, the drains and the guard.
#[derive(Clone, Default)]
pub struct Observed {
    /// The kubelets' sandbox failures by node (words for PodsNotStarting, never a trigger).
    pub(crate) sandbox: sandbox::SandboxFailures,
    nodes: Arc<RwLock<NodeMap>>,
    pods: Arc<RwLock<Pods>>,
    changes: Arc<Mutex<Changes>>,
    nodes_synced: Arc<AtomicBool>,
    pods_synced: Arc<AtomicBool>,
    /// Bumped whenever a pod goes (drains wait on it instead of polling the API server).
    pods_gone: Arc<watch::Sender<u64>>,
    /// Since when each watch (nodes, pods) has been failing, if it is.
    failing: Arc<Mutex<[Option<std::time::Instant>; 2]>>,
    /// Wakes the controller.
    pub(crate) changed: Arc<Notify>,
    /// Where malformed objects are counted (set by `run`).
    metrics: Arc<std::sync::OnceLock<crate::metrics::Metrics>>,
    /// What decisions read of a node (set by the controller from its configuration; everything
    /// until then): a change of anything else is taken at the next round without waking the
    /// controller.
    interest: Arc<RwLock<Interest>>,
}

const NODES: usize = 0;
const PODS: usize = 1;

impl Observed {
    /// Count what the watches cannot decode in `metrics`.
    pub(crate) fn count_with(&self, metrics: crate::metrics::Metrics) {
        let _ = self.metrics.set(metrics);
    }

    /// How long the longest-failing watch has been failing (None: both are fine).
    pub(crate) fn watch_failing_for(&self) -> Option<std::time::Duration> {
        let failing = self.failing.lock().unwrap();
        failing.iter().flatten().min().map(|since| since.elapsed())
    }

    fn watch_result(&self, which: usize, ok: bool) {
        let mut failing = self.failing.lock().unwrap();
        match (ok, failing[which]) {
            (true, _) => failing[which] = None,
            (false, None) => failing[which] = Some(std::time::Instant::now()),
            (false, Some(_)) => {}
        }
    }

    pub(crate) fn synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire) && self.pods_synced.load(Ordering::Acquire)
    }

    pub(crate) fn nodes_synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire)
    }

    pub fn node(&self, name: &str) -> Option<Arc<NodeView>> {
        self.nodes.read().unwrap().get(name).cloned()
    }

    /// The names of the nodes in the cache.
    pub(crate) fn names(&self) -> Vec<ArcStr> {
        self.nodes.read().unwrap().keys().cloned().collect()
    }

    pub fn nodes(&self) -> Vec<Arc<NodeView>> {
        self.nodes.read().unwrap().values().cloned().collect()
    }

    /// How a Node watch finds a node's view as last cached, to reuse what did not change
    /// ([`crate::model::lite::reusing`]).
    pub fn earlier(&self) -> crate::model::lite::Earlier {
        let nodes = self.nodes.clone();
        Arc::new(move |name: &str| nodes.read().unwrap().get(name).cloned())
    }

    pub fn pods_on(&self, node: &str) -> Arc<Vec<Arc<PodInfo>>> {
        self.pods
            .read()
            .unwrap()
            .by_node
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        self.pods.read().unwrap().get(namespace, name).cloned()
    }

    /// The pods waiting on their node to start or deleted and not gone, and when a container last
    /// started on each of their nodes.
    pub(crate) fn troubled_pods(&self) -> (Vec<Arc<PodInfo>>, HashMap<ArcStr, Timestamp>) {
        let pods = self.pods.read().unwrap();
        let troubled: Vec<Arc<PodInfo>> = pods.troubled().cloned().collect();
        let mut starts = HashMap::new();
        for n in troubled.iter().filter_map(|p| p.node.as_ref()) {
            if !starts.contains_key(n)
                && let Some(t) = pods.last_start.get(n)
            {
                starts.insert(n.clone(), *t);
            }
        }
        (troubled, starts)
    }

    /// A container started on `node` at `at` (from the pod watch: the time is not kept in
    /// [`PodInfo`]).
    pub(crate) fn pod_started(&self, node: &str, at: Timestamp) {
        self.pods.write().unwrap().started(node, at);
    }

    /// Pods whose own readiness is stale, wherever they run.
    pub(crate) fn stale_pods(&self) -> Vec<Arc<PodInfo>> {
        self.pods.read().unwrap().stale().cloned().collect()
    }

    /// How many Nodes are cached, without copying them.
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.read().unwrap().len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.read().unwrap().all.len()
    }

    /// Whether a change that woke the controller came in since it last took the changes.
    pub(crate) fn has_urgent_changes(&self) -> bool {
        self.changes.lock().unwrap().urgent
    }

    /// Take what changed since the last call.
    pub fn take_changes(&self) -> Changes {
        std::mem::take(&mut *self.changes.lock().unwrap())
    }

    /// Wait until the pod `namespace/name` with `uid` is gone from the cache (deleted, or replaced by
    /// a pod with another uid), or with `or_finished` has finished, or `deadline`. True when it did.
    pub(crate) async fn wait_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        deadline: tokio::time::Instant,
        or_finished: bool,
    ) -> bool {
        let mut gone = self.pods_gone.subscribe();
        loop {
            let present = self.pod(namespace, name).filter(|p| p.uid.as_ref() == uid);
            let finished = |p: &PodInfo| p.phase.is_some_and(crate::model::pod::PodPhase::finished);
            if present.is_none_or(|p| or_finished && finished(&p)) {
                return true;
            }
            match tokio::time::timeout_at(deadline, gone.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the cache was dropped.
                _ => return false,
            }
        }
    }

    fn mark(&self, f: impl FnOnce(&mut Changes)) {
        let mut changes = self.changes.lock().unwrap();
        f(&mut changes);
        changes.urgent = true;
        drop(changes);
        self.changed.notify_one();
    }

    /// A node was added or updated.
    pub(crate) fn apply_node(&self, node: &Node) {
        self.apply_view(NodeView::of(node))
    }

    /// What decisions read of a node, from now on.
    pub(crate) fn set_interest(&self, interest: Interest) {
        *self.interest.write().unwrap() = interest;
    }

    /// A heartbeat (the steady traffic) replaces the view in place: no key is copied and the
    /// controller is not woken. A change of nothing decisions read ([`Interest`]) is noted for the
    /// next round (at most a tick away) without waking the controller for it.
    pub fn apply_view(&self, view: NodeView) {
        let mut nodes = self.nodes.write().unwrap();
        let (new, old) = match nodes.get_mut(view.name.as_str()) {
            Some(old) if old.same_state(&view) => {
                self.interest.read().unwrap().carry(old, &view);
                *old = Arc::new(view);
                return;
            }
            Some(old) => {
                let new = Arc::new(view);
                let old = std::mem::replace(old, new.clone());
                (new, Some(old))
            }
            None => {
                let new = Arc::new(view);
                nodes.insert(new.name.clone(), new.clone());
                (new, None)
            }
        };
        drop(nodes);
        // Outside the cache's lock: a selector may be evaluated.
        let wake = old.is_none_or(|old| {
            let interest = self.interest.read().unwrap();
            interest.carry(&old, &new);
            interest.news(&old, &new)
        });
        let note = |c: &mut Changes| {
            c.nodes.insert(new.name.clone());
        };
        if wake {
            self.mark(note);
        } else {
            note(&mut self.changes.lock().unwrap());
        }
    }

    pub(crate) fn delete_node(&self, name: &str) {
        let gone = self.nodes.write().unwrap().remove_entry(name);
        let name = gone.map_or_else(|| ArcStr::from(name), |(k, _)| k);
        self.mark(|c| {
            c.nodes.insert(name);
        });
    }

    /// Replace every node (after a relist).
    pub fn replace_nodes(&self, views: NodeMap) {
        *self.nodes.write().unwrap() = views;
        self.nodes_synced.store(true, Ordering::Release);
        self.mark(|c| c.all = true);
    }

    /// A pod was added or updated.
    pub(crate) fn apply_pod(&self, info: PodInfo) {
        let mut pods = self.pods.write().unwrap();
        if pods
            .get(&info.namespace, &info.name)
            .is_some_and(|old| **old == info)
        {
            return;
        }
        let (new_node, new_uid) = (info.node.clone(), info.uid.clone());
        let now_finished = info
            .phase
            .is_some_and(crate::model::pod::PodPhase::finished);
        let old = pods.insert(Arc::new(info));
        drop(pods);
        let finished = |p: &PodInfo| p.phase.is_some_and(crate::model::pod::PodPhase::finished);
        if old.as_ref().is_some_and(|o| {
            o.node != new_node || o.uid != new_uid || (!finished(o) && now_finished)
        }) {
            self.pods_gone.send_modify(|n| *n += 1);
        }
        let old_node = old.and_then(|o| o.node.clone());
        self.mark(|c| c.pods_of.extend(old_node.into_iter().chain(new_node)));
    }

    pub(crate) fn delete_pod(&self, namespace: &str, name: &str) {
        let old = self.pods.write().unwrap().remove(namespace, name);
        self.pods_gone.send_modify(|n| *n += 1);
        if let Some(node) = old.and_then(|o| o.node.clone()) {
            self.mark(|c| {
                c.pods_of.insert(node);
            });
        }
    }

    /// Replace every pod (after a relist).
    pub fn replace_pods(&self, infos: impl IntoIterator<Item = PodInfo>) {
        let mut pods = Pods::default();
        for p in infos {
            pods.insert(Arc::new(p));
        }
        self.swap_pods(pods);
    }

    fn swap_pods(&self, pods: Pods) {
        *self.pods.write().unwrap() = pods;
        self.pods_synced.store(true, Ordering::Release);
        self.pods_gone.send_modify(|n| *n += 1);
        self.mark(|c| c.all = true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn pod(name: &str, node: &str, phase: &str) -> PodInfo {
        let p: Pod = serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "app", "uid": name},
            "spec": {"nodeName": node, "containers": []}, "status": {"phase": phase}}),
        )
        .unwrap();
        PodInfo::from_pod(&p, Some(&[]))
    }

    fn node(name: &str, rv: &str, ready: &str, heartbeat: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": rv},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": "2026-11-23T00:00:00Z"}]}}))
        .unwrap()
    }

    #[test]
    fn only_changes_a_decision_could_see_are_news() {
        let o = Observed::default();
        o.replace_nodes(NodeMap::default());
        assert!(o.take_changes().all);
        o.apply_node(&node("a", "1", "True", "2026-11-23T10:00:00Z"));
        assert_eq!(o.take_changes().nodes, HashSet::from([ArcStr::from("a")]));
        o.apply_node(&node("a", "2", "True", "2026-11-23T10:05:00Z"));
        assert_eq!(o.take_changes(), Changes::default(), "a heartbeat");
        assert_eq!(o.node("a").unwrap().resource_version, "2");
        o.apply_node(&node("a", "3", "False", "2026-11-23T10:05:00Z"));
        assert_eq!(o.take_changes().nodes.len(), 1);

        let p = pod("p1", "a", "Running");
        o.apply_pod(p.clone());
        assert_eq!(o.take_changes().pods_of, HashSet::from([ArcStr::from("a")]));
        o.apply_pod(p);
        assert_eq!(o.take_changes(), Changes::default(), "an equal pod");
        let moved = pod("p1", "b", "Running");
        o.apply_pod(moved);
        assert_eq!(
            o.take_changes().pods_of,
            HashSet::from([ArcStr::from("a"), ArcStr::from("b")])
        );
        assert!(o.pods_on("a").is_empty());
        assert_eq!(o.pods_on("b").len(), 1);
        // A round's list stays as it was taken while the pods change under it.
        let held = o.pods_on("b");
        o.apply_pod(pod("p2", "b", "Running"));
        assert_eq!(held.len(), 1, "the round's list");
        assert_eq!(o.pods_on("b").len(), 2, "the index's");
        o.delete_pod("app", "p1");
        o.delete_pod("app", "p2");
        assert!(o.pods_on("b").is_empty());
        assert_eq!(held[0].name.as_str(), "p1");
        assert_eq!(o.pod_count(), 0);
    }

    #[test]
    fn a_change_of_conditions_no_decision_reads_waits_for_the_next_round_without_a_wake() {
        use futures::FutureExt;
        let o = Observed::default();
        let woken = |o: &Observed| o.changed.notified().now_or_never().is_some();
        let with_memory = |rv: &str, reason: &str| -> Node {
            let mut n =
                serde_json::to_value(node("a", rv, "True", "2026-11-23T10:00:00Z")).unwrap();
            n["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({
                "type": "MemoryPressure", "status": "False", "reason": reason,
                "lastTransitionTime": "2026-11-23T00:00:00Z"}));
            serde_json::from_value(n).unwrap()
        };
        o.apply_node(&with_memory("1", "KubeletHasSufficientMemory"));
        o.take_changes();
        assert!(woken(&o), "a new node wakes the controller");
        // Until the controller says what it reads, every condition is news.
        o.apply_node(&with_memory("2", "A"));
        assert!(woken(&o));
        assert_eq!(o.take_changes().nodes.len(), 1);
        o.set_interest(Interest::of(&Arc::new(crate::config::Config::default())));
        o.apply_node(&with_memory("3", "B"));
        assert!(!woken(&o), "MemoryPressure's reason changes no decision");
        assert_eq!(
            o.take_changes().nodes,
            HashSet::from([ArcStr::from("a")]),
            "but the next round takes the new view"
        );
        assert_eq!(o.node("a").unwrap().resource_version, "3");
        let mut not_ready = serde_json::to_value(with_memory("4", "B")).unwrap();
        not_ready["status"]["conditions"][0]["status"] = json!("False");
        o.apply_node(&serde_json::from_value(not_ready).unwrap());
        assert!(woken(&o), "Ready is read");
        assert_eq!(o.take_changes().nodes.len(), 1);
    }

    /// A quiet label change (one the CEL selector reads, its answer the same) costs one evaluation
    /// between the watch and the fleet's next round: the old view's answer came with the
    /// heartbeats' views, and the fleet takes the new view's answer from the watch.
    #[test]
    fn a_label_change_the_selector_reads_is_evaluated_once_between_the_watch_and_the_fleet() {
        use crate::config::select::CEL_EVALUATIONS;
        use futures::FutureExt;
        let cfg = Arc::new(crate::config::Config {
            selector: crate::config::select::Selector::cel(
                "metadata.labels['draino'] == 'node' && metadata.labels['flip'] != 'off'",
            )
            .unwrap(),
            ..Default::default()
        });
        let o = Observed::default();
        o.set_interest(Interest::of(&cfg));
        let mut fleet = crate::decide::fleet::Fleet::new(cfg);
        let now = "2026-11-28T10:00:00Z".parse().unwrap();
        let woken = |o: &Observed| o.changed.notified().now_or_never().is_some();
        let evaluations = || CEL_EVALUATIONS.with(|n| n.replace(0));
        evaluations(); // building the selector tried it on two sample nodes
        let flip = |rv: &str, flip: &str, beat: &str| -> Node {
            let mut n = serde_json::to_value(node("a", rv, "True", beat)).unwrap();
            n["metadata"]["labels"] = json!({"draino": "node", "flip": flip});
            serde_json::from_value(n).unwrap()
        };
        o.apply_node(&flip("1", "a", "2026-11-28T09:00:00Z"));
        fleet.observe(o.node("a").unwrap(), now);
        assert_eq!(evaluations(), 1, "the fleet evaluates a node it sees first");
        // Heartbeats: nothing evaluated, the answer carried to each new view.
        for (rv, beat) in [("2", "2026-11-28T09:00:10Z"), ("3", "2026-11-28T09:00:20Z")] {
            o.apply_node(&flip(rv, "a", beat));
        }
        assert_eq!(evaluations(), 0);
        o.take_changes();
        woken(&o);

        o.apply_node(&flip("4", "b", "2026-11-28T09:00:30Z"));
        assert!(!woken(&o), "the answer is the same: no wake-up");
        fleet.observe(o.node("a").unwrap(), now);
        assert_eq!(evaluations(), 1, "the new view, once: at the watch");
        assert!(fleet.selected("a"));

        o.apply_node(&flip("5", "off", "2026-11-28T09:00:40Z"));
        assert!(woken(&o), "the node leaves the selection");
        fleet.observe(o.node("a").unwrap(), now);
        assert_eq!(evaluations(), 1);
        assert!(!fleet.selected("a"), "the fleet took the watch's answer");
    }

    #[tokio::test]
    async fn a_drain_waits_for_the_pod_to_leave_the_cache() {
        let o = Observed::default();
        o.apply_pod(pod("p1", "a", "Running"));
        let uid = Uid::parse("p1");
        let deadline = tokio::time::Instant::now() + Duration::from_millis(50);
        assert!(!o.wait_gone("app", "p1", Some(&uid), deadline, false).await);
        let o2 = o.clone();
        let waiter = tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            o2.wait_gone("app", "p1", Some(&Uid::parse("p1")), deadline, false)
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        o.delete_pod("app", "p1");
        assert!(waiter.await.unwrap());
        // Replaced by a pod with the same name and another uid: gone too.
        let mut p = pod("p2", "a", "Running");
        o.apply_pod(p.clone());
        p.uid = Some(Uid::parse("other"));
        o.apply_pod(p);
        let uid = Uid::parse("p2");
        assert!(o.wait_gone("app", "p2", Some(&uid), deadline, false).await);
    }

    #[tokio::test]
    async fn the_watches_back_off_when_the_api_server_is_unreachable() {
        // Accept and drop every connection: each watch attempt fails at once.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let attempts = Arc::new(AtomicUsize::new(0));
        let a = attempts.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::Relaxed);
                drop(conn);
            }
        });
        let client = nodemedic_common::client::from_config(
            kube::Config::new(url.parse().unwrap()),
            "nodemedic-test",
        )
        .unwrap();
        let o = Observed::default();
        // No reloads: the set's sender is gone at once (the watch then never waits on it).
        let t1 = o.spawn_pods(
            Api::all(client.clone()),
            watch::channel(Default::default()).1,
            watch::channel(Default::default()).0,
        );
        let t2 = o.spawn_nodes(Api::all(client));
        tokio::time::sleep(Duration::from_secs(3)).await;
        t1.abort();
        t2.abort();
        let n = attempts.load(Ordering::Relaxed);
        assert!((2..=20).contains(&n), "{n} connection attempts in 3 s");
        // And they say so: health turns on how long they have been failing.
        let failing = o.watch_failing_for().expect("the watches are failing");
        assert!(failing >= Duration::from_secs(1), "{failing:?}");
        o.watch_result(NODES, true);
        o.watch_result(PODS, true);
        assert_eq!(o.watch_failing_for(), None);
    }
}
