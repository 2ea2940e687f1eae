//! The detector watchdog, pure: is a node's detector silent? A detector proves itself alive by
//! refreshing the `lastHeartbeatTime` of the conditions it owns (those its ownership annotation
//! names, and those `--detector-conditions` names for detectors that write none, such as NPD) once
//! per heartbeat period. A selected node is *silent* when the newest of those heartbeats is older
//! than `--detector-silent-after`, or when it never got them although the detector DaemonSet places
//! a pod on it and it has existed that long. Kosmos leaf nodes (no detector runs there) and nodes
//! the DaemonSet does not place a pod on are exempt.
//!
//! Where the DaemonSet is placed is worked out here as its controller does
//! ([`Placement::places`]): the pod template's nodeSelector, its required node affinity, and its
//! tolerations together with those the DaemonSet controller adds to every daemon pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION;

use crate::config::Config;
use crate::model::node::{NodeTaint, NodeView, TaintEffect};

/// The condition type a silent detector appears as, for `--condition DetectorSilent=True,30m`.
pub(crate) const DETECTOR_SILENT: &str = "DetectorSilent";

/// A silent node: since when its detector was last heard (or, never heard, since the node was
/// created), and when the watchdog deemed it silent (`last_heard + silent_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Silence {
    pub(crate) last_heard: Timestamp,
    /// Never heard: `last_heard` is the node's creation.
    pub(crate) never: bool,
    pub(crate) declared: Timestamp,
}

/// Where the detector DaemonSet runs its pods.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Placement {
    /// No DaemonSet is configured, or it could not be read (absent, forbidden): only nodes whose
    /// detector reported at least once are watched.
    #[default]
    Unknown,
    /// No DaemonSet is named (`--detector-daemonset ""`): every selected node runs a detector.
    Everywhere,
    DaemonSet {
        node_selector: BTreeMap<String, String>,
        /// Required node affinity (ORed terms); empty: no requirement.
        terms: Vec<NodeSelectorTerm>,
        tolerations: Vec<Toleration>,
    },
}

/// In an operator's words, for logs: the node selector as `k=v`, and how many affinity terms and
/// tolerations there are (the DaemonSet itself says which).
impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Unknown => write!(f, "unknown (no DaemonSet read)"),
            Placement::Everywhere => write!(f, "every node"),
            Placement::DaemonSet {
                node_selector,
                terms,
                tolerations,
            } => {
                let selector: Vec<String> = node_selector
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                write!(
                    f,
                    "nodes with labels {{{}}}, {} required node affinity term(s), {} toleration(s)",
                    selector.join(","),
                    terms.len(),
                    tolerations.len()
                )
            }
        }
    }
}

/// What the DaemonSet controller adds to every daemon pod's tolerations
/// (`AddOrUpdateDaemonPodTolerations` in kubernetes/pkg/controller/daemon/util).
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

impl Placement {
    /// The placement of `ds`'s pod template.
    pub(crate) fn of(ds: &DaemonSet) -> Placement {
        let pod = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .cloned()
            .unwrap_or_default();
        let terms = pod
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .map(|r| r.node_selector_terms)
            .unwrap_or_default();
        let mut tolerations = pod.tolerations.unwrap_or_default();
        let mut extra: Vec<(&str, &str)> = DAEMON_TOLERATIONS.to_vec();
        if pod.host_network == Some(true) {
            extra.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
        }
        tolerations.extend(extra.into_iter().map(|(key, effect)| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Toleration::default()
        }));
        Placement::DaemonSet {
            node_selector: pod.node_selector.unwrap_or_default(),
            terms,
            tolerations,
        }
    }

    /// Whether the DaemonSet places a pod on `node` (never, for an unknown placement). `ours` are
    /// the taints this drainer puts on problem nodes: a `NoSchedule` one of them keeps no running
    /// detector off the node.
    pub(crate) fn places(&self, node: &NodeView, ours: &[NodeTaint]) -> bool {
        let (node_selector, terms, tolerations) = match self {
            Placement::Unknown => return false,
            Placement::Everywhere => return true,
            Placement::DaemonSet {
                node_selector,
                terms,
                tolerations,
            } => (node_selector, terms, tolerations),
        };
        let selected = node_selector
            .iter()
            .all(|(k, v)| node.label(k) == Some(v.as_str()));
        let affine = terms.is_empty() || terms.iter().any(|t| term_matches(t, node));
        let tolerated = node.taints.iter().all(|t| {
            t.effect == TaintEffect::PreferNoSchedule
                || (t.effect == TaintEffect::NoSchedule && ours.contains(t))
                || tolerations.iter().any(|tol| tolerates(tol, t))
        });
        selected && affine && tolerated
    }
}

/// A node selector term: every expression and field requirement holds (an empty term matches
/// nothing, as the scheduler has it).
fn term_matches(t: &NodeSelectorTerm, node: &NodeView) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs.iter().all(|r| requirement(r, node.label(&r.key)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then(|| node.name.as_str());
            requirement(r, value)
        })
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// The placement of the configured detector DaemonSet among `daemonsets` (Unknown when it is not
/// there).
pub(crate) fn placement_among(
    daemonsets: &[DaemonSet],
    cfg: &crate::config::remedy::Watchdog,
) -> Placement {
    let Some((ns, name)) = &cfg.daemonset else {
        return Placement::Everywhere;
    };
    daemonsets
        .iter()
        .find(|d| {
            d.metadata.namespace.as_ref() == Some(ns) && d.metadata.name.as_ref() == Some(name)
        })
        .map(Placement::of)
        .unwrap_or_default()
}

/// Whether `tol` tolerates `taint` (the rules of `Toleration.ToleratesTaint`).
fn tolerates(tol: &Toleration, taint: &NodeTaint) -> bool {
    if tol
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect.as_str())
    {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    let exists = tol.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    if key != taint.key.as_str() {
        return false;
    }
    exists || tol.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
}

/// The newest heartbeat of the conditions the detector owns on `node` (a condition without one
/// counts by its transition), or None when it has none of them.
pub(crate) fn last_heard(node: &NodeView, also: &[String]) -> Option<Timestamp> {
    let annotated = node
        .annotations
        .get(OWNED_CONDITIONS_ANNOTATION)
        .unwrap_or_default();
    let owned =
        |t: &str| annotated.split(',').any(|o| o.trim() == t) || also.iter().any(|a| a == t);
    node.conditions
        .iter()
        .filter(|c| owned(&c.type_))
        .map(|c| match c.heartbeat {
            0 => c.since,
            s => Timestamp::from_second(s).unwrap_or(c.since),
        })
        .max()
}

/// Whether the detector on `node`, a selected node, is silent at `now`.
pub(crate) fn silence(
    node: &NodeView,
    cfg: &Config,
    placement: &Placement,
    now: Timestamp,
) -> Option<Silence> {
    let after = cfg.watchdog.silent_after?;
    if node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str()) {
        return None;
    }
    let placed = placement.places(node, &cfg.remedy.node_taints());
    let known = !matches!(placement, Placement::Unknown);
    let (last_heard, never) = match last_heard(node, &cfg.watchdog.conditions) {
        // A node the DaemonSet no longer places a pod on has no detector to hear from.
        Some(_) if known && !placed => return None,
        Some(t) => (t, false),
        // Never heard: silent once it has existed that long (a node without a creation time,
        // as hand-made files have, cannot be judged).
        None if placed && node.created > 0 => (Timestamp::from_second(node.created).ok()?, true),
        None => return None,
    };
    let declared = nodemedic_common::time::add(last_heard, after);
    (declared <= now).then_some(Silence {
        last_heard,
        never,
        declared,
    })
}

/// How long ago `t` was at `now`, to the second (for messages).
pub(crate) fn ago(t: Timestamp, now: Timestamp) -> Duration {
    Duration::from_secs((now.as_second() - t.as_second()).max(0) as u64)
}
