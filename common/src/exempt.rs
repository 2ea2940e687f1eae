//! Pods nodemedic never evicts, whoever asks (the drainer's drains and its stale-readiness
//! evictions): not-evicted pods (`kube-system` + `scheduler.alpha.kubernetes.io/not-evicted-pod: ""`),
//! critical pods (priority >= 2000000000, or the legacy critical-pod annotation in `kube-system`),
//! and mirror pods.

use std::collections::BTreeMap;

use crate::keys;

/// Why a pod with these properties may never be evicted, if it may not.
pub fn never_evicted(
    namespace: &str,
    annotations: &BTreeMap<String, String>,
    priority: Option<i32>,
) -> Option<String> {
    if annotations.contains_key(keys::MIRROR_POD_ANNOTATION) {
        return Some("mirror (static) pod".into());
    }
    if namespace == "kube-system"
        && annotations
            .get(keys::NOT_EVICTED_POD_ANNOTATION)
            .is_some_and(|v| v.is_empty())
    {
        return Some(format!(
            "not-evicted pod ({})",
            keys::NOT_EVICTED_POD_ANNOTATION
        ));
    }
    if priority.is_some_and(|p| p >= keys::CRITICAL_PRIORITY) {
        return Some("critical pod (priority >= 2000000000)".into());
    }
    // As the kubelet read it (IsCritical): only in kube-system. Anyone who may create pods can
    // annotate them, and a pod elsewhere marking itself critical would block every drain.
    if namespace == "kube-system" && annotations.contains_key(keys::CRITICAL_POD_ANNOTATION) {
        return Some(format!("critical pod ({})", keys::CRITICAL_POD_ANNOTATION));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_pod_is_never_evicted_only_where_kube_system_or_criticality_says_so() {
        assert!(
            never_evicted(
                "kube-system",
                &ann(&[(keys::NOT_EVICTED_POD_ANNOTATION, "")]),
                None
            )
            .unwrap()
            .starts_with("not-evicted")
        );
        assert_eq!(
            never_evicted(
                "default",
                &ann(&[(keys::NOT_EVICTED_POD_ANNOTATION, "")]),
                None
            ),
            None,
            "only in kube-system"
        );
        assert_eq!(
            never_evicted(
                "kube-system",
                &ann(&[(keys::NOT_EVICTED_POD_ANNOTATION, "x")]),
                None
            ),
            None,
            "only with an empty value"
        );
        assert!(
            never_evicted("a", &ann(&[]), Some(2_000_000_000))
                .unwrap()
                .starts_with("critical")
        );
        assert!(
            never_evicted(
                "kube-system",
                &ann(&[(keys::CRITICAL_POD_ANNOTATION, "")]),
                None
            )
            .unwrap()
            .starts_with("critical")
        );
        assert_eq!(
            never_evicted("a", &ann(&[(keys::CRITICAL_POD_ANNOTATION, "")]), None),
            None,
            "the critical-pod annotation counts only in kube-system"
        );
        assert!(
            never_evicted("a", &ann(&[(keys::MIRROR_POD_ANNOTATION, "x")]), None)
                .unwrap()
                .starts_with("mirror")
        );
        assert_eq!(never_evicted("a", &ann(&[]), Some(1000)), None);
    }
}
