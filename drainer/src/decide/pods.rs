//! Which pods a drain evicts (kubectl drain semantics with draino's options).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use nodemedic_common::keys;

use crate::config::{Config, ProtectedPods};

/// What the drainer keeps of a Pod: the fields its rules and evictions read, a few hundred bytes
/// instead of the several kilobytes of a full `Pod`, so 50,000 pods fit in tens of MiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub node: Option<String>,
    pub phase: Option<String>,
    /// Kind of the controlling owner (ReplicaSet, DaemonSet, StatefulSet, Job, Node for mirror pods).
    pub owner_kind: Option<String>,
    pub priority: Option<i32>,
    pub uses_empty_dir: bool,
    pub grace_period_seconds: Option<i64>,
    /// Running, containers ready, Ready=False, gates met: stale if its node has been Ready a while
    /// (see `decide::stale`).
    pub readiness_stale: bool,
    /// Labels, for `drainer plan` only (empty when projected with `keep`).
    pub labels: BTreeMap<String, String>,
    /// Only the annotations the rules look at (all of them when projected with `keep: None`).
    pub annotations: BTreeMap<String, String>,
}

/// Annotation keys the pod rules read, besides configured protected annotations.
pub const RULE_ANNOTATIONS: &[&str] = &[
    keys::NOT_EVICTED_POD_ANNOTATION,
    keys::CRITICAL_POD_ANNOTATION,
    keys::SAFE_TO_EVICT_ANNOTATION,
    keys::MIRROR_POD_ANNOTATION,
];

impl PodInfo {
    /// Project a Pod. `keep`: the annotation keys to keep (None keeps all).
    pub fn from_pod(pod: &Pod, keep: Option<&[String]>) -> PodInfo {
        let spec = pod.spec.as_ref();
        let annotations = pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| keep.is_none_or(|keep| keep.iter().any(|x| x == *k)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        PodInfo {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone(),
            node: spec.and_then(|s| s.node_name.clone()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            owner_kind: pod
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
                .map(|o| o.kind.clone()),
            priority: spec.and_then(|s| s.priority),
            uses_empty_dir: spec
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some())),
            grace_period_seconds: spec.and_then(|s| s.termination_grace_period_seconds),
            readiness_stale: super::stale::readiness_stale(pod),
            // Only `drainer plan` reads labels (to match PDBs); the controller does not keep them.
            labels: match keep {
                None => pod.metadata.labels.clone().unwrap_or_default(),
                Some(_) => BTreeMap::new(),
            },
            annotations,
        }
    }
}

/// The annotation keys to keep for `cfg`.
pub fn kept_annotations(cfg: &Config) -> Vec<String> {
    RULE_ANNOTATIONS
        .iter()
        .map(|s| s.to_string())
        .chain(cfg.protected_annotations.iter().map(|(k, _)| k.clone()))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PodAction {
    /// Evicted through the Eviction API.
    Evict,
    /// Not part of the drain (DaemonSet, mirror, finished, or protected and left in place).
    Skip,
    /// Protected, and `--protected-pods=block`: the drain does not start.
    Block,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodPlan {
    pub namespace: String,
    pub name: String,
    pub action: PodAction,
    pub reason: String,
}

fn annotation<'a>(pod: &'a PodInfo, key: &str) -> Option<&'a str> {
    pod.annotations.get(key).map(String::as_str)
}

/// Why a pod may never be evicted, if it may not.
fn protected(pod: &PodInfo, cfg: &Config) -> Option<String> {
    // Shared with the detector's stale-readiness evictions (mirror pods are skipped before this).
    if let Some(why) =
        nodemedic_common::exempt::never_evicted(&pod.namespace, &pod.annotations, pod.priority)
    {
        return Some(why);
    }
    if annotation(pod, keys::SAFE_TO_EVICT_ANNOTATION) == Some("false") {
        return Some(format!(
            "protected by {}=false",
            keys::SAFE_TO_EVICT_ANNOTATION
        ));
    }
    for (k, v) in &cfg.protected_annotations {
        match (annotation(pod, k), v) {
            (Some(_), None) => return Some(format!("protected by annotation {k}")),
            (Some(actual), Some(want)) if actual == want => {
                return Some(format!("protected by annotation {k}={want}"));
            }
            _ => {}
        }
    }
    if pod.uses_empty_dir && !cfg.evict_emptydir_pods {
        return Some("uses emptyDir (allow with --evict-emptydir-pods)".into());
    }
    match pod.owner_kind.as_deref() {
        None if !cfg.evict_unreplicated_pods => {
            Some("not managed by a controller (allow with --evict-unreplicated-pods)".into())
        }
        Some("StatefulSet") if !cfg.evict_statefulset_pods => {
            Some("StatefulSet pod (allow with --evict-statefulset-pods)".into())
        }
        _ => None,
    }
}

/// Decide for one pod.
pub fn decide(pod: &PodInfo, cfg: &Config) -> PodPlan {
    let (action, reason) = if matches!(pod.phase.as_deref(), Some("Succeeded" | "Failed")) {
        (PodAction::Skip, "finished".to_string())
    } else if annotation(pod, keys::MIRROR_POD_ANNOTATION).is_some() {
        (PodAction::Skip, "mirror (static) pod".to_string())
    } else if pod.owner_kind.as_deref() == Some("DaemonSet") {
        (PodAction::Skip, "DaemonSet pod".to_string())
    } else if let Some(why) = protected(pod, cfg) {
        match cfg.protected_pods {
            ProtectedPods::Leave => (PodAction::Skip, why),
            ProtectedPods::Block => (PodAction::Block, why),
        }
    } else {
        (PodAction::Evict, "evictable".to_string())
    };
    PodPlan {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        action,
        reason,
    }
}
