//! A Node as the drainer's watch decodes it, pure: only what a [`NodeView`] keeps, read in one pass
//! straight into the view's own shapes. The images, addresses, capacity, managedFields and all of
//! nodeInfo but its software versions of a kubelet's Node are skipped, not allocated. Times are read as text: past what `jiff` holds
//! (kube-apiserver takes them up to 9999-12-31T23:59:59Z) they are the latest it holds instead of
//! failing the whole node list.
//!
//! Most events are a kubelet's status update: the same labels, annotations and conditions with new
//! heartbeat times. So a decode compares what it reads with the node's view as last cached
//! ([`reusing`] says where to find it) and reuses the parts that are the same: an unchanged string
//! costs one comparison, not a lookup in the shared strings, and an unchanged map is kept whole.
//! What differs, or a node not seen before, is shared anew ([`crate::model::intern`]); the view is
//! the same either way.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;
use serde::Deserialize;
use serde::de::DeserializeSeed;

use super::intern::{ArcStr, Expect, Map, MapVisitor, Shared, TextVisitor, intern};
use super::node::{Condition, NodeTaint, NodeView, TaintEffect, Version};

/// What the watch keeps of a Node, in the view's shapes. `metadata` carries only what kube's
/// watcher reads (the resourceVersion); the name is [`NodeLite::name`].
#[derive(Debug, Clone, Default)]
pub struct NodeLite {
    pub(crate) metadata: ObjectMeta,
    pub(crate) name: ArcStr,
    pub(crate) created: i64,
    pub(crate) labels: Map,
    pub(crate) annotations: Map,
    pub(crate) unschedulable: bool,
    pub(crate) conditions: Box<[Condition]>,
    pub(crate) taints: Box<[NodeTaint]>,
    pub(crate) info: Option<ArcStr>,
    pub(crate) boot: super::node::Uid,
}

impl NodeView {
    /// The view of a Node as the watch decodes it (its parts move, nothing is copied).
    pub fn from_lite(node: NodeLite) -> NodeView {
        NodeView {
            name: node.name,
            uid: super::node::Uid::parse(node.metadata.uid.as_deref().unwrap_or_default()),
            resource_version: Version::parse(
                node.metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default(),
            ),
            created: node.created,
            labels: node.labels,
            annotations: node.annotations,
            unschedulable: node.unschedulable,
            conditions: node.conditions,
            taints: node.taints,
            info: node.info,
            boot: node.boot,
            selection: Default::default(),
        }
    }
}

/// Finds a node's view as last cached, by name.
pub type Earlier = Arc<dyn Fn(&str) -> Option<Arc<NodeView>> + Send + Sync>;

thread_local! {
    /// Where decodes on this thread find a node's earlier view (set by [`reusing`]).
    static EARLIER: RefCell<Option<Earlier>> = const { RefCell::new(None) };
    /// The earlier view of the node being decoded: found by its name, which the API server writes
    /// before the labels, annotations and status.
    static LAST: RefCell<Option<Arc<NodeView>>> = const { RefCell::new(None) };
    /// Which of `LAST`'s conditions the condition being decoded is (found by its type).
    static LAST_CONDITION: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Run `f` (a poll of the Node watch, which decodes its events) with `earlier` to find each node's
/// view as last cached, so the parts that did not change are reused.
pub fn reusing<R>(earlier: &Earlier, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Earlier>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let old = self.0.take();
            EARLIER.with(|e| *e.borrow_mut() = old);
        }
    }
    let _restore = Restore(EARLIER.with(|e| e.replace(Some(earlier.clone()))));
    f()
}

fn last() -> Option<Arc<NodeView>> {
    LAST.with(|l| l.borrow().clone())
}

impl<'de> Deserialize<'de> for NodeLite {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NodeLite, D::Error> {
        LAST.with(|l| l.borrow_mut().take());
        let raw = Raw::deserialize(d);
        LAST.with(|l| l.borrow_mut().take());
        LAST_CONDITION.with(|c| c.set(None));
        raw.map(NodeLite::from)
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
    name: Option<Name>,
    resource_version: Option<String>,
    uid: Option<String>,
    creation_timestamp: Option<LiteTime>,
    labels: Option<Labels>,
    annotations: Option<Annotations>,
}

/// The node's name; finding it sets `LAST`.
struct Name(ArcStr);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| {
            let earlier = EARLIER.with(|e| e.borrow().as_ref().and_then(|f| f(s)));
            let name = match &earlier {
                Some(v) if v.name == s => v.name.clone(),
                _ => intern(s),
            };
            LAST.with(|l| *l.borrow_mut() = earlier);
            Name(name)
        }))
    }
}

struct Labels(Map);

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        let last = last();
        d.deserialize_map(MapVisitor(last.as_ref().map(|v| &v.labels)))
            .map(Labels)
    }
}

struct Annotations(Map);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Annotations, D::Error> {
        let last = last();
        d.deserialize_map(MapVisitor(last.as_ref().map(|v| &v.annotations)))
            .map(Annotations)
    }
}

#[derive(Deserialize)]
struct RawSpec {
    #[serde(default)]
    unschedulable: Option<bool>,
    #[serde(default)]
    taints: Option<Vec<RawTaint>>,
}

/// A taint as a view keeps it (its time added is not kept).
#[derive(Deserialize)]
struct RawTaint {
    #[serde(default)]
    key: Shared,
    #[serde(default)]
    value: Option<Shared>,
    #[serde(default)]
    effect: Effect,
}

struct Effect(TaintEffect);

impl Default for Effect {
    fn default() -> Effect {
        Effect(TaintEffect::Other)
    }
}

impl<'de> Deserialize<'de> for Effect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Effect, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| Effect(TaintEffect::parse(s))))
    }
}

#[derive(Deserialize)]
struct RawStatus {
    #[serde(default)]
    conditions: Option<Conditions>,
    #[serde(default, rename = "nodeInfo")]
    node_info: Option<Info>,
}

/// `status.nodeInfo`: the four parts the view keeps and the bootID, the rest skipped, read without
/// allocating but for one buffer. The same as the earlier view's (the usual case: a heartbeat) is
/// that view's shared string, found without a lookup.
struct Info(Option<ArcStr>, super::node::Uid);

/// The place [`InfoKey`] gives `bootID` (past those of [`NODE_INFO`](super::node::NODE_INFO)).
const BOOT_ID: usize = super::node::NODE_INFO.len();

thread_local! {
    static INFO_BUF: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A nodeInfo key: its place in [`NODE_INFO`](super::node::NODE_INFO), if it is kept.
struct InfoKey;

impl<'de> DeserializeSeed<'de> for InfoKey {
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| {
            let kept = super::node::NODE_INFO.iter().position(|(k, _)| *k == s);
            kept.or((s == "bootID").then_some(BOOT_ID))
        }))
    }
}

/// The bootID, read without keeping its text.
struct BootId;

impl<'de> DeserializeSeed<'de> for BootId {
    type Value = super::node::Uid;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(TextVisitor(super::node::Uid::parse))
    }
}

/// A nodeInfo value, appended to the buffer; its range there.
struct Append<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = (usize, usize);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(usize, usize), D::Error> {
        let buf = self.0;
        d.deserialize_str(TextVisitor(|s: &str| {
            let from = buf.len();
            buf.push_str(s);
            (from, buf.len())
        }))
    }
}

impl<'de> Deserialize<'de> for Info {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Info, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Info;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("nodeInfo")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Info, A::Error> {
                // One buffer per thread, kept between events: no allocation per heartbeat.
                let mut buf = INFO_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
                buf.clear();
                let mut at = [(0, 0); 4];
                let mut boot = super::node::Uid::NONE;
                let read = (|| {
                    while let Some(k) = m.next_key_seed(InfoKey)? {
                        match k {
                            Some(BOOT_ID) => {
                                boot = m.next_value_seed(BootId)?;
                            }
                            Some(i) => at[i] = m.next_value_seed(Append(&mut buf))?,
                            None => {
                                m.next_value::<serde::de::IgnoredAny>()?;
                            }
                        }
                    }
                    Ok(())
                })();
                let info = read.map(|()| {
                    let parts = at.map(|(a, b)| &buf[a..b]);
                    let last = last();
                    let same = last.as_ref().and_then(|v| v.info.as_ref()).filter(|i| {
                        let mut kept = i.split('\u{1f}');
                        parts.iter().all(|p| kept.next() == Some(*p))
                    });
                    match same {
                        Some(same) => Info(Some(same.clone()), boot),
                        None => Info(super::node::node_info(parts), boot),
                    }
                });
                INFO_BUF.with(|b| *b.borrow_mut() = buf);
                info
            }
        }
        d.deserialize_map(V)
    }
}

/// The conditions, read into a list as long as the earlier view's (one allocation).
struct Conditions(Box<[Condition]>);

impl<'de> Deserialize<'de> for Conditions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Conditions, D::Error> {
        struct List;
        impl<'de> serde::de::Visitor<'de> for List {
            type Value = Conditions;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of conditions")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Conditions, A::Error> {
                let expected = last().map_or(0, |v| v.conditions.len());
                let mut out =
                    Vec::with_capacity(seq.size_hint().unwrap_or(expected).clamp(expected, 64));
                while let Some(c) = seq.next_element::<RawCondition>()? {
                    out.push(Condition {
                        type_: c.type_.0,
                        status: c.status.map_or(Status::Unknown, |s| s.0),
                        reason: c.reason.map(|r| r.0),
                        since: c
                            .last_transition_time
                            .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
                        heartbeat: c.last_heartbeat_time.map_or(0, |t| t.0.as_second()),
                    });
                }
                Ok(Conditions(out.into_boxed_slice()))
            }
        }
        d.deserialize_seq(List)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCondition {
    #[serde(rename = "type", default)]
    type_: ConditionType,
    #[serde(default)]
    status: Option<LiteStatus>,
    #[serde(default)]
    reason: Option<Reason>,
    #[serde(default)]
    last_heartbeat_time: Option<LiteTime>,
    #[serde(default)]
    last_transition_time: Option<LiteTime>,
}

/// A condition's type; finding it among the earlier view's conditions sets `LAST_CONDITION`.
#[derive(Default)]
struct ConditionType(ArcStr);

impl<'de> Deserialize<'de> for ConditionType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ConditionType, D::Error> {
        let last = last();
        d.deserialize_str(TextVisitor(|s: &str| {
            let conditions = last.as_ref().map_or(&[][..], |v| &v.conditions[..]);
            let found = conditions.iter().position(|c| c.type_ == s);
            LAST_CONDITION.with(|c| c.set(found));
            ConditionType(match found {
                Some(i) => conditions[i].type_.clone(),
                None => intern(s),
            })
        }))
    }
}

/// A condition's reason, compared with the same condition's as last read.
struct Reason(ArcStr);

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let last = last();
        let expected = LAST_CONDITION
            .with(Cell::get)
            .and_then(|i| last.as_ref()?.conditions.get(i)?.reason.as_ref());
        Expect(expected)
            .deserialize(d)
            .map(|t| Reason(t.or(expected)))
    }
}

impl From<Raw> for NodeLite {
    fn from(raw: Raw) -> NodeLite {
        let spec = raw.spec;
        NodeLite {
            unschedulable: spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            taints: spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .map(|t| NodeTaint {
                    key: t.key.0,
                    value: t.value.map(|v| v.0),
                    effect: t.effect.0,
                })
                .collect(),
            created: raw
                .metadata
                .creation_timestamp
                .map_or(0, |t| t.0.as_second()),
            info: raw
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .and_then(|i| i.0.clone()),
            boot: raw
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map_or(super::node::Uid::NONE, |i| i.1),
            conditions: raw
                .status
                .and_then(|s| s.conditions)
                .map(|c| c.0)
                .unwrap_or_default(),
            labels: raw.metadata.labels.map(|l| l.0).unwrap_or_default(),
            annotations: raw.metadata.annotations.map(|a| a.0).unwrap_or_default(),
            name: raw.metadata.name.map(|n| n.0).unwrap_or_default(),
            metadata: ObjectMeta {
                resource_version: raw.metadata.resource_version,
                uid: raw.metadata.uid,
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

pub(crate) fn lite_time(s: &str) -> Timestamp {
    if let Some(t) = utc_seconds(s) {
        return t;
    }
    s.parse().unwrap_or(if s.starts_with("9999-") {
        Timestamp::MAX
    } else {
        Timestamp::UNIX_EPOCH
    })
}

/// The form the API server writes every `metav1.Time` in (`2026-11-25T10:00:00Z`), read from its
/// fixed positions: each condition of each event carries one, and jiff's general RFC 3339 parser
/// costs some twenty times more. jiff still makes the time (its calendar, its range checks);
/// anything else, or any field out of range, is left to the general parser.
fn utc_seconds(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i16> {
        b[from..to].iter().try_fold(0i16, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i16::from(c - b'0'))
        })
    };
    let small = |from: usize| num(from, from + 2).and_then(|n| i8::try_from(n).ok());
    let dt = jiff::civil::DateTime::new(
        num(0, 4)?,
        small(5)?,
        small(8)?,
        small(11)?,
        small(14)?,
        small(17)?,
        0,
    )
    .ok()?;
    jiff::tz::Offset::UTC.to_timestamp(dt).ok()
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
mod tests;
