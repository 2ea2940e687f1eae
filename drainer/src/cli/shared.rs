//! What the subcommands share: which cluster a live command reads, the output format, a runtime
//! for the live commands, and the settings from the flags or exit 2. The shell (I/O).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

/// Which cluster a live command reads.
#[derive(clap::Args)]
pub(crate) struct ClusterArgs {
    /// Kubeconfig file. [default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account]
    #[arg(help_heading = "Cluster", long)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Kubeconfig context. [default: the current context]
    #[arg(help_heading = "Cluster", long)]
    pub(crate) context: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    Text,
    Json,
}

/// How `simulate` and `backtest` write what happened.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReportOutput {
    /// For people: what happened, line by line.
    Text,
    /// For scripts: one JSON object per scenario or policy, a line each.
    Json,
    /// One self-contained HTML page of timelines (a swimlane per node, nodes cordoned over time,
    /// breaker openings; policies side by side): open it in a browser.
    Html,
}

/// A one-thread runtime for the live commands (they make a few list calls).
pub(crate) fn block_on<T>(f: impl std::future::Future<Output = T>) -> Result<T, ExitCode> {
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

/// The settings from the flags (and the config file they name), or exit 2 with every error.
pub(crate) fn config_or_exit(
    args: &crate::config::flags::PolicyArgs,
) -> Result<crate::config::Config, ExitCode> {
    crate::config::build::build(args).map_err(|errors| {
        for e in &errors {
            say!("{e}");
        }
        ExitCode::from(2)
    })
}

/// The mistakes the live drainer warns of at start ([`crate::config::Config::start_warnings`]) and
/// when its caches have synced (`decide::summary`): a watched condition no node reports when one a
/// typo away is, an obsolete one, a selector that selects nothing. The same words, on stderr
/// (`config`, with no nodes, says those that need none).
pub(super) fn say_settings_warnings(
    cfg: &crate::config::Config,
    nodes: &[crate::model::node::NodeView],
) {
    for w in cfg.start_warnings() {
        say!("warning: {w}");
    }
    let selected = nodes
        .iter()
        .map(|v| (v, cfg.selector.matches(v).unwrap_or(false)));
    for w in crate::decide::summary::summarize(cfg, selected).warnings {
        say!("warning: {w}");
    }
}
