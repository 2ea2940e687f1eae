//! Which pods a drain evicts (kubectl drain semantics with draino's options), pure.

use nodemedic_common::keys;

use crate::config::{Config, ProtectedPods};
use crate::model::pod::{PodInfo, PodPhase, RULE_ANNOTATIONS};

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
    pod.annotations().get(key).map(String::as_str)
}

/// Why a pod may never be evicted, if it may not.
fn protected(pod: &PodInfo, cfg: &Config) -> Option<String> {
    // Shared with the detector's stale-readiness evictions (mirror pods are skipped before this).
    if let Some(why) =
        nodemedic_common::exempt::never_evicted(&pod.namespace, pod.annotations(), pod.priority)
    {
        return Some(why);
    }
    if annotation(pod, keys::SAFE_TO_EVICT_ANNOTATION) == Some("false")
        && !cfg.ignore_safe_to_evict_annotation
    {
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
    let (action, reason) = if pod.phase.is_some_and(PodPhase::finished) {
        (PodAction::Skip, "finished".to_string())
    } else if annotation(pod, keys::MIRROR_POD_ANNOTATION).is_some() {
        (PodAction::Skip, "mirror (static) pod".to_string())
    } else if pod.owner_kind.as_deref() == Some("DaemonSet") && !cfg.evict_daemonset_pods {
        (PodAction::Skip, "DaemonSet pod".to_string())
    } else if let Some(why) = protected(pod, cfg) {
        match cfg.protected_pods {
            ProtectedPods::Leave => (PodAction::Skip, why),
            ProtectedPods::Block => (PodAction::Block, why),
        }
    } else if pod.owner_kind.as_deref() == Some("DaemonSet") {
        (
            PodAction::Evict,
            "evictable: DaemonSet pod (--evict-daemonset-pods; its DaemonSet recreates it on this node)"
                .to_string(),
        )
    } else {
        (PodAction::Evict, "evictable".to_string())
    };
    PodPlan {
        namespace: pod.namespace.to_string(),
        name: pod.name.to_string(),
        action,
        reason,
    }
}
