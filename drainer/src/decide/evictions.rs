//! Which pods a drain evicts (kubectl drain semantics with draino's options), pure.

use nodemedic_common::keys;

use crate::config::policy::{PodPolicy, PolicyAction};
use crate::config::{Config, ProtectedPods};
use crate::model::node::{NodeTaint, TaintEffect};
use crate::model::pod::{PodInfo, PodPhase, Projection, RULE_ANNOTATIONS};

/// The annotation keys to keep for `cfg`.
pub(crate) fn kept_annotations(cfg: &Config) -> Vec<String> {
    RULE_ANNOTATIONS
        .iter()
        .map(|s| s.to_string())
        .chain(cfg.protected_annotations.iter().map(|(k, _)| k.clone()))
        .collect()
}

/// What the controller's pod cache keeps for `cfg`: the annotations the rules read, and labels and
/// priority class names only if a pod policy matches on them.
pub(crate) fn projection(cfg: &Config) -> Projection {
    let (labels, priority_class) = crate::config::policy::needs(&cfg.pod_policies);
    Projection {
        annotations: Some(kept_annotations(cfg)),
        labels,
        priority_class,
        tolerations: false,
    }
}

/// The first pod policy that matches `pod`, with its place in the list.
pub(crate) fn policy_for<'a>(pod: &PodInfo, policies: &'a [PodPolicy]) -> Option<&'a PodPolicy> {
    policies.iter().find(|p| {
        let any = |list: &[String], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|x| x == v))
        };
        any(&p.namespaces, Some(&pod.namespace))
            && any(&p.owner_kinds, pod.owner_kind.as_deref())
            && any(&p.priority_classes, pod.priority_class())
            && p.selector
                .as_ref()
                .is_none_or(|s| s.matches(pod.labels().iter().map(|(k, v)| (k.clone(), v.clone()))))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PodAction {
    /// Evicted through the Eviction API.
    Evict,
    /// Not part of the drain (DaemonSet, mirror, finished, or protected and left in place).
    Skip,
    /// Protected, and `--protected-pods=block`: the drain does not start.
    Block,
    /// A pod policy lets it finish: evicted only if it is still running after the policy's wait.
    Wait,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PodPlan {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) action: PodAction,
    pub(crate) reason: String,
    /// The pod policy that classified it, if one did (the built-in rules otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<String>,
    /// What that policy has the drain do with it (waiting, deleting), for the drain.
    #[serde(skip)]
    pub(crate) policy_action: Option<PolicyAction>,
}

fn annotation<'a>(pod: &'a PodInfo, key: &str) -> Option<&'a str> {
    pod.annotations().get(key).map(String::as_str)
}

/// Why a pod may never be evicted, if it may not.
fn protected(pod: &PodInfo, cfg: &Config) -> Option<String> {
    // The never-evicted pods (shared with the stale-readiness evictions) are skipped before this.
    if annotation(pod, keys::SAFE_TO_EVICT_ANNOTATION) == Some("false")
        && !cfg.ignore_safe_to_evict_annotation
    {
        return Some(format!(
            "protected by {}=false",
            keys::SAFE_TO_EVICT_ANNOTATION
        ));
    }
    // Karpenter's own: a pod it never disrupts is one a drain of ours leaves too (issue 79).
    if annotation(pod, keys::DO_NOT_DISRUPT_ANNOTATION) == Some("true") {
        return Some(format!(
            "protected by {}=true",
            keys::DO_NOT_DISRUPT_ANNOTATION
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

/// Decide for one pod: the built-in protections first (finished, mirror, never evicted), then
/// the first pod policy that matches, then the pod rules (DaemonSet, protected, emptyDir, ...).
pub(crate) fn decide(pod: &PodInfo, cfg: &Config) -> PodPlan {
    let plan = |action, reason: String, policy: Option<&PodPolicy>| PodPlan {
        namespace: pod.namespace.to_string(),
        name: pod.name.to_string(),
        action,
        reason,
        policy: policy.map(|p| p.name.clone()),
        policy_action: policy.map(|p| p.action.clone()),
    };
    if pod.phase.is_some_and(PodPhase::finished) {
        return plan(PodAction::Skip, "finished".into(), None);
    }
    if annotation(pod, keys::MIRROR_POD_ANNOTATION).is_some() {
        return plan(PodAction::Skip, "mirror (static) pod".into(), None);
    }
    let protected_action = match cfg.protected_pods {
        ProtectedPods::Leave => PodAction::Skip,
        ProtectedPods::Block => PodAction::Block,
    };
    if let Some(why) =
        nodemedic_common::exempt::never_evicted(&pod.namespace, pod.annotations(), pod.priority)
    {
        return plan(protected_action, why, None);
    }
    if let Some(p) = policy_for(pod, &cfg.pod_policies) {
        let (action, reason) = match &p.action {
            PolicyAction::Evict => (
                PodAction::Evict,
                format!("evictable (pod policy {})", p.name),
            ),
            PolicyAction::Skip => (
                PodAction::Skip,
                format!(
                    "never evicted (pod policy {}); the drain completes without it",
                    p.name
                ),
            ),
            PolicyAction::Wait { max } => (
                PodAction::Wait,
                format!(
                    "let finish (pod policy {}): evicted only if still running {} after the drain starts",
                    p.name,
                    humantime::format_duration(*max)
                ),
            ),
            PolicyAction::Delete { after } => (
                PodAction::Evict,
                format!(
                    "evictable (pod policy {}): deleted instead once PodDisruptionBudgets have refused it for {}",
                    p.name,
                    humantime::format_duration(*after)
                ),
            ),
        };
        return plan(action, reason, Some(p));
    }
    let (action, reason) = if pod.owner_kind.as_deref() == Some("DaemonSet")
        && !cfg.evict_daemonset_pods
    {
        (PodAction::Skip, "DaemonSet pod".to_string())
    } else if let Some(why) = protected(pod, cfg) {
        (protected_action, why)
    } else if pod.owner_kind.as_deref() == Some("DaemonSet") {
        (
            PodAction::Evict,
            "evictable: DaemonSet pod (--evict-daemonset-pods; its DaemonSet recreates it on this node)"
                .to_string(),
        )
    } else {
        (PodAction::Evict, "evictable".to_string())
    };
    plan(action, reason, None)
}

/// What a NoExecute problem taint does to a pod once the node is tainted: one that does not
/// tolerate it is evicted at once by the taint manager, PodDisruptionBudgets aside (what `drainer
/// plan` must show before anyone turns such a taint on).
pub(crate) fn under_no_execute(pod: &PodInfo, plan: PodPlan, taints: &[NodeTaint]) -> PodPlan {
    let no_execute: Vec<&NodeTaint> = taints
        .iter()
        .filter(|t| t.effect == TaintEffect::NoExecute)
        .collect();
    if no_execute.is_empty() || pod.phase.is_some_and(PodPhase::finished) {
        return plan;
    }
    let untolerated: Vec<String> = match pod.tolerations() {
        Some(tols) => no_execute
            .iter()
            .filter(|t| !tols.iter().any(|tol| tol.tolerates(t)))
            .map(|t| t.to_string())
            .collect(),
        // The controller does not keep tolerations: say what the taint does unless it is tolerated.
        None => {
            let taints: Vec<String> = no_execute.iter().map(|t| t.to_string()).collect();
            return PodPlan {
                action: PodAction::Evict,
                reason: format!(
                    "evicted at once by the taint manager unless it tolerates {} (PodDisruptionBudgets do not apply)",
                    taints.join(", ")
                ),
                ..plan
            };
        }
    };
    if untolerated.is_empty() {
        return PodPlan {
            reason: format!("{}; tolerates the NoExecute taint", plan.reason),
            ..plan
        };
    }
    PodPlan {
        action: PodAction::Evict,
        reason: format!(
            "evicted at once by the taint manager: does not tolerate {} (PodDisruptionBudgets do not apply)",
            untolerated.join(", ")
        ),
        ..plan
    }
}
