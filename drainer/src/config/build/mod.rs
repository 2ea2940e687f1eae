//! Building the frozen [`Config`] from the raw flags ([`PolicyArgs`]) and file ([`FileConfig`]):
//! each setting in one place, flags over the file, every error with where it is (the flag, or
//! `file:line:column`), all of them reported together. Pure but for reading the file.

use std::path::Path;

mod ladder;
mod pod_policies;
mod remedy_and_watchdog;
mod sources;

pub use sources::PolicyError;
use sources::Sources;

use crate::config::drain_window::DrainWindow;
use crate::config::file::FileConfig;
use crate::config::flags::PolicyArgs;
use crate::config::safety::Safety;
use crate::config::select::Selector;
use crate::config::spec::ConditionSpec;
use crate::config::{Budget, Config, Taint, protected_annotation};

/// Build the validated configuration. All errors are returned together.
pub fn build(args: &PolicyArgs) -> Result<Config, Vec<PolicyError>> {
    build_with(args, true, None)
}

/// [`build`] with the config file's text given (as the running drainer published it) instead of
/// read from `args.config`, which then only names it in errors. `need_conditions` as in
/// [`build_for_reading`].
pub(crate) fn build_with_text(
    args: &PolicyArgs,
    text: &str,
    need_conditions: bool,
) -> Result<Config, Vec<PolicyError>> {
    build_with(args, need_conditions, Some(text))
}

/// [`build`] for a tool that only reads the cluster (`kubectl nodemedic conditions`): no problem
/// condition is needed.
pub(crate) fn build_for_reading(args: &PolicyArgs) -> Result<Config, Vec<PolicyError>> {
    build_with(args, false, None)
}

fn build_with(
    args: &PolicyArgs,
    need_conditions: bool,
    text: Option<&str>,
) -> Result<Config, Vec<PolicyError>> {
    let read;
    let text = match (text, args.config.as_deref()) {
        (Some(t), _) => Some(t),
        (None, None) => None,
        (None, Some(path)) => {
            read = std::fs::read_to_string(path).map_err(|e| {
                vec![PolicyError::Read {
                    file: path.to_path_buf(),
                    message: e.to_string(),
                }]
            })?;
            Some(read.as_str())
        }
    };
    let (file, errors) = match text {
        Some(text) => parse_file(args.config.as_deref().unwrap_or(Path::new("config")), text)?,
        None => (FileConfig::default(), Vec::new()),
    };
    let mut s = Sources {
        args,
        file: &file,
        path: args.config.clone().unwrap_or_default(),
        errors,
    };
    let mut cfg = Config::default();
    conditions(&mut s, &mut cfg, need_conditions);
    selector(&mut s, &mut cfg);
    timing(&mut s, &mut cfg);
    pod_rules(&mut s, &mut cfg);
    budgets(&mut s, &mut cfg);
    safety(&mut s, &mut cfg.safety);
    after_drain(&mut s, &mut cfg);
    ladder::build(&mut s, &mut cfg);
    let allow_http = args
        .notify_allow_http
        .or(file.notify_allow_http)
        .unwrap_or(false);
    cfg.notify_urls = s.each(
        &args.notify_urls,
        &file.notify_urls,
        ("notify-url", "notifyUrls"),
        |v| crate::config::url::check(v, allow_http),
    );
    for path in &args.notify_url_files {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                for line in crate::config::url::from_file(&text) {
                    match crate::config::url::check(line, allow_http) {
                        Ok(u) => cfg.notify_urls.push(u),
                        Err(e) => {
                            s.flag_error(format!("--notify-url-file {}: {e}", path.display()))
                        }
                    }
                }
            }
            Err(e) => s.flag_error(format!(
                "--notify-url-file {}: cannot read: {e}",
                path.display()
            )),
        }
    }
    remedy_and_watchdog::build(&mut s, &mut cfg);
    pod_policies::build(&mut s, &mut cfg.pod_policies);
    // What flags and files build is read by `plan` and `explain` too, which hold no key: records
    // are taken as they are there (and said to be unverified). `run::start` seals with the key.
    cfg.records = crate::model::seal::RecordTrust::Unchecked;
    // The settings as operators write them, for what a reload says it changed.
    let name = args.config.as_ref().map(|p| p.display().to_string());
    let shown = crate::config::effective::render(
        args,
        name.as_deref().zip(text),
        crate::config::effective::Whose::Given,
    );
    cfg.said = shown
        .map(|t| crate::config::effective::settings(&t))
        .unwrap_or_default();
    if s.errors.is_empty() {
        Ok(cfg)
    } else {
        Err(s.errors)
    }
}

type Parsed = Result<(FileConfig, Vec<PolicyError>), Vec<PolicyError>>;

fn parse_file(path: &Path, text: &str) -> Parsed {
    // Parse errors first; the checks of what did parse add the file's other errors.
    let (parsed, found) = nodemedic_common::yaml::parse_partial::<FileConfig>(text);
    let errors: Vec<PolicyError> = found
        .into_iter()
        .map(|e| PolicyError::File {
            file: path.to_path_buf(),
            line: e.line as usize,
            column: e.column as usize,
            message: e.message,
        })
        .collect();
    match parsed {
        Some(f) => Ok((f, errors)),
        None => Err(errors),
    }
}

/// The problem conditions: the flags' list replaces the file's, `--add-condition` adds to either;
/// one is needed.
fn conditions(s: &mut Sources, cfg: &mut Config, needed: bool) {
    listed(s, cfg, needed);
    let args = s.args;
    for c in &args.add_conditions {
        let spec = c.parse::<ConditionSpec>().map_err(|e| e.to_string());
        match spec.and_then(|spec| match too_soon(args.min_ready_duration, &spec) {
            None => Ok(spec),
            Some(e) => Err(e),
        }) {
            Ok(spec) => cfg.conditions.push(spec),
            Err(e) => s.flag_error(format!("--add-condition={c}: {e}")),
        }
    }
}

/// Why a Ready condition acted on sooner than `floor` (`--min-ready-duration`) is refused, if it is.
fn too_soon(floor: Option<std::time::Duration>, spec: &ConditionSpec) -> Option<String> {
    floor
        .filter(|f| spec.type_ == "Ready" && spec.min_duration < *f)
        .map(|f| {
            format!(
                "{spec} acts on Ready sooner than --min-ready-duration {} given on the command line: \
                 a config edit may only lengthen it",
                humantime::format_duration(f)
            )
        })
}

/// The listed conditions: the flags' list, else the file's.
fn listed(s: &mut Sources, cfg: &mut Config, needed: bool) {
    let (args, file) = (s.args, s.file);
    let added = !args.add_conditions.is_empty();
    if needed && !added && args.conditions.is_empty() && file.conditions.is_empty() {
        s.flag_error("no problem conditions given (e.g. `drainer run KernelDeadlock=True,10m`)");
        return;
    }
    let floor = args.min_ready_duration;
    if args.conditions.is_empty() {
        for c in &file.conditions {
            let e = match c.value.0.parse::<ConditionSpec>() {
                Ok(spec) => match too_soon(floor, &spec) {
                    None => {
                        cfg.conditions.push(spec);
                        continue;
                    }
                    Some(e) => e,
                },
                Err(e) => e.to_string(),
            };
            let err = s.at(c, e);
            s.errors.push(err);
        }
        return;
    }
    for c in &args.conditions {
        match c.parse::<ConditionSpec>() {
            Ok(spec) => match too_soon(floor, &spec) {
                None => cfg.conditions.push(spec),
                Some(e) => s.flag_error(e),
            },
            Err(e) => s.flag_error(e),
        }
    }
}

/// The node selector: a CEL expression (or draino's expr-lang) or a label selector (with draino's
/// `--node-label` terms added), not both.
fn selector(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    let expr = args.node_label_expr.clone().map(|e| (e, None)).or_else(|| {
        file.node_label_expr
            .as_ref()
            .map(|sp| (sp.value.clone(), Some(sp)))
    });
    let mut labels = args.node_selector.clone().map(|e| (e, None)).or_else(|| {
        file.node_selector
            .as_ref()
            .map(|sp| (sp.value.clone(), Some(sp)))
    });
    if !args.node_labels.is_empty() {
        match crate::config::draino::node_labels_selector(&args.node_labels) {
            Ok(terms) => {
                labels = Some(match labels {
                    Some((l, _)) if !l.trim().is_empty() => (format!("{l},{terms}"), None),
                    _ => (terms, None),
                })
            }
            Err(e) => s.flag_error(e),
        }
    }
    let (flag, key, made) = match (expr, labels) {
        (Some(_), Some(_)) => {
            s.flag_error(
                "give --node-label-expr or --node-selector (or draino's --node-label), not both",
            );
            return;
        }
        (Some((e, span)), None) => (
            "--node-label-expr",
            ("nodeLabelExpr", span),
            crate::config::draino::cel_or_draino(&e).map_err(|e| e.to_string()),
        ),
        (None, Some((l, span))) => (
            "--node-selector",
            ("nodeSelector", span),
            Selector::labels(&l).map_err(|e| e.to_string()),
        ),
        (None, None) => return,
    };
    match (made, key) {
        (Ok(sel), _) => cfg.selector = sel,
        (Err(msg), (key, Some(span))) => {
            let err = s.at(span, format!("{key}: {msg}"));
            s.errors.push(err);
        }
        (Err(msg), (_, None)) => s.flag_error(format!("{flag}: {msg}")),
    }
}

/// The drain's times, and stale readiness.
fn timing(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    if let Some(d) = s.duration(
        args.drain_buffer,
        &file.drain_buffer,
        ("drain-buffer", "drainBuffer"),
    ) {
        cfg.drain_buffer = d;
    }
    if let Some(d) = s.duration(
        args.max_grace_period,
        &file.max_grace_period,
        ("max-grace-period", "maxGracePeriod"),
    ) {
        cfg.max_grace_period = d;
    }
    if let Some(d) = s.duration(
        args.eviction_headroom,
        &file.eviction_headroom,
        ("eviction-headroom", "evictionHeadroom"),
    ) {
        cfg.eviction_headroom = d;
    }
    if let Some(d) = s.duration(
        args.stale_readiness_threshold,
        &file.stale_readiness_threshold,
        ("stale-readiness-threshold", "staleReadinessThreshold"),
    ) {
        cfg.stale_readiness = (!d.is_zero()).then_some(d);
    }
    cfg.evict_stale_pods = args.evict_stale_pods || file.evict_stale_pods.unwrap_or(false);
    if let Some(d) = s.duration(
        args.pods_not_starting_after,
        &file.pods_not_starting_after,
        ("pods-not-starting-after", "podsNotStartingAfter"),
    ) {
        cfg.symptoms.not_starting_after = (!d.is_zero()).then_some(d);
    }
    if let Some(d) = s.duration(
        args.pods_not_terminating_after,
        &file.pods_not_terminating_after,
        ("pods-not-terminating-after", "podsNotTerminatingAfter"),
    ) {
        cfg.symptoms.not_terminating_after = (!d.is_zero()).then_some(d);
    }
    cfg.skip_drain = args.skip_drain || file.skip_drain.unwrap_or(false);
    cfg.lifecycle_conditions = (args.lifecycle_conditions)
        .or(file.lifecycle_conditions)
        .unwrap_or(false);
    cfg.dry_run = args.dry_run || file.dry_run.unwrap_or(false);
    cfg.kosmos_other_conditions =
        args.kosmos_other_conditions || file.kosmos_other_conditions.unwrap_or(false);
}

/// Which pods a drain evicts, and what a protected one does to it.
fn pod_rules(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    let on = |flag: bool, key: Option<bool>| flag || key.unwrap_or(false);
    cfg.evict_emptydir_pods = on(args.evict_emptydir_pods, file.evict_emptydir_pods);
    cfg.evict_unreplicated_pods = on(args.evict_unreplicated_pods, file.evict_unreplicated_pods);
    cfg.evict_statefulset_pods = on(args.evict_statefulset_pods, file.evict_statefulset_pods);
    cfg.evict_daemonset_pods = on(args.evict_daemonset_pods, file.evict_daemonset_pods);
    cfg.allow_force_delete = on(args.allow_force_delete, file.allow_force_delete);
    cfg.ignore_safe_to_evict_annotation = on(
        args.ignore_safe_to_evict_annotation,
        file.ignore_safe_to_evict_annotation,
    );
    // Both lists add up (the file's and the flags').
    for a in &args.protected_pod_annotations {
        match protected_annotation(a) {
            Ok(p) => cfg.protected_annotations.push(p),
            Err(e) => s.flag_error(e),
        }
    }
    for a in &file.protected_pod_annotations {
        match protected_annotation(&a.value) {
            Ok(p) => cfg.protected_annotations.push(p),
            Err(e) => {
                let err = s.at(a, e);
                s.errors.push(err);
            }
        }
    }
    if let Some(p) = args.protected_pods.or(file.protected_pods) {
        cfg.protected_pods = p;
    }
}

/// The cordon and drain budgets.
fn budgets(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    let n = match (args.max_drains_in_flight, file.max_drains_in_flight) {
        (Some(ceiling), Some(n)) if n > ceiling => {
            s.flag_error(format!(
                "maxDrainsInFlight {n} in the config file is looser than --max-drains-in-flight {ceiling} given on the command line: a config edit may only tighten it"
            ));
            Some(ceiling)
        }
        (Some(ceiling), file) => Some(file.unwrap_or(ceiling)),
        (None, file) => file,
    };
    if let Some(n) = n {
        if n == 0 {
            s.flag_error("max-drains-in-flight must be at least 1");
        }
        cfg.max_drains_in_flight = n;
    }
    if let Some(b) = s.limit(
        args.max_cordoned.as_deref(),
        &file.max_cordoned,
        ("max-cordoned", "maxCordoned"),
        str::parse::<Budget>,
        Budget::within,
    ) {
        cfg.max_cordoned = b;
    }
}

/// A label key that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected a label key, e.g. topology.kubernetes.io/zone")]
pub(crate) struct LabelKeyError(String);

/// A label key (no spaces, no `=`).
fn label_key(v: &str) -> Result<String, LabelKeyError> {
    let v = v.trim();
    if v.is_empty() || v.contains(char::is_whitespace) || v.contains('=') {
        Err(LabelKeyError(v.to_string()))
    } else {
        Ok(v.to_string())
    }
}

/// The common-cause watch: how many nodes gaining one condition together, within how long.
fn correlate(s: &mut Sources, out: &mut Safety) {
    let (args, file) = (s.args, s.file);
    if let Some(n) = args.correlate_min.or(file.correlate_min) {
        out.correlate_min = n;
    }
    let window = ("correlate-window", "correlateWindow");
    if let Some(d) = s.duration(args.correlate_window, &file.correlate_window, window) {
        out.correlate_window = d;
    }
}

/// The fleet safety gates: the breaker, failure domains, flap damping and drain windows.
fn safety(s: &mut Sources, out: &mut Safety) {
    let (args, file) = (s.args, s.file);
    let budget = str::parse::<Budget>;
    if let Some(b) = s.limit(
        args.max_unhealthy.as_deref(),
        &file.max_unhealthy,
        ("max-unhealthy", "maxUnhealthy"),
        budget,
        Budget::within,
    ) {
        out.max_unhealthy = b;
    }
    if let Some(b) = s.limit(
        args.breaker_new.as_deref(),
        &file.breaker_new,
        ("breaker-new", "breakerNew"),
        budget,
        Budget::within,
    ) {
        out.breaker_new = b;
    }
    if let Some(d) = s.duration(
        args.breaker_window,
        &file.breaker_window,
        ("breaker-window", "breakerWindow"),
    ) {
        out.breaker_window = d;
    }
    if let Some(d) = s.duration(
        args.breaker_cooldown,
        &file.breaker_cooldown,
        ("breaker-cooldown", "breakerCooldown"),
    ) {
        out.breaker_cooldown = d;
    }
    if let Some(l) = s.pick(
        args.failure_domain.as_deref(),
        &file.failure_domain,
        ("failure-domain", "failureDomain"),
        label_key,
    ) {
        out.failure_domain = l;
    }
    if let Some(l) = s.pick(
        args.kosmos_cluster_label.as_deref(),
        &file.kosmos_cluster_label,
        ("kosmos-cluster-label", "kosmosClusterLabel"),
        label_key,
    ) {
        out.kosmos_cluster_label = l;
    }
    if let Some(b) = s.limit(
        args.max_cordoned_per_domain.as_deref(),
        &file.max_cordoned_per_domain,
        ("max-cordoned-per-domain", "maxCordonedPerDomain"),
        budget,
        Budget::within,
    ) {
        out.max_cordoned_per_domain = Some(b);
    }
    let percent = |v: &str| match v.parse::<Budget>() {
        Ok(Budget::Percent(p)) => Ok(p),
        _ => Err(format!(
            "{v:?}: expected a percentage in (0, 100], e.g. 50%"
        )),
    };
    // A higher outage percentage declares fewer outages (fewer holds): the flag is its ceiling.
    if let Some(p) = s.limit(
        args.domain_outage.as_deref(),
        &file.domain_outage,
        ("domain-outage", "domainOutage"),
        percent,
        |a: &f64, b: &f64| Some(a <= b),
    ) {
        out.domain_outage_percent = p;
    }
    if let Some(n) = args
        .domain_outage_min_nodes
        .or(file.domain_outage_min_nodes)
    {
        out.domain_outage_min_nodes = n;
    }
    if let Some(n) = args.flap_threshold.or(file.flap_threshold) {
        out.flap_threshold = n;
    }
    correlate(s, out);
    if let Some(d) = s.duration(
        args.flap_window,
        &file.flap_window,
        ("flap-window", "flapWindow"),
    ) {
        out.flap_window = d;
    }
    out.drain_windows = s.each(
        &args.drain_windows,
        &file.drain_windows,
        ("drain-window", "drainWindows"),
        str::parse::<DrainWindow>,
    );
}

/// What a drained node gets, and when its Node object is deleted.
fn after_drain(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    cfg.after_drain.labels = s.each(
        &args.after_drain_labels,
        &file.after_drain_labels,
        ("after-drain-label", "afterDrainLabels"),
        crate::config::mark,
    );
    cfg.after_drain.annotations = s.each(
        &args.after_drain_annotations,
        &file.after_drain_annotations,
        ("after-drain-annotation", "afterDrainAnnotations"),
        crate::config::mark,
    );
    cfg.after_drain.taints = s.each(
        &args.after_drain_taints,
        &file.after_drain_taints,
        ("after-drain-taint", "afterDrainTaints"),
        str::parse::<Taint>,
    );
    if let Some(d) = s.duration(
        args.delete_drained_node_after,
        &file.delete_drained_node_after,
        ("delete-drained-node-after", "deleteDrainedNodeAfter"),
    ) {
        cfg.after_drain.delete_after = Some(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    /// `--add-condition` adds to the config file's list or the command line's, never replaces it
    /// (what a kustomize component adds), and is checked as a listed one is.
    #[test]
    fn an_added_condition_joins_the_listed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        std::fs::write(&f, "conditions:\n  - KernelDeadlock=True,10m\n").unwrap();
        let types = |a: &PolicyArgs| -> Vec<String> {
            let cfg = build(a).unwrap_or_else(|e| panic!("{e:?}"));
            cfg.conditions.iter().map(|c| c.to_string()).collect()
        };
        let mut a = PolicyArgs {
            config: Some(f),
            add_conditions: vec!["MaintenanceScheduled=True".into()],
            ..Default::default()
        };
        let both = types(&a);
        assert_eq!(both.len(), 2, "{both:?}");
        assert!(
            both[0].starts_with("KernelDeadlock=True")
                && both[1].starts_with("MaintenanceScheduled=True"),
            "{both:?}"
        );
        a.conditions = vec!["ReadonlyFilesystem".into()];
        let flags = types(&a);
        assert!(
            flags[0].starts_with("ReadonlyFilesystem")
                && flags[1].starts_with("MaintenanceScheduled"),
            "{flags:?}"
        );
        // Alone, it is the list.
        let alone = PolicyArgs {
            add_conditions: vec!["MaintenanceScheduled=True".into()],
            ..Default::default()
        };
        assert_eq!(types(&alone).len(), 1);
        // Checked as any condition: a typo, and Ready sooner than the floor.
        a.add_conditions = vec!["Maintenance=Maybe,x".into()];
        let e = build(&a).unwrap_err()[0].to_string();
        assert!(e.contains("--add-condition=Maintenance=Maybe,x"), "{e}");
        a.add_conditions = vec!["Ready=False,1m".into()];
        a.min_ready_duration = Some(Duration::from_secs(300));
        let e = build(&a).unwrap_err()[0].to_string();
        assert!(e.contains("sooner than --min-ready-duration"), "{e}");
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
    fn a_ladder_left_unquoted_in_the_file_is_the_ladder_meant() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        let from = |text: &str| {
            std::fs::write(&f, text).unwrap();
            build(&PolicyArgs {
                config: Some(f.clone()),
                ..Default::default()
            })
        };
        let quoted = from("conditions:\n  - \"KernelDeadlock=True,10m: drain, reboot\"\n").unwrap();
        // YAML reads these as a mapping of one entry: taken as the text written.
        for text in [
            "conditions:\n  - KernelDeadlock=True,10m: drain, reboot\n",
            "conditions:\n  - KernelDeadlock=True,10m: [drain, reboot]\n",
        ] {
            let c = from(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!(c.conditions, quoted.conditions, "{text}");
        }
        assert_eq!(
            quoted.conditions[0].to_string(),
            "KernelDeadlock=True,10m: drain, reboot"
        );
        // Two conditions run together in one item: said, with the line.
        let e =
            from("conditions:\n  - {KernelDeadlock: drain, Ready=Unknown: drain}\n").unwrap_err();
        let said = e[0].to_string();
        assert!(said.contains(":2:"), "{said}");
        assert!(said.contains("one condition per list item"), "{said}");
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
            vec![crate::config::url::NotifyUrl::new(
                "https://hooks.example.com/x"
            )]
        );
        // Flags win; for a safety limit the flag is a ceiling the file may tighten only.
        a.max_unhealthy = Some("50%".into());
        a.drain_windows = vec!["Sat 00:00-06:00".into()];
        let c = build(&a).unwrap();
        assert_eq!(c.safety.max_unhealthy, Budget::Percent(40.0), "tightened");
        assert_eq!(c.safety.drain_windows[0].to_string(), "Sat 00:00-06:00");
        a.max_unhealthy = Some("5".into());
        let e = build(&a).unwrap_err();
        assert!(e[0].to_string().contains("not comparable"), "{}", e[0]);
        a.max_unhealthy = Some("30%".into());
        let e = build(&a).unwrap_err();
        assert!(
            e[0].to_string().ends_with(
                "drainer.yaml:2:15: maxUnhealthy \"40%\" is looser than --max-unhealthy 30% given on the command line: a config edit may only tighten it"
            ),
            "{}",
            e[0]
        );
        a.max_unhealthy = None;
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

    #[test]
    fn a_config_file_may_not_act_on_ready_sooner_than_the_command_lines_floor() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("drainer.yaml");
        std::fs::write(
            &f,
            "conditions:\n  - KernelDeadlock=True,0s\n  - Ready=Unknown,1m\n",
        )
        .unwrap();
        let mut a = PolicyArgs {
            config: Some(f.clone()),
            ..Default::default()
        };
        // No floor: as before (draino's lines keep working).
        assert_eq!(build(&a).unwrap().conditions.len(), 2);
        a.min_ready_duration = Some(Duration::from_secs(300));
        let e = build(&a).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].to_string().ends_with(
                "drainer.yaml:3:5: Ready=Unknown,1m acts on Ready sooner than --min-ready-duration 5m given on \
                 the command line: a config edit may only lengthen it"
            ),
            "{}",
            e[0]
        );
        // Other conditions are not Ready's business; Ready at or past the floor passes.
        std::fs::write(
            &f,
            "conditions: ['KernelDeadlock=True,0s', 'Ready=False,5m', 'Ready=Unknown,10m']\n",
        )
        .unwrap();
        assert_eq!(build(&a).unwrap().conditions.len(), 3);
        // The same on the command line is the operator's own contradiction: refused too.
        a.conditions = vec!["Ready=Unknown".into()];
        let e = build(&a).unwrap_err();
        assert!(
            e[0].to_string().contains("--min-ready-duration 5m"),
            "{}",
            e[0]
        );
    }

    #[test]
    fn notification_urls_come_from_a_secret_file_and_never_show_their_credential() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("urls");
        std::fs::write(
            &secret,
            "# the on-call channel\nhttps://hooks.slack.com/services/T1/B1/SECRETTOKEN\n",
        )
        .unwrap();
        let args = PolicyArgs {
            conditions: vec!["KernelDeadlock=True".into()],
            notify_url_files: vec![secret.clone()],
            ..Default::default()
        };
        let c = build(&args).unwrap();
        assert_eq!(
            c.notify_urls[0].expose(),
            "https://hooks.slack.com/services/T1/B1/SECRETTOKEN"
        );
        // What a reload logs names the setting, never the URL's secret part.
        let changes = Config::default().changes(&c).join("; ");
        assert!(changes.contains("notify_urls"), "{changes}");
        assert!(!changes.contains("SECRETTOKEN"), "{changes}");
        // Plain http is refused unless allowed, and the error hides the path too.
        std::fs::write(&secret, "http://hooks.example.com/T2/SECRET2\n").unwrap();
        let e = build(&args).unwrap_err();
        let shown = e[0].to_string();
        assert!(
            shown.contains("--notify-allow-http") && !shown.contains("SECRET2"),
            "{shown}"
        );
        let allowed = PolicyArgs {
            notify_allow_http: Some(true),
            ..args
        };
        assert_eq!(build(&allowed).unwrap().notify_urls.len(), 1);
    }
}
