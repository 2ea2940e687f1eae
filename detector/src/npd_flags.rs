//! node-problem-detector's command line on `detector` (and `detector run`): NPD's DaemonSet args work
//! unchanged. Each flag is mapped to ours, accepted because it asks for what we do anyway, ignored
//! with a warning when it tunes something we do differently, or refused with a sentence saying what
//! to use instead. [`resolve`] is pure; `main` applies what it returns.

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// NPD's flags (and klog's that NPD's manifests pass). Go accepts `--flag=value`, `--flag value` and
/// `-flag`; [`normalize_args`] turns the single-dash long form into the double-dash one first.
#[derive(Debug, Default, Clone, clap::Args)]
#[command(next_help_heading = "node-problem-detector flags (mapped onto the ones above)")]
pub(crate) struct NpdFlags {
    /// NPD monitor files (JSON; comma separated), loaded as rule files.
    #[arg(
        long = "config.system-log-monitor",
        value_delimiter = ',',
        value_name = "FILES"
    )]
    pub(crate) system_log_monitor: Vec<PathBuf>,
    /// NPD custom plugin monitor files (JSON; comma separated), loaded as exec rule files.
    #[arg(
        long = "config.custom-plugin-monitor",
        value_delimiter = ',',
        value_name = "FILES"
    )]
    pub(crate) custom_plugin_monitor: Vec<PathBuf>,
    /// NPD's deprecated spelling of --config.system-log-monitor.
    #[arg(
        long = "system-log-monitors",
        value_delimiter = ',',
        value_name = "FILES"
    )]
    pub(crate) system_log_monitors: Vec<PathBuf>,
    /// NPD's deprecated spelling of --config.custom-plugin-monitor.
    #[arg(
        long = "custom-plugin-monitors",
        value_delimiter = ',',
        value_name = "FILES"
    )]
    pub(crate) custom_plugin_monitors: Vec<PathBuf>,
    /// NPD system stats monitor files (JSON; comma separated): host metrics on /metrics under
    /// NPD's names.
    #[arg(
        long = "config.system-stats-monitor",
        value_delimiter = ',',
        value_name = "FILES"
    )]
    pub(crate) system_stats_monitor: Vec<PathBuf>,
    /// NPD's /healthz and /conditions server address (with --port: served there too).
    #[arg(long = "address", value_name = "IP")]
    pub(crate) address: Option<IpAddr>,
    /// NPD's /healthz and /conditions server port (0: none); the same endpoints are served there too.
    #[arg(long = "port", value_name = "PORT")]
    pub(crate) port: Option<u16>,
    /// Address of /metrics (sets --listen's address).
    #[arg(long = "prometheus-address", value_name = "IP")]
    pub(crate) prometheus_address: Option<IpAddr>,
    /// Port of /metrics (sets --listen's port; 0 is refused: /healthz is served there too).
    #[arg(long = "prometheus-port", value_name = "PORT")]
    pub(crate) prometheus_port: Option<u16>,
    /// Same as --heartbeat-period.
    #[arg(long = "k8s-exporter-heartbeat-period", value_name = "DURATION")]
    pub(crate) heartbeat_period: Option<String>,
    /// Accepted when true (the default); false is refused (use `detector check` offline).
    #[arg(long = "enable-k8s-exporter", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) enable_k8s_exporter: Option<bool>,
    /// Accepted when true; false is refused (Events are always written).
    #[arg(long = "k8s-exporter-write-events", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) write_events: Option<bool>,
    /// Accepted when true; false is refused (conditions are always written).
    #[arg(long = "k8s-exporter-update-node-conditions", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) update_conditions: Option<bool>,
    /// The API server as NPD takes it: `https://HOST:PORT?inClusterConfig=false&auth=KUBECONFIG`
    /// (`inClusterConfig` true by default: the pod's service account with HOST:PORT; `auth`: a
    /// kubeconfig file; `insecure=true`: the certificate not checked).
    #[arg(long = "apiserver-override", value_name = "URL")]
    pub(crate) apiserver_override: Option<String>,
    /// Ignored with a warning: the API server is waited for as long as it takes, with backoff.
    #[arg(long = "apiserver-wait-timeout", value_name = "DURATION")]
    pub(crate) apiserver_wait_timeout: Option<String>,
    /// Ignored with a warning (see --apiserver-wait-timeout).
    #[arg(long = "apiserver-wait-interval", value_name = "DURATION")]
    pub(crate) apiserver_wait_interval: Option<String>,
    /// Accepted when empty or `default` (where Events go); others are refused.
    #[arg(long = "event-namespace", value_name = "NAMESPACE")]
    pub(crate) event_namespace: Option<String>,
    /// Ignored with a warning: status writes are coalesced to at most one per second.
    #[arg(long = "kube-api-qps", value_name = "QPS")]
    pub(crate) kube_api_qps: Option<String>,
    /// Ignored with a warning (see --kube-api-qps).
    #[arg(long = "kube-api-burst", value_name = "N")]
    pub(crate) kube_api_burst: Option<String>,
    /// Refused: Stackdriver export is not offered (scrape /metrics).
    #[arg(long = "exporter.stackdriver", value_name = "FILE")]
    pub(crate) stackdriver: Option<String>,
    /// klog: logs always go to stderr (accepted).
    #[arg(long = "logtostderr", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) logtostderr: Option<bool>,
    /// klog: logs always go to stderr (accepted).
    #[arg(long = "alsologtostderr", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) alsologtostderr: Option<bool>,
    /// klog verbosity: 0-3 info, 4 and more debug (unless RUST_LOG is set).
    #[arg(short = 'v', long = "v", value_name = "LEVEL")]
    pub(crate) verbosity: Option<u8>,
}

/// What NPD's flags come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapped {
    /// Rule files to load in addition to `--rules`.
    pub(crate) rules: Vec<PathBuf>,
    /// System stats monitor files.
    pub(crate) stats: Vec<PathBuf>,
    /// `--listen` with NPD's Prometheus address and port applied.
    pub(crate) listen: SocketAddr,
    /// NPD's own server (`--address`/`--port`), when it names another port.
    pub(crate) extra_listen: Option<SocketAddr>,
    pub(crate) heartbeat: Option<Duration>,
    /// A log filter for NPD's `-v`, when RUST_LOG does not say.
    pub(crate) log_level: Option<&'static str>,
    /// One line per flag accepted but not acted on.
    pub(crate) warnings: Vec<String>,
    /// How to reach the API server, from `--apiserver-override` (None: as the detector's own
    /// flags say).
    pub(crate) client: Option<nodemedic_common::client::Options>,
}

/// Map NPD's flags onto `listen`; `Err` says, for each refused flag, what to use instead.
pub(crate) fn resolve(f: &NpdFlags, listen: SocketAddr) -> Result<Mapped, Vec<String>> {
    let mut refused = Vec::new();
    let mut m = Mapped {
        rules: Vec::new(),
        stats: Vec::new(),
        listen,
        extra_listen: None,
        heartbeat: None,
        log_level: None,
        warnings: Vec::new(),
        client: None,
    };
    m.rules.extend(f.system_log_monitor.iter().cloned());
    m.rules.extend(f.system_log_monitors.iter().cloned());
    m.rules.extend(f.custom_plugin_monitor.iter().cloned());
    m.rules.extend(f.custom_plugin_monitors.iter().cloned());
    m.rules.retain(|p| !p.as_os_str().is_empty());
    m.stats.extend(f.system_stats_monitor.iter().cloned());
    m.stats.retain(|p| !p.as_os_str().is_empty());
    if let Some(ip) = f.prometheus_address {
        m.listen.set_ip(ip);
    }
    match f.prometheus_port {
        Some(0) => refused.push("--prometheus-port=0: /metrics cannot be turned off, /healthz and /readyz share its listener (--listen). Remove the flag.".to_string()),
        Some(p) => m.listen.set_port(p),
        None => {}
    }
    match (f.address, f.port) {
        (_, Some(0)) => {}
        (None, None) => {}
        (address, port) => {
            let extra = SocketAddr::new(
                address.unwrap_or(IpAddr::from([127, 0, 0, 1])),
                port.unwrap_or(20256),
            );
            if extra.port() != m.listen.port() {
                m.extra_listen = Some(extra);
            }
        }
    }
    if let Some(h) = &f.heartbeat_period {
        match crate::config::npd::parse_go_duration(h) {
            Some(d) if !d.is_zero() => m.heartbeat = Some(d),
            _ => refused.push(format!(
                "--k8s-exporter-heartbeat-period={h:?}: not a positive duration (e.g. 5m)"
            )),
        }
    }
    if f.enable_k8s_exporter == Some(false) {
        refused.push("--enable-k8s-exporter=false: to run the rules without a cluster, use `detector check --rules DIR --input LOG` (it prints what would be reported).".to_string());
    }
    if f.write_events == Some(false) {
        refused.push("--k8s-exporter-write-events=false: Events are always written (they are aggregated: one Event per reason and message, its count raised). Remove the flag.".to_string());
    }
    if f.update_conditions == Some(false) {
        refused.push("--k8s-exporter-update-node-conditions=false: conditions are always written; a rule file without permanent rules writes none. Remove the flag.".to_string());
    }
    if let Some(url) = &f.apiserver_override {
        match apiserver_override(url) {
            Ok((client, ignored)) => {
                m.client = Some(client);
                m.warnings.extend(ignored);
            }
            Err(why) => refused.push(format!("--apiserver-override={url}: {why}")),
        }
    }
    if let Some(ns) = f
        .event_namespace
        .as_deref()
        .filter(|ns| !ns.is_empty() && *ns != "default")
    {
        refused.push(format!("--event-namespace={ns}: Events about a Node go to the `default` namespace, where `kubectl describe node` finds them. Remove the flag."));
    }
    if f.stackdriver.is_some() {
        refused.push("--exporter.stackdriver: not offered; scrape /metrics (problem_counter, problem_gauge) instead.".to_string());
    }
    m.warnings = ignored(f);
    m.log_level = match f.verbosity {
        Some(v) if v >= 4 => Some("info,nodemedic_detector=debug,nodemedic_common=debug"),
        _ => None,
    };
    if refused.is_empty() {
        Ok(m)
    } else {
        Err(refused)
    }
}

/// NPD's `--apiserver-override` (heapster's source URI, which NPD reads): the URL's scheme and
/// host name the API server; `inClusterConfig` (true by default) takes the pod's service account,
/// `inClusterConfig=false&auth=FILE` the kubeconfig FILE; `insecure=true` checks no certificate;
/// `useServiceAccount=true` is the service account's token. The parameters NPD reads but that mean
/// nothing here (`apiVersion`, kubelet's) are warned about; anything else is refused, as is
/// `inClusterConfig=false` with no credential at all. Pure.
pub(crate) fn apiserver_override(
    url: &str,
) -> Result<(nodemedic_common::client::Options, Vec<String>), String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let server = if base.is_empty() {
        None
    } else {
        let uri: http::Uri = base.parse().map_err(|e| {
            format!("not a URL ({e}); e.g. https://10.0.0.1:6443?inClusterConfig=false&auth=/etc/kubernetes/kubeconfig")
        })?;
        match (uri.scheme_str(), uri.authority()) {
            (Some(scheme), Some(host)) => Some(format!("{scheme}://{host}")),
            _ => {
                return Err(
                    "name the API server as scheme://host:port (https://10.0.0.1:6443)".into(),
                );
            }
        }
    };
    let mut in_cluster = true;
    let mut auth = None;
    let mut insecure = false;
    let mut service_account = false;
    let mut warnings = Vec::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let flag = |v: &str| go_bool(v).ok_or_else(|| format!("{key}={v:?} is not true or false"));
        match &*key {
            "inClusterConfig" => in_cluster = flag(&value)?,
            "auth" if !value.is_empty() => auth = Some(PathBuf::from(&*value)),
            "auth" => {}
            "insecure" => insecure = flag(&value)?,
            "useServiceAccount" => service_account = flag(&value)?,
            "apiVersion" | "kubeletPort" | "kubeletHttps" => warnings.push(format!(
                "--apiserver-override: {key} ignored (the detector speaks the API server's own versions, and no kubelet)"
            )),
            other => {
                return Err(format!(
                    "{other:?} is not a parameter NPD reads (inClusterConfig, auth, insecure, useServiceAccount)"
                ));
            }
        }
    }
    // As NPD: a kubeconfig only with inClusterConfig=false.
    let kubeconfig = auth.filter(|_| !in_cluster);
    if !in_cluster && kubeconfig.is_none() && !service_account {
        return Err("inClusterConfig=false needs auth=KUBECONFIG (or useServiceAccount=true): without either NPD connects with no credential".into());
    }
    let options = nodemedic_common::client::Options {
        in_cluster: kubeconfig.is_none(),
        kubeconfig,
        server,
        insecure,
    };
    Ok((options, warnings))
}

/// Go's `strconv.ParseBool`.
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Flags accepted but not acted on, one warning each.
fn ignored(f: &NpdFlags) -> Vec<String> {
    let mut warnings = Vec::new();
    for (flag, given) in [
        (
            "--apiserver-wait-timeout",
            f.apiserver_wait_timeout.is_some(),
        ),
        (
            "--apiserver-wait-interval",
            f.apiserver_wait_interval.is_some(),
        ),
    ] {
        if given {
            warnings.push(format!("{flag} ignored: the API server is waited for as long as it takes, retrying with backoff up to 30s"));
        }
    }
    for (flag, given) in [
        ("--kube-api-qps", f.kube_api_qps.is_some()),
        ("--kube-api-burst", f.kube_api_burst.is_some()),
    ] {
        if given {
            warnings.push(format!("{flag} ignored: the detector writes its Node's status at most once a second and Events at most once per --event-interval"));
        }
    }
    warnings
}

/// Go's flag package takes `-flag` for `--flag`; clap does not. The NPD and klog flags written that
/// way become `--flag` (other arguments, and any that is not UTF-8, are left alone for clap to judge).
pub(crate) fn normalize_args<S: Into<OsString>>(
    args: impl IntoIterator<Item = S>,
) -> Vec<OsString> {
    const LONG: &[&str] = &[
        "config.system-log-monitor",
        "config.custom-plugin-monitor",
        "config.system-stats-monitor",
        "system-log-monitors",
        "custom-plugin-monitors",
        "hostname-override",
        "address",
        "port",
        "prometheus-address",
        "prometheus-port",
        "k8s-exporter-heartbeat-period",
        "enable-k8s-exporter",
        "k8s-exporter-write-events",
        "k8s-exporter-update-node-conditions",
        "apiserver-override",
        "apiserver-wait-timeout",
        "apiserver-wait-interval",
        "event-namespace",
        "kube-api-qps",
        "kube-api-burst",
        "exporter.stackdriver",
        "logtostderr",
        "alsologtostderr",
    ];
    args.into_iter()
        .map(|a| {
            let a: OsString = a.into();
            let Some(rest) = a
                .to_str()
                .and_then(|s| s.strip_prefix('-'))
                .filter(|r| !r.starts_with('-'))
            else {
                return a;
            };
            let name = rest.split_once('=').map_or(rest, |(n, _)| n);
            if LONG.contains(&name) {
                format!("--{rest}").into()
            } else {
                a
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        npd: NpdFlags,
    }

    fn parse(args: &[&str]) -> NpdFlags {
        let argv = normalize_args(
            std::iter::once("detector".to_string()).chain(args.iter().map(|s| s.to_string())),
        );
        Cli::try_parse_from(argv).unwrap().npd
    }

    const LISTEN: &str = "0.0.0.0:20257";

    #[test]
    fn npd_daemonset_args_map_onto_ours() {
        let f = parse(&[
            "--logtostderr",
            "--config.system-log-monitor=/config/kernel-monitor.json,/config/readonly-monitor.json",
            "--config.custom-plugin-monitor=/config/health-checker-kubelet.json",
            "-config.system-stats-monitor=/config/system-stats-monitor.json,/config/net-cgroup-system-stats-monitor.json",
            "-v=4",
            "--prometheus-address=0.0.0.0",
            "--prometheus-port=20258",
            "-k8s-exporter-heartbeat-period=2m",
        ]);
        let m = resolve(&f, LISTEN.parse().unwrap()).unwrap();
        assert_eq!(
            m.rules,
            [
                "/config/kernel-monitor.json",
                "/config/readonly-monitor.json",
                "/config/health-checker-kubelet.json"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(
            m.stats,
            [
                "/config/system-stats-monitor.json",
                "/config/net-cgroup-system-stats-monitor.json"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(m.listen, "0.0.0.0:20258".parse().unwrap());
        assert_eq!(m.heartbeat, Some(Duration::from_secs(120)));
        assert!(m.log_level.is_some());
        assert!(m.warnings.is_empty());
        assert_eq!(m.extra_listen, None);
    }

    #[test]
    fn npd_server_flags_add_a_listener() {
        let m = resolve(&parse(&["--port=20256"]), LISTEN.parse().unwrap()).unwrap();
        assert_eq!(m.extra_listen, Some("127.0.0.1:20256".parse().unwrap()));
        let m = resolve(&parse(&["--port", "0"]), LISTEN.parse().unwrap()).unwrap();
        assert_eq!(m.extra_listen, None);
    }

    #[test]
    fn flags_we_cannot_honour_are_refused_with_what_to_do() {
        let f = parse(&[
            "--enable-k8s-exporter=false",
            "--apiserver-override=https://10.0.0.1?inClusterConfig=false",
            "--prometheus-port=0",
            "--event-namespace=npd",
        ]);
        let refused = resolve(&f, LISTEN.parse().unwrap()).unwrap_err();
        assert_eq!(refused.len(), 4, "{refused:#?}");
        assert!(refused.iter().any(|r| r.contains("detector check")));
        assert!(refused.iter().any(|r| r.contains("auth=KUBECONFIG")));
    }

    /// NPD's `--apiserver-override` as NPD reads it (heapster's source URI).
    #[test]
    fn the_api_server_override_is_taken_as_npd_takes_it() {
        use nodemedic_common::client::Options;
        let ok = |url: &str| apiserver_override(url).unwrap();
        // Out of cluster: the kubeconfig named, its server replaced by the URL's.
        let (o, warnings) =
            ok("https://10.0.0.1:6443?inClusterConfig=false&auth=/etc/kubernetes/my%20kubeconfig");
        assert_eq!(
            o,
            Options {
                kubeconfig: Some("/etc/kubernetes/my kubeconfig".into()),
                in_cluster: false,
                server: Some("https://10.0.0.1:6443".into()),
                insecure: false,
            }
        );
        assert!(warnings.is_empty());
        // NPD's default: the pod's service account, with the URL's server.
        let (o, _) = ok("https://10.0.0.1");
        assert!(o.in_cluster && o.kubeconfig.is_none());
        assert_eq!(o.server.as_deref(), Some("https://10.0.0.1"));
        // auth= is NPD's only with inClusterConfig=false.
        let (o, _) = ok("https://10.0.0.1?auth=/k");
        assert!(o.in_cluster && o.kubeconfig.is_none());
        let (o, w) = ok("?inClusterConfig=0&auth=/k&insecure=TRUE&apiVersion=v1");
        assert_eq!((o.server, o.insecure, o.in_cluster), (None, true, false));
        assert_eq!(w.len(), 1, "{w:?}");
        let (o, _) = ok("https://h?inClusterConfig=false&useServiceAccount=true");
        assert!(o.in_cluster);
        for (bad, said) in [
            ("https://h?inClusterConfig=maybe", "not true or false"),
            ("https://h?inClusterConfig=false", "needs auth=KUBECONFIG"),
            ("https://h?kubeconfig=/k", "not a parameter NPD reads"),
            ("//h", "scheme://host:port"),
            ("https://h h", "not a URL"),
        ] {
            let e = apiserver_override(bad).unwrap_err();
            assert!(e.contains(said), "{bad}: {e}");
        }
    }

    #[test]
    fn tuning_flags_are_ignored_with_a_warning() {
        let f = parse(&[
            "--kube-api-qps=50",
            "--apiserver-wait-timeout=1m",
            "--enable-k8s-exporter",
        ]);
        let m = resolve(&f, LISTEN.parse().unwrap()).unwrap();
        assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
    }

    #[test]
    fn single_dash_long_flags_are_go_style() {
        assert_eq!(
            normalize_args(["-logtostderr", "-port=1", "-v", "-x", "--port"]),
            ["--logtostderr", "--port=1", "-v", "-x", "--port"]
        );
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(b"-\xff".to_vec());
        assert_eq!(normalize_args([bad.clone()]), [bad]);
    }
}
