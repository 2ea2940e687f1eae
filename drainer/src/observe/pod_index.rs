//! The pod index, pure data: every pod once, found by (namespace, name) without storing the key
//! twice, by node, the few whose own readiness is stale, the few waiting to start or to go
//! (`model::progress`), and when a container last started on each node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::pod::PodInfo;

pub(crate) type PodKey = (ArcStr, ArcStr);

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
    pub(crate) stale: HashSet<PodKey>,
    /// Pods waiting on their node to start, or deleted and not gone: usually few.
    pub(crate) troubled: HashSet<PodKey>,
    /// When a container last started on each node (as far as the pods seen say).
    pub(crate) last_start: HashMap<ArcStr, Timestamp>,
}

impl Pods {
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<&Arc<PodInfo>> {
        self.all.get(&(namespace, name) as &dyn Key).map(|e| &e.0)
    }

    pub(crate) fn insert(&mut self, info: Arc<PodInfo>) -> Option<Arc<PodInfo>> {
        let key = (info.namespace.clone(), info.name.clone());
        if info.progress.is_some() {
            self.troubled.insert(key.clone());
        } else {
            self.troubled.remove(&key);
        }
        if info.readiness_stale {
            self.stale.insert(key);
        } else {
            self.stale.remove(&key);
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
        let old = self.all.take(&(namespace, name) as &dyn Key)?.0;
        let key = (old.namespace.clone(), old.name.clone());
        self.troubled.remove(&key);
        self.stale.remove(&key);
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
