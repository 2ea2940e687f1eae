//! Drain policies per workload (`podPolicies` in `--config`): rules matched in order against each
//! pod of a drain, by namespace, label selector, owner kind and priority class; the first that
//! matches says what the drain does with the pod (built from the file's `RawPolicy` by
//! `build::pod_policies`, every error at its position). Pure.

use std::time::Duration;

/// A label selector over a pod's labels: as written, and as kube matches it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodSelector {
    pub(crate) text: String,
    pub(crate) selector: kube::core::Selector,
}

impl PodSelector {
    pub(crate) fn matches(&self, labels: impl Iterator<Item = (String, String)>) -> bool {
        use kube::core::SelectorExt;
        self.selector.matches(&labels.collect())
    }
}

/// What a drain does with a pod a policy matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PolicyAction {
    /// Evicted through the Eviction API (the default; the pod rules' exemptions do not apply).
    Evict,
    /// Never evicted; the drain completes without it.
    Skip,
    /// Let it finish (a Job's pod, a batch run): evicted only if still running `max` after the
    /// drain started.
    Wait { max: Duration },
    /// Evicted, and deleted instead (as `kubectl drain --disable-eviction`) once PodDisruptionBudgets
    /// have refused its eviction for `after`.
    Delete { after: Duration },
}

impl std::fmt::Display for PolicyAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = |d: &Duration| humantime::format_duration(*d).to_string();
        match self {
            PolicyAction::Evict => f.write_str("evict"),
            PolicyAction::Skip => f.write_str("skip"),
            PolicyAction::Wait { max } => write!(f, "wait up to {}", d(max)),
            PolicyAction::Delete { after } => {
                write!(f, "delete after {} of budget refusals", d(after))
            }
        }
    }
}

/// One rule: every criterion given must hold (a list: any of its values).
#[derive(Debug, Clone, PartialEq)]
pub struct PodPolicy {
    /// Its name in plans and Events (`podPolicies[N]` when the file gives none).
    pub(crate) name: String,
    pub(crate) namespaces: Vec<String>,
    pub(crate) selector: Option<PodSelector>,
    pub(crate) owner_kinds: Vec<String>,
    pub(crate) priority_classes: Vec<String>,
    pub(crate) action: PolicyAction,
}

/// What the pod cache must keep for these policies to be matched: labels (a selector), priority
/// class names.
pub(crate) fn needs(policies: &[PodPolicy]) -> (bool, bool) {
    (
        policies.iter().any(|p| p.selector.is_some()),
        policies.iter().any(|p| !p.priority_classes.is_empty()),
    )
}
