//! Each node's failure domain is the one it had when the drainer first saw its Node object: a
//! kubelet may set its own zone label, and a node moving between domains could hide an outage
//! (more healthy nodes in it) or take another domain's pace. A relabelled node is said once per
//! change (FailureDomainKept) and kept where it was, and the record memory keeps where (issue 76,
//! principle 6), so a restart or a new leader keeps it there too. Pure.

use super::{Fleet, FleetEvent};
use crate::decide::gates::outage;
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

impl Fleet {
    /// The labels of a node already known changed: if they now name another failure domain than
    /// the one it is kept in, that is said, and the memory keeps it there; back in it, forgotten.
    pub(super) fn domain_moved(&mut self, view: &NodeView, kept: Option<&ArcStr>) {
        let now = outage::domain_of(view, &self.cfg);
        let kept = kept.map(|k| k.as_str());
        let moved = now.as_deref() != kept;
        let changed = if moved {
            self.records
                .seen
                .pin(&view.name, &view.uid.to_string(), kept)
        } else {
            self.records.seen.unpin(&view.name)
        };
        self.records.node_changed(&view.name, changed);
        if moved {
            self.events.push(FleetEvent::DomainKept {
                node: view.name.to_string(),
                kept: kept.map(String::from),
                labels_say: now,
            });
        }
    }

    /// The domain the memory keeps a node this process sees for the first time in, if it does.
    pub(super) fn pinned_domain(&self, view: &NodeView) -> Option<Option<ArcStr>> {
        // Most nodes have none: looked up by name before the UID is written out.
        self.records.seen.pinned.get(view.name.as_str())?;
        (self.records.seen.pinned(&view.name, &view.uid.to_string()))
            .map(|d| d.map(crate::model::intern::intern))
    }

    /// The memory read back: the nodes already held take the domains it keeps them in.
    pub(super) fn apply_pins(&mut self) {
        let pins: Vec<(String, Option<ArcStr>)> = (self.records.seen.pinned.iter())
            .filter(|(n, p)| {
                self.nodes
                    .get(n.as_str())
                    .is_some_and(|e| e.view.uid.to_string() == p.uid)
            })
            .map(|(n, p)| {
                (
                    n.clone(),
                    p.domain.as_deref().map(crate::model::intern::intern),
                )
            })
            .collect();
        for (name, domain) in pins {
            let Some((key, mut e)) = self.nodes.remove_entry(name.as_str()) else {
                continue;
            };
            if e.domain != domain {
                self.running.count(&e, &self.cfg.owner, false);
                e.domain = domain;
                self.running.count(&e, &self.cfg.owner, true);
                self.queue.dirty.insert(key.clone());
            }
            self.nodes.insert(key, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::config::Config;
    use crate::decide::fleet::seen::{SHARDS, Seen};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn node(zone: &str) -> Arc<NodeView> {
        Arc::new(NodeView {
            name: "n1".into(),
            uid: crate::model::node::Uid::parse("0b6e0c36-8a6c-4b1e-9d3e-1f2a3b4c5d6e"),
            resource_version: "1".into(),
            labels: [("topology.kubernetes.io/zone", zone)]
                .into_iter()
                .collect(),
            ..Default::default()
        })
    }

    fn domain(f: &Fleet) -> Option<String> {
        f.nodes["n1"].domain.as_ref().map(|d| d.to_string())
    }

    /// The memory as a new leader reads it back: through its shards' texts.
    fn restarted(f: &Fleet) -> Seen {
        let texts: Vec<String> = (0..SHARDS).map(|i| f.records.seen.shard_text(i)).collect();
        Seen::from_shards(texts.iter().enumerate().map(|(i, t)| (i, Some(t.as_str())))).0
    }

    #[test]
    fn a_node_that_moved_itself_stays_in_its_first_domain_across_a_restart() {
        let cfg = Arc::new(Config::default());
        let mut f = Fleet::new(cfg.clone());
        f.observe(node("a"), t(0));
        f.observe(node("b"), t(1));
        assert_eq!(domain(&f), Some("a".into()), "kept where it was first seen");
        let kept = restarted(&f);
        // A new leader that reads its memory before it sees the node, and one that reads it after.
        let mut before = Fleet::new(cfg.clone());
        before.restore_seen(kept.clone());
        before.observe(node("b"), t(2));
        assert_eq!(domain(&before), Some("a".into()));
        let mut after = Fleet::new(cfg.clone());
        after.observe(node("b"), t(2));
        assert_eq!(
            domain(&after),
            Some("b".into()),
            "read afresh until the memory comes"
        );
        after.restore_seen(kept);
        assert_eq!(domain(&after), Some("a".into()));
        // Back in its domain: forgotten, and a restart reads the label again.
        f.observe(node("a"), t(3));
        assert!(f.records.seen.pinned.is_empty());
        let mut again = Fleet::new(cfg);
        again.restore_seen(restarted(&f));
        again.observe(node("c"), t(4));
        assert_eq!(domain(&again), Some("c".into()));
    }
}
