//! A round's first part, I/O: bring the fleet up to date with the caches (the changed nodes, or
//! every node after a relist), and the periodic resync that takes every view again, giving way to
//! changes that come in meanwhile.

use k8s_openapi::jiff::Timestamp;
use std::sync::Arc;

use super::chores::Chores;
use super::{Controller, YIELD_EVERY};
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

impl<C: Cluster> Controller<C> {
    /// Hand the fleet a node's view; and its pods, when the node is new to it or `with_pods`.
    fn observe(&mut self, view: Arc<NodeView>, with_pods: bool, now: Timestamp) {
        let name = view.name.clone();
        let with_pods = with_pods || !self.fleet.contains(&name);
        if let Some((node, error)) = self.fleet.observe(view, now) {
            self.record.metrics().selector_errors.inc();
            tracing::warn!(%node, %error, "the node selector failed on this node; not selected");
        }
        if with_pods {
            self.fleet.pods(&name, self.observed.pods_on(&name));
        }
    }

    /// Hand the fleet the node `name` as the cache holds it now (and its pods with `with_pods`), or
    /// drop it when the cache no longer has it.
    fn take_node(&mut self, name: &str, with_pods: bool, now: Timestamp) {
        match self.observed.node(name) {
            Some(v) => self.observe(v, with_pods, now),
            None => self.forget(name),
        }
    }

    /// Bring the fleet up to date with the caches: the changed nodes, or all of them after a relist
    /// and at every resync. True after a relist (or the first list): every node is decided.
    pub(super) async fn catch_up(&mut self, now: Timestamp) -> bool {
        let changes = self.observed.take_changes();
        let first = self.chores.last_resync.is_none();
        let chores = if changes.all || self.fleet.is_empty() {
            self.chores.last_resync = Some(now);
            self.chores.resync_left = Vec::new();
            self.resync(now).await;
            Chores::Whole
        } else {
            for n in changes.nodes {
                self.take_node(&n, false, now);
            }
            let chores = self.chores_now(changes.urgent, now);
            if chores != Chores::Later && self.resync_due(now) && self.chores.resync_left.is_empty()
            {
                self.chores.last_resync = Some(now);
                self.chores.resync_left = self.resync_begin();
            }
            if chores != Chores::Later && !self.chores.resync_left.is_empty() {
                self.resync_some(now, chores).await;
            }
            chores
        };
        for n in changes.pods_of {
            self.fleet.pods(&n, self.observed.pods_on(&n));
        }
        if chores != Chores::Later {
            self.watch_detectors(now, chores).await;
            if self.chores.resync_left.is_empty() && self.chores.watchdog_walk.is_none() {
                self.chores.chores_waiting = None; // none pending any more
            }
        }
        changes.all || first
    }

    /// The periodic resync begins: the nodes the cache lost go from the fleet, decided or not (the
    /// fleet is what budgets count); the names of the others, to be taken again.
    fn resync_begin(&mut self) -> Vec<ArcStr> {
        let names = self.observed.names();
        let present: std::collections::HashSet<&str> = names.iter().map(ArcStr::as_str).collect();
        let gone: Vec<String> = (self.fleet.names())
            .filter(|n| !present.contains(n))
            .map(String::from)
            .collect();
        for n in gone {
            self.forget(&n);
        }
        names
    }

    /// Take again, from the cache as it is now, the views the periodic resync has left; then decide
    /// the nodes not at rest again (a node at rest changes only with its view, and a changed view
    /// is decided anyway). In `drainer run` the resync gives way: when a change comes in meanwhile
    /// it stops (after [`YIELD_EVERY`] nodes at least) so the change is decided at the next round,
    /// not after every node of the cluster (at 50,000 nodes a whole resync held a new condition's
    /// cordon up to 100 ms), and goes on at the rounds after.
    async fn resync_some(&mut self, now: Timestamp, chores: Chores) {
        while let Some(n) = self.chores.resync_left.pop() {
            self.take_node(&n, false, now);
            if self.give_way(self.chores.resync_left.len(), chores).await {
                return;
            }
        }
        self.chores.resync_left = Vec::new();
        self.fleet.touch_restless();
        // Strings of nodes and pods gone since the last resync.
        crate::model::intern::purge();
    }

    /// In a walk over the nodes (the periodic resync, the watchdog's), `left` to go: every
    /// [`YIELD_EVERY`] nodes the runtime serves the watches and the guard; true when the walk
    /// gives way (`chores`) and a change that woke the controller came in meanwhile: the walk is to
    /// stop, the next round, woken now, takes the change, and the walk goes on after it.
    pub(super) async fn give_way(&self, left: usize, chores: Chores) -> bool {
        if left == 0 || !left.is_multiple_of(YIELD_EVERY) {
            return false;
        }
        tokio::task::yield_now().await;
        if chores == Chores::GivingWay && self.observed.has_urgent_changes() {
            self.observed.changed.notify_one();
            return true;
        }
        false
    }

    /// Every node again from the caches, each decided again, with its pods (after a relist, or
    /// the first list).
    async fn resync(&mut self, now: Timestamp) {
        // The selector runs on each view: let the guard and the watches in between. The pods of
        // every node are handed over again (the pod index was replaced).
        for (i, n) in self.resync_begin().iter().enumerate() {
            self.take_node(n, true, now);
            if i % YIELD_EVERY == YIELD_EVERY - 1 {
                tokio::task::yield_now().await;
            }
        }
        self.fleet.touch_all();
        // Strings of nodes and pods gone since the last resync.
        crate::model::intern::purge();
    }

    fn forget(&mut self, node: &str) {
        self.fleet.remove(node);
    }
}
