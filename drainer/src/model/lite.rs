//! A Node as the drainer's watch decodes it, pure: only what a [`NodeView`] keeps, read in one pass
//! straight into the view's own shapes. The images, addresses, capacity, nodeInfo and managedFields
//! of a kubelet's Node are skipped, not allocated; labels, annotations, condition types and reasons
//! are looked up in the shared strings ([`crate::model::intern`]) as they are read, so a heartbeat
//! (every few seconds per node, the watch's steady traffic) allocates the name, the resourceVersion
//! and the view's few boxes, not a string per label. Times are read as text: past what `jiff` holds
//! (kube-apiserver takes them up to 9999-12-31T23:59:59Z) they are the latest it holds instead of
//! failing the whole node list.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;
use serde::Deserialize;

use super::intern::{Map, Shared, TextVisitor};
use super::node::{Condition, NodeView, flap_taint};

/// What the watch keeps of a Node. `metadata` holds what kube's watcher reads (the name and the
/// resourceVersion, and the uid); the rest is already in the view's shapes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "Raw")]
pub struct NodeLite {
    pub metadata: ObjectMeta,
    pub labels: Map,
    pub annotations: Map,
    pub unschedulable: bool,
    pub conditions: Vec<Condition>,
    pub flap_taint: Option<String>,
}

impl NodeView {
    /// The view of a Node as the watch decodes it (its parts move, nothing is copied).
    pub fn from_lite(node: NodeLite) -> NodeView {
        NodeView {
            name: node.metadata.name.unwrap_or_default(),
            resource_version: node.metadata.resource_version.unwrap_or_default(),
            labels: node.labels,
            annotations: node.annotations,
            unschedulable: node.unschedulable,
            conditions: node.conditions.into_boxed_slice(),
            flap_taint: node.flap_taint,
        }
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    metadata: RawMeta,
    #[serde(default)]
    spec: Option<RawSpec>,
    #[serde(default)]
    status: Option<RawStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<Map>,
    annotations: Option<Map>,
}

#[derive(Deserialize)]
struct RawSpec {
    #[serde(default)]
    unschedulable: Option<bool>,
    #[serde(default)]
    taints: Option<Vec<RawTaint>>,
}

#[derive(Deserialize)]
struct RawTaint {
    #[serde(default)]
    key: Shared,
    #[serde(default)]
    effect: Shared,
}

#[derive(Deserialize)]
struct RawStatus {
    #[serde(default)]
    conditions: Option<Vec<RawCondition>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCondition {
    #[serde(rename = "type", default)]
    type_: Shared,
    #[serde(default)]
    status: Option<LiteStatus>,
    #[serde(default)]
    reason: Option<Shared>,
    #[serde(default)]
    last_transition_time: Option<LiteTime>,
}

impl From<Raw> for NodeLite {
    fn from(raw: Raw) -> NodeLite {
        let spec = raw.spec;
        let taints = spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]);
        NodeLite {
            flap_taint: flap_taint(taints.iter().map(|t| (&*t.key.0, &*t.effect.0))),
            unschedulable: spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            conditions: raw
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(|c| Condition {
                    type_: c.type_.0,
                    status: c.status.map_or(Status::Unknown, |s| s.0),
                    reason: c.reason.map(|r| r.0),
                    since: c
                        .last_transition_time
                        .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
                })
                .collect(),
            labels: raw.metadata.labels.unwrap_or_default(),
            annotations: raw.metadata.annotations.unwrap_or_default(),
            metadata: ObjectMeta {
                name: raw.metadata.name,
                uid: raw.metadata.uid,
                resource_version: raw.metadata.resource_version,
                ..Default::default()
            },
        }
    }
}

/// A condition status read from the text without keeping it (anything but `True` and `False` is
/// `Unknown`, as [`Status::parse`] says).
struct LiteStatus(Status);

impl<'de> Deserialize<'de> for LiteStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| LiteStatus(Status::parse(s))))
    }
}

/// An RFC 3339 time as the API server writes it, read from the text without keeping it; past
/// jiff's end (the last 26 hours of year 9999) the latest time jiff holds.
struct LiteTime(Timestamp);

impl<'de> Deserialize<'de> for LiteTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| LiteTime(lite_time(s))))
    }
}

fn lite_time(s: &str) -> Timestamp {
    s.parse().unwrap_or(if s.starts_with("9999-") {
        Timestamp::MAX
    } else {
        Timestamp::UNIX_EPOCH
    })
}

impl kube::Resource for NodeLite {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn the_lite_decoding_gives_the_same_view_and_takes_year_9999() {
        let text = include_str!("../../../tests/fixtures/scale/kubelet-like-node.json");
        let full: Node = serde_json::from_str(text).unwrap();
        let lite: NodeLite = serde_json::from_str(text).unwrap();
        assert_eq!(NodeView::of(&full), NodeView::from_lite(lite));
        let odd = r#"{"metadata": {"name": "odd", "creationTimestamp": "9999-12-31T23:00:00Z", "resourceVersion": "5"},
            "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "9999-12-31T23:59:59Z"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "9999-12-31T23:59:59Z"}]}}"#;
        assert!(
            serde_json::from_str::<Node>(odd).is_err(),
            "the full type cannot hold it"
        );
        let v = NodeView::from_lite(serde_json::from_str(odd).unwrap());
        assert_eq!(v.name, "odd");
        assert_eq!(v.resource_version, "5");
        assert_eq!(v.ready_since(), Some(Timestamp::MAX));
        assert_eq!(
            v.flap_taint.as_deref(),
            Some("node.kubernetes.io/unreachable")
        );
    }

    #[test]
    fn escaped_null_and_odd_fields_decode_as_the_full_type_reads_them() {
        let text = r#"{"metadata": {"name": "n\u0031", "labels": {"a\/b": "x\"y", "empty": ""}, "annotations": null},
            "spec": null,
            "status": {"conditions": [{"type": "Ready", "status": "Maybe", "reason": null}, {"type": "Disk", "status": ""}]}}"#;
        let full: Node = serde_json::from_str(text).unwrap();
        let lite = NodeView::from_lite(serde_json::from_str(text).unwrap());
        assert_eq!(NodeView::of(&full), lite);
        assert_eq!(lite.name, "n1");
        assert_eq!(lite.label("a/b"), Some("x\"y"));
        assert_eq!(lite.conditions[0].status, Status::Unknown);
        assert_eq!(lite.conditions[1].status, Status::Unknown);
    }

    #[test]
    fn a_label_that_is_not_text_fails_the_node_with_its_position() {
        let err =
            serde_json::from_str::<NodeLite>(r#"{"metadata": {"labels": {"a": 1}}}"#).unwrap_err();
        assert!(err.to_string().contains("column"), "{err}");
    }
}
