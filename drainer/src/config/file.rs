//! The drainer's settings as a YAML file (`--config`, camelCase keys, the same settings as the
//! flags), raw: every value with its position, for errors that say `file:line:column`. Pure data
//! and its parse.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ProtectedPods;

/// The file's keys; values keep their position (`Spanned`) for errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileConfig {
    #[serde(default)]
    pub(crate) conditions: Vec<Spanned<ConditionText>>,
    pub(crate) node_label_expr: Option<Spanned<String>>,
    pub(crate) node_selector: Option<Spanned<String>>,
    pub(crate) drain_buffer: Option<Spanned<String>>,
    pub(crate) max_grace_period: Option<Spanned<String>>,
    pub(crate) eviction_headroom: Option<Spanned<String>>,
    pub(crate) skip_drain: Option<bool>,
    pub(crate) lifecycle_conditions: Option<bool>,
    pub(crate) evict_emptydir_pods: Option<bool>,
    pub(crate) evict_unreplicated_pods: Option<bool>,
    pub(crate) evict_statefulset_pods: Option<bool>,
    pub(crate) evict_daemonset_pods: Option<bool>,
    pub(crate) allow_force_delete: Option<bool>,
    pub(crate) ignore_safe_to_evict_annotation: Option<bool>,
    #[serde(default)]
    pub(crate) protected_pod_annotations: Vec<Spanned<String>>,
    pub(crate) protected_pods: Option<ProtectedPods>,
    pub(crate) max_drains_in_flight: Option<usize>,
    pub(crate) max_cordoned: Option<Spanned<String>>,
    pub(crate) kosmos_other_conditions: Option<bool>,
    pub(crate) dry_run: Option<bool>,
    pub(crate) stale_readiness_threshold: Option<Spanned<String>>,
    pub(crate) evict_stale_pods: Option<bool>,
    pub(crate) pods_not_starting_after: Option<Spanned<String>>,
    pub(crate) pods_not_terminating_after: Option<Spanned<String>>,
    pub(crate) max_unhealthy: Option<Spanned<String>>,
    pub(crate) breaker_new: Option<Spanned<String>>,
    pub(crate) breaker_window: Option<Spanned<String>>,
    pub(crate) breaker_cooldown: Option<Spanned<String>>,
    pub(crate) failure_domain: Option<Spanned<String>>,
    pub(crate) kosmos_cluster_label: Option<Spanned<String>>,
    pub(crate) max_cordoned_per_domain: Option<Spanned<String>>,
    pub(crate) domain_outage: Option<Spanned<String>>,
    pub(crate) domain_outage_min_nodes: Option<usize>,
    pub(crate) flap_threshold: Option<usize>,
    pub(crate) flap_window: Option<Spanned<String>>,
    pub(crate) correlate_min: Option<usize>,
    pub(crate) correlate_window: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) drain_windows: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) after_drain_labels: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) after_drain_annotations: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) after_drain_taints: Vec<Spanned<String>>,
    pub(crate) delete_drained_node_after: Option<Spanned<String>>,
    pub(crate) reboot_deadline: Option<Spanned<String>>,
    pub(crate) restart_deadline: Option<Spanned<String>>,
    pub(crate) replace_deadline: Option<Spanned<String>>,
    pub(crate) max_reboots_per_node_per_day: Option<u32>,
    pub(crate) max_replacements_per_hour: Option<u32>,
    pub(crate) slow_start_dwell: Option<Spanned<String>>,
    pub(crate) slow_start_cooldown: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) notify_urls: Vec<Spanned<String>>,
    pub(crate) notify_allow_http: Option<bool>,
    pub(crate) cordon: Option<bool>,
    #[serde(default)]
    pub(crate) problem_taints: Vec<Spanned<String>>,
    pub(crate) uncordon_after: Option<Spanned<String>>,
    pub(crate) probation_taint: Option<Spanned<String>>,
    pub(crate) detector_silent_after: Option<Spanned<String>>,
    #[serde(rename = "detectorDaemonSet")]
    pub(crate) detector_daemonset: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) detector_conditions: Vec<Spanned<String>>,
    pub(crate) history_file: Option<std::path::PathBuf>,
    /// Drain policies per workload, first match wins (`config::policy`).
    #[serde(default)]
    pub(crate) pod_policies: Vec<RawPolicy>,
}

/// A policy as the file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawPolicy {
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) namespaces: Vec<String>,
    pub(crate) selector: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) owner_kinds: Vec<String>,
    #[serde(default)]
    pub(crate) priority_classes: Vec<String>,
    pub(crate) action: Spanned<String>,
    pub(crate) max_wait: Option<Spanned<String>>,
    pub(crate) after: Option<Spanned<String>>,
}

/// A condition as the file gives it: the text `drainer run` takes (`KernelDeadlock=True,10m: drain,
/// reboot`), or the same with its ladder left unquoted, which YAML reads as a mapping of one entry
/// (`KernelDeadlock=True,10m` to `drain, reboot`, or to a list of steps): taken as that text. Any
/// other shape is refused saying what a condition looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConditionText(pub(crate) String);

impl<'de> Deserialize<'de> for ConditionText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ConditionText, D::Error> {
        d.deserialize_any(ConditionVisitor)
    }
}

const CONDITION_SHAPE: &str = "a condition: `Type`, `Type=Status,MinDuration`, or with its ladder `Type=Status,MinDuration: drain, reboot` (quote it, or YAML reads it as a mapping)";

struct ConditionVisitor;

impl<'de> serde::de::Visitor<'de> for ConditionVisitor {
    type Value = ConditionText;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(CONDITION_SHAPE)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ConditionText, E> {
        Ok(ConditionText(v.to_string()))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<ConditionText, A::Error> {
        let Some((condition, steps)) = map.next_entry::<String, Steps>()? else {
            return Err(serde::de::Error::custom(CONDITION_SHAPE));
        };
        if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            return Err(serde::de::Error::custom(
                "one condition per list item: `- KernelDeadlock=True,10m: drain, reboot`",
            ));
        }
        Ok(ConditionText(format!("{condition}: {}", steps.0)))
    }
}

/// A ladder's steps as YAML may give them unquoted: `drain, reboot` or `[drain, reboot]`.
struct Steps(String);

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Steps;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a ladder's steps: `drain, reboot, replace`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Steps, E> {
                Ok(Steps(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Steps, A::Error> {
                let mut steps = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    steps.push(s);
                }
                Ok(Steps(steps.join(", ")))
            }
        }
        d.deserialize_any(V)
    }
}
