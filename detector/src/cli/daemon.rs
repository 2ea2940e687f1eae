//! `detector run` (and `detector` with no subcommand, NPD's command line): its flags, the rule files
//! checked before anything talks to a cluster, then the node agent started and run until a signal.
//! Shell.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config;

/// Where `detector run` reads rules when `--rules` names none (the manifests mount them there).
const DEFAULT_RULES: &str = "/etc/nodemedic/rules";

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// This node's name. Default: $NODE_NAME, else the hostname.
    #[arg(long = "node-name", visible_alias = "hostname-override")]
    node_name: Option<String>,
    /// A kubeconfig file to reach the API server with (running outside a pod, on a node's own
    /// credential). Default: the pod's service account, else KUBECONFIG or ~/.kube/config.
    #[arg(long = "kubeconfig", value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Rule file or directory (repeatable; YAML rule files and NPD's JSON monitor files); watched
    /// and hot-reloaded. Default: /etc/nodemedic/rules, unless NPD's --config.* flags name files.
    #[arg(long = "rules")]
    rules: Vec<PathBuf>,
    /// Another directory exec checks may run programs from (repeatable), besides the rules'
    /// directories, /usr/lib/nodemedic/checks and /etc/nodemedic/checks (NPD's plugin directory, say).
    #[arg(long = "check-dir")]
    check_dirs: Vec<PathBuf>,
    /// Run the exec checks that ask for root (`runAs: root`, NPD custom plugin files) as root.
    /// Without it they are not run: whoever may edit the rules ConfigMap would otherwise be root on
    /// every node. NPD's --config.custom-plugin-monitor on the command line allows it too (NPD runs
    /// the plugins it names as root). Default: every check runs as nobody.
    #[arg(long = "allow-root-checks")]
    allow_root_checks: bool,
    /// The kernel log device, or a regular file in kmsg format (followed like tail -f).
    #[arg(long = "kmsg-path", default_value = "/dev/kmsg")]
    kmsg_path: PathBuf,
    /// journalctl binary used by journal inputs.
    #[arg(long, default_value = "journalctl")]
    journalctl: PathBuf,
    /// Journal directory for journal inputs that name none (default: the system journal).
    #[arg(long = "journal-dir")]
    journal_dir: Option<PathBuf>,
    /// Where input positions are kept across restarts.
    #[arg(
        long = "state-file",
        default_value = "/var/lib/nodemedic/detector-state.json"
    )]
    state_file: PathBuf,
    /// Address of /metrics /healthz /readyz /conditions. Loopback by default, as NPD's: on a host
    /// (or under hostNetwork) every interface would expose it; the manifests give the pod's address.
    #[arg(long, default_value = "127.0.0.1:20257", value_parser = nodemedic_common::serve::listen_addr)]
    listen: std::net::SocketAddr,
    /// Refresh of lastHeartbeatTime on our conditions.
    #[arg(long = "heartbeat-period", default_value = "5m", value_parser = nodemedic_common::time::parse_duration)]
    heartbeat: std::time::Duration,
    /// Minimum time between two updates of the same aggregated Event.
    #[arg(long = "event-interval", default_value = "10s", value_parser = nodemedic_common::time::parse_duration)]
    event_interval: std::time::Duration,
    /// Moved to the drainer (`drainer run --stale-readiness-threshold`); accepted here so an
    /// existing DaemonSet still starts, with a warning.
    #[arg(long = "stale-readiness-threshold", hide = true)]
    stale_threshold: Option<String>,
    /// Moved to the drainer (`drainer run --evict-stale-pods`).
    #[arg(long = "evict-stale-pods", hide = true)]
    evict_stale_pods: bool,
    /// The drainer's reboot requests, NAMESPACE/NAME of its ConfigMap (`<lease>-reboots`): this
    /// node's request is carried out once the drainer's signature verifies with
    /// --reboot-public-key, it names this Node's UID and current bootID, the Node carries the
    /// drainer's fence taint, is cordoned and runs no pods but DaemonSet, mirror and not-evicted
    /// ones. Default: none (never reboots).
    #[arg(long = "reboot-requests", value_name = "NAMESPACE/NAME", value_parser = namespaced, requires = "reboot_public_key")]
    reboot_requests: Option<(String, String)>,
    /// The public half (PEM, `openssl pkey -pubout`) of the drainer's --reboot-signing-key: only
    /// requests it signed are carried out.
    #[arg(long = "reboot-public-key", value_name = "FILE")]
    reboot_public_key: Option<PathBuf>,
    /// Carry out reboot requests on a control-plane node too (`node-role.kubernetes.io/control-plane`
    /// or `master`). Default: never reboot one.
    #[arg(long = "reboot-control-plane")]
    reboot_control_plane: bool,
    /// At most this many reboots of this node in 24 hours, whatever the drainer asks (counted in
    /// --reboot-state).
    #[arg(long = "reboot-max-per-day", default_value_t = 3)]
    reboot_max_per_day: u32,
    /// The command that reboots this machine, its words separated by spaces (from the DaemonSet:
    /// the host's systemd through PID 1's namespaces, as kured does).
    #[arg(
        long = "reboot-command",
        default_value = "nsenter --target 1 --mount --uts --ipc --net -- systemctl reboot"
    )]
    reboot_command: String,
    /// Where the reboot requests carried out are remembered, so a restart never carries one out
    /// twice.
    #[arg(
        long = "reboot-state",
        default_value = "/var/lib/nodemedic/detector-reboots.json"
    )]
    reboot_state: PathBuf,
    /// Before each reboot it carries out (and before its Node's replacement), keep the kernel log since boot, the journal of
    /// --evidence-units and the Node's conditions in a folder of its own under this directory (a
    /// hostPath: it must outlive the reboot); the Event `EvidenceKept` names it. Default: none.
    #[arg(
        long = "evidence-dir",
        value_name = "DIR",
        requires = "reboot_requests"
    )]
    evidence_dir: Option<PathBuf>,
    /// The units whose journal of this boot is kept (commas).
    #[arg(
        long = "evidence-units",
        value_delimiter = ',',
        default_value = "kubelet.service,containerd.service"
    )]
    evidence_units: Vec<String>,
    /// How many folders --evidence-dir keeps (the oldest go).
    #[arg(long = "evidence-keep", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    evidence_keep: u32,
    /// A collector run with the folder's path as its last argument once it is written (to ship it
    /// off the node), its words separated by spaces; within 30 s, before the reboot. Default: none.
    #[arg(
        long = "evidence-command",
        value_name = "COMMAND",
        requires = "evidence_dir"
    )]
    evidence_command: Option<String>,
    /// Each component's systemd unit, for the drainer's restart requests (a ladder's `restart
    /// kubelet` / `restart containerd`): kubeadm and most distributions as given; k3s
    /// `kubelet=k3s-agent.service,containerd=k3s-agent.service` (`k3s.service` on servers), RKE2
    /// `rke2-agent.service` for both, MicroK8s `snap.microk8s.daemon-kubelite.service` and
    /// `snap.microk8s.daemon-containerd.service`.
    #[arg(
        long = "restart-units",
        default_value = "kubelet=kubelet.service,containerd=containerd.service",
        value_parser = crate::restart::units
    )]
    restart_units: std::collections::BTreeMap<String, String>,
    /// At most this many component restarts on this node in 24 hours, whatever the drainer asks.
    #[arg(long = "restart-max-per-day", default_value_t = 3)]
    restart_max_per_day: u32,
    /// How long a restarted unit has to be active again before it is started again.
    #[arg(long = "restart-settle", default_value = "60s", value_parser = nodemedic_common::time::parse_duration, hide = true)]
    restart_settle: std::time::Duration,
    /// The host's systemctl, its words separated by spaces (from the DaemonSet: through PID 1's
    /// namespaces, as the reboot command).
    #[arg(
        long = "systemctl",
        default_value = "nsenter --target 1 --mount --uts --ipc --net -- systemctl"
    )]
    systemctl: String,
    /// Where the kernel says which boot this is.
    #[arg(
        long = "boot-id-file",
        default_value = "/proc/sys/kernel/random/boot_id",
        hide = true
    )]
    boot_id_file: PathBuf,
    /// Log format.
    #[arg(long = "log-format", default_value = "text")]
    log_format: nodemedic_common::telemetry::LogFormat,
    #[command(flatten)]
    npd: crate::npd_flags::NpdFlags,
}

/// `NAMESPACE/NAME`.
fn namespaced(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("{s:?}: expected NAMESPACE/NAME")),
    }
}

/// What `--reboot-*` say (None: this detector never reboots); a public key file that is not one is
/// an error (exit 2).
fn reboot_options(args: &RunArgs) -> Result<Option<crate::reboot::Options>, ExitCode> {
    let (Some(requests), Some(path)) = (args.reboot_requests.clone(), &args.reboot_public_key)
    else {
        return Ok(None);
    };
    let public_key = nodemedic_common::reboot::VerifyingKey::read(path).map_err(|e| {
        eprintln!("detector: --reboot-public-key {e}");
        ExitCode::from(2)
    })?;
    Ok(Some(crate::reboot::Options {
        requests,
        public_key,
        control_plane: args.reboot_control_plane,
        max_per_day: args.reboot_max_per_day,
        command: args
            .reboot_command
            .split_whitespace()
            .map(String::from)
            .collect(),
        state: args.reboot_state.clone(),
        boot_id_file: args.boot_id_file.clone(),
        restart: crate::restart::Options {
            settle: args.restart_settle,
            systemctl: args
                .systemctl
                .split_whitespace()
                .map(String::from)
                .collect(),
            units: args.restart_units.clone(),
            max_per_day: args.restart_max_per_day,
        },
        evidence: args
            .evidence_dir
            .clone()
            .map(|dir| crate::evidence::Options {
                dir,
                units: args.evidence_units.clone(),
                keep: args.evidence_keep as usize,
                command: (args.evidence_command.iter())
                    .flat_map(|c| c.split_whitespace().map(String::from))
                    .collect(),
                journalctl: args.journalctl.clone(),
                kmsg: args.kmsg_path.clone(),
            }),
    }))
}

/// How to reach the API server: NPD's --apiserver-override, then --kubeconfig (which names the
/// file if both are given).
fn client_options(
    npd: Option<nodemedic_common::client::Options>,
    kubeconfig: Option<PathBuf>,
) -> nodemedic_common::client::Options {
    let mut how = npd.unwrap_or_default();
    if let Some(k) = kubeconfig {
        (how.kubeconfig, how.in_cluster) = (Some(k), false);
    }
    how
}

pub(crate) fn run_daemon(mut args: RunArgs) -> ExitCode {
    let npd = match crate::npd_flags::resolve(&args.npd, args.listen) {
        Ok(m) => m,
        Err(refused) => {
            for r in &refused {
                eprintln!("detector: {r}");
            }
            return ExitCode::from(2);
        }
    };
    nodemedic_common::telemetry::init_with_default(args.log_format, npd.log_level);
    for w in &npd.warnings {
        tracing::warn!("{w}");
    }
    args.rules.extend(npd.rules.iter().cloned());
    args.listen = npd.listen;
    if let Some(h) = npd.heartbeat {
        args.heartbeat = h;
    }
    let stats = match check_rules(&mut args.rules).and_then(|()| load_stats(&npd.stats)) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let npd_plugins =
        !args.npd.custom_plugin_monitor.is_empty() || !args.npd.custom_plugin_monitors.is_empty();
    let reboot = match reboot_options(&args) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let node_name = args
        .node_name
        .clone()
        .or_else(|| std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
    // One thread for the async work: the detector's I/O is light, and blocking inputs have their own
    // threads. This keeps idle memory small.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result: anyhow::Result<()> = rt.block_on(async move {
        // Said first, so even a detector that stops before reaching anything leaves a line.
        tracing::info!(node = %node_name, version = env!("CARGO_PKG_VERSION"), "detector starting");
        let how = client_options(npd.client.clone(), args.kubeconfig.clone());
        let (client, credential, server) =
            nodemedic_common::client::connect(nodemedic_common::keys::DETECTOR_MANAGER, &how)
                .await?;
        // Said before any call, so a detector that cannot reach its API server has said which.
        tracing::info!(api_server = %server, "using the API server");
        let opts = crate::run::Options {
            node_name,
            rules: args.rules,
            kmsg_path: args.kmsg_path,
            journalctl: args.journalctl,
            journal_dir: args.journal_dir,
            state_file: args.state_file,
            listen: args.listen,
            extra_listen: npd.extra_listen,
            heartbeat: args.heartbeat,
            events: crate::report::aggregate::Limits {
                min_interval: args.event_interval,
                ..Default::default()
            },
            report_tick: std::time::Duration::from_millis(250),
            check_dirs: args.check_dirs,
            // NPD's --config.custom-plugin-monitor on the DaemonSet names its plugins, which NPD
            // runs as root: that flag is the DaemonSet's allowance too.
            allow_root_checks: args.allow_root_checks || npd_plugins,
            credential,
            api_server: server,
            reboot,
            stats,
        };
        if args.stale_threshold.is_some() || args.evict_stale_pods {
            tracing::warn!(
                "--stale-readiness-threshold and --evict-stale-pods moved to the drainer (drainer run \
                 --stale-readiness-threshold / --evict-stale-pods): it sees every node, Kosmos leaves \
                 included, with one watch; ignored here"
            );
        }
        let running = crate::run::start(opts, client).await?;
        nodemedic_common::runtime::shutdown_signal().await;
        tracing::info!("shutting down");
        running.shutdown().await;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once, on stderr (where the logs go too).
            eprintln!(
                "detector: {}",
                nodemedic_common::cli::error_chain(e.as_ref())
            );
            ExitCode::from(1)
        }
    }
}

/// The rule files (the default directory when none are named), checked before anything talks to a
/// cluster: a bad file is the error shown. Errors are printed.
/// The system stats monitor files, read and checked before anything starts (exit 2 naming the
/// file, line and column otherwise).
fn load_stats(files: &[PathBuf]) -> Result<Vec<crate::stats::StatsSettings>, ExitCode> {
    crate::stats::load(files).map_err(|e| {
        eprintln!("detector: --config.system-stats-monitor: {e}");
        ExitCode::from(2)
    })
}

fn check_rules(rules: &mut Vec<PathBuf>) -> Result<(), ExitCode> {
    if rules.is_empty() {
        if !std::path::Path::new(DEFAULT_RULES).exists() {
            eprintln!(
                "detector: no --rules given, and the default rule directory {DEFAULT_RULES} does not exist: \
                 give --rules FILE|DIR (repeatable). The shipped rules are in the repository's config/rules/ \
                 (the manifests mount them at {DEFAULT_RULES}; `detector check` runs them offline); \
                 `detector convert-npd` turns NPD's monitor files into rule files"
            );
            return Err(ExitCode::from(2));
        }
        rules.push(PathBuf::from(DEFAULT_RULES));
    }
    match config::load_paths(rules) {
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("detector: {} error(s) in rule files", errors.0.len());
            Err(ExitCode::from(2))
        }
        Ok(r) if r.monitors.is_empty() => {
            eprintln!("{}", no_rule_files(rules));
            Err(ExitCode::from(2))
        }
        Ok(_) => Ok(()),
    }
}

/// What to say when `--rules` names no rule file: which files were there instead.
pub(crate) fn no_rule_files(paths: &[PathBuf]) -> String {
    let mut others = Vec::new();
    for p in paths {
        if let Ok(dir) = std::fs::read_dir(p) {
            others.extend(
                dir.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.')),
            );
        }
    }
    others.sort();
    let listed: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut msg = format!(
        "detector: no rule files in {}: *.yaml and *.yml rule files and NPD's *.json monitor files are read",
        listed.join(", ")
    );
    if !others.is_empty() {
        msg.push_str(&format!(" (found: {})", others.join(", ")));
    }
    msg
}
