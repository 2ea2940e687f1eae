//! The drainer's settings as a YAML file (`--config`, camelCase keys, the same settings as the
//! flags), raw: every value with its position, for errors that say `file:line:column`. Pure data
//! and its parse.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ProtectedPods;

/// The file's keys; values keep their position (`Spanned`) for errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    #[serde(default)]
    pub conditions: Vec<Spanned<String>>,
    pub node_label_expr: Option<Spanned<String>>,
    pub node_selector: Option<Spanned<String>>,
    pub drain_buffer: Option<Spanned<String>>,
    pub max_grace_period: Option<Spanned<String>>,
    pub eviction_headroom: Option<Spanned<String>>,
    pub skip_drain: Option<bool>,
    pub evict_emptydir_pods: Option<bool>,
    pub evict_unreplicated_pods: Option<bool>,
    pub evict_statefulset_pods: Option<bool>,
    pub evict_daemonset_pods: Option<bool>,
    pub allow_force_delete: Option<bool>,
    pub ignore_safe_to_evict_annotation: Option<bool>,
    #[serde(default)]
    pub protected_pod_annotations: Vec<Spanned<String>>,
    pub protected_pods: Option<ProtectedPods>,
    pub max_drains_in_flight: Option<usize>,
    pub max_cordoned: Option<Spanned<String>>,
    pub kosmos_other_conditions: Option<bool>,
    pub dry_run: Option<bool>,
    pub stale_readiness_threshold: Option<Spanned<String>>,
    pub evict_stale_pods: Option<bool>,
    pub max_unhealthy: Option<Spanned<String>>,
    pub breaker_new: Option<Spanned<String>>,
    pub breaker_window: Option<Spanned<String>>,
    pub breaker_cooldown: Option<Spanned<String>>,
    pub failure_domain: Option<Spanned<String>>,
    pub kosmos_cluster_label: Option<Spanned<String>>,
    pub max_cordoned_per_domain: Option<Spanned<String>>,
    pub domain_outage: Option<Spanned<String>>,
    pub domain_outage_min_nodes: Option<usize>,
    pub flap_threshold: Option<usize>,
    pub flap_window: Option<Spanned<String>>,
    pub correlate_min: Option<usize>,
    pub correlate_window: Option<Spanned<String>>,
    #[serde(default)]
    pub drain_windows: Vec<Spanned<String>>,
    #[serde(default)]
    pub after_drain_labels: Vec<Spanned<String>>,
    #[serde(default)]
    pub after_drain_annotations: Vec<Spanned<String>>,
    #[serde(default)]
    pub after_drain_taints: Vec<Spanned<String>>,
    pub delete_drained_node_after: Option<Spanned<String>>,
    #[serde(default)]
    pub notify_urls: Vec<Spanned<String>>,
    pub notify_allow_http: Option<bool>,
    pub cordon: Option<bool>,
    #[serde(default)]
    pub problem_taints: Vec<Spanned<String>>,
    pub uncordon_after: Option<Spanned<String>>,
    pub probation_taint: Option<Spanned<String>>,
    pub detector_silent_after: Option<Spanned<String>>,
    #[serde(rename = "detectorDaemonSet")]
    pub detector_daemonset: Option<Spanned<String>>,
    #[serde(default)]
    pub detector_conditions: Vec<Spanned<String>>,
    pub history_file: Option<std::path::PathBuf>,
    /// Drain policies per workload, first match wins (`config::policy`).
    #[serde(default)]
    pub pod_policies: Vec<RawPolicy>,
}

/// A policy as the file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPolicy {
    pub name: Option<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub selector: Option<Spanned<String>>,
    #[serde(default)]
    pub owner_kinds: Vec<String>,
    #[serde(default)]
    pub priority_classes: Vec<String>,
    pub action: Spanned<String>,
    pub max_wait: Option<Spanned<String>>,
    pub after: Option<Spanned<String>>,
}
