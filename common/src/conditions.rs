//! Node-condition patches that change only the condition types we own.
//!
//! Conditions are written with a strategic-merge patch of `nodes/{name}/status`: the API server merges
//! the `conditions` list by `type`, so the kubelet's conditions are left alone. A JSON merge patch would
//! replace the whole list (it wipes Ready), so it is never used here. Removing a condition uses the
//! strategic-merge `$patch: delete` directive on that one entry.

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use serde_json::{Value, json};

/// One condition as the detector wants it on the Node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// "True" | "False" | "Unknown"
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339, whole seconds (metav1.Time drops fractions anyway).
    pub last_transition_time: String,
}

/// The body of a strategic-merge patch of `nodes/{name}/status` that sets `set` (with
/// `lastHeartbeatTime = heartbeat`), deletes `remove`, and records `owned` in the ownership annotation
/// (and the rules `revision` that set them, when known).
pub fn status_patch(
    set: &[DesiredCondition],
    remove: &[String],
    heartbeat: &str,
    owned: &[String],
    revision: Option<&str>,
) -> Value {
    let mut entries: Vec<Value> = set
        .iter()
        .map(|c| {
            json!({
                "type": c.type_,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition_time,
                "lastHeartbeatTime": heartbeat,
            })
        })
        .collect();
    entries.extend(
        remove
            .iter()
            .map(|t| json!({"type": t, "$patch": "delete"})),
    );
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        crate::keys::OWNED_CONDITIONS_ANNOTATION.into(),
        owned.join(",").into(),
    );
    if let Some(r) = revision {
        annotations.insert(crate::keys::RULES_REVISION_ANNOTATION.into(), r.into());
    }
    json!({
        "metadata": { "annotations": annotations },
        "status": { "conditions": entries },
    })
}

/// The condition types listed in the ownership annotation of `node`.
pub fn owned_types(node: &Node) -> Vec<String> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::keys::OWNED_CONDITIONS_ANNOTATION))
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The node's condition of `type_`, if any.
pub fn find<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, s: &str) -> DesiredCondition {
        DesiredCondition {
            type_: t.into(),
            status: s.into(),
            reason: "R".into(),
            message: "m".into(),
            last_transition_time: "2026-11-22T00:00:00Z".into(),
        }
    }

    #[test]
    fn patch_sets_deletes_and_records_ownership() {
        let p = status_patch(
            &[cond("KernelDeadlock", "True")],
            &["Old".into()],
            "2026-11-22T00:00:05Z",
            &["KernelDeadlock".into()],
            Some("0a1b2c3d4e5f"),
        );
        let conds = p["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[0]["type"], "KernelDeadlock");
        assert_eq!(conds[0]["lastHeartbeatTime"], "2026-11-22T00:00:05Z");
        assert_eq!(conds[1], json!({"type": "Old", "$patch": "delete"}));
        assert_eq!(
            p["metadata"]["annotations"][crate::keys::OWNED_CONDITIONS_ANNOTATION],
            "KernelDeadlock"
        );
        assert_eq!(
            p["metadata"]["annotations"][crate::keys::RULES_REVISION_ANNOTATION],
            "0a1b2c3d4e5f"
        );
        let none = status_patch(&[], &[], "2026-11-22T00:00:05Z", &[], None);
        assert!(
            none["metadata"]["annotations"]
                .get(crate::keys::RULES_REVISION_ANNOTATION)
                .is_none()
        );
    }

    #[test]
    fn owned_types_parses_the_annotation() {
        let mut node = Node::default();
        node.metadata.annotations = Some(
            [(
                crate::keys::OWNED_CONDITIONS_ANNOTATION.to_string(),
                "A, B,,C".to_string(),
            )]
            .into(),
        );
        assert_eq!(owned_types(&node), vec!["A", "B", "C"]);
        assert!(owned_types(&Node::default()).is_empty());
    }
}
