//! `kubectl nodemedic conditions`: every node's nodemedic conditions and drain record, read from
//! the live cluster. I/O (the reads and the table; the summary of each node is `live`'s).

use std::process::ExitCode;

use super::shared::{ClusterArgs, Output, block_on};
use crate::decide::silence::Placement;

#[derive(clap::Args)]
pub(crate) struct ConditionsArgs {
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// The drainer's config file: its detector watchdog settings say which nodes are silent.
    #[arg(long)]
    pub(crate) config: Option<std::path::PathBuf>,
    /// As the drainer's: a node whose detector has not refreshed its conditions this long is shown
    /// silent (default 15m; 0s: never).
    #[arg(long = "detector-silent-after", value_parser = nodemedic_common::time::parse_duration)]
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
    /// The namespace of the running drainer's Lease, whose published settings (the conditions it
    /// watches, its detector watchdog) are used unless --config or a watchdog flag is given.
    #[arg(long = "lease-namespace", default_value = "kube-system")]
    pub(crate) lease_namespace: String,
    /// The name of the running drainer's Lease.
    #[arg(long = "lease-name", default_value = "nodemedic-drainer")]
    pub(crate) lease_name: String,
}

/// The settings to show with: the flags' when any is given, else the running drainer's
/// published ones (said on stderr), else the defaults (said too).
fn settings(args: &ConditionsArgs) -> Result<crate::config::Config, ExitCode> {
    use super::config::{Unread, read_published};
    let policy = crate::config::flags::PolicyArgs {
        config: args.config.clone(),
        detector_silent_after: args.detector_silent_after,
        detector_daemonset: args.detector_daemonset.clone(),
        detector_conditions: args.detector_conditions.clone(),
        ..Default::default()
    };
    let given = args.config.is_some()
        || args.detector_silent_after.is_some()
        || args.detector_daemonset.is_some()
        || !args.detector_conditions.is_empty();
    let published = if given {
        None
    } else {
        match read_published(&args.cluster, &args.lease_namespace, &args.lease_name) {
            Ok(read) => match read.settings.config() {
                Ok(cfg) => {
                    say!(
                        "showing the running drainer's watched conditions and detector watchdog ({}, published by {} at {})",
                        read.at,
                        read.by,
                        read.when
                    );
                    Some(cfg)
                }
                Err(_) => {
                    say!(
                        "the settings in {} cannot be used; showing the defaults",
                        read.at
                    );
                    None
                }
            },
            Err(Unread::Missing { at }) => {
                say!(
                    "no running drainer's settings in {at} (--lease-namespace, --lease-name): showing the defaults"
                );
                None
            }
            Err(Unread::Cluster(e) | Unread::Bad { why: e, .. }) => {
                say!("{e}; showing the defaults");
                None
            }
        }
    };
    if let Some(cfg) = published {
        return Ok(cfg);
    }
    // Only read: no problem condition is needed (one given in --config is shown on every node).
    crate::config::build::build_for_reading(&policy).map_err(|errors| {
        for e in &errors {
            say!("{e}");
        }
        ExitCode::from(2)
    })
}

pub(super) fn conditions(args: ConditionsArgs) -> ExitCode {
    use crate::live;
    let cfg = match settings(&args) {
        Ok(c) => c,
        Err(code) => return code,
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
            say!("{e}");
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
            say!("writing failed: {e}");
            ExitCode::from(1)
        }
    }
}
