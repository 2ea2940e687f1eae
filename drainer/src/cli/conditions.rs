//! `kubectl nodemedic conditions`: every node's nodemedic conditions and drain record, read from
//! the live cluster. I/O (the reads and the table; the summary of each node is `live`'s).

use std::process::ExitCode;

use super::shared::{ClusterArgs, Output, block_on};
use crate::decide::watchdog::Placement;

#[derive(clap::Args)]
pub(crate) struct ConditionsArgs {
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// The drainer's config file: its detector watchdog settings say which nodes are silent.
    #[arg(long)]
    pub(crate) config: Option<std::path::PathBuf>,
    /// As the drainer's: a node whose detector has not refreshed its conditions this long is shown
    /// silent (default 15m; 0s: never).
    #[arg(long = "detector-silent-after", value_parser = humantime::parse_duration)]
    pub(crate) detector_silent_after: Option<std::time::Duration>,
    /// As the drainer's: the detector DaemonSet, NAMESPACE/NAME (default kube-system/nodemedic-detector).
    #[arg(long = "detector-daemonset")]
    pub(crate) detector_daemonset: Option<String>,
    /// As the drainer's: condition types the detector writes without naming them in its annotation.
    #[arg(long = "detector-conditions", value_delimiter = ',')]
    pub(crate) detector_conditions: Vec<String>,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) output: Output,
}

pub(super) fn conditions(args: ConditionsArgs) -> ExitCode {
    use crate::live;
    let policy = crate::config::flags::PolicyArgs {
        config: args.config.clone(),
        detector_silent_after: args.detector_silent_after,
        detector_daemonset: args.detector_daemonset.clone(),
        detector_conditions: args.detector_conditions.clone(),
        ..Default::default()
    };
    // Only read: no problem condition is needed (one given in --config is shown on every node).
    let cfg = match crate::config::build::build_for_reading(&policy) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors {
                eprintln!("kubectl-nodemedic: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let read = block_on(async {
        let client = live::client(
            args.cluster.kubeconfig.as_deref(),
            args.cluster.context.as_deref(),
        )
        .await?;
        let nodes = live::read_nodes(&client).await?;
        let placement = match &cfg.watchdog.daemonset {
            Some((ns, name)) => live::daemon_set(&client, ns, name)
                .await?
                .map(|d| Placement::of(&d))
                .unwrap_or_default(),
            None => Placement::Everywhere,
        };
        Ok::<_, live::LiveError>((nodes, placement))
    });
    let (nodes, placement) = match read {
        Err(code) => return code,
        Ok(Err(e)) => {
            eprintln!("kubectl-nodemedic: {e}");
            return ExitCode::from(1);
        }
        Ok(Ok(x)) => x,
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut rows: Vec<live::NodeSummary> = nodes
        .iter()
        .map(|n| live::summarise(n, &cfg, &placement, now))
        .collect();
    rows.sort_by(|a, b| a.node.cmp(&b.node));
    let stdout = std::io::stdout();
    let mut out = nodemedic_common::events::PrintableWriter(std::io::BufWriter::new(stdout.lock()));
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
