//! Building the [`Config`] from draino-compatible flags and/or a YAML file. Flags override the file;
//! every error names what is wrong (and, for the file, `file:line:column`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::{Budget, Config, ProtectedPods, protected_annotation};
use crate::select::Selector;
use crate::spec::ConditionSpec;

/// A selector expression in CEL, or in draino's expr-lang when that is what it is: translated (the
/// CEL form is logged once, to put in its place), or refused with the CEL forms of expr-lang's habits.
fn cel_or_draino(expr: &str) -> Result<Selector, String> {
    let err = match Selector::cel(expr) {
        Ok(s) => return Ok(s),
        Err(e) => e,
    };
    if let Ok(cel) = crate::draino::translate_expr(expr)
        && cel != expr
        && let Ok(s) = Selector::cel(&cel)
    {
        tracing::warn!(draino = %expr, cel = %cel, "--node-label-expr is draino's expr-lang; using it translated to CEL (write the CEL form to silence this)");
        return Ok(s);
    }
    let habits = [" and ", " or ", "not ", "nil", " matches "];
    if habits.iter().any(|h| expr.contains(h)) {
        return Err(format!(
            "{err}; in CEL expr-lang's `and`, `or`, `not`, `nil` are `&&`, `||`, `!`, `null`, `a not in b` is `!(a in b)` and `a matches b` is `a.matches(b)`"
        ));
    }
    Err(err)
}

/// Flags shared by `drainer run` and `drainer plan`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyArgs {
    /// Problem conditions: `Type`, `Type=Status` or `Type=Status,MinDuration` (e.g. `KernelDeadlock=True,10m`).
    pub conditions: Vec<String>,
    /// YAML file with the same settings (camelCase names); flags given here override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// CEL expression over the Node selecting the nodes to act on, e.g. `metadata.labels['draino'] in ['node']`.
    #[arg(long = "node-label-expr", env = "DRAINO_NODE_LABEL_EXPR")]
    pub node_label_expr: Option<String>,
    /// Label selector alternative to --node-label-expr, e.g. `pool=blue,!gpu`.
    #[arg(long = "node-selector")]
    pub node_selector: Option<String>,
    /// draino's deprecated KEY=VALUE label (repeatable, all must match): added to --node-selector.
    #[arg(
        long = "node-label",
        env = "DRAINO_NODE_LABEL",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    pub node_labels: Vec<String>,
    /// Time between cordon and drain; also the spacing between drain starts. Default 10m.
    #[arg(long = "drain-buffer", env = "DRAINO_DRAIN_BUFFER", value_parser = humantime::parse_duration)]
    pub drain_buffer: Option<Duration>,
    /// Longest grace period given to an evicted pod. Default 8m.
    #[arg(long = "max-grace-period", env = "DRAINO_MAX_GRACE_PERIOD", value_parser = humantime::parse_duration)]
    pub max_grace_period: Option<Duration>,
    /// Extra time after max-grace-period before a drain is declared failed. Default 30s.
    #[arg(long = "eviction-headroom", env = "DRAINO_EVICTION_HEADROOM", value_parser = humantime::parse_duration)]
    pub eviction_headroom: Option<Duration>,
    /// Cordon only; never drain.
    #[arg(long = "skip-drain", env = "DRAINO_SKIP_DRAIN")]
    pub skip_drain: bool,
    /// Also evict pods with emptyDir volumes (their data is lost); without it they are left running.
    #[arg(long = "evict-emptydir-pods", env = "DRAINO_EVICT_EMPTYDIR_PODS")]
    pub evict_emptydir_pods: bool,
    /// Also evict pods no controller recreates; without it they are left running.
    #[arg(
        long = "evict-unreplicated-pods",
        env = "DRAINO_EVICT_UNREPLICATED_PODS"
    )]
    pub evict_unreplicated_pods: bool,
    /// Also evict StatefulSet pods; without it they are left running.
    #[arg(long = "evict-statefulset-pods", env = "DRAINO_EVICT_STATEFULSET_PODS")]
    pub evict_statefulset_pods: bool,
    /// Also evict DaemonSet pods, as draino did: their DaemonSet recreates them on the cordoned node
    /// at once (they tolerate unschedulable). Without it they stay until the node goes.
    #[arg(long = "evict-daemonset-pods", env = "DRAINO_EVICT_DAEMONSET_PODS")]
    pub evict_daemonset_pods: bool,
    /// Delete a pod with grace period 0 when its eviction fails other than by a PodDisruptionBudget,
    /// or when it has not gone by the drain's deadline (draino's meaning; PDB refusals are still
    /// waited on, never deleted around).
    #[arg(long = "allow-force-delete", env = "DRAINO_ALLOW_FORCE_DELETE")]
    pub allow_force_delete: bool,
    /// Evict pods annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false too (draino's
    /// meaning; --protected-pod-annotation still protects).
    #[arg(
        long = "ignore-safe-to-evict-annotation",
        env = "DRAINO_IGNORE_SAFE_TO_EVICT_ANNOTATION"
    )]
    pub ignore_safe_to_evict_annotation: bool,
    /// Pods with this annotation (`KEY` or `KEY=VALUE`) are never evicted (repeatable).
    #[arg(
        long = "protected-pod-annotation",
        env = "DRAINO_PROTECTED_POD_ANNOTATION"
    )]
    pub protected_pod_annotations: Vec<String>,
    /// What a pod we may not evict does to a drain: leave it running (default) or block the drain.
    #[arg(long = "protected-pods", value_enum)]
    pub protected_pods: Option<ProtectedPods>,
    /// Drains running at once. Default 1.
    #[arg(long = "max-drains-in-flight")]
    pub max_drains_in_flight: Option<usize>,
    /// Nodes cordoned by the drainer at once: N or N% of selected nodes. Default 10%.
    #[arg(long = "max-cordoned")]
    pub max_cordoned: Option<String>,
    /// Also act on Kosmos leaf nodes for conditions other than Ready (never for Ready).
    #[arg(long = "kosmos-other-conditions")]
    pub kosmos_other_conditions: bool,
    /// Log decisions and emit Events; change nothing else.
    #[arg(long = "dry-run", env = "DRAINO_DRY_RUN")]
    pub dry_run: bool,
    /// Report pods whose readiness is stale once their node has been Ready this long (a node flap
    /// left them Ready=False with every container ready). "0s" turns it off. Default 2m.
    #[arg(long = "stale-readiness-threshold", value_parser = humantime::parse_duration)]
    pub stale_readiness_threshold: Option<Duration>,
    /// Also evict stale pods (Eviction API, PodDisruptionBudgets honoured; exempt pods never).
    #[arg(long = "evict-stale-pods")]
    pub evict_stale_pods: bool,
    /// Circuit breaker: open when more than N or N% of the selected nodes are unhealthy. Default 30%.
    #[arg(long = "max-unhealthy")]
    pub max_unhealthy: Option<String>,
    /// Circuit breaker: open when more than N or N% became unhealthy within --breaker-window. Default 20%.
    #[arg(long = "breaker-new")]
    pub breaker_new: Option<String>,
    /// The window of --breaker-new. Default 5m.
    #[arg(long = "breaker-window", value_parser = humantime::parse_duration)]
    pub breaker_window: Option<Duration>,
    /// The breaker closes after the counts stayed under the thresholds this long. Default 10m.
    #[arg(long = "breaker-cooldown", value_parser = humantime::parse_duration)]
    pub breaker_cooldown: Option<Duration>,
    /// Node label naming a node's failure domain (Kosmos leaf nodes are their own). Default topology.kubernetes.io/zone.
    #[arg(long = "failure-domain")]
    pub failure_domain: Option<String>,
    /// The label of a Kosmos leaf node naming its member cluster, its failure domain. Default: none
    /// (each leaf node is a member cluster of its own).
    #[arg(long = "kosmos-cluster-label")]
    pub kosmos_cluster_label: Option<String>,
    /// Nodes cordoned at once per failure domain: N or N% of its selected nodes. Default: no limit.
    #[arg(long = "max-cordoned-per-domain")]
    pub max_cordoned_per_domain: Option<String>,
    /// A domain with more than N% of its nodes unhealthy is an outage: nothing in it is cordoned or drained. Default 50%.
    #[arg(long = "domain-outage")]
    pub domain_outage: Option<String>,
    /// Domains smaller than this are never an outage. Default 3.
    #[arg(long = "domain-outage-min-nodes")]
    pub domain_outage_min_nodes: Option<usize>,
    /// A node whose watched conditions changed this many times within --flap-window is flapping (0: off). Default 4.
    #[arg(long = "flap-threshold")]
    pub flap_threshold: Option<usize>,
    /// The flapping window; a flapping node is acted on once stable this long. Default 10m.
    #[arg(long = "flap-window", value_parser = humantime::parse_duration)]
    pub flap_window: Option<Duration>,
    /// Drains start only inside these windows, e.g. "Mon-Fri 09:00-17:00 Europe/Berlin" (repeatable; cordons happen at once).
    #[arg(long = "drain-window")]
    pub drain_windows: Vec<String>,
    /// Label a drained node KEY=VALUE, e.g. for an autoscaler or machine controller to replace it (repeatable).
    #[arg(long = "after-drain-label")]
    pub after_drain_labels: Vec<String>,
    /// Annotate a drained node KEY=VALUE (repeatable).
    #[arg(long = "after-drain-annotation")]
    pub after_drain_annotations: Vec<String>,
    /// Taint a drained node KEY[=VALUE]:EFFECT (repeatable).
    #[arg(long = "after-drain-taint")]
    pub after_drain_taints: Vec<String>,
    /// Delete the Node object this long after its drain succeeded (for clusters where that is the replacement signal). Default: never.
    #[arg(long = "delete-drained-node-after", value_parser = humantime::parse_duration)]
    pub delete_drained_node_after: Option<Duration>,
    /// POST a JSON notification (with a Slack-compatible `text`) here on cordons, drains, uncordons, breaker and outage changes (repeatable).
    #[arg(long = "notify-url")]
    pub notify_urls: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileConfig {
    #[serde(default)]
    conditions: Vec<Spanned<String>>,
    node_label_expr: Option<Spanned<String>>,
    node_selector: Option<Spanned<String>>,
    drain_buffer: Option<Spanned<String>>,
    max_grace_period: Option<Spanned<String>>,
    eviction_headroom: Option<Spanned<String>>,
    skip_drain: Option<bool>,
    evict_emptydir_pods: Option<bool>,
    evict_unreplicated_pods: Option<bool>,
    evict_statefulset_pods: Option<bool>,
    evict_daemonset_pods: Option<bool>,
    allow_force_delete: Option<bool>,
    ignore_safe_to_evict_annotation: Option<bool>,
    #[serde(default)]
    protected_pod_annotations: Vec<Spanned<String>>,
    protected_pods: Option<ProtectedPods>,
    max_drains_in_flight: Option<usize>,
    max_cordoned: Option<Spanned<String>>,
    kosmos_other_conditions: Option<bool>,
    dry_run: Option<bool>,
    stale_readiness_threshold: Option<Spanned<String>>,
    evict_stale_pods: Option<bool>,
    max_unhealthy: Option<Spanned<String>>,
    breaker_new: Option<Spanned<String>>,
    breaker_window: Option<Spanned<String>>,
    breaker_cooldown: Option<Spanned<String>>,
    failure_domain: Option<Spanned<String>>,
    kosmos_cluster_label: Option<Spanned<String>>,
    max_cordoned_per_domain: Option<Spanned<String>>,
    domain_outage: Option<Spanned<String>>,
    domain_outage_min_nodes: Option<usize>,
    flap_threshold: Option<usize>,
    flap_window: Option<Spanned<String>>,
    #[serde(default)]
    drain_windows: Vec<Spanned<String>>,
    #[serde(default)]
    after_drain_labels: Vec<Spanned<String>>,
    #[serde(default)]
    after_drain_annotations: Vec<Spanned<String>>,
    #[serde(default)]
    after_drain_taints: Vec<Spanned<String>>,
    delete_drained_node_after: Option<Spanned<String>>,
    #[serde(default)]
    notify_urls: Vec<Spanned<String>>,
}

/// One configuration error and where it is: typed and comparable, all of them reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// In the command line (the message names the flag).
    #[error("{0}")]
    Flag(String),
    /// In the YAML file, at a line and column.
    #[error("{}:{line}:{column}: {message}", file.display())]
    File {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The YAML file cannot be read.
    #[error("{}: cannot read: {message}", file.display())]
    Read { file: PathBuf, message: String },
}

fn at(file: &Path, s: &Spanned<impl Sized>, msg: impl std::fmt::Display) -> PolicyError {
    PolicyError::File {
        file: file.to_path_buf(),
        line: s.referenced.line() as usize,
        column: s.referenced.column() as usize,
        message: msg.to_string(),
    }
}

fn duration(file: &Path, s: &Spanned<String>, what: &str) -> Result<Duration, PolicyError> {
    humantime::parse_duration(s.value.trim()).map_err(|e| {
        at(
            file,
            s,
            format!("{what}: invalid duration {:?}: {e}", s.value),
        )
    })
}

/// Build the validated configuration. All errors are returned together.
pub fn build(args: &PolicyArgs) -> Result<Config, Vec<PolicyError>> {
    let mut errors = Vec::new();
    let mut cfg = Config::default();
    let file = match &args.config {
        None => FileConfig::default(),
        Some(path) => match std::fs::read_to_string(path) {
            Err(e) => {
                return Err(vec![PolicyError::Read {
                    file: path.clone(),
                    message: e.to_string(),
                }]);
            }
            Ok(text) => {
                // Parse errors first; the checks of what did parse add the file's other errors.
                let (parsed, found) = nodemedic_common::yaml::parse_partial::<FileConfig>(&text);
                errors.extend(found.into_iter().map(|e| PolicyError::File {
                    file: path.clone(),
                    line: e.line as usize,
                    column: e.column as usize,
                    message: e.message,
                }));
                match parsed {
                    Some(f) => f,
                    None => return Err(errors),
                }
            }
        },
    };
    let path = args.config.clone().unwrap_or_default();
    // conditions: flags replace the file's list
    if args.conditions.is_empty() {
        for c in &file.conditions {
            match c.value.parse::<ConditionSpec>() {
                Ok(s) => cfg.conditions.push(s),
                Err(e) => errors.push(at(&path, c, e)),
            }
        }
    } else {
        for c in &args.conditions {
            match c.parse::<ConditionSpec>() {
                Ok(s) => cfg.conditions.push(s),
                Err(e) => errors.push(PolicyError::Flag(e)),
            }
        }
    }
    if args.conditions.is_empty() && file.conditions.is_empty() {
        errors.push(PolicyError::Flag(
            "no problem conditions given (e.g. `drainer run KernelDeadlock=True,10m`)".into(),
        ));
    }
    let expr = args.node_label_expr.clone().map(|e| (e, None)).or_else(|| {
        file.node_label_expr
            .as_ref()
            .map(|s| (s.value.clone(), Some(s)))
    });
    let mut labels = args.node_selector.clone().map(|e| (e, None)).or_else(|| {
        file.node_selector
            .as_ref()
            .map(|s| (s.value.clone(), Some(s)))
    });
    if !args.node_labels.is_empty() {
        match crate::draino::node_labels_selector(&args.node_labels) {
            Ok(terms) => {
                labels = Some(match labels {
                    Some((l, _)) if !l.trim().is_empty() => (format!("{l},{terms}"), None),
                    _ => (terms, None),
                })
            }
            Err(e) => errors.push(PolicyError::Flag(e)),
        }
    }
    match (expr, labels) {
        (Some(_), Some(_)) => errors.push(PolicyError::Flag(
            "give --node-label-expr or --node-selector (or draino's --node-label), not both".into(),
        )),
        (Some((e, span)), None) => match cel_or_draino(&e) {
            Ok(s) => cfg.selector = s,
            Err(msg) => errors.push(match span {
                Some(s) => at(&path, s, format!("nodeLabelExpr: {msg}")),
                None => PolicyError::Flag(format!("--node-label-expr: {msg}")),
            }),
        },
        (None, Some((l, span))) => match Selector::labels(&l) {
            Ok(s) => cfg.selector = s,
            Err(msg) => errors.push(match span {
                Some(s) => at(&path, s, format!("nodeSelector: {msg}")),
                None => PolicyError::Flag(format!("--node-selector: {msg}")),
            }),
        },
        (None, None) => {}
    }
    let mut dur = |flag: Option<Duration>,
                   from_file: &Option<Spanned<String>>,
                   what: &str,
                   slot: &mut Duration| {
        if let Some(d) = flag {
            *slot = d;
        } else if let Some(s) = from_file {
            match duration(&path, s, what) {
                Ok(d) => *slot = d,
                Err(e) => errors.push(e),
            }
        }
    };
    dur(
        args.drain_buffer,
        &file.drain_buffer,
        "drainBuffer",
        &mut cfg.drain_buffer,
    );
    dur(
        args.max_grace_period,
        &file.max_grace_period,
        "maxGracePeriod",
        &mut cfg.max_grace_period,
    );
    dur(
        args.eviction_headroom,
        &file.eviction_headroom,
        "evictionHeadroom",
        &mut cfg.eviction_headroom,
    );
    let mut stale = cfg.stale_readiness.unwrap_or_default();
    dur(
        args.stale_readiness_threshold,
        &file.stale_readiness_threshold,
        "staleReadinessThreshold",
        &mut stale,
    );
    cfg.stale_readiness = (!stale.is_zero()).then_some(stale);
    cfg.evict_stale_pods = args.evict_stale_pods || file.evict_stale_pods.unwrap_or(false);
    cfg.skip_drain = args.skip_drain || file.skip_drain.unwrap_or(false);
    cfg.evict_emptydir_pods = args.evict_emptydir_pods || file.evict_emptydir_pods.unwrap_or(false);
    cfg.evict_unreplicated_pods =
        args.evict_unreplicated_pods || file.evict_unreplicated_pods.unwrap_or(false);
    cfg.evict_statefulset_pods =
        args.evict_statefulset_pods || file.evict_statefulset_pods.unwrap_or(false);
    cfg.evict_daemonset_pods =
        args.evict_daemonset_pods || file.evict_daemonset_pods.unwrap_or(false);
    cfg.allow_force_delete = args.allow_force_delete || file.allow_force_delete.unwrap_or(false);
    cfg.ignore_safe_to_evict_annotation = args.ignore_safe_to_evict_annotation
        || file.ignore_safe_to_evict_annotation.unwrap_or(false);
    cfg.kosmos_other_conditions =
        args.kosmos_other_conditions || file.kosmos_other_conditions.unwrap_or(false);
    cfg.dry_run = args.dry_run || file.dry_run.unwrap_or(false);
    for a in &args.protected_pod_annotations {
        match protected_annotation(a) {
            Ok(p) => cfg.protected_annotations.push(p),
            Err(e) => errors.push(PolicyError::Flag(e)),
        }
    }
    for a in &file.protected_pod_annotations {
        match protected_annotation(&a.value) {
            Ok(p) => cfg.protected_annotations.push(p),
            Err(e) => errors.push(at(&path, a, e)),
        }
    }
    if let Some(p) = args.protected_pods.or(file.protected_pods) {
        cfg.protected_pods = p;
    }
    if let Some(n) = args.max_drains_in_flight.or(file.max_drains_in_flight) {
        if n == 0 {
            errors.push(PolicyError::Flag(
                "max-drains-in-flight must be at least 1".into(),
            ));
        }
        cfg.max_drains_in_flight = n;
    }
    // A value from its flag, else from the file (with its position), parsed by `parse`.
    fn pick<T>(
        flag: &Option<String>,
        from_file: &Option<Spanned<String>>,
        names: (&str, &str),
        path: &Path,
        parse: impl Fn(&str) -> Result<T, String>,
        errors: &mut Vec<PolicyError>,
    ) -> Option<T> {
        let (flag_name, key) = names;
        match (flag, from_file) {
            (Some(v), _) => parse(v)
                .map_err(|e| errors.push(PolicyError::Flag(format!("--{flag_name}: {e}"))))
                .ok(),
            (None, Some(s)) => parse(&s.value)
                .map_err(|e| errors.push(at(path, s, format!("{key}: {e}"))))
                .ok(),
            _ => None,
        }
    }
    // Repeatable flags replace the file's list.
    fn each<T>(
        flags: &[String],
        from_file: &[Spanned<String>],
        names: (&str, &str),
        path: &Path,
        parse: impl Fn(&str) -> Result<T, String>,
        errors: &mut Vec<PolicyError>,
    ) -> Vec<T> {
        let (flag_name, key) = names;
        if !flags.is_empty() {
            return flags
                .iter()
                .filter_map(|v| {
                    parse(v)
                        .map_err(|e| errors.push(PolicyError::Flag(format!("--{flag_name}: {e}"))))
                        .ok()
                })
                .collect();
        }
        from_file
            .iter()
            .filter_map(|s| {
                parse(&s.value)
                    .map_err(|e| errors.push(at(path, s, format!("{key}: {e}"))))
                    .ok()
            })
            .collect()
    }
    let budget = |v: &str| v.parse::<Budget>();
    let dur = |v: &str| {
        humantime::parse_duration(v.trim()).map_err(|e| format!("invalid duration {v:?}: {e}"))
    };
    if let Some(b) = pick(
        &args.max_cordoned,
        &file.max_cordoned,
        ("max-cordoned", "maxCordoned"),
        &path,
        budget,
        &mut errors,
    ) {
        cfg.max_cordoned = b;
    }
    let s = &mut cfg.safety;
    if let Some(b) = pick(
        &args.max_unhealthy,
        &file.max_unhealthy,
        ("max-unhealthy", "maxUnhealthy"),
        &path,
        budget,
        &mut errors,
    ) {
        s.max_unhealthy = b;
    }
    if let Some(b) = pick(
        &args.breaker_new,
        &file.breaker_new,
        ("breaker-new", "breakerNew"),
        &path,
        budget,
        &mut errors,
    ) {
        s.breaker_new = b;
    }
    let flag_dur = |d: Option<Duration>| d.map(|d| humantime::format_duration(d).to_string());
    if let Some(d) = pick(
        &flag_dur(args.breaker_window),
        &file.breaker_window,
        ("breaker-window", "breakerWindow"),
        &path,
        dur,
        &mut errors,
    ) {
        s.breaker_window = d;
    }
    if let Some(d) = pick(
        &flag_dur(args.breaker_cooldown),
        &file.breaker_cooldown,
        ("breaker-cooldown", "breakerCooldown"),
        &path,
        dur,
        &mut errors,
    ) {
        s.breaker_cooldown = d;
    }
    let label_key = |v: &str| {
        let v = v.trim();
        if v.is_empty() || v.contains(char::is_whitespace) || v.contains('=') {
            Err(format!(
                "{v:?}: expected a label key, e.g. topology.kubernetes.io/zone"
            ))
        } else {
            Ok(v.to_string())
        }
    };
    if let Some(l) = pick(
        &args.failure_domain,
        &file.failure_domain,
        ("failure-domain", "failureDomain"),
        &path,
        label_key,
        &mut errors,
    ) {
        s.failure_domain = l;
    }
    if let Some(l) = pick(
        &args.kosmos_cluster_label,
        &file.kosmos_cluster_label,
        ("kosmos-cluster-label", "kosmosClusterLabel"),
        &path,
        label_key,
        &mut errors,
    ) {
        s.kosmos_cluster_label = l;
    }
    if let Some(b) = pick(
        &args.max_cordoned_per_domain,
        &file.max_cordoned_per_domain,
        ("max-cordoned-per-domain", "maxCordonedPerDomain"),
        &path,
        budget,
        &mut errors,
    ) {
        s.max_cordoned_per_domain = Some(b);
    }
    let percent = |v: &str| match v.parse::<Budget>() {
        Ok(Budget::Percent(p)) => Ok(p),
        _ => Err(format!(
            "{v:?}: expected a percentage in (0, 100], e.g. 50%"
        )),
    };
    if let Some(p) = pick(
        &args.domain_outage,
        &file.domain_outage,
        ("domain-outage", "domainOutage"),
        &path,
        percent,
        &mut errors,
    ) {
        s.domain_outage_percent = p;
    }
    if let Some(n) = args
        .domain_outage_min_nodes
        .or(file.domain_outage_min_nodes)
    {
        s.domain_outage_min_nodes = n;
    }
    if let Some(n) = args.flap_threshold.or(file.flap_threshold) {
        s.flap_threshold = n;
    }
    if let Some(d) = pick(
        &flag_dur(args.flap_window),
        &file.flap_window,
        ("flap-window", "flapWindow"),
        &path,
        dur,
        &mut errors,
    ) {
        s.flap_window = d;
    }
    s.drain_windows = each(
        &args.drain_windows,
        &file.drain_windows,
        ("drain-window", "drainWindows"),
        &path,
        |v| v.parse::<crate::decide::safety::DrainWindow>(),
        &mut errors,
    );
    let pair = |v: &str| match v.split_once('=') {
        Some((k, val)) if !k.trim().is_empty() => Ok((k.trim().to_string(), val.to_string())),
        _ => Err(format!("{v:?}: expected KEY=VALUE")),
    };
    cfg.after_drain.labels = each(
        &args.after_drain_labels,
        &file.after_drain_labels,
        ("after-drain-label", "afterDrainLabels"),
        &path,
        pair,
        &mut errors,
    );
    cfg.after_drain.annotations = each(
        &args.after_drain_annotations,
        &file.after_drain_annotations,
        ("after-drain-annotation", "afterDrainAnnotations"),
        &path,
        pair,
        &mut errors,
    );
    cfg.after_drain.taints = each(
        &args.after_drain_taints,
        &file.after_drain_taints,
        ("after-drain-taint", "afterDrainTaints"),
        &path,
        |v| v.parse::<crate::config::Taint>(),
        &mut errors,
    );
    if let Some(d) = pick(
        &flag_dur(args.delete_drained_node_after),
        &file.delete_drained_node_after,
        ("delete-drained-node-after", "deleteDrainedNodeAfter"),
        &path,
        dur,
        &mut errors,
    ) {
        cfg.after_drain.delete_after = Some(d);
    }
    cfg.notify_urls = each(
        &args.notify_urls,
        &file.notify_urls,
        ("notify-url", "notifyUrls"),
        &path,
        |v| {
            crate::notify::check_url(v)
                .map(|()| v.to_string())
                .map_err(|e| e.trim_start_matches("--notify-url ").to_string())
        },
        &mut errors,
    );
    if errors.is_empty() {
        Ok(cfg)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(conditions: &[&str]) -> PolicyArgs {
        PolicyArgs {
            conditions: conditions.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn draino_expressions_are_translated_or_refused_with_the_cel_forms() {
        let mut a = PolicyArgs {
            conditions: vec!["KernelDeadlock".into()],
            node_label_expr: Some(
                "metadata['labels']['pool'] not in ['gpu'] and metadata.name != nil".into(),
            ),
            ..Default::default()
        };
        assert!(build(&a).is_ok());
        a.node_label_expr = Some("metadata.labels.pool == 'a' and (".into());
        let e = build(&a).unwrap_err()[0].to_string();
        assert!(e.contains("--node-label-expr"), "{e}");
        assert!(
            e.contains("`&&`, `||`, `!`, `null`") && e.contains("`!(a in b)`"),
            "{e}"
        );
        a.node_label_expr = None;
        a.node_labels = vec!["draino-enabled=true".into()];
        assert!(build(&a).is_ok());
        a.node_label_expr = Some("metadata.name == 'x'".into());
        let e = build(&a).unwrap_err()[0].to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn every_error_of_the_config_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        std::fs::write(
            &f,
            "conditions: [KernelDeadlock]\ndrainBufer: 10m\nmaxGracePeriod: 8\n",
        )
        .unwrap();
        let a = PolicyArgs {
            config: Some(f),
            ..Default::default()
        };
        let errors: Vec<String> = build(&a)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[0].contains(":2:1: unknown field `drainBufer`"),
            "{errors:#?}"
        );
        assert!(
            errors[1].contains(":3:17: maxGracePeriod: invalid duration"),
            "{errors:#?}"
        );
    }

    #[test]
    fn flags_build_a_config() {
        let mut a = args(&["KernelDeadlock=True,10m"]);
        a.node_label_expr = Some("metadata.labels['draino'] in ['node']".into());
        a.max_cordoned = Some("25%".into());
        a.protected_pod_annotations = vec!["team/keep=yes".into()];
        let c = build(&a).unwrap();
        assert_eq!(c.conditions.len(), 1);
        assert_eq!(c.max_cordoned, Budget::Percent(25.0));
        assert_eq!(
            c.protected_annotations,
            vec![("team/keep".to_string(), Some("yes".to_string()))]
        );
    }

    #[test]
    fn errors_are_precise_and_all_reported() {
        let mut a = args(&["Ready=Maybe"]);
        a.node_label_expr = Some("metadata.labels['a'] ==".into());
        a.max_cordoned = Some("0".into());
        let e = build(&a).unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            matches!(&e[0], PolicyError::Flag(m) if m.contains("status \"Maybe\"")),
            "{e:?}"
        );
        assert!(
            matches!(&e[1], PolicyError::Flag(m) if m.starts_with("--node-label-expr: invalid CEL expression")),
            "{e:?}"
        );
        assert_eq!(
            e[2],
            PolicyError::Flag("--max-cordoned: budget \"0\": must be at least 1".into())
        );
    }

    #[test]
    fn the_yaml_file_is_read_with_positions_and_flags_override_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        std::fs::write(
            &f,
            "conditions: ['KernelDeadlock=True,10m']\ndrainBuffer: 5m\nmaxCordoned: '2'\n",
        )
        .unwrap();
        let mut a = PolicyArgs {
            config: Some(f.clone()),
            ..Default::default()
        };
        let c = build(&a).unwrap();
        assert_eq!(
            (c.drain_buffer, c.max_cordoned),
            (Duration::from_secs(300), Budget::Count(2))
        );
        a.drain_buffer = Some(Duration::from_secs(60));
        assert_eq!(build(&a).unwrap().drain_buffer, Duration::from_secs(60));
        std::fs::write(&f, "conditions: ['KernelDeadlock']\ndrainBufer: 5m\n").unwrap();
        let e = build(&a).unwrap_err();
        assert!(
            matches!(&e[0], PolicyError::File { file, line: 2, column: 1, .. } if file == &f),
            "{e:?}"
        );
        assert!(
            e[0].to_string()
                .starts_with(&format!("{}:2:1: ", f.display()))
        );
        std::fs::write(
            &f,
            "conditions: ['KernelDeadlock']\nnodeLabelExpr: \"a &&\"\n",
        )
        .unwrap();
        let e = build(&PolicyArgs {
            config: Some(f.clone()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            matches!(&e[0], PolicyError::File { line: 2, column: 16, message, .. } if message.starts_with("nodeLabelExpr: invalid CEL")),
            "{e:?}"
        );
    }

    #[test]
    fn fleet_safety_settings_from_flags_and_file_with_positions() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        std::fs::write(
            &f,
            "conditions: ['Ready=Unknown,5m']\nmaxUnhealthy: '40%'\nbreakerCooldown: 2m\nfailureDomain: example.com/rack\n\
             drainWindows: ['Mon-Fri 09:00-17:00 Europe/Berlin']\nafterDrainTaints: ['replace-me=true:NoSchedule']\n\
             afterDrainLabels: ['lifecycle=replace']\ndeleteDrainedNodeAfter: 30m\nnotifyUrls: ['https://hooks.example.com/x']\n",
        )
        .unwrap();
        let mut a = PolicyArgs {
            config: Some(f.clone()),
            ..Default::default()
        };
        let c = build(&a).unwrap();
        assert_eq!(c.safety.max_unhealthy, Budget::Percent(40.0));
        assert_eq!(c.safety.breaker_cooldown, Duration::from_secs(120));
        assert_eq!(c.safety.failure_domain, "example.com/rack");
        assert_eq!(c.safety.drain_windows.len(), 1);
        assert_eq!(c.after_drain.taints[0].effect, "NoSchedule");
        assert_eq!(
            c.after_drain.labels,
            vec![("lifecycle".into(), "replace".into())]
        );
        assert_eq!(c.after_drain.delete_after, Some(Duration::from_secs(1800)));
        assert_eq!(
            c.notify_urls,
            vec!["https://hooks.example.com/x".to_string()]
        );
        // Flags win.
        a.max_unhealthy = Some("5".into());
        a.drain_windows = vec!["Sat 00:00-06:00".into()];
        let c = build(&a).unwrap();
        assert_eq!(c.safety.max_unhealthy, Budget::Count(5));
        assert_eq!(c.safety.drain_windows[0].to_string(), "Sat 00:00-06:00");
        // Every bad value is reported, at its position.
        std::fs::write(
            &f,
            "conditions: ['Ready']\ndomainOutage: '3'\ndrainWindows: ['Mon 9-17']\nafterDrainTaints: ['x:Sometimes']\nnotifyUrls: ['ftp://x']\n",
        )
        .unwrap();
        let e = build(&PolicyArgs {
            config: Some(f.clone()),
            ..Default::default()
        })
        .unwrap_err();
        let lines: Vec<usize> = e
            .iter()
            .map(|e| match e {
                PolicyError::File { line, .. } => *line,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(lines, vec![2, 3, 4, 5], "{e:?}");
        assert!(
            e[0].to_string()
                .contains("domainOutage: \"3\": expected a percentage"),
            "{}",
            e[0]
        );
        assert!(
            e[1].to_string()
                .contains("drainWindows: drain window \"Mon 9-17\""),
            "{}",
            e[1]
        );
        let e = build(&PolicyArgs {
            conditions: vec!["Ready".into()],
            breaker_new: Some("0%".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e[0].to_string().starts_with("--breaker-new: "), "{}", e[0]);
    }
}
