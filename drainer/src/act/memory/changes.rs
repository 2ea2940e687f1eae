//! What a scenario or a test changes on the nodes of the [`MemoryCluster`], as a node's kubelet
//! and detector would: a condition (with its reason), the boot, the heartbeats. No I/O.

use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;

use super::{MemoryCluster, condition};

impl MemoryCluster {
    /// Set a node's condition `type_` to `status` (its transition time `at` when it changes).
    pub(crate) fn set_condition(
        &self,
        node: &str,
        type_: &str,
        status: Status,
        at: Timestamp,
    ) -> bool {
        self.set_condition_for(node, type_, status, None, at)
    }

    /// [`MemoryCluster::set_condition`] with the condition's `reason` too (None: as it was).
    pub(crate) fn set_condition_for(
        &self,
        node: &str,
        type_: &str,
        status: Status,
        reason: Option<&str>,
        at: Timestamp,
    ) -> bool {
        let mut s = self.state();
        let (version, lagging) = (s.bump(), s.lagging);
        let Some(n) = s.nodes.get_mut(node) else {
            return false;
        };
        let conditions = n
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        let same_reason = |c: &NodeCondition| reason.is_none_or(|r| c.reason.as_deref() == Some(r));
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == status.as_str() && same_reason(c) => return false,
            // Another reason, the same status: no transition.
            Some(c) if c.status == status.as_str() => c.reason = reason.map(String::from),
            Some(c) => {
                c.status = status.as_str().into();
                c.last_transition_time = Some(Time(at));
                if let Some(r) = reason {
                    c.reason = Some(r.into());
                }
            }
            None => {
                let mut c = condition(type_, status, at);
                c.reason = reason.map(String::from);
                conditions.push(c);
            }
        }
        n.metadata.resource_version = Some(version);
        if !lagging {
            self.observed.apply_node(n);
        }
        true
    }

    /// The node is back from a reboot as boot `id` (`status.nodeInfo.bootID`), as its kubelet says.
    pub(crate) fn set_boot_id(&self, node: &str, id: &str) {
        let mut s = self.state();
        let (version, lagging) = (s.bump(), s.lagging);
        let Some(n) = s.nodes.get_mut(node) else {
            return;
        };
        let status = n.status.get_or_insert_with(NodeStatus::default);
        status
            .node_info
            .get_or_insert_with(Default::default)
            .boot_id = id.into();
        n.metadata.resource_version = Some(version);
        if !lagging && self.observed.nodes_synced() {
            self.observed.apply_node(n);
        }
    }

    /// The node's detector refreshes its conditions (those its ownership annotation names): their
    /// heartbeats become `at`, nothing else changes.
    pub(crate) fn heartbeat(&self, node: &str, at: Timestamp) {
        let mut s = self.state();
        let (version, lagging) = (s.bump(), s.lagging);
        let Some(n) = s.nodes.get_mut(node) else {
            return;
        };
        let owned: Vec<String> = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION))
            .map(|o| o.split(',').map(|t| t.trim().to_string()).collect())
            .unwrap_or_default();
        let conditions = n.status.as_mut().and_then(|s| s.conditions.as_mut());
        for c in conditions.into_iter().flatten() {
            if owned.contains(&c.type_) {
                c.last_heartbeat_time = Some(Time(at));
            }
        }
        n.metadata.resource_version = Some(version);
        if !lagging {
            self.observed.apply_node(n);
        }
    }
}
