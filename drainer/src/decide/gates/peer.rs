//! Peace with the other remediators, pure: a node another remediator has taken is left to it, and
//! said (issue 79, point 3). Two remediators on one node fight: cluster-autoscaler deleting a node
//! nodemedic reboots, Karpenter replacing one nodemedic drains.
//!
//! Taken, by what the peer itself writes on the Node (as its project ships it):
//! - cluster-autoscaler: its `ToBeDeletedByClusterAutoscaler` taint (it is deleting the node; its
//!   `DeletionCandidateOfClusterAutoscaler` only marks a candidate, and takes nothing);
//! - Karpenter: its `karpenter.sh/disrupted` taint (v1; `karpenter.sh/disruption=disrupting` in
//!   v1beta1): it is draining the node to delete it.
//!
//! A taken node gets nothing new from the drainer (no cordon, no drain start, no ladder step, a
//! standing reboot request withdrawn) until the peer lets go; what is under way finishes as the other
//! gates let it (a drain already evicting). Settings: none. State: none (the taints are on the
//! view). Only these taints hold a node back and none starts anything, so whoever may taint a Node
//! can hold it, never act on it; the own-node policy keeps a node from tainting itself.

use super::gate::Gate;
use super::reboot_lock::KuredLock;
use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
pub(crate) use crate::decide::facts::Peer;
use crate::model::node::NodeView;

/// The taints that say a peer has taken a node: key, the value it must have (`None`: any), the
/// peer, and what the peer is doing.
pub(crate) const TAKEN_TAINTS: [(&str, Option<&str>, Peer, &str); 3] = [
    (
        "ToBeDeletedByClusterAutoscaler",
        None,
        Peer::ClusterAutoscaler,
        "deleting it",
    ),
    (
        "karpenter.sh/disrupted",
        None,
        Peer::Karpenter,
        "disrupting it",
    ),
    (
        "karpenter.sh/disruption",
        Some("disrupting"),
        Peer::Karpenter,
        "disrupting it",
    ),
];

/// Who has taken `node` by a taint, if a peer has: the peer, and how it says so.
pub(crate) fn tainted(node: &NodeView) -> Option<(Peer, String)> {
    node.taints.iter().find_map(|t| {
        let (key, _, peer, doing) = TAKEN_TAINTS.iter().find(|(key, value, ..)| {
            *key == &*t.key && value.is_none_or(|v| t.value.as_deref() == Some(v))
        })?;
        Some((*peer, format!("{doing} (its {key} taint)")))
    })
}

/// The gate: a node a peer has taken is held, whatever else would start on it; with kured's lock
/// read (`--kured-daemonset`), a node kured is rebooting is kured's, and our reboots wait for a
/// full lock ([`super::reboot_lock`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PeerGate {
    /// kured's DaemonSet (`NAMESPACE/NAME`) and its lock as last read.
    pub(crate) kured: Option<(String, KuredLock)>,
}

impl PeerGate {
    /// Who has taken `node`, if a peer has: the peer, and how it says so.
    pub(crate) fn taken(&self, node: &NodeView) -> Option<(Peer, String)> {
        tainted(node).or_else(|| {
            let (at, lock) = self.kured.as_ref()?;
            lock.holds(&node.name)
                .then(|| (Peer::Kured, format!("rebooting it (its lock on {at})")))
        })
    }

    /// Why a reboot or power-cycle of `node` waits for another remediator's reboots, if it does.
    pub(crate) fn reboot_waits(&self, node: &str) -> Option<String> {
        self.kured.as_ref()?.1.reboot_waits(node)
    }
}

impl Gate for PeerGate {
    fn hold(&self, c: &Candidate) -> Option<Why> {
        let (peer, how) = self.taken(c.node)?;
        Some(Why::TakenByPeer { peer, how })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(taints: serde_json::Value) -> NodeView {
        NodeView::of(
            &serde_json::from_value(json!({"metadata": {"name": "n1", "uid": "u1"},
                "spec": {"taints": taints}}))
            .unwrap(),
        )
    }

    #[test]
    fn a_node_is_taken_by_the_peer_whose_taint_it_carries_and_only_then() {
        let ca = node(
            json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1733", "effect": "NoSchedule"}]),
        );
        let (peer, how) = tainted(&ca).unwrap();
        assert_eq!(peer, Peer::ClusterAutoscaler);
        assert_eq!(
            how,
            "deleting it (its ToBeDeletedByClusterAutoscaler taint)"
        );
        let v1 = node(json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]));
        assert_eq!(tainted(&v1).unwrap().0, Peer::Karpenter);
        let beta = node(
            json!([{"key": "karpenter.sh/disruption", "value": "disrupting", "effect": "NoSchedule"}]),
        );
        assert_eq!(tainted(&beta).unwrap().0, Peer::Karpenter);
        // A candidate only, another value, other taints: not taken.
        for free in [
            json!([{"key": "DeletionCandidateOfClusterAutoscaler", "value": "1733", "effect": "PreferNoSchedule"}]),
            json!([{"key": "karpenter.sh/disruption", "value": "other", "effect": "NoSchedule"}]),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            json!([]),
        ] {
            assert_eq!(tainted(&node(free.clone())), None, "{free}");
        }
    }
}
