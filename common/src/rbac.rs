//! The API permissions a component needs, declared next to the code that makes the calls (see
//! `nodemedic_detector::report::kube::PERMISSIONS` and `nodemedic_drainer::act::PERMISSIONS`). A test
//! checks the shipped RBAC grants exactly these: nothing missing, nothing more, no wildcards.

/// One RBAC rule: verbs on a resource (or subresource, `pods/eviction`) of an API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// "" for the core group.
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// Granted in the component's own namespace (a Role), not cluster-wide.
    pub namespaced: bool,
}
