//! The drainer's settings as flags (draino's names where draino has one): what `drainer run` and
//! `drainer plan` take, raw, before validation (`build`). Pure data.

use std::path::PathBuf;
use std::time::Duration;

use super::ProtectedPods;

/// Flags shared by `drainer run` and `drainer plan`. Serialized as the running drainer publishes
/// them (`config::published`) for `kubectl nodemedic` to decide with the same settings.
#[derive(Debug, Clone, Default, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PolicyArgs {
    /// Problem conditions: `Type`, `Type=Status` or `Type=Status,MinDuration` (e.g. `KernelDeadlock=True,10m`), each optionally with its remediation ladder after a colon: `KernelDeadlock=True,10m: drain, reboot, replace` (quoted in a shell; without one: cordon, drain, then wait, as draino). A type listed more than once is held under the first whose `reason=A|B` its reason matches: `KernelDeadlock=True,reason=DockerHung,10m: drain`.
    pub conditions: Vec<String>,
    /// A problem condition added to the others, the config file's or the command line's (repeatable; same form):
    /// what a kustomize component or a Helm value adds without copying the whole list, e.g.
    /// `--add-condition=MaintenanceScheduled=True` (deploy/components/cloud-maintenance). A type listed already
    /// stays under its first listing.
    #[arg(
        help_heading = "Selection",
        long = "add-condition",
        value_name = "CONDITION"
    )]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_conditions: Vec<String>,
    /// YAML file with the same settings (camelCase names); flags given here override it.
    #[arg(help_heading = "Selection", long)]
    pub config: Option<PathBuf>,
    /// CEL expression over the Node selecting the nodes to act on, e.g. `metadata.labels['draino'] in ['node']`.
    #[arg(
        help_heading = "Selection",
        long = "node-label-expr",
        env = "DRAINO_NODE_LABEL_EXPR"
    )]
    pub node_label_expr: Option<String>,
    /// Label selector alternative to --node-label-expr, e.g. `pool=blue,!gpu`.
    #[arg(help_heading = "Selection", long = "node-selector")]
    pub node_selector: Option<String>,
    /// draino's deprecated KEY=VALUE label (repeatable, all must match): added to --node-selector.
    #[arg(
        help_heading = "Selection",
        long = "node-label",
        env = "DRAINO_NODE_LABEL",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    pub node_labels: Vec<String>,
    /// Time between cordon and drain; also the spacing between drain starts. [default: 10m]
    #[arg(help_heading = "Budgets", long = "drain-buffer", env = "DRAINO_DRAIN_BUFFER", value_parser = nodemedic_common::time::parse_duration)]
    pub drain_buffer: Option<Duration>,
    /// Longest grace period given to an evicted pod. [default: 8m]
    #[arg(help_heading = "Eviction", long = "max-grace-period", env = "DRAINO_MAX_GRACE_PERIOD", value_parser = nodemedic_common::time::parse_duration)]
    pub max_grace_period: Option<Duration>,
    /// Extra time after max-grace-period before a drain is declared failed. [default: 30s]
    #[arg(help_heading = "Eviction", long = "eviction-headroom", env = "DRAINO_EVICTION_HEADROOM", value_parser = nodemedic_common::time::parse_duration)]
    pub eviction_headroom: Option<Duration>,
    /// Cordon only; never drain.
    #[arg(
        help_heading = "Eviction",
        long = "skip-drain",
        env = "DRAINO_SKIP_DRAIN"
    )]
    pub skip_drain: bool,
    /// Also evict pods with emptyDir volumes (their data is lost); without it they are left running.
    #[arg(
        help_heading = "Eviction",
        long = "evict-emptydir-pods",
        env = "DRAINO_EVICT_EMPTYDIR_PODS"
    )]
    pub evict_emptydir_pods: bool,
    /// Also evict pods no controller recreates; without it they are left running.
    #[arg(
        help_heading = "Eviction",
        long = "evict-unreplicated-pods",
        env = "DRAINO_EVICT_UNREPLICATED_PODS"
    )]
    pub evict_unreplicated_pods: bool,
    /// Also evict StatefulSet pods; without it they are left running.
    #[arg(
        help_heading = "Eviction",
        long = "evict-statefulset-pods",
        env = "DRAINO_EVICT_STATEFULSET_PODS"
    )]
    pub evict_statefulset_pods: bool,
    /// Also evict DaemonSet pods, as draino did: their DaemonSet recreates them on the cordoned node
    /// at once (they tolerate unschedulable). Without it they stay until the node goes.
    #[arg(
        help_heading = "Eviction",
        long = "evict-daemonset-pods",
        env = "DRAINO_EVICT_DAEMONSET_PODS"
    )]
    pub evict_daemonset_pods: bool,
    /// Delete a pod with grace period 0 when its eviction fails other than by a PodDisruptionBudget,
    /// or when it has not gone by the drain's deadline (draino's meaning; PDB refusals are still
    /// waited on, never deleted around).
    #[arg(
        help_heading = "Eviction",
        long = "allow-force-delete",
        env = "DRAINO_ALLOW_FORCE_DELETE"
    )]
    pub allow_force_delete: bool,
    /// Evict pods annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false too (draino's
    /// meaning; --protected-pod-annotation still protects).
    #[arg(
        help_heading = "Eviction",
        long = "ignore-safe-to-evict-annotation",
        env = "DRAINO_IGNORE_SAFE_TO_EVICT_ANNOTATION"
    )]
    pub ignore_safe_to_evict_annotation: bool,
    /// Pods with this annotation (`KEY` or `KEY=VALUE`) are never evicted (repeatable).
    #[arg(
        help_heading = "Eviction",
        long = "protected-pod-annotation",
        env = "DRAINO_PROTECTED_POD_ANNOTATION"
    )]
    pub protected_pod_annotations: Vec<String>,
    /// What a pod we may not evict does to a drain: leave it running or block the drain. [default: leave]
    #[arg(help_heading = "Eviction", long = "protected-pods", value_enum)]
    pub protected_pods: Option<ProtectedPods>,
    /// Drains running at once. [default: 1]
    #[arg(help_heading = "Budgets", long = "max-drains-in-flight")]
    pub max_drains_in_flight: Option<usize>,
    /// Nodes cordoned by the drainer at once: N or N% of selected nodes. [default: 10%]
    #[arg(help_heading = "Budgets", long = "max-cordoned")]
    pub max_cordoned: Option<String>,
    /// Also act on Kosmos leaf nodes for conditions other than Ready (never for Ready).
    #[arg(help_heading = "Conditions", long = "kosmos-other-conditions")]
    pub kosmos_other_conditions: bool,
    /// Log decisions and emit Events; change nothing else.
    #[arg(
        help_heading = "Output and operation",
        long = "dry-run",
        env = "DRAINO_DRY_RUN"
    )]
    pub dry_run: bool,
    /// Report pods whose readiness is stale once their node has been Ready this long (a node flap
    /// left them Ready=False with every container ready). "0s" turns it off. [default: 2m]
    #[arg(help_heading = "Eviction", long = "stale-readiness-threshold", value_parser = nodemedic_common::time::parse_duration)]
    pub stale_readiness_threshold: Option<Duration>,
    /// Also evict stale pods (Eviction API, PodDisruptionBudgets honoured; exempt pods never).
    #[arg(help_heading = "Eviction", long = "evict-stale-pods")]
    pub evict_stale_pods: bool,
    /// Set a node's PodsNotStarting condition when pods bound to it have waited this long to start
    /// and no container started there meanwhile (pods of an owner waiting on other nodes too do not
    /// count). Reported only, unless named among the conditions. "0s" turns it off. [default: 10m]
    #[arg(help_heading = "Conditions", long = "pods-not-starting-after", value_parser = nodemedic_common::time::parse_duration)]
    pub pods_not_starting_after: Option<Duration>,
    /// Set a node's PodsNotTerminating condition when pods deleted there are still there this long
    /// past their grace period. Reported only, unless named among the conditions. "0s" turns it
    /// off. [default: 5m]
    #[arg(help_heading = "Conditions", long = "pods-not-terminating-after", value_parser = nodemedic_common::time::parse_duration)]
    pub pods_not_terminating_after: Option<Duration>,
    /// Circuit breaker: open when more than N or N% of the selected nodes are unhealthy. [default: 30%]
    #[arg(help_heading = "Safety gates", long = "max-unhealthy")]
    pub max_unhealthy: Option<String>,
    /// Circuit breaker: open when more than N or N% became unhealthy within --breaker-window. [default: 20%]
    #[arg(help_heading = "Safety gates", long = "breaker-new")]
    pub breaker_new: Option<String>,
    /// The window of --breaker-new. [default: 5m]
    #[arg(help_heading = "Safety gates", long = "breaker-window", value_parser = nodemedic_common::time::parse_duration)]
    pub breaker_window: Option<Duration>,
    /// The breaker closes after the counts stayed under the thresholds this long. [default: 10m]
    #[arg(help_heading = "Safety gates", long = "breaker-cooldown", value_parser = nodemedic_common::time::parse_duration)]
    pub breaker_cooldown: Option<Duration>,
    /// The shortest min duration a watched `Ready` condition may have (`Ready=Unknown,5m`): a
    /// config file (an edit of its ConfigMap included) with a shorter one is refused, so whoever
    /// may edit that ConfigMap cannot make a network blip drain nodes. [default: no floor]
    #[arg(help_heading = "Conditions", long = "min-ready-duration", value_parser = nodemedic_common::time::parse_duration)]
    pub min_ready_duration: Option<Duration>,
    /// Node label naming a node's failure domain (Kosmos leaf nodes are their own); a node keeps
    /// the domain it had when first seen (a kubelet may set its own zone). [default: topology.kubernetes.io/zone]
    #[arg(help_heading = "Safety gates", long = "failure-domain")]
    pub failure_domain: Option<String>,
    /// The label of a Kosmos leaf node naming its member cluster, its failure domain; without it
    /// each leaf node is a member cluster of its own. [default: none]
    #[arg(help_heading = "Safety gates", long = "kosmos-cluster-label")]
    pub kosmos_cluster_label: Option<String>,
    /// Nodes cordoned at once per failure domain: N or N% of its selected nodes. [default: no limit]
    #[arg(help_heading = "Budgets", long = "max-cordoned-per-domain")]
    pub max_cordoned_per_domain: Option<String>,
    /// A domain with more than N% of its nodes unhealthy is an outage: nothing in it is cordoned or drained. [default: 50%]
    #[arg(help_heading = "Safety gates", long = "domain-outage")]
    pub domain_outage: Option<String>,
    /// Domains smaller than this are never an outage. [default: 3]
    #[arg(help_heading = "Safety gates", long = "domain-outage-min-nodes")]
    pub domain_outage_min_nodes: Option<usize>,
    /// A node whose watched conditions changed this many times within --flap-window is flapping (0: off). [default: 4]
    #[arg(help_heading = "Safety gates", long = "flap-threshold")]
    pub flap_threshold: Option<usize>,
    /// The flapping window; a flapping node is acted on once stable this long. [default: 10m]
    #[arg(help_heading = "Safety gates", long = "flap-window", value_parser = nodemedic_common::time::parse_duration)]
    pub flap_window: Option<Duration>,
    /// Common cause: when more than N nodes gain the same condition type and reason within --correlate-window, report what they share. [default: 3]
    #[arg(help_heading = "Safety gates", long = "correlate-min")]
    pub correlate_min: Option<usize>,
    /// The common-cause window. [default: 10m]
    #[arg(help_heading = "Safety gates", long = "correlate-window", value_parser = nodemedic_common::time::parse_duration)]
    pub correlate_window: Option<Duration>,
    /// Drains start only inside these windows, e.g. "Mon-Fri 09:00-17:00 Europe/Berlin" (repeatable; cordons happen at once).
    #[arg(help_heading = "Safety gates", long = "drain-window")]
    pub drain_windows: Vec<String>,
    /// Label a drained node KEY=VALUE, e.g. for an autoscaler or machine controller to replace it (repeatable).
    #[arg(
        help_heading = "Holding and after the drain",
        long = "after-drain-label"
    )]
    pub after_drain_labels: Vec<String>,
    /// Annotate a drained node KEY=VALUE (repeatable).
    #[arg(
        help_heading = "Holding and after the drain",
        long = "after-drain-annotation"
    )]
    pub after_drain_annotations: Vec<String>,
    /// Taint a drained node KEY[=VALUE]:EFFECT (repeatable).
    #[arg(
        help_heading = "Holding and after the drain",
        long = "after-drain-taint"
    )]
    pub after_drain_taints: Vec<String>,
    /// Delete the Node object this long after its drain succeeded (for clusters where that is the replacement signal). [default: never]
    #[arg(help_heading = "Holding and after the drain", long = "delete-drained-node-after", value_parser = nodemedic_common::time::parse_duration)]
    pub delete_drained_node_after: Option<Duration>,
    /// A reboot (a ladder step: `COND: drain, reboot`) is proven when the node is back with a new bootID, Ready and the problem clear within this long; otherwise the ladder goes on. [default: 20m]
    #[arg(help_heading = "Remediation ladder", long = "reboot-deadline", value_parser = nodemedic_common::time::parse_duration)]
    pub reboot_deadline: Option<Duration>,
    /// A restart before the drain (a ladder step: `COND: restart kubelet, drain`, carried out by the node's detector) is proven when the node is Ready and the problem clear within this long; otherwise the node is cordoned and drained. [default: 5m]
    #[arg(help_heading = "Remediation ladder", long = "restart-deadline", value_parser = nodemedic_common::time::parse_duration)]
    pub restart_deadline: Option<Duration>,
    /// A replacement (`COND: drain, replace`) is proven when the Node is gone within this long; otherwise a person is needed. [default: 30m]
    #[arg(help_heading = "Remediation ladder", long = "replace-deadline", value_parser = nodemedic_common::time::parse_duration)]
    pub replace_deadline: Option<Duration>,
    /// Who reboots a node from outside for a ladder's `power-cycle` step: `http` (--power-cycle-url), `metal3` (the reboot annotation of the BareMetalHost behind the node's Cluster API Machine, which must name the node back; needs deploy/components/power-cycle-metal3) or `medik8s` (a remediation object made from --remediation-template, as NodeHealthCheck makes it; needs deploy/components/power-cycle-medik8s). On the command line only. [default: http when --power-cycle-url is given]
    #[arg(help_heading = "Remediation ladder", long = "power-cycle-provider", value_parser = ["http", "metal3", "medik8s"])]
    pub power_cycle_provider: Option<String>,
    /// The medik8s remediation template a `power-cycle` step copies (--power-cycle-provider=medik8s): `KIND/NAMESPACE/NAME` for FenceAgentsRemediationTemplate, SelfNodeRemediationTemplate or MachineDeletionRemediationTemplate, or `GROUP/VERSION/KIND/NAMESPACE/NAME` for another remediator. On the command line only. [default: none]
    #[arg(help_heading = "Remediation ladder", long = "remediation-template")]
    pub remediation_template: Option<String>,
    /// The endpoint a ladder's `power-cycle` step asks to reboot a node from outside (a BMC gateway, a cloud function; docs/operator-guide.md gives the request): https, or http with --power-cycle-allow-http. On the command line only: a ConfigMap edit cannot redirect a power-cycle. [default: none]
    #[arg(help_heading = "Remediation ladder", long = "power-cycle-url")]
    pub power_cycle_url: Option<String>,
    /// A file holding the bearer token sent to --power-cycle-url (a mounted Secret; read at each request, so a rotated token is used). [default: none]
    #[arg(help_heading = "Remediation ladder", long = "power-cycle-token-file")]
    pub power_cycle_token_file: Option<std::path::PathBuf>,
    /// Trust only the certificate authorities in this PEM file for --power-cycle-url (a BMC gateway with a private CA), instead of the system's; read at each request. On the command line only. [default: the system's]
    #[arg(help_heading = "Remediation ladder", long = "power-cycle-ca-file")]
    pub power_cycle_ca_file: Option<std::path::PathBuf>,
    /// Allow a plain http:// --power-cycle-url: its bearer token then crosses the network in the clear (--notify-allow-http does not allow it). On the command line only.
    #[arg(help_heading = "Remediation ladder", long = "power-cycle-allow-http")]
    pub power_cycle_allow_http: bool,
    /// kured's DaemonSet (`NAMESPACE/NAME`, as `kube-system/kured`), where kured runs: a node kured holds its reboot lock for (`weave.works/kured-node-lock`) is left to it, and a reboot or power-cycle of ours waits while the lock is full with other nodes, so no two nodes reboot at once unless kured's own concurrency allows. Needs deploy/components/kured (get, list and watch of that DaemonSet). On the command line only. [default: none]
    #[arg(help_heading = "Remediation ladder", long = "kured-daemonset")]
    pub kured_daemonset: Option<String>,
    /// Let a ladder reboot or power-cycle a control-plane node (`node-role.kubernetes.io/control-plane` or `.../master`); without it such a node goes to a person instead. On the command line only: a ConfigMap edit cannot allow it. (The detector's --reboot-control-plane must allow its own reboots too.)
    #[arg(help_heading = "Remediation ladder", long = "remediate-control-plane")]
    pub remediate_control_plane: bool,
    /// At most this many reboots of one node in 24 hours; past it the ladder goes on to its next step. [default: 1]
    #[arg(
        help_heading = "Remediation ladder",
        long = "max-reboots-per-node-per-day"
    )]
    pub max_reboots_per_node_per_day: Option<u32>,
    /// Slow start: in each failure domain, reboots and replacements start one at a time, and the number allowed at once doubles each time a remediated node has stayed healthy this long after its proof. [default: 5m]
    #[arg(help_heading = "Remediation ladder", long = "slow-start-dwell", value_parser = nodemedic_common::time::parse_duration)]
    pub slow_start_dwell: Option<Duration>,
    /// Slow start: the least time between two widenings of a domain; a failure or a problem back sets it to one at once. [default: 5m]
    #[arg(help_heading = "Remediation ladder", long = "slow-start-cooldown", value_parser = nodemedic_common::time::parse_duration)]
    pub slow_start_cooldown: Option<Duration>,
    /// At most this many Nodes replaced in any hour, fleet-wide; the rest wait. [default: 2]
    #[arg(
        help_heading = "Remediation ladder",
        long = "max-replacements-per-hour"
    )]
    pub max_replacements_per_hour: Option<u32>,
    /// POST a JSON notification (with a Slack-compatible `text`) here on cordons, drains, uncordons, breaker and outage changes (repeatable).
    #[arg(help_heading = "Notifications", long = "notify-url")]
    pub notify_urls: Vec<String>,
    /// Read notification URLs from this file, one a line (a mounted Secret: Slack and Teams carry the credential in the URL); repeatable, added to --notify-url.
    #[arg(help_heading = "Notifications", long = "notify-url-file")]
    pub notify_url_files: Vec<std::path::PathBuf>,
    /// Allow plain http:// notification URLs (their credential then crosses the network in the clear).
    #[arg(help_heading = "Notifications", long = "notify-allow-http", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub notify_allow_http: Option<bool>,
    /// Write KEP-5683's node lifecycle conditions as a drain goes: `DrainInProgress` (True from the drain's start until it succeeds) and `Drained` (True once it has, False while it runs), both removed at the uncordon; for tools that read them (Kubernetes' alpha `NodeLifecycleConditions`). [default: false]
    #[arg(help_heading = "Holding and after the drain", long = "lifecycle-conditions", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub lifecycle_conditions: Option<bool>,
    /// Cordon problem nodes. `--cordon=false` only taints them (--problem-taint), so pods that tolerate the problem keep running. [default: true]
    #[arg(help_heading = "Holding and after the drain", long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub cordon: Option<bool>,
    /// Taint a problem node KEY[=VALUE]:EFFECT while it has the problem; removed on recovery (repeatable). NoExecute needs the breaker and a cordon budget.
    #[arg(help_heading = "Holding and after the drain", long = "problem-taint")]
    pub problem_taints: Vec<String>,
    /// Uncordon a recovered node only once it has stayed healthy this long (probation); 0s: at once. [default: 0s]
    #[arg(help_heading = "Holding and after the drain", long = "uncordon-after", value_parser = nodemedic_common::time::parse_duration)]
    pub uncordon_after: Option<Duration>,
    /// During probation, lift the cordon and taint the node KEY[=VALUE][:PreferNoSchedule] instead, so it takes work back gradually.
    #[arg(help_heading = "Holding and after the drain", long = "probation-taint")]
    pub probation_taint: Option<String>,
    /// A selected node whose detector has not refreshed its conditions this long is reported silent (the default is three heartbeat periods); 0s turns the watchdog off. [default: 15m]
    #[arg(help_heading = "Detector watchdog", long = "detector-silent-after", value_parser = nodemedic_common::time::parse_duration)]
    pub detector_silent_after: Option<Duration>,
    /// The detector DaemonSet, NAMESPACE/NAME: nodes it places no pod on are not watched; "" watches every selected node but Kosmos leaf nodes. [default: kube-system/nodemedic-detector]
    #[arg(help_heading = "Detector watchdog", long = "detector-daemonset")]
    pub detector_daemonset: Option<String>,
    /// Condition types a detector writes without naming them in its ownership annotation (NPD's, e.g. KernelDeadlock): their heartbeats prove it alive too (repeatable, or comma-separated).
    #[arg(
        help_heading = "Detector watchdog",
        long = "detector-conditions",
        value_delimiter = ','
    )]
    pub detector_conditions: Vec<String>,
    /// Record the transitions of the watched conditions the drainer observes in this file, one JSON line each, for `drainer simulate --history` (at most 16 MiB, then rotated to FILE.1).
    #[arg(help_heading = "Conditions", long = "history-file")]
    pub history_file: Option<PathBuf>,
}

/// The flags of a command line (`line` without the program's name), as tests write them.
#[cfg(test)]
pub(crate) fn parsed(line: &[&str]) -> PolicyArgs {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        policy: PolicyArgs,
    }
    Cli::parse_from(std::iter::once("drainer").chain(line.iter().copied())).policy
}
