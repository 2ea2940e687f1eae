//! The pod index, pure data: every pod once, found by (namespace, name) without storing the key
//! twice, by node, the few whose own readiness is stale, the few waiting to start or to go
//! (`model::progress`), and when a container last started on each node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::pod::PodInfo;

/// A pod in the set, found by (namespace, name) without storing the key twice.
pub(crate) struct ByKey(Arc<PodInfo>);

/// What the set is looked up by: an entry or a borrowed (namespace, name).
trait Key {
    fn key(&self) -> (&str, &str);
}

impl Key for ByKey {
    fn key(&self) -> (&str, &str) {
        (&self.0.namespace, &self.0.name)
    }
}

impl Key for (&str, &str) {
    fn key(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl std::hash::Hash for dyn Key + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.key().hash(h)
    }
}

impl PartialEq for dyn Key + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for dyn Key + '_ {}

impl std::hash::Hash for ByKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self as &dyn Key).hash(h)
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ByKey {}

impl<'a> std::borrow::Borrow<dyn Key + 'a> for ByKey {
    fn borrow(&self) -> &(dyn Key + 'a) {
        self
    }
}

#[derive(Default)]
pub(crate) struct Pods {
    pub(crate) all: HashSet<ByKey>,
    /// Shared with the rounds that decide the node: a round takes a node's pods with one count
    /// on the list, not one on each pod (ten counts on cold pods were 13 us of a state change's
    /// round, issue 39); changed in place unless a round holds the list meanwhile.
    pub(crate) by_node: HashMap<ArcStr, Arc<Vec<Arc<PodInfo>>>>,
    /// Pods whose own readiness is stale (see `decide::stale`): usually none.
    stale: HashSet<ByKey>,
    /// Pods waiting on their node to start, or deleted and not gone: usually few, but a bad
    /// image on a big Deployment makes it hundreds of thousands, so they are kept here, not
    /// looked up again by key (500,000 lookups were a quarter of the leader's CPU, issue 39).
    troubled: HashSet<ByKey>,
    /// When a container last started on each node (as far as the pods seen say).
    pub(crate) last_start: HashMap<ArcStr, Timestamp>,
}

impl Pods {
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<&Arc<PodInfo>> {
        self.all.get(&(namespace, name) as &dyn Key).map(|e| &e.0)
    }

    /// The pods waiting on their node to start, or deleted and not gone.
    pub(crate) fn troubled(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.troubled.iter().map(|e| &e.0)
    }

    /// The pods whose own readiness is stale.
    pub(crate) fn stale(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.stale.iter().map(|e| &e.0)
    }

    pub(crate) fn insert(&mut self, info: Arc<PodInfo>) -> Option<Arc<PodInfo>> {
        let key = (&*info.namespace, &*info.name);
        self.troubled.take(&key as &dyn Key);
        self.stale.take(&key as &dyn Key);
        if info.progress.is_some() {
            self.troubled.insert(ByKey(info.clone()));
        }
        if info.readiness_stale {
            self.stale.insert(ByKey(info.clone()));
        }
        if let Some(n) = &info.node {
            Arc::make_mut(self.by_node.entry(n.clone()).or_default()).push(info.clone());
        }
        let old = self.all.replace(ByKey(info)).map(|e| e.0);
        if let Some(o) = &old {
            self.unindex(o);
        }
        old
    }

    pub(crate) fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let key = (namespace, name);
        let old = self.all.take(&key as &dyn Key)?.0;
        self.troubled.take(&key as &dyn Key);
        self.stale.take(&key as &dyn Key);
        self.unindex(&old);
        Some(old)
    }

    /// A container started on `node` at `at`: kept if it is the latest.
    pub(crate) fn started(&mut self, node: &str, at: Timestamp) {
        match self.last_start.get_mut(node) {
            Some(t) => *t = (*t).max(at),
            None => {
                self.last_start
                    .insert(crate::model::intern::intern(node), at);
            }
        }
    }

    fn unindex(&mut self, old: &Arc<PodInfo>) {
        let Some(n) = &old.node else { return };
        if let Some(v) = self.by_node.get_mut(n) {
            Arc::make_mut(v).retain(|p| !Arc::ptr_eq(p, old));
            if v.is_empty() {
                self.by_node.remove(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The index keeps the few waiting or stale pods as the latest of each pod, and forgets them
    //! when they recover or go.
    use super::*;
    use serde_json::json;

    /// `name` on node-1: waiting to start when `waiting`, running otherwise; its readiness stale
    /// when `stale` (set by hand: `decide::stale` has its own tests).
    fn pod(name: &str, waiting: bool, stale: bool) -> Arc<PodInfo> {
        let state = match waiting {
            true => json!({"waiting": {"reason": "ContainerCreating"}}),
            false => json!({"running": {"startedAt": "2026-11-27T09:00:00Z"}}),
        };
        let p = json!({
            "metadata": {"name": name, "namespace": "app", "creationTimestamp": "2026-11-27T08:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"phase": if waiting { "Pending" } else { "Running" },
                "conditions": [{"type": "PodScheduled", "status": "True",
                    "lastTransitionTime": "2026-11-27T08:00:00Z"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": !waiting,
                    "restartCount": 0, "state": state}]}
        });
        let mut info = PodInfo::from_pod(&serde_json::from_value(p).unwrap(), Some(&[]));
        info.readiness_stale = stale;
        Arc::new(info)
    }

    fn names<'a>(pods: impl Iterator<Item = &'a Arc<PodInfo>>) -> Vec<String> {
        let mut n: Vec<String> = pods.map(|p| p.name.to_string()).collect();
        n.sort();
        n
    }

    #[test]
    fn the_waiting_and_stale_pods_are_the_latest_of_each_and_go_when_they_recover_or_go() {
        let mut pods = Pods::default();
        assert!(
            pod("a", true, false).progress.is_some(),
            "the fixture waits"
        );
        assert!(
            pod("a", false, false).progress.is_none(),
            "the fixture runs"
        );
        pods.insert(pod("a", true, false));
        pods.insert(pod("b", false, true));
        pods.insert(pod("c", true, true));
        assert_eq!(names(pods.troubled()), ["a", "c"]);
        assert_eq!(names(pods.stale()), ["b", "c"]);

        // A newer version of a waiting pod replaces the one kept.
        let newer = pod("a", true, false);
        pods.insert(newer.clone());
        let kept: Vec<_> = pods.troubled().filter(|p| &*p.name == "a").collect();
        assert_eq!(kept.len(), 1);
        assert!(Arc::ptr_eq(kept[0], &newer), "the latest version is kept");

        // Recovered: no longer waiting, no longer stale.
        pods.insert(pod("a", false, false));
        pods.insert(pod("b", false, false));
        assert_eq!(names(pods.troubled()), ["c"]);
        assert_eq!(names(pods.stale()), ["c"]);

        // Gone: forgotten everywhere.
        assert!(pods.remove("app", "c").is_some());
        assert_eq!(names(pods.troubled()), Vec::<String>::new());
        assert_eq!(names(pods.stale()), Vec::<String>::new());
        assert_eq!(pods.all.len(), 2);
        assert_eq!(pods.by_node["node-1"].len(), 2);
    }
}
