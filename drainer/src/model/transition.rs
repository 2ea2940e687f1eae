//! A node condition transition as the drainer records it (`--history-file`) and a backtest reads
//! it back (`drainer simulate --history`): one JSON line each. Pure data.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub(crate) at: Timestamp,
    pub(crate) node: String,
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// The transitions of the watched condition `types` between two views of a node: each type
/// whose status changed (or that appeared), at its new transition time.
pub(crate) fn between(
    old: &super::node::NodeView,
    new: &super::node::NodeView,
    types: &[&str],
) -> Vec<Transition> {
    types
        .iter()
        .filter_map(|t| {
            let now = new.condition(t)?;
            if old.condition(t).is_some_and(|c| c.status == now.status) {
                return None;
            }
            Some(Transition {
                at: now.since,
                node: new.name.to_string(),
                type_: t.to_string(),
                status: now.status.as_str().to_string(),
                reason: now.reason.as_ref().map(|r| r.to_string()),
            })
        })
        .collect()
}
