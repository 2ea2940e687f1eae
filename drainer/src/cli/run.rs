//! `drainer run` (and `drainer` with no subcommand, as draino is run): the controller with its
//! election, metrics server, guard and config reloads, until SIGTERM. The shell: flags to
//! [`crate::run::Options`], the runtime, the exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::flags::PolicyArgs;

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Address of /metrics /healthz /readyz: HOST:PORT, or draino's :PORT for every address.
    #[arg(help_heading = "Output and operation", long, default_value = ":10002", env = "DRAINO_LISTEN", value_parser = crate::config::draino::parse_listen)]
    pub(crate) listen: std::net::SocketAddr,
    /// Namespace of the leader-election Lease.
    #[arg(
        help_heading = "Leader election",
        long,
        default_value = "kube-system",
        env = "DRAINO_NAMESPACE"
    )]
    pub(crate) namespace: String,
    /// Name of the leader-election Lease, which also names this drainer in drain records (several
    /// drainers can share a cluster). draino's --leader-election-token-name sets it too.
    #[arg(
        help_heading = "Leader election",
        long = "lease-name",
        default_value = "nodemedic-drainer"
    )]
    pub(crate) lease_name: String,
    /// This replica's identity in the Lease, taken as given. Without it: $POD_NAME (else the
    /// hostname) and a random suffix, as client-go makes them: two processes on one host never
    /// share one. [default: $POD_NAME-RANDOM]
    #[arg(help_heading = "Leader election", long)]
    pub(crate) identity: Option<String>,
    /// How long a Lease holds without renewal before another replica may take it.
    #[arg(help_heading = "Leader election", long = "leader-election-lease-duration", default_value = "15s", env = "DRAINO_LEADER_ELECTION_LEASE_DURATION", value_parser = nodemedic_common::time::parse_duration)]
    pub(crate) lease_duration: std::time::Duration,
    /// A leader that cannot renew within this long stops acting.
    #[arg(help_heading = "Leader election", long = "leader-election-renew-deadline", default_value = "10s", env = "DRAINO_LEADER_ELECTION_RENEW_DEADLINE", value_parser = nodemedic_common::time::parse_duration)]
    pub(crate) renew_deadline: std::time::Duration,
    /// Time between two tries to take or renew the Lease.
    #[arg(help_heading = "Leader election", long = "leader-election-retry-period", default_value = "2s", env = "DRAINO_LEADER_ELECTION_RETRY_PERIOD", value_parser = nodemedic_common::time::parse_duration)]
    pub(crate) retry_period: std::time::Duration,
    /// Log format: text for people, json for log pipelines.
    #[arg(
        help_heading = "Output and operation",
        long = "log-format",
        default_value = "text"
    )]
    pub(crate) log_format: nodemedic_common::telemetry::LogFormat,
    /// Serve the Kosmos eviction guard webhook (HTTPS) on this address, e.g. 0.0.0.0:9443.
    #[arg(help_heading = "Kosmos eviction guard", long = "guard-listen", requires_all = ["guard_tls_cert", "guard_tls_key"])]
    pub(crate) guard_listen: Option<std::net::SocketAddr>,
    /// PEM certificate of the guard (re-read when the file changes).
    #[arg(help_heading = "Kosmos eviction guard", long = "guard-tls-cert")]
    pub(crate) guard_tls_cert: Option<PathBuf>,
    /// PEM private key of the guard.
    #[arg(help_heading = "Kosmos eviction guard", long = "guard-tls-key")]
    pub(crate) guard_tls_key: Option<PathBuf>,
    /// Requesters whose pod deletions the guard checks (repeatable). The defaults cover the node
    /// lifecycle controller with kube-controller-manager's --use-service-account-credentials on
    /// (its service account) and off (the controller manager's own user).
    #[arg(help_heading = "Kosmos eviction guard", 
        long = "guard-user",
        default_values = crate::guard::DEFAULT_USERS
    )]
    pub(crate) guard_users: Vec<String>,
    /// The label (KEY=VALUE) of Kosmos leaf nodes.
    #[arg(help_heading = "Kosmos eviction guard", long = "guard-node-label", default_value = "kosmos.io/node=true", value_parser = crate::config::pair)]
    pub(crate) guard_node_label: (String, String),
    /// The Ed25519 private key (PEM, as `openssl genpkey -algorithm ed25519` writes it) the reboot
    /// requests of remediation ladders are signed with: a file the drainer's pod mounts from a
    /// Secret, which its ServiceAccount token cannot read. Detectors verify with the public half
    /// and refuse unsigned requests. [default: none: requests go unsigned and are refused]
    #[arg(
        help_heading = "Remediation",
        long = "reboot-signing-key",
        value_name = "FILE"
    )]
    pub(crate) reboot_signing_key: Option<PathBuf>,
    /// The key the drainer seals its drain records with: a file its pod mounts from the Secret
    /// `<lease>-record-key` (made once at install), which its ServiceAccount token cannot read, so
    /// a stolen token cannot forge a record the drainer would act on. Waited for while missing.
    /// [default: none: the key is read, and filled at the first start, through the API]
    #[arg(
        help_heading = "Leader election",
        long = "record-key-file",
        value_name = "FILE"
    )]
    pub(crate) record_key_file: Option<PathBuf>,
    /// During a record key rotation, the previous key's file (the Secret's `previous` item, mounted
    /// beside `key`): records it sealed are still trusted, and sealed with the new key when next
    /// written. Absent or empty: no rotation under way. docs/operator-guide.md says how to rotate.
    #[arg(
        help_heading = "Leader election",
        long = "record-key-previous-file",
        value_name = "FILE"
    )]
    pub(crate) record_key_previous_file: Option<PathBuf>,
    /// Refuse to start with safety limits looser than the ones the drainer last published (its
    /// `<lease>-settings` ConfigMap): a pod restarted after a ConfigMap edit its reload refused
    /// would otherwise take that edit. Without it such a start is logged, counted and told in a
    /// StartedLooser Event on the Lease. Take a deliberate loosening with one start without it.
    #[arg(help_heading = "Leader election", long = "refuse-looser-start")]
    pub(crate) refuse_looser_start: bool,
    #[command(flatten)]
    pub(crate) draino: crate::config::draino::DrainoFlags,
}

/// Why `drainer run` stopped with an error.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Client(#[from] nodemedic_common::client::Error),
    #[error(transparent)]
    Start(#[from] crate::error::Error),
}

pub(super) fn run(mut args: RunArgs, notes: Vec<String>) -> ExitCode {
    if let Some(name) = args.draino.leader_election_token_name.take() {
        args.lease_name = name;
    }
    nodemedic_common::telemetry::init_with_default(
        args.log_format,
        args.draino
            .debug
            .then_some("info,nodemedic_drainer=debug,nodemedic_common=debug"),
    );
    let config = match super::shared::config_or_exit(&args.policy) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // What the command line's draino booleans came to (`--dry-run=false` keeps dry run on).
    for line in notes {
        tracing::warn!("{line}");
    }
    for w in config.start_warnings() {
        tracing::warn!("{w}");
    }
    // One thread: the controller's work per event is small, drains are I/O, and with every
    // allocation in one arena the memory freed after the initial sync is reused instead of
    // stranded in per-thread arenas (tens of MiB at 50,000 pods).
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(until_signal(args, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("{}", nodemedic_common::cli::error_chain(&e));
            ExitCode::from(1)
        }
    }
}

/// Start everything and run until SIGTERM or SIGINT, then stop in order.
async fn until_signal(args: RunArgs, config: crate::config::Config) -> Result<(), RunError> {
    let client = nodemedic_common::client::for_flags(
        nodemedic_common::keys::DRAINER_MANAGER,
        args.draino.kubeconfig.as_deref(),
        args.draino.master.as_deref(),
    )
    .await?;
    let running = crate::run::start(options(args, config), client).await?;
    nodemedic_common::runtime::shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    Ok(())
}

fn options(args: RunArgs, config: crate::config::Config) -> crate::run::Options {
    let identity = args.identity.clone().unwrap_or_else(|| {
        let base = std::env::var("POD_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
        crate::leader::unique_identity(&base)
    });
    let guard = match (args.guard_listen, args.guard_tls_cert, args.guard_tls_key) {
        (Some(listen), Some(cert), Some(key)) => Some(crate::guard::server::GuardOptions {
            listen,
            cert,
            key,
            config: crate::guard::GuardConfig {
                users: args.guard_users,
                node_label: args.guard_node_label,
                ..Default::default()
            },
        }),
        _ => None,
    };
    crate::run::Options {
        config,
        listen: args.listen,
        lease: crate::leader::LeaseConfig {
            namespace: args.namespace,
            name: args.lease_name,
            identity,
            duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
        },
        tick: std::time::Duration::from_secs(5),
        // What it decides with, for `kubectl nodemedic` (the file as it was just read and built).
        settings: Some(crate::config::published::Published::new(
            &args.policy,
            args.policy
                .config
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok()),
        )),
        reload: Some(args.policy.clone()),
        guard,
        reboot_signing_key: args.reboot_signing_key,
        record_key_file: args.record_key_file,
        record_key_previous_file: args.record_key_previous_file,
        refuse_looser_start: args.refuse_looser_start,
    }
}
