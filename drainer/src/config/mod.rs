//! The drainer's settings, frozen: what every layer above reads ([`Config`]), built from the raw
//! flags (`flags`) and file (`file`) by `build`, with the values their parsers (`spec`, `select`,
//! `drain_window`, `draino`, `url`) check. Pure.

pub mod budget;
pub mod build;
pub(crate) mod ca;
pub mod ceilings;
pub(crate) mod convert;
pub mod drain_window;
pub mod draino;
pub(crate) mod effective;
pub mod file;
pub mod flags;
pub mod kingpin;
pub mod ladder;
pub mod policy;
pub mod published;
pub mod remedy;
pub mod safety;
pub mod select;
pub mod spec;
pub mod taint;
pub mod url;

use std::time::Duration;

pub use budget::{Budget, BudgetError};
use select::Selector;
use spec::ConditionSpec;
pub use taint::{Taint, TaintError};

/// The owner name of a drainer run with the default `--lease-name`.
pub(crate) const DEFAULT_OWNER: &str = "nodemedic-drainer";

/// What to do with a pod we may not evict.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ProtectedPods {
    /// Leave it running; the drain completes around it (draino's behaviour).
    Leave,
    /// The drain does not start and says which pods block it (kubectl drain's behaviour).
    Block,
}

#[derive(Debug)]
pub struct Config {
    /// This drainer's name, written into its drain records (the Lease name when running).
    pub owner: String,
    /// How drain records are sealed and checked: the running drainer's key (from its Secret), a
    /// key of this process's own until one is set, or unchecked for `plan` and `explain` on files.
    pub records: crate::model::seal::RecordTrust,
    pub selector: Selector,
    pub conditions: Vec<ConditionSpec>,
    pub drain_buffer: Duration,
    pub max_grace_period: Duration,
    pub eviction_headroom: Duration,
    pub skip_drain: bool,
    /// Write KEP-5683's `DrainInProgress` and `Drained` conditions (`--lifecycle-conditions`).
    pub lifecycle_conditions: bool,
    pub evict_emptydir_pods: bool,
    pub evict_unreplicated_pods: bool,
    pub evict_statefulset_pods: bool,
    /// Evict DaemonSet pods too (draino's `--evict-daemonset-pods`); their controller recreates them
    /// on the cordoned node, since they tolerate `unschedulable`.
    pub evict_daemonset_pods: bool,
    /// Delete a pod with grace 0 when its eviction fails other than by a PodDisruptionBudget, or when
    /// it is still there at the drain's deadline (draino's `--allow-force-delete`).
    pub allow_force_delete: bool,
    /// `cluster-autoscaler.kubernetes.io/safe-to-evict=false` no longer protects a pod (draino's
    /// `--ignore-safe-to-evict-annotation`).
    pub ignore_safe_to_evict_annotation: bool,
    /// `KEY` or `KEY=VALUE`.
    pub protected_annotations: Vec<(String, Option<String>)>,
    pub protected_pods: ProtectedPods,
    pub max_drains_in_flight: usize,
    pub max_cordoned: Budget,
    pub kosmos_label: (String, String),
    /// Act on Kosmos leaf nodes for conditions other than Ready (default off).
    pub kosmos_other_conditions: bool,
    pub exclude_label: (String, String),
    pub dry_run: bool,
    /// First retry delay after a failed drain (doubles, capped at `retry_max`).
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Pods evicted at once during one drain.
    pub eviction_concurrency: usize,
    /// Report pods whose readiness is stale once their node has been Ready this long (None: off).
    pub stale_readiness: Option<Duration>,
    /// Evict stale pods too.
    pub evict_stale_pods: bool,
    /// When pods waiting to start or to go make their node's PodsNotStarting or PodsNotTerminating
    /// condition True (written as reporting; acted on only when the conditions name them).
    pub symptoms: SymptomSettings,
    /// How often a waiting node's WaitingForBudget Event count is refreshed (default 1m).
    pub event_refresh: Duration,
    /// Fleet safety: the breaker, failure domains, flap damping, drain windows.
    pub safety: safety::Safety,
    /// What a drained node gets, and whether the Node object is deleted later.
    pub after_drain: AfterDrain,
    /// The limits every remediation ladder runs within (the ladders are the conditions').
    pub ladder: ladder::Limits,
    /// Where notifications go.
    pub notify_urls: Vec<url::NotifyUrl>,
    /// Cordon and/or taints while a node has a problem, probation before it is let go.
    pub remedy: remedy::Remedy,
    /// Noticing nodes whose detector went silent.
    pub watchdog: remedy::Watchdog,
    /// What a drain does with each workload's pods, first match wins.
    pub pod_policies: Vec<policy::PodPolicy>,
    /// Record the watched conditions' transitions the drainer observes here, as JSON lines, for
    /// backtests (`--history-file`; bounded, rotated).
    pub history_file: Option<std::path::PathBuf>,
    /// The settings as the config file writes them (`key`, value), for what a reload changed
    /// (`config::effective`; notification URLs are not among them).
    pub said: Vec<(String, String)>,
}

/// Marks for a drained node (so an autoscaler, Karpenter or a machine controller replaces it),
/// removed again if it recovers and is uncordoned; and optionally deleting the Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfterDrain {
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub taints: Vec<Taint>,
    /// Delete the Node this long after its drain succeeded.
    pub delete_after: Option<Duration>,
}

impl AfterDrain {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.taints.is_empty()
    }
}

/// A value that is not `KEY=VALUE`, or an after-drain mark in a domain the drainer never writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PairError {
    #[error("{0:?}: expected KEY=VALUE")]
    Form(String),
    #[error(
        "{0:?}: keys in the {1} domain belong to Kubernetes, nodemedic or Kosmos (a node's role, zone, exclusion, a person's veto); the drainer does not write them, and the own-node policy refuses it if asked (deploy/components/own-node-policy/drainer-policy.yaml)"
    )]
    Owned(String, &'static str),
}

/// The key domains (and their subdomains) whose labels and annotations the drainer never writes
/// but for its own record, as `deploy/components/own-node-policy/drainer-policy.yaml`'s `owned`
/// names them (a test holds the two equal).
pub(crate) const OWNED_DOMAINS: [&str; 5] = [
    "kubernetes.io",
    "k8s.io",
    "nodemedic.io",
    "kosmos.io",
    // Cluster API's (`cluster.x-k8s.io/machine` names the node's Machine).
    "x-k8s.io",
];

/// The owned domain `key` is in, if any: `topology.kubernetes.io/zone` is in `kubernetes.io`.
pub(crate) fn owned_domain(key: &str) -> Option<&'static str> {
    let (prefix, _) = key.split_once('/')?;
    OWNED_DOMAINS
        .into_iter()
        .find(|d| prefix == *d || prefix.strip_suffix(d).is_some_and(|p| p.ends_with('.')))
}

/// An after-drain label or annotation: `KEY=VALUE`, its key outside [`OWNED_DOMAINS`].
pub(crate) fn mark(v: &str) -> Result<(String, String), PairError> {
    let (k, val) = pair(v)?;
    match owned_domain(&k) {
        Some(d) => Err(PairError::Owned(v.to_string(), d)),
        None => Ok((k, val)),
    }
}

/// `KEY=VALUE` (the key trimmed, not empty).
pub(crate) fn pair(v: &str) -> Result<(String, String), PairError> {
    match v.split_once('=') {
        Some((k, val)) if !k.trim().is_empty() => Ok((k.trim().to_string(), val.to_string())),
        _ => Err(PairError::Form(v.to_string())),
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            owner: DEFAULT_OWNER.into(),
            records: crate::model::seal::RecordTrust::process(),
            selector: Selector::All,
            conditions: Vec::new(),
            drain_buffer: Duration::from_secs(600),
            max_grace_period: Duration::from_secs(480),
            eviction_headroom: Duration::from_secs(30),
            skip_drain: false,
            lifecycle_conditions: false,
            evict_emptydir_pods: false,
            evict_unreplicated_pods: false,
            evict_statefulset_pods: false,
            evict_daemonset_pods: false,
            allow_force_delete: false,
            ignore_safe_to_evict_annotation: false,
            protected_annotations: Vec::new(),
            protected_pods: ProtectedPods::Leave,
            max_drains_in_flight: 1,
            max_cordoned: Budget::Percent(10.0),
            kosmos_label: (
                nodemedic_common::keys::KOSMOS_NODE_LABEL.into(),
                nodemedic_common::keys::KOSMOS_NODE_VALUE.into(),
            ),
            kosmos_other_conditions: false,
            exclude_label: (nodemedic_common::keys::EXCLUDE_LABEL.into(), "true".into()),
            dry_run: false,
            retry_base: Duration::from_secs(60),
            retry_max: Duration::from_secs(1800),
            eviction_concurrency: 8,
            stale_readiness: Some(Duration::from_secs(120)),
            evict_stale_pods: false,
            symptoms: SymptomSettings {
                not_starting_after: Some(Duration::from_secs(600)),
                not_terminating_after: Some(Duration::from_secs(300)),
            },
            event_refresh: Duration::from_secs(60),
            safety: Default::default(),
            after_drain: AfterDrain::default(),
            ladder: ladder::Limits::default(),
            notify_urls: Vec::new(),
            remedy: remedy::Remedy::default(),
            watchdog: remedy::Watchdog::default(),
            history_file: None,
            pod_policies: Vec::new(),
            said: Vec::new(),
        }
    }
}

impl Config {
    /// What `drainer run` warns of at start about these settings alone (no cluster needed), in the
    /// words it logs them; `config`, `plan` and `explain` say the same offline.
    pub(crate) fn start_warnings(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.dry_run {
            out.push(
                "dry run: no node is cordoned, drained or changed (the drainer's own Lease and ConfigMaps are kept as usual); each decision is logged as `action=would ...`. To act, write --no-dry-run (or take --dry-run off the command line) and leave dryRun out of the config file",
            );
        }
        if self.evict_daemonset_pods {
            out.push(
                "--evict-daemonset-pods: DaemonSet pods are evicted in drains, as draino did; their DaemonSet recreates them on the cordoned node at once (they tolerate unschedulable), so they keep running there",
            );
        }
        out
    }

    /// Whether a condition's remediation ladder reboots.
    pub(crate) fn ladder_reboots(&self) -> bool {
        self.conditions.iter().any(|c| {
            c.ladder
                .is_some_and(|l| l.steps().any(|s| s == ladder::Step::Reboot))
        })
    }

    /// What a reload changed, in the config file's words: `key: old -> new` for each setting
    /// whose value differs (notification URLs: "notifyUrls changed", never their tokens).
    pub(crate) fn changes_said(&self, new: &Config) -> Vec<String> {
        let mut out: Vec<String> = new
            .said
            .iter()
            .filter_map(|(key, now)| {
                let old = self.said.iter().find(|(k, _)| k == key).map(|(_, v)| v);
                match old {
                    Some(old) if old == now => None,
                    Some(old) => Some(format!("{key}: {old} -> {now}")),
                    None => Some(format!("{key}: {now}")),
                }
            })
            .collect();
        for (key, _) in &self.said {
            if !new.said.iter().any(|(k, _)| k == key) {
                out.push(format!("{key}: no longer set"));
            }
        }
        if self.notify_urls != new.notify_urls {
            out.push("notifyUrls changed".into());
        }
        out
    }

    /// The settings that differ from `self` in `new`, each as `name: old -> new`, compared as
    /// built (the tests' check that two ways of giving settings build the same). The owner is not
    /// a setting (it is the Lease name).
    #[cfg(test)]
    pub(crate) fn changes(&self, new: &Config) -> Vec<String> {
        let mut out = Vec::new();
        macro_rules! compare {
            ($($field:ident),+ $(,)?) => {$(
                let (old, now) = (format!("{:?}", self.$field), format!("{:?}", new.$field));
                if old != now {
                    out.push(format!("{}: {old} -> {now}", stringify!($field)));
                }
            )+};
        }
        compare!(
            selector,
            conditions,
            drain_buffer,
            max_grace_period,
            eviction_headroom,
            skip_drain,
            lifecycle_conditions,
            evict_emptydir_pods,
            evict_unreplicated_pods,
            evict_statefulset_pods,
            evict_daemonset_pods,
            allow_force_delete,
            ignore_safe_to_evict_annotation,
            protected_annotations,
            protected_pods,
            max_drains_in_flight,
            max_cordoned,
            kosmos_label,
            kosmos_other_conditions,
            exclude_label,
            dry_run,
            retry_base,
            retry_max,
            eviction_concurrency,
            stale_readiness,
            evict_stale_pods,
            symptoms,
            event_refresh,
            safety,
            after_drain,
            ladder,
            notify_urls,
            remedy,
            watchdog,
            pod_policies,
            history_file,
        );
        out
    }
}

/// A protected pod annotation that is not `KEY` or `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protected pod annotation {0:?}: expected KEY or KEY=VALUE")]
pub(crate) struct AnnotationError(pub String);

/// Parse `KEY[=VALUE]`.
pub(crate) fn protected_annotation(s: &str) -> Result<(String, Option<String>), AnnotationError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), Some(v.to_string()))),
        None if !s.is_empty() => Ok((s.to_string(), None)),
        _ => Err(AnnotationError(s.into())),
    }
}

/// How long before a symptom counts (`None`: not looked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymptomSettings {
    pub not_starting_after: Option<Duration>,
    pub not_terminating_after: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reload says what it changed as the config file writes it: keys and values an operator
    /// wrote, never a Rust dump, never a notification URL's token.
    #[test]
    fn a_reload_says_what_changed_in_the_files_words() {
        let args = crate::config::flags::PolicyArgs {
            config: Some("drainer.yaml".into()),
            ..Default::default()
        };
        let build = |text: &str| crate::config::build::build_with_text(&args, text, true).unwrap();
        let old = build(
            "conditions: [\"KernelDeadlock=True,10m\"]\nnodeLabelExpr: \"'pool' in metadata.labels\"\nnotifyUrls: [\"https://hooks.example/A-TOKEN\"]\n",
        );
        let new = build(
            "conditions: [\"KernelDeadlock=True,2h\"]\ndrainBuffer: 20m\nnotifyUrls: [\"https://hooks.example/B-TOKEN\"]\n",
        );
        let said = old.changes_said(&new);
        assert_eq!(
            said,
            [
                "conditions: [\"KernelDeadlock=True,10m\"] -> [\"KernelDeadlock=True,2h\"]",
                "drainBuffer: \"10m\" -> \"20m\"",
                "nodeLabelExpr: no longer set",
                "notifyUrls changed",
            ]
        );
        for line in &said {
            assert_eq!(nodemedic_tests::debug_dump::find(line), None, "{line}");
            assert!(!line.contains("TOKEN"));
        }
        assert!(old.changes_said(&build(
            "conditions: [\"KernelDeadlock=True,10m\"]\nnodeLabelExpr: \"'pool' in metadata.labels\"\nnotifyUrls: [\"https://hooks.example/A-TOKEN\"]\n"
        ))
        .is_empty());
    }

    #[test]
    fn changes_name_each_setting_that_differs() {
        let old = Config::default();
        assert!(old.changes(&Config::default()).is_empty());
        let new = Config {
            drain_buffer: Duration::from_secs(60),
            max_cordoned: Budget::Count(3),
            selector: Selector::cel("metadata.labels['pool'] == 'a'").unwrap(),
            owner: "someone-else".into(),
            ..Config::default()
        };
        assert_eq!(
            old.changes(&new),
            vec![
                "selector: All -> Cel(\"metadata.labels['pool'] == 'a'\")".to_string(),
                "drain_buffer: 600s -> 60s".to_string(),
                "max_cordoned: Percent(10.0) -> Count(3)".to_string(),
            ]
        );
    }

    #[test]
    fn a_budget_is_a_count_or_a_share_never_below_one() {
        assert_eq!("3".parse::<Budget>().unwrap().limit(100), 3);
        assert_eq!("10%".parse::<Budget>().unwrap().limit(100), 10);
        assert_eq!(
            "10%".parse::<Budget>().unwrap().limit(5),
            1,
            "never below one"
        );
        for bad in ["0", "0%", "150%", "x", "-1"] {
            assert!(bad.parse::<Budget>().is_err(), "{bad}");
        }
    }
}
