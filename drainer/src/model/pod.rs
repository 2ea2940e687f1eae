//! What the drainer keeps of a Pod ([`PodInfo`]): the fields its pod rules, evictions and stale
//! readiness read, projected once when the pod is cached. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use nodemedic_common::keys;

use super::pod_lite::PodLite;

use super::intern::{ArcStr, intern};
pub(crate) use super::uid::Uid;

/// What the drainer keeps of a Pod: the fields its rules and evictions read, about 100 bytes
/// instead of the several kilobytes of a full `Pod`, so 650,000 of them fit in well under 256 MiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Shared ([`intern`]): many pods have the same one.
    pub(crate) namespace: ArcStr,
    pub(crate) name: ArcStr,
    pub(crate) uid: Option<Uid>,
    /// Shared, with the node's own name.
    pub(crate) node: Option<ArcStr>,
    /// Kind of the controlling owner (ReplicaSet, DaemonSet, StatefulSet, Job, Node for mirror
    /// pods); shared.
    pub(crate) owner_kind: Option<ArcStr>,
    pub(crate) priority: Option<i32>,
    /// `spec.terminationGracePeriodSeconds`, [`NO_GRACE`] when absent (see [`PodInfo::grace`]):
    /// an `Option<i64>` would take 16 bytes in each of hundreds of thousands of pods.
    pub(crate) grace_period_seconds: i64,
    /// Labels (`drainer plan` only: empty when projected with `keep`) and the kept annotations;
    /// boxed, as most pods in the controller's cache have neither.
    pub(crate) meta: Option<Box<Meta>>,
    /// `status.phase`; None when absent or not one of the five Kubernetes defines.
    pub(crate) phase: Option<PodPhase>,
    pub(crate) uses_empty_dir: bool,
    /// Running, containers ready, Ready=False, gates met: stale if its node has been Ready a while
    /// (see [`readiness_stale`]).
    pub(crate) readiness_stale: bool,
    /// Waiting on its node to start, or deleted and not gone; boxed, absent for most pods.
    pub(crate) progress: Option<Box<super::progress::Progress>>,
}

/// [`PodInfo::grace_period_seconds`] when the pod sets none (the API server rejects negative ones).
pub(crate) const NO_GRACE: i64 = i64::MIN;

/// A pod's phase (`status.phase`): one byte instead of a shared string in each of 50,000 pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    /// The phase named `s`, or None for a name Kubernetes does not define.
    pub fn parse(s: &str) -> Option<PodPhase> {
        Some(match s {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            _ => return None,
        })
    }

    /// Succeeded or Failed: the pod's containers will not run again.
    pub(crate) fn finished(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// What a [`PodInfo`] keeps besides its fixed fields: only what the decisions read (see
/// [`Projection`]), boxed since most pods in the controller's cache need none of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Meta {
    pub(crate) labels: BTreeMap<String, String>,
    /// Only the annotations the rules look at (all of them when projected with `keep: None`).
    pub(crate) annotations: BTreeMap<String, String>,
    /// `spec.priorityClassName`, shared (pod policies may match on it).
    pub(crate) priority_class: Option<ArcStr>,
    /// `spec.tolerations`, when projected (`drainer plan` tells which pods a NoExecute taint evicts).
    pub(crate) tolerations: Option<Box<[Toleration]>>,
}

/// A pod's toleration, as far as matching a taint needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Toleration {
    /// Empty with operator Exists: every key.
    pub(crate) key: String,
    /// `Exists` (any value) or `Equal`.
    pub(crate) exists: bool,
    pub(crate) value: String,
    /// Empty: every effect.
    pub(crate) effect: String,
}

impl Toleration {
    /// Whether it tolerates `taint` (Kubernetes' rule: key, operator and value, effect).
    pub(crate) fn tolerates(&self, taint: &super::node::NodeTaint) -> bool {
        let key = (self.key.is_empty() && self.exists) || self.key == *taint.key;
        let value = self.exists || self.value == taint.value.as_deref().unwrap_or("");
        let effect = self.effect.is_empty() || self.effect == taint.effect.as_str();
        key && value && effect
    }
}

impl std::fmt::Display for Projection {
    /// In words, for the log: `annotations (all), labels, priority class`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = vec![match &self.annotations {
            None => "annotations (all)".to_string(),
            Some(keys) if keys.is_empty() => "no annotations".to_string(),
            Some(keys) => format!("annotations {}", keys.join(", ")),
        }];
        for (kept, what) in [
            (self.labels, "labels"),
            (self.priority_class, "priority class"),
            (self.tolerations, "tolerations"),
        ] {
            if kept {
                parts.push(what.to_string());
            }
        }
        f.write_str(&parts.join("; "))
    }
}

/// What of a Pod a [`PodInfo`] keeps beyond its fixed fields: what the running settings read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Projection {
    /// The annotation keys to keep (None: all).
    pub(crate) annotations: Option<Vec<String>>,
    /// Labels (pod policies with a selector; `drainer plan`, to match PodDisruptionBudgets).
    pub(crate) labels: bool,
    /// The priority class name (pod policies naming one).
    pub(crate) priority_class: bool,
    /// Tolerations (`drainer plan`).
    pub(crate) tolerations: bool,
}

impl Projection {
    /// Everything (`drainer plan`, tests).
    pub(crate) fn everything() -> Projection {
        Projection {
            annotations: None,
            labels: true,
            priority_class: true,
            tolerations: true,
        }
    }
}

/// Annotation keys the pod rules read, besides configured protected annotations.
pub(crate) const RULE_ANNOTATIONS: &[&str] = &[
    keys::NOT_EVICTED_POD_ANNOTATION,
    keys::CRITICAL_POD_ANNOTATION,
    keys::SAFE_TO_EVICT_ANNOTATION,
    keys::DO_NOT_DISRUPT_ANNOTATION,
    keys::MIRROR_POD_ANNOTATION,
];

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

impl PodInfo {
    /// The pod's own termination grace period, if it sets one.
    pub(crate) fn grace(&self) -> Option<i64> {
        (self.grace_period_seconds != NO_GRACE).then_some(self.grace_period_seconds)
    }

    pub(crate) fn labels(&self) -> &BTreeMap<String, String> {
        self.meta.as_ref().map_or(&EMPTY, |m| &m.labels)
    }

    pub(crate) fn annotations(&self) -> &BTreeMap<String, String> {
        self.meta.as_ref().map_or(&EMPTY, |m| &m.annotations)
    }

    /// Project a Pod. `keep`: the annotation keys to keep, and nothing else of what
    /// [`Projection`] chooses (None: everything).
    pub fn from_pod(pod: &Pod, keep: Option<&[String]>) -> PodInfo {
        PodInfo::from_lite(&PodLite::from(pod), keep)
    }

    /// Project a Pod as the watch decodes it ([`PodLite`]); `keep` as for [`PodInfo::from_pod`].
    pub fn from_lite(pod: &PodLite, keep: Option<&[String]>) -> PodInfo {
        match keep {
            None => PodInfo::project(pod, &Projection::everything()),
            Some(keys) => PodInfo::project(
                pod,
                &Projection {
                    annotations: Some(keys.to_vec()),
                    ..Default::default()
                },
            ),
        }
    }

    /// Project a Pod, keeping what `keep` says.
    pub(crate) fn project(pod: &PodLite, keep: &Projection) -> PodInfo {
        let spec = pod.spec.as_ref();
        PodInfo {
            namespace: intern(pod.metadata.namespace.as_deref().unwrap_or_default()),
            name: ArcStr::from(pod.metadata.name.as_deref().unwrap_or_default()),
            uid: pod.metadata.uid.as_deref().map(Uid::parse),
            node: spec.and_then(|s| s.node_name.as_deref()).map(intern),
            phase: pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .and_then(PodPhase::parse),
            owner_kind: pod
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
                .map(|o| intern(&o.kind)),
            priority: spec.and_then(|s| s.priority),
            uses_empty_dir: spec
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some())),
            grace_period_seconds: spec
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(NO_GRACE),
            readiness_stale: readiness_stale(pod),
            progress: super::progress::progress(pod),
            meta: meta(pod, keep),
        }
    }
}

/// What `keep` says to keep of `pod` beyond the fixed fields; None when that is nothing.
fn meta(pod: &PodLite, keep: &Projection) -> Option<Box<Meta>> {
    let spec = pod.spec.as_ref();
    let annotations = pod
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| {
            keep.annotations
                .as_ref()
                .is_none_or(|keep| keep.iter().any(|x| x == *k))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<BTreeMap<String, String>>();
    let labels = match keep.labels {
        true => pod.metadata.labels.clone().unwrap_or_default(),
        false => BTreeMap::new(),
    };
    let priority_class = spec
        .and_then(|s| s.priority_class_name.as_deref())
        .filter(|_| keep.priority_class)
        .map(intern);
    let tolerations = keep.tolerations.then(|| {
        spec.and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone().unwrap_or_default(),
                exists: t.operator.as_deref() == Some("Exists"),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect()
    });
    // Tolerations kept (even none) are an answer, so they keep the box.
    let empty = labels.is_empty()
        && annotations.is_empty()
        && priority_class.is_none()
        && tolerations.is_none();
    (!empty).then(|| {
        Box::new(Meta {
            labels,
            annotations,
            priority_class,
            tolerations,
        })
    })
}

impl PodInfo {
    pub(crate) fn priority_class(&self) -> Option<&str> {
        self.meta.as_ref()?.priority_class.as_deref()
    }

    /// The pod's tolerations; None when they were not kept.
    pub(crate) fn tolerations(&self) -> Option<&[Toleration]> {
        match &self.meta {
            Some(m) => m.tolerations.as_deref(),
            None => None,
        }
    }
}

fn condition<'a>(pod: &'a PodLite, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// Is this pod's readiness stale, its node aside: Running, ContainersReady=True, Ready=False, every
/// readiness gate met? (Computed once, when the pod is cached; `decide::stale` adds the node.)
pub(crate) fn readiness_stale(pod: &PodLite) -> bool {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let gates_met = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_none_or(|gates| {
            gates
                .iter()
                .all(|g| condition(pod, &g.condition_type) == Some("True"))
        });
    running
        && condition(pod, "ContainersReady") == Some("True")
        && condition(pod, "Ready") == Some("False")
        && gates_met
}

#[cfg(test)]
mod tests {
    use super::{PodPhase, Uid};

    #[test]
    fn phases_are_the_five_kubernetes_defines_and_two_are_finished() {
        let all = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
        let finished: Vec<_> = all
            .iter()
            .filter(|s| PodPhase::parse(s).is_some_and(PodPhase::finished))
            .collect();
        assert_eq!(finished, [&"Succeeded", &"Failed"]);
        assert!(all.iter().all(|s| PodPhase::parse(s).is_some()));
        for other in ["", "running", "Completed"] {
            assert_eq!(PodPhase::parse(other), None, "{other}");
        }
    }

    #[test]
    fn uuids_are_kept_as_16_bytes_and_print_as_given() {
        let s = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        assert!(matches!(Uid::parse(s), Uid::Uuid(_)));
        assert_eq!(Uid::parse(s).to_string(), s);
        for other in [
            "p1",
            "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fz",
            "é",
        ] {
            assert_eq!(Uid::parse(other), Uid::Other(other.into()), "{other}");
            assert_eq!(Uid::parse(other).to_string(), other);
        }
    }
}
