//! What the drainer keeps of a Node: the fields its decisions, its selector and the guard read. A
//! kubelet's Node is about 4 KB of JSON (capacity, images, addresses, nodeInfo) and changes every few
//! minutes only in heartbeat times; a [`NodeView`] drops all of that, so 5,000 of them are small and a
//! heartbeat leaves the view as it was ([`NodeView::same_state`]), which is what lets the controller
//! skip it. Pure.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

pub(crate) use nodemedic_common::status::Status;

use super::intern::{ArcStr, Map, intern};

/// A node condition without its message (it changes without news).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Condition {
    pub(crate) type_: ArcStr,
    pub(crate) status: Status,
    pub(crate) reason: Option<ArcStr>,
    /// `lastTransitionTime` (the epoch when absent).
    pub(crate) since: Timestamp,
    /// `lastHeartbeatTime` in Unix seconds (0 when absent): what proves the condition's writer
    /// alive (the drainer's detector watchdog reads it); no decision does, so a heartbeat alone is
    /// no news ([`Condition::same_state`]). Seconds, not a `Timestamp`: 8 bytes instead of 16 in
    /// each condition of 65,000 nodes.
    pub(crate) heartbeat: i64,
}

impl Condition {
    /// Everything but the heartbeat is equal.
    pub(crate) fn same_state(&self, other: &Condition) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.since == other.since
    }
}

/// The condition types some decision reads: a change of a node's other conditions alone (a
/// kubelet's MemoryPressure reason, a detector condition no rule names) changes nothing the
/// drainer does, so it need not wake the controller ([`NodeView::same_watched_state`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Watched {
    /// Every type (a selector that reads the conditions, or before the configuration is known).
    #[default]
    All,
    /// These types only.
    Types(Vec<String>),
}

impl Watched {
    pub(crate) fn reads(&self, type_: &str) -> bool {
        match self {
            Watched::All => true,
            Watched::Types(types) => types.iter().any(|t| t == type_),
        }
    }
}

/// The effect of a node taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// Anything else (the API server takes only the three above).
    Other,
}

impl TaintEffect {
    pub fn parse(s: &str) -> TaintEffect {
        match s {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => TaintEffect::Other,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::Other => "",
        }
    }
}

/// A taint on a node, as far as decisions need it (its time added is the API server's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NodeTaint {
    /// Shared ([`intern`]): the same taints are on many nodes.
    pub(crate) key: ArcStr,
    pub(crate) value: Option<ArcStr>,
    pub(crate) effect: TaintEffect,
}

impl NodeTaint {
    pub(crate) fn new(key: &str, value: Option<&str>, effect: TaintEffect) -> NodeTaint {
        NodeTaint {
            key: flap_key(key),
            value: value.map(intern),
            effect,
        }
    }
}

/// A taint that is not `KEY[=VALUE]:EFFECT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected KEY[=VALUE]:EFFECT")]
pub(crate) struct TaintSyntax(pub String);

impl std::str::FromStr for NodeTaint {
    type Err = TaintSyntax;
    /// As [`NodeTaint`]'s `Display` writes it.
    fn from_str(s: &str) -> Result<NodeTaint, TaintSyntax> {
        let bad = || TaintSyntax(s.to_string());
        let (kv, effect) = s.rsplit_once(':').ok_or_else(bad)?;
        let effect = TaintEffect::parse(effect);
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (kv, None),
        };
        if key.is_empty() || effect == TaintEffect::Other {
            return Err(bad());
        }
        Ok(NodeTaint::new(key, value, effect))
    }
}

impl std::fmt::Display for NodeTaint {
    /// `KEY[=VALUE]:EFFECT`, as `kubectl taint` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key)?;
        if let Some(v) = &self.value {
            write!(f, "={v}")?;
        }
        write!(f, ":{}", self.effect.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    /// Shared ([`intern`]): the pods on the node and its hostname label hold the same string.
    pub name: ArcStr,
    /// `metadata.uid`: which Node object of that name (a drain record is bound to it).
    pub(crate) uid: Uid,
    pub(crate) resource_version: Version,
    /// `creationTimestamp` in Unix seconds (0 when absent).
    pub(crate) created: i64,
    pub(crate) labels: Map,
    pub(crate) annotations: Map,
    pub(crate) unschedulable: bool,
    pub(crate) conditions: Box<[Condition]>,
    /// Most nodes have none (no allocation then).
    pub(crate) taints: Box<[NodeTaint]>,
    /// What `status.nodeInfo` says the node runs ([`NodeInfo`]): kernel, OS image, container
    /// runtime, kubelet, shared by every node that runs the same (a fleet has a few such sets).
    pub(crate) info: Option<ArcStr>,
    /// `status.nodeInfo.bootID`, which the kubelet sets anew at each boot: what proves a reboot.
    pub(crate) boot: Uid,
    /// The CEL selector's answer for this view once asked: one evaluation per view.
    pub(crate) selection: super::selection::Selection,
}

/// A Node's `metadata.uid`, kept in 16 bytes without an allocation: the API server's UIDs are
/// UUIDs. Anything else (a hand-written file) is kept as a 128-bit FNV-1a hash of its text, so
/// two different UIDs still compare different; [`Uid::NONE`] is an object without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct Uid(u128);

impl Uid {
    pub(crate) const NONE: Uid = Uid(0);

    pub fn parse(s: &str) -> Uid {
        if s.is_empty() {
            return Uid::NONE;
        }
        // A UUID's 32 hex digits, read without a copy (each heartbeat reads a bootID).
        if s.len() == 36 {
            let mut v: u128 = 0;
            let mut digits = 0;
            for c in s.chars().filter(|c| *c != '-') {
                match c.to_digit(16) {
                    Some(d) => v = (v << 4) | u128::from(d),
                    None => {
                        digits = 0;
                        break;
                    }
                }
                digits += 1;
            }
            if digits == 32 {
                return Uid(v);
            }
        }
        // FNV-1a, 128-bit (offset basis and prime from the FNV specification).
        let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
        for b in s.bytes() {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000000001000000000000000000013B);
        }
        Uid(h | 1)
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h = format!("{:032x}", self.0);
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }
}

/// The parts of `status.nodeInfo` the common-cause report compares, in the order they are kept in
/// [`NodeView::info`] (separated by U+001F).
pub(crate) const NODE_INFO: [(&str, &str); 4] = [
    ("kernelVersion", "kernel"),
    ("osImage", "OS image"),
    ("containerRuntimeVersion", "container runtime"),
    ("kubeletVersion", "kubelet"),
];

/// The kept form of a node's software: the four parts of [`NODE_INFO`], shared.
pub(crate) fn node_info(parts: [&str; 4]) -> Option<ArcStr> {
    if parts.iter().all(|p| p.is_empty()) {
        return None;
    }
    Some(intern(&parts.join("\u{1f}")))
}

/// A resourceVersion as the API server wrote it. It is opaque text and is given back as written;
/// the decimal numbers etcd's revisions are written as are kept as a number (8 bytes, nothing
/// allocated for each of 65,000 nodes), anything else as its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    Number(u64),
    Text(Box<str>),
}

impl Default for Version {
    fn default() -> Version {
        Version::Text("".into())
    }
}

impl Version {
    pub fn parse(s: &str) -> Version {
        // Only the canonical form round-trips through a number: "007" stays text.
        let canonical = !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'));
        match s.parse() {
            Ok(n) if canonical => Version::Number(n),
            _ => Version::Text(s.into()),
        }
    }
}

impl From<&str> for Version {
    fn from(s: &str) -> Version {
        Version::parse(s)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Number(n) => write!(f, "{n}"),
            Version::Text(s) => f.write_str(s),
        }
    }
}

impl PartialEq<str> for Version {
    fn eq(&self, other: &str) -> bool {
        match self {
            Version::Number(n) => Version::parse(other) == Version::Number(*n),
            Version::Text(s) => **s == *other,
        }
    }
}

impl PartialEq<&str> for Version {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

/// The taints of a node that is, or just was, unreachable or not ready.
pub(crate) const FLAP_TAINTS: [&str; 2] = [
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/not-ready",
];

/// The first flap taint with effect NoExecute among `taints` (key, effect).
pub fn flap_taint<'a>(taints: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<ArcStr> {
    taints
        .into_iter()
        .find(|(k, e)| *e == "NoExecute" && FLAP_TAINTS.contains(k))
        .map(|(k, _)| flap_key(k))
}

/// The shared copy of a flap taint's key (one of [`FLAP_TAINTS`]; anything else is shared anew).
pub(crate) fn flap_key(key: &str) -> ArcStr {
    match key {
        "node.kubernetes.io/unreachable" => arcstr::literal!("node.kubernetes.io/unreachable"),
        "node.kubernetes.io/not-ready" => arcstr::literal!("node.kubernetes.io/not-ready"),
        other => intern(other),
    }
}

impl NodeView {
    pub fn of(node: &Node) -> NodeView {
        let spec = node.spec.as_ref();
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        let map = |m: &Option<std::collections::BTreeMap<String, String>>| -> Map {
            m.iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect()
        };
        let meta = &node.metadata;
        let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
        let info = info.and_then(|i| {
            node_info([
                &i.kernel_version,
                &i.os_image,
                &i.container_runtime_version,
                &i.kubelet_version,
            ])
        });
        let boot = node.status.as_ref().and_then(|s| s.node_info.as_ref());
        NodeView {
            info,
            boot: Uid::parse(boot.map_or("", |i| i.boot_id.as_str())),
            selection: Default::default(),
            name: intern(meta.name.as_deref().unwrap_or_default()),
            uid: Uid::parse(meta.uid.as_deref().unwrap_or_default()),
            resource_version: Version::parse(meta.resource_version.as_deref().unwrap_or_default()),
            created: meta
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_second()),
            labels: map(&meta.labels),
            annotations: map(&meta.annotations),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            conditions: conditions
                .into_iter()
                .flatten()
                .map(|c| Condition {
                    type_: intern(&c.type_),
                    status: Status::parse(&c.status),
                    reason: c.reason.as_deref().map(intern),
                    since: c
                        .last_transition_time
                        .as_ref()
                        .map(|t| t.0)
                        .unwrap_or(Timestamp::UNIX_EPOCH),
                    heartbeat: c
                        .last_heartbeat_time
                        .as_ref()
                        .map_or(0, |t| t.0.as_second()),
                })
                .collect(),
            taints: spec
                .and_then(|s| s.taints.as_ref())
                .into_iter()
                .flatten()
                .map(|t| NodeTaint::new(&t.key, t.value.as_deref(), TaintEffect::parse(&t.effect)))
                .collect(),
        }
    }

    /// Everything but the resourceVersion and the conditions' heartbeats is equal: nothing a
    /// decision reads changed.
    pub(crate) fn same_state(&self, other: &NodeView) -> bool {
        self.same_but_conditions(other)
            && self.conditions.len() == other.conditions.len()
            && self
                .conditions
                .iter()
                .zip(&*other.conditions)
                .all(|(a, b)| a.same_state(b))
    }

    /// Of the conditions only those of a type in `watched` count: equal in state (heartbeats
    /// aside), in the same order. A change of the others alone changes no decision.
    pub(crate) fn same_watched_conditions(&self, other: &NodeView, watched: &Watched) -> bool {
        let mut a = (self.conditions.iter()).filter(|c| watched.reads(&c.type_));
        let mut b = (other.conditions.iter()).filter(|c| watched.reads(&c.type_));
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(x), Some(y)) if x.same_state(y) => {}
                _ => return false,
            }
        }
    }

    fn same_but_conditions(&self, other: &NodeView) -> bool {
        self.same_but_labels_and_conditions(other) && self.labels == other.labels
    }

    /// Everything but the labels, the conditions, the resourceVersion is equal.
    pub(crate) fn same_but_labels_and_conditions(&self, other: &NodeView) -> bool {
        self.name == other.name
            && self.uid == other.uid
            && self.unschedulable == other.unschedulable
            && self.taints == other.taints
            && self.annotations == other.annotations
            && self.created == other.created
            && self.info == other.info
            && self.boot == other.boot
    }

    /// A NoExecute taint of the node lifecycle controller's (see [`FLAP_TAINTS`]), while it is there.
    pub(crate) fn flap_taint(&self) -> Option<&ArcStr> {
        self.taints
            .iter()
            .find(|t| t.effect == TaintEffect::NoExecute && FLAP_TAINTS.contains(&t.key.as_str()))
            .map(|t| &t.key)
    }

    /// Whether the node carries `taint` (key, value and effect).
    pub(crate) fn has_taint(&self, taint: &NodeTaint) -> bool {
        self.taints.iter().any(|t| t == taint)
    }

    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// The node's software as `status.nodeInfo` says: `(name, value)` for each part of
    /// [`NODE_INFO`] it has.
    pub(crate) fn software(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let parts = self.info.as_deref().unwrap_or_default();
        NODE_INFO
            .iter()
            .zip(parts.split('\u{1f}'))
            .filter(|(_, v)| !v.is_empty())
            .map(|((_, name), v)| (*name, v))
    }

    pub(crate) fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Since when the node has been Ready=True, if it is.
    pub(crate) fn ready_since(&self) -> Option<Timestamp> {
        self.condition("Ready")
            .filter(|c| c.status == Status::True)
            .map(|c| c.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet_node(heartbeat: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "resourceVersion": heartbeat, "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
            "status": {
                "capacity": {"cpu": "4"},
                "images": [{"names": ["registry/app:1"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": format!("beat {heartbeat}"), "lastHeartbeatTime": format!("2026-11-23T10:00:{heartbeat}Z"),
                    "lastTransitionTime": "2026-11-23T09:00:00Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_heartbeat_leaves_the_view_as_it_was() {
        let a = NodeView::of(&kubelet_node("01"));
        let b = NodeView::of(&kubelet_node("02"));
        assert!(a.same_state(&b));
        assert_ne!(a, b, "the resourceVersion is kept");
        assert_eq!(b.resource_version, "02");
        assert_eq!(
            a.ready_since(),
            Some("2026-11-23T09:00:00Z".parse().unwrap())
        );
        assert_eq!(
            a.flap_taint().map(|k| k.as_str()),
            Some("node.kubernetes.io/unreachable")
        );
        assert_ne!(
            a.conditions[0].heartbeat, b.conditions[0].heartbeat,
            "the heartbeat is kept, and is no news"
        );
        let mut c = b.clone();
        c.conditions[0].status = Status::False;
        assert!(!a.same_state(&c));
        assert_eq!(c.ready_since(), None);
        let mut d = b.clone();
        d.labels = d.labels.with("draino", Some("node"));
        assert!(!a.same_state(&d));
    }

    #[test]
    fn a_change_of_conditions_no_decision_reads_is_no_news_to_the_watched_ones() {
        let with = |memory_reason: &str, extra: bool| {
            let mut n = serde_json::to_value(kubelet_node("01")).unwrap();
            let conds = n["status"]["conditions"].as_array_mut().unwrap();
            conds.push(
                serde_json::json!({"type": "MemoryPressure", "status": "False",
                "reason": memory_reason, "lastTransitionTime": "2026-11-23T09:00:00Z"}),
            );
            if extra {
                conds.push(
                    serde_json::json!({"type": "FrequentDockerRestart", "status": "False",
                    "lastTransitionTime": "2026-11-23T09:00:00Z"}),
                );
            }
            NodeView::of(&serde_json::from_value(n).unwrap())
        };
        let watched = Watched::Types(vec!["Ready".into(), "KernelDeadlock".into()]);
        let a = with("KubeletHasSufficientMemory", false);
        // Another reason, a condition that appears: state changes, of types nothing reads.
        for b in [
            with("Other", false),
            with("KubeletHasSufficientMemory", true),
        ] {
            assert!(!a.same_state(&b));
            assert!(a.same_watched_conditions(&b, &watched));
            assert!(
                !a.same_watched_conditions(&b, &Watched::All),
                "all types count"
            );
        }
        // A watched condition's change is news; so is a watched change sent along with unwatched
        // ones (a node writing its own conditions cannot hide one that way).
        let mut c = a.clone();
        c.conditions[0].status = Status::False;
        assert!(!a.same_watched_conditions(&c, &watched));
        let mut mixed = with("Other", true);
        mixed.conditions[0].status = Status::False;
        assert!(!a.same_watched_conditions(&mixed, &watched));
        // A watched condition that goes is news.
        let mut e = a.clone();
        e.conditions = e.conditions[1..].into();
        assert!(!a.same_watched_conditions(&e, &watched));
        // The labels are left to whoever knows which ones are read (`observe::interest`); an
        // annotation, a taint, cordoning are compared here.
        let mut d = a.clone();
        d.labels = d.labels.with("draino", Some("node"));
        assert!(a.same_but_labels_and_conditions(&d));
        assert!(!a.same_state(&d));
        let mut f = a.clone();
        f.annotations = f.annotations.with("nodemedic.io/x", Some("1"));
        assert!(!a.same_but_labels_and_conditions(&f));
        let mut g = a.clone();
        g.unschedulable = true;
        assert!(!a.same_but_labels_and_conditions(&g));
    }

    #[test]
    fn a_resource_version_is_given_back_as_written() {
        for (text, number) in [
            ("0", true),
            ("1234567", true),
            ("18446744073709551615", true),
            ("18446744073709551616", false),
            ("007", false),
            ("", false),
            ("abc", false),
            ("12a", false),
            ("-1", false),
            ("+1", false),
        ] {
            let v = Version::parse(text);
            assert_eq!(v.to_string(), text);
            assert_eq!(matches!(v, Version::Number(_)), number, "{text}");
            assert!(v == *text);
        }
        assert!(Version::parse("5") != *"05");
    }
}
