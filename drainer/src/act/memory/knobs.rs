//! What tests set and read of the in-memory cluster besides its API: its DaemonSets, how slow it
//! answers, what it holds now, a watch running late. Test-only, no I/O.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::{MemoryCluster, Slow};

impl MemoryCluster {
    /// A DaemonSet the cluster holds.
    pub(crate) fn put_daemon_set(&self, ds: k8s_openapi::api::apps::v1::DaemonSet) {
        let key = (
            ds.metadata.namespace.clone().unwrap_or_default(),
            ds.metadata.name.clone().unwrap_or_default(),
        );
        self.state().daemon_sets.insert(key, ds);
    }

    /// Each request of this kind takes `d` before it is answered (an API server slow to answer).
    pub(crate) fn set_delay(&self, what: Slow, d: Duration) {
        self.state().delays[what as usize] = d;
    }

    /// The most evictions that were under way at once (with [`Slow::Evictions`]).
    pub(crate) fn most_evictions_at_once(&self) -> usize {
        self.state().evicting.1
    }

    /// Every node and every pod, as they are now.
    pub fn objects(&self) -> (Vec<Node>, Vec<Pod>) {
        let s = self.state();
        (
            s.nodes.values().cloned().collect(),
            s.pods.values().cloned().collect(),
        )
    }

    pub fn node(&self, name: &str) -> Option<Node> {
        self.state().nodes.get(name).cloned()
    }

    pub fn has_pod(&self, namespace: &str, name: &str) -> bool {
        self.state()
            .pods
            .contains_key(&(namespace.into(), name.into()))
    }

    /// Hold changes back from the caches (`on`), as a watch running late, until [`Self::deliver`].
    pub fn lag(&self, on: bool) {
        self.state().lagging = on;
    }

    /// Show the caches every node as it is now (the late watch catches up).
    pub fn deliver(&self) {
        let s = self.state();
        for node in s.nodes.values() {
            self.observed.apply_node(node);
        }
    }
}
