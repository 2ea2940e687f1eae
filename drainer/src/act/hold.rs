//! Holding a problem node and letting it go: one change of the cordon, our taints and the drain
//! record ([`Hold`]), which `Executor::hold` writes in one patch, and the edit of a taint list.
//! Pure.

use k8s_openapi::api::core::v1::{Node, Taint};

use crate::model::cluster::ApiError;
use crate::model::node::{NodeTaint, NodeView};
use crate::model::record::Record;

/// Tries of the read-modify-write of the taint list when the node changes under it (409).
pub(super) const TAINT_TRIES: usize = 4;

/// One change to a node's hold.
#[derive(Debug, Default)]
pub(super) struct Hold<'a> {
    /// `spec.unschedulable` to set (None: left as it is).
    pub(crate) unschedulable: Option<bool>,
    /// Our taints to take off, and those to put on.
    pub(crate) untaint: Vec<NodeTaint>,
    pub(crate) taint: Vec<NodeTaint>,
    /// The drain record (None: left; `Some(None)`: removed).
    pub(crate) record: Option<Option<&'a Record>>,
    /// draino's conditions annotation (None: left; `Some(None)`: removed).
    pub(crate) draino: Option<Option<String>>,
    /// The node as the decision saw it: the write goes against its resourceVersion, and when the
    /// node changed since, only if its state is still this one ([`as_seen`]). None: whatever the
    /// node is now (the taints read fresh, retried on conflicts).
    pub(crate) seen: Option<&'a NodeView>,
}

/// A Node's taints (as the API server has them) and its resourceVersion.
pub(crate) fn taints_and_version(node: Node) -> (Vec<Taint>, String) {
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    (taints, node.metadata.resource_version.unwrap_or_default())
}

/// The resourceVersion to write `now` (the node read fresh) against, when nothing a decision reads
/// changed since `seen` (a kubelet's or a detector's heartbeat came in between: the decision
/// stands); a conflict (409) when something did, so nothing is written on stale state.
pub(crate) fn as_seen(seen: &NodeView, now: &Node) -> Result<String, ApiError> {
    let version = now.metadata.resource_version.clone().unwrap_or_default();
    if seen.resource_version == *version.as_str() || NodeView::of(now).same_state(seen) {
        return Ok(version);
    }
    Err(ApiError::Status {
        code: 409,
        text: format!(
            "node {} changed since it was decided on (resourceVersion {} -> {version})",
            seen.name, seen.resource_version
        ),
    })
}

/// `taints` (as the API server has them) without `remove` and then with `add` (each once; a
/// taint already there keeps its time added).
pub(crate) fn edit_taints(
    mut taints: Vec<Taint>,
    remove: &[NodeTaint],
    add: &[NodeTaint],
) -> Vec<Taint> {
    let same = |t: &Taint, n: &NodeTaint| t.key == *n.key && t.effect == n.effect.as_str();
    taints.retain(|t| !remove.iter().any(|r| same(t, r)));
    for a in add {
        match taints.iter_mut().find(|t| same(t, a)) {
            Some(t) => t.value = a.value.as_ref().map(|v| v.to_string()),
            None => taints.push(Taint {
                key: a.key.to_string(),
                value: a.value.as_ref().map(|v| v.to_string()),
                effect: a.effect.as_str().to_string(),
                time_added: None,
            }),
        }
    }
    taints
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node::TaintEffect;

    fn k8s(key: &str, effect: &str, added: Option<&str>) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: added
                .map(|t| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t.parse().unwrap())),
        }
    }

    #[test]
    fn our_taints_come_off_and_on_and_others_keep_their_time_added() {
        let current = vec![
            k8s(
                "node.kubernetes.io/unreachable",
                "NoExecute",
                Some("2026-11-25T10:00:00Z"),
            ),
            k8s("nodemedic.io/problem", "NoSchedule", None),
        ];
        let problem = NodeTaint::new("nodemedic.io/problem", None, TaintEffect::NoSchedule);
        let probation = NodeTaint::new(
            "nodemedic.io/probation",
            Some("yes"),
            TaintEffect::PreferNoSchedule,
        );
        let swapped = edit_taints(
            current.clone(),
            std::slice::from_ref(&problem),
            std::slice::from_ref(&probation),
        );
        assert_eq!(swapped.len(), 2);
        assert_eq!(swapped[0], current[0], "another's taint is left as it was");
        assert_eq!(
            (
                swapped[1].key.as_str(),
                swapped[1].value.as_deref(),
                swapped[1].effect.as_str()
            ),
            ("nodemedic.io/probation", Some("yes"), "PreferNoSchedule")
        );
        let again = edit_taints(swapped.clone(), &[], &[probation]);
        assert_eq!(again, swapped, "a taint already there is not added twice");
        let none = edit_taints(
            again,
            &[NodeTaint::new(
                "nodemedic.io/probation",
                None,
                TaintEffect::PreferNoSchedule,
            )],
            &[],
        );
        assert_eq!(none, vec![current[0].clone()], "removed whatever its value");
    }
}
