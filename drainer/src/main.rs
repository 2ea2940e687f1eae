//! `drainer`: thin binary. `plan` explains (offline from files, or from the live cluster); `run` is
//! the controller. Installed (or linked) as `kubectl-nodemedic` it is the kubectl plugin:
//! `kubectl nodemedic plan` and `kubectl nodemedic conditions`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use nodemedic_drainer::config::build as policy;
use nodemedic_drainer::config::draino;
use nodemedic_drainer::config::flags::PolicyArgs;

#[derive(Parser)]
#[command(
    name = "drainer",
    version,
    about = "nodemedic drainer: cordon, drain and uncordon nodes by their conditions",
    long_about = "nodemedic drainer: cordon, drain and uncordon nodes by their conditions.\n\n\
        With no subcommand it runs the controller (`drainer run`), so a draino Deployment's command \
        line works unchanged: `drainer --node-label-expr=\"metadata['labels']['draino'] in ['node']\" \
        --drain-buffer=10m KernelDeadlock ReadonlyFilesystem`.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
// Parsed once per process: the size of the plan's flags does not matter.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Print, without a cluster, what the controller would do and why.
    Plan(PlanArgs),
    /// Run the controller (leader-elected); also what `drainer` with no subcommand does.
    Run(Box<RunArgs>),
    /// Replay a fleet scenario (nodes, condition changes over time) through the drainer's decisions,
    /// and print what it did; exits 1 when the scenario's expectations fail (config/scenarios/).
    Simulate(SimulateArgs),
    /// Print the shell completion script (e.g. `drainer completions bash > /etc/bash_completion.d/drainer`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: nodemedic_common::cli::Shell,
    },
    /// Write man pages for drainer and each subcommand into DIR (e.g. /usr/local/share/man/man1).
    Man {
        /// The directory to write the pages into (created if missing).
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Address of /metrics /healthz /readyz: HOST:PORT, or draino's :PORT for every address.
    #[arg(long, default_value = ":10002", env = "DRAINO_LISTEN", value_parser = nodemedic_drainer::config::draino::parse_listen)]
    listen: std::net::SocketAddr,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "kube-system", env = "DRAINO_NAMESPACE")]
    namespace: String,
    /// Name of the leader-election Lease, which also names this drainer in drain records (several
    /// drainers can share a cluster). draino's --leader-election-token-name sets it too.
    #[arg(long = "lease-name", default_value = "nodemedic-drainer")]
    lease_name: String,
    /// This replica's identity in the Lease. Default: $POD_NAME, else the hostname.
    #[arg(long)]
    identity: Option<String>,
    /// How long a Lease holds without renewal before another replica may take it.
    #[arg(long = "leader-election-lease-duration", default_value = "15s", env = "DRAINO_LEADER_ELECTION_LEASE_DURATION", value_parser = humantime::parse_duration)]
    lease_duration: std::time::Duration,
    /// A leader that cannot renew within this long stops acting.
    #[arg(long = "leader-election-renew-deadline", default_value = "10s", env = "DRAINO_LEADER_ELECTION_RENEW_DEADLINE", value_parser = humantime::parse_duration)]
    renew_deadline: std::time::Duration,
    /// Time between two tries to take or renew the Lease.
    #[arg(long = "leader-election-retry-period", default_value = "2s", env = "DRAINO_LEADER_ELECTION_RETRY_PERIOD", value_parser = humantime::parse_duration)]
    retry_period: std::time::Duration,
    /// Log format: text for people, json for log pipelines.
    #[arg(long = "log-format", default_value = "text")]
    log_format: nodemedic_common::telemetry::LogFormat,
    /// Serve the Kosmos eviction guard webhook (HTTPS) on this address, e.g. 0.0.0.0:9443.
    #[arg(long = "guard-listen", requires_all = ["guard_tls_cert", "guard_tls_key"])]
    guard_listen: Option<std::net::SocketAddr>,
    /// PEM certificate of the guard (re-read when the file changes).
    #[arg(long = "guard-tls-cert")]
    guard_tls_cert: Option<PathBuf>,
    /// PEM private key of the guard.
    #[arg(long = "guard-tls-key")]
    guard_tls_key: Option<PathBuf>,
    /// Requesters whose pod deletions the guard checks (repeatable). The defaults cover the node
    /// lifecycle controller with kube-controller-manager's --use-service-account-credentials on
    /// (its service account) and off (the controller manager's own user).
    #[arg(
        long = "guard-user",
        default_values = nodemedic_drainer::guard::DEFAULT_USERS
    )]
    guard_users: Vec<String>,
    /// The label (KEY=VALUE) of Kosmos leaf nodes.
    #[arg(long = "guard-node-label", default_value = "kosmos.io/node=true")]
    guard_node_label: String,
    #[command(flatten)]
    draino: nodemedic_drainer::config::draino::DrainoFlags,
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Scenario files (YAML).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

#[derive(clap::Args)]
struct PlanArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// `kubectl get nodes -o json` output (with --pods; or --live).
    #[arg(long, conflicts_with = "live")]
    nodes: Option<PathBuf>,
    /// `kubectl get pods -A -o json` output.
    #[arg(long, conflicts_with = "live")]
    pods: Option<PathBuf>,
    /// `kubectl get pdb -A -o json` output (optional).
    #[arg(long, conflicts_with = "live")]
    pdbs: Option<PathBuf>,
    /// `kubectl get lease -n NAMESPACE NAME -o json` of the drainer (optional): shows a pause.
    #[arg(long, conflicts_with = "live")]
    lease: Option<PathBuf>,
    /// `kubectl get events -A -o json` (optional): the drainer's NodeFlapping Events show which
    /// nodes are flapping.
    #[arg(long, conflicts_with = "live")]
    events: Option<PathBuf>,
    /// Read nodes, pods, PodDisruptionBudgets and the drainer's Lease from the cluster (read-only)
    /// instead of files.
    #[arg(long)]
    live: bool,
    /// With --live: the namespace of the drainer's Lease.
    #[arg(long = "lease-namespace", default_value = "kube-system")]
    lease_namespace: String,
    /// With --live: the name of the drainer's Lease.
    #[arg(long = "lease-name", default_value = "nodemedic-drainer")]
    lease_name: String,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Evaluate at this time (RFC 3339) instead of now, for reproducible durations.
    #[arg(long)]
    now: Option<Timestamp>,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

/// Which cluster a live command reads.
#[derive(clap::Args)]
struct ClusterArgs {
    /// Kubeconfig file. Default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context. Default: the current context.
    #[arg(long)]
    context: Option<String>,
}

/// `kubectl nodemedic ...`: the drainer binary under the name kubectl looks plugins up by.
#[derive(Parser)]
#[command(
    name = "kubectl-nodemedic",
    bin_name = "kubectl nodemedic",
    version,
    about = "nodemedic for kubectl: what the drainer would do now, and every node's nodemedic conditions"
)]
struct KubectlCli {
    #[command(subcommand)]
    command: KubectlCommand,
}

#[derive(Subcommand)]
// Parsed once per process: the size of the plan's flags does not matter.
#[allow(clippy::large_enum_variant)]
enum KubectlCommand {
    /// What the drainer would do now and why, from the live cluster (changes nothing).
    Plan(PlanArgs),
    /// Every node's nodemedic conditions and drain record at a glance.
    Conditions(ConditionsArgs),
}

#[derive(clap::Args)]
struct ConditionsArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let invoked_as = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if invoked_as.starts_with("kubectl-nodemedic") {
        return match KubectlCli::parse().command {
            // As a plugin, `plan` reads the cluster unless files are given.
            KubectlCommand::Plan(mut args) => {
                args.live |= args.nodes.is_none() && args.pods.is_none();
                plan(args)
            }
            KubectlCommand::Conditions(args) => conditions(args),
        };
    }
    // draino's kingpin booleans: `--no-FLAG` (and the last of it and `--FLAG` wins, over DRAINO_*).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cmd = draino::without_env(Cli::command(), &draino::negated_last(&args));
    let cli = match cmd.try_get_matches_from(draino::drop_negations(args)) {
        Ok(m) => Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit()),
        Err(e) => e.exit(),
    };
    let Some(command) = cli.command else {
        return run(cli.run);
    };
    match command {
        Command::Plan(args) => plan(args),
        Command::Run(args) => run(*args),
        Command::Simulate(args) => simulate(args),
        Command::Completions { shell } => nodemedic_common::cli::completions_command(
            <Cli as clap::CommandFactory>::command(),
            shell,
        ),
        Command::Man { dir } => {
            nodemedic_common::cli::man_command(<Cli as clap::CommandFactory>::command(), &dir)
        }
    }
}

/// A one-thread runtime for the live commands (they make a few list calls).
fn block_on<T>(f: impl std::future::Future<Output = T>) -> Result<T, ExitCode> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Ok(rt.block_on(f)),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            Err(ExitCode::from(1))
        }
    }
}

fn simulate(args: SimulateArgs) -> ExitCode {
    use nodemedic_drainer::simulate;
    use std::io::Write as _;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut code = ExitCode::SUCCESS;
    // A fixed start, so the output of a scenario is the same every run.
    let start: Timestamp = "2026-01-05T00:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    for path in &args.scenarios {
        let file = path.display().to_string();
        let result = std::fs::read_to_string(path)
            .map_err(|e| format!("{file}: cannot read: {e}"))
            .and_then(|text| simulate::parse(&file, &text).map_err(|e| e.to_string()))
            .and_then(|s| {
                let started = std::time::Instant::now();
                simulate::run(&file, &s, start)
                    .map(|r| (s, r, started.elapsed()))
                    .map_err(|e| e.to_string())
            });
        let written = match result {
            Err(e) => {
                eprintln!("drainer: {e}");
                code = ExitCode::from(2);
                continue;
            }
            Ok((s, report, took)) => {
                if !report.failed.is_empty() {
                    code = ExitCode::from(1);
                }
                if args.output == Output::Json {
                    serde_json::to_writer(&mut out, &report)
                        .map_err(std::io::Error::other)
                        .and_then(|()| writeln!(out))
                } else {
                    writeln!(out, "== {file}")
                        .and_then(|()| simulate::print(&report, &s, &mut out))
                        .and_then(|()| writeln!(out, "simulated in {:.2} s", took.as_secs_f64()))
                }
            }
        };
        if let Err(e) = written {
            eprintln!("drainer: writing failed: {e}");
            return ExitCode::from(1);
        }
    }
    let _ = out.flush();
    code
}

fn conditions(args: ConditionsArgs) -> ExitCode {
    use nodemedic_drainer::live;
    let read = block_on(async {
        let client = live::client(
            args.cluster.kubeconfig.as_deref(),
            args.cluster.context.as_deref(),
        )
        .await?;
        live::read_nodes(&client).await
    });
    let nodes = match read {
        Err(code) => return code,
        Ok(Err(e)) => {
            eprintln!("kubectl-nodemedic: {e}");
            return ExitCode::from(1);
        }
        Ok(Ok(nodes)) => nodes,
    };
    let mut rows: Vec<live::NodeSummary> = nodes.iter().map(live::summarise).collect();
    rows.sort_by(|a, b| a.node.cmp(&b.node));
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match live::print_summaries(&rows, args.output == Output::Json, &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubectl-nodemedic: writing failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(mut args: RunArgs) -> ExitCode {
    if let Some(name) = args.draino.leader_election_token_name.take() {
        args.lease_name = name;
    }
    nodemedic_common::telemetry::init_with_default(
        args.log_format,
        args.draino
            .debug
            .then_some("info,nodemedic_drainer=debug,nodemedic_common=debug"),
    );
    let config = match config_or_exit(&args.policy) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if config.evict_daemonset_pods {
        tracing::warn!(
            "--evict-daemonset-pods: DaemonSet pods are evicted in drains, as draino did; their DaemonSet recreates them on the cordoned node at once (they tolerate unschedulable), so they keep running there"
        );
    }
    let identity = args
        .identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
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
    let result: anyhow::Result<()> = rt.block_on(async move {
        let client = nodemedic_common::client::for_flags(
            nodemedic_common::keys::DRAINER_MANAGER,
            args.draino.kubeconfig.as_deref(),
            args.draino.master.as_deref(),
        )
        .await?;
        let opts = nodemedic_drainer::run::Options {
            config,
            listen: args.listen,
            lease: nodemedic_drainer::leader::LeaseConfig {
                namespace: args.namespace,
                name: args.lease_name,
                identity,
                duration: args.lease_duration,
                renew_deadline: args.renew_deadline,
                retry_period: args.retry_period,
            },
            tick: std::time::Duration::from_secs(5),
            reload: Some(args.policy.clone()),
            guard: match (args.guard_listen, args.guard_tls_cert, args.guard_tls_key) {
                (Some(listen), Some(cert), Some(key)) => {
                    let (k, v) = args.guard_node_label.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!(
                            "--guard-node-label {:?}: expected KEY=VALUE",
                            args.guard_node_label
                        )
                    })?;
                    Some(nodemedic_drainer::guard::server::GuardOptions {
                        listen,
                        cert,
                        key,
                        config: nodemedic_drainer::guard::GuardConfig {
                            users: args.guard_users,
                            node_label: (k.into(), v.into()),
                            ..Default::default()
                        },
                    })
                }
                _ => None,
            },
        };
        let running = nodemedic_drainer::run::start(opts, client).await?;
        nodemedic_common::runtime::shutdown_signal().await;
        tracing::info!("shutting down");
        running.shutdown().await;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "drainer: {}",
                nodemedic_common::cli::error_chain(e.as_ref())
            );
            ExitCode::from(1)
        }
    }
}

fn config_or_exit(args: &PolicyArgs) -> Result<nodemedic_drainer::config::Config, ExitCode> {
    policy::build(args).map_err(|errors| {
        for e in &errors {
            eprintln!("drainer: {e}");
        }
        ExitCode::from(2)
    })
}

/// What `drainer plan` keeps of what it read: node views and pod infos, not the whole objects.
type Objects = (
    Vec<nodemedic_drainer::model::node::NodeView>,
    Vec<nodemedic_drainer::model::pod::PodInfo>,
    Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    Option<k8s_openapi::api::coordination::v1::Lease>,
    Vec<k8s_openapi::api::core::v1::Event>,
);

fn read_files(args: &PlanArgs) -> Result<Objects, String> {
    let (Some(nodes), Some(pods)) = (&args.nodes, &args.pods) else {
        return Err("give --nodes and --pods files, or --live".into());
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if tty {
        eprint!(
            "drainer: reading {} and {} ...",
            nodes.display(),
            pods.display()
        );
    }
    let read = || -> Result<Objects, String> {
        use k8s_openapi::api::core::v1::{Node, Pod};
        use nodemedic_drainer::plan::{read_items, read_items_map};
        let mut skipped = Vec::new();
        let nodes = read_items_map(nodes, |n: Node| {
            nodemedic_drainer::model::node::NodeView::of(&n)
        })?
        .items_noting(&mut skipped);
        let pods = read_items_map(pods, |p: Pod| {
            nodemedic_drainer::model::pod::PodInfo::from_pod(&p, None)
        })?
        .items_noting(&mut skipped);
        let pdbs = match &args.pdbs {
            Some(p) => read_items(p)?.items_noting(&mut skipped),
            None => Vec::new(),
        };
        let lease = match &args.lease {
            Some(p) => read_items(p)?.items_noting(&mut skipped).pop(),
            None => None,
        };
        let events = match &args.events {
            Some(p) => read_items(p)?.items_noting(&mut skipped),
            None => Vec::new(),
        };
        for s in &skipped {
            eprintln!("drainer: {s}");
        }
        Ok((nodes, pods, pdbs, lease, events))
    };
    let result = read();
    if tty {
        eprint!("\r\x1b[2K");
    }
    result
}

fn plan(args: PlanArgs) -> ExitCode {
    let cfg = match config_or_exit(&args.policy) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let read_result = if args.live {
        let read = block_on(async {
            let client = nodemedic_drainer::live::client(
                args.cluster.kubeconfig.as_deref(),
                args.cluster.context.as_deref(),
            )
            .await?;
            nodemedic_drainer::live::read(&client, &args.lease_namespace, &args.lease_name).await
        });
        match read {
            Err(code) => return code,
            Ok(r) => r
                .map(|s| {
                    let nodes = s
                        .nodes
                        .iter()
                        .map(nodemedic_drainer::model::node::NodeView::of);
                    let pods = s
                        .pods
                        .iter()
                        .map(|p| nodemedic_drainer::model::pod::PodInfo::from_pod(p, None));
                    (nodes.collect(), pods.collect(), s.pdbs, s.lease, s.flapping)
                })
                .map_err(|e| e.to_string()),
        }
    } else {
        read_files(&args)
    };
    let (nodes, pods, pdbs, lease, events) = match read_result {
        Ok(x) => x,
        Err(e) => {
            eprintln!("drainer: {e}");
            return ExitCode::from(1);
        }
    };
    let now = args.now.unwrap_or_else(Timestamp::now);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let recorded = nodemedic_drainer::decide::gates::snapshot::Recorded {
        paused: lease
            .as_ref()
            .and_then(nodemedic_drainer::decide::gates::pause::pause_of),
        flapping: nodemedic_drainer::decide::gates::snapshot::flapping_from_events(
            &events,
            &cfg.safety,
            now,
        ),
    };
    match nodemedic_drainer::plan::run(
        &cfg,
        &nodes,
        &pods,
        &pdbs,
        &recorded,
        now,
        args.output == Output::Json,
        &mut out,
    ) {
        Ok(plans) => {
            use std::io::Write as _;
            let _ = out.flush();
            eprintln!(
                "drainer: planned {} nodes, {} pods at {now}",
                plans.len(),
                pods.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("drainer: writing the plan failed: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_says_what_it_does() {
        use nodemedic_common::cli::undocumented;
        let mut missing = undocumented(&<Cli as clap::CommandFactory>::command());
        missing.extend(undocumented(
            &<KubectlCli as clap::CommandFactory>::command(),
        ));
        assert!(missing.is_empty(), "no --help text: {missing:#?}");
    }
}
