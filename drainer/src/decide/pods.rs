//! Which pods a drain evicts (kubectl drain semantics with draino's options).

use k8s_openapi::api::core::v1::Pod;
use nodemedic_common::keys;

use crate::config::{Config, ProtectedPods};

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

fn owner_kind(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.as_str())
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Why a pod may never be evicted, if it may not.
fn protected(pod: &Pod, cfg: &Config) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    if ns == "kube-system" && annotation(pod, keys::NOT_EVICTED_POD_ANNOTATION) == Some("") {
        return Some(format!(
            "not-evicted pod ({})",
            keys::NOT_EVICTED_POD_ANNOTATION
        ));
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.priority)
        .is_some_and(|p| p >= keys::CRITICAL_PRIORITY)
    {
        return Some("critical pod (priority >= 2000000000)".into());
    }
    if annotation(pod, keys::CRITICAL_POD_ANNOTATION).is_some() {
        return Some(format!("critical pod ({})", keys::CRITICAL_POD_ANNOTATION));
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
    let uses_empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    if uses_empty_dir && !cfg.evict_emptydir_pods {
        return Some("uses emptyDir (allow with --evict-emptydir-pods)".into());
    }
    match owner_kind(pod) {
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
pub fn decide(pod: &Pod, cfg: &Config) -> PodPlan {
    let (action, reason) = if matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        (PodAction::Skip, "finished".to_string())
    } else if annotation(pod, keys::MIRROR_POD_ANNOTATION).is_some() {
        (PodAction::Skip, "mirror (static) pod".to_string())
    } else if owner_kind(pod) == Some("DaemonSet") {
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
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        action,
        reason,
    }
}
