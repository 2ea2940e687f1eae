//! `drainer plan` and `kubectl nodemedic plan`: what the controller would do now and why, from
//! `kubectl get -o json` files or the live cluster (read-only). The shell around `crate::plan`:
//! reading, the time, printing, exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::shared::{ClusterArgs, Output, block_on, config_or_exit};
use crate::config::flags::PolicyArgs;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::plan::{ReadError, read_items, read_items_map};

#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// `kubectl get nodes -o json` output (with --pods; or --live).
    #[arg(long, conflicts_with = "live")]
    pub(crate) nodes: Option<PathBuf>,
    /// `kubectl get pods -A -o json` output.
    #[arg(long, conflicts_with = "live")]
    pub(crate) pods: Option<PathBuf>,
    /// `kubectl get pdb -A -o json` output (optional).
    #[arg(long, conflicts_with = "live")]
    pub(crate) pdbs: Option<PathBuf>,
    /// `kubectl get lease -n NAMESPACE NAME -o json` of the drainer (optional): shows a pause.
    #[arg(long, conflicts_with = "live")]
    pub(crate) lease: Option<PathBuf>,
    /// `kubectl get events -A -o json` (optional): the drainer's NodeFlapping Events show which
    /// nodes are flapping.
    #[arg(long, conflicts_with = "live")]
    pub(crate) events: Option<PathBuf>,
    /// `kubectl get daemonsets -A -o json` (optional): where the detector DaemonSet
    /// (--detector-daemonset) runs, so a node it should run on and never reported is shown silent.
    #[arg(long, conflicts_with = "live")]
    pub(crate) daemonsets: Option<PathBuf>,
    /// Read nodes, pods, PodDisruptionBudgets and the drainer's Lease from the cluster (read-only)
    /// instead of files.
    #[arg(long)]
    pub(crate) live: bool,
    /// With --live: the namespace of the drainer's Lease.
    #[arg(long = "lease-namespace", default_value = "kube-system")]
    pub(crate) lease_namespace: String,
    /// With --live: the name of the drainer's Lease.
    #[arg(long = "lease-name", default_value = "nodemedic-drainer")]
    pub(crate) lease_name: String,
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// Evaluate at this time (RFC 3339) instead of now, for reproducible durations.
    #[arg(long)]
    pub(crate) now: Option<Timestamp>,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) output: Output,
}

/// What `drainer plan` keeps of what it read: node views and pod infos, not the whole objects
/// (but for the one node `explain` asks for).
pub(super) struct Objects {
    pub(super) nodes: Vec<NodeView>,
    /// The whole object of the node asked for, if any.
    pub(super) kept: Option<Node>,
    pub(super) pods: Vec<PodInfo>,
    pub(super) pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    pub(super) lease: Option<k8s_openapi::api::coordination::v1::Lease>,
    pub(super) events: Vec<k8s_openapi::api::core::v1::Event>,
    pub(super) daemonsets: Vec<k8s_openapi::api::apps::v1::DaemonSet>,
}

/// Why the plan's inputs could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    #[error("give --nodes and --pods files, or --live")]
    NoFiles,
    #[error(transparent)]
    File(#[from] ReadError),
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
}

pub(super) fn read_files(args: &PlanArgs, keep: Option<&str>) -> Result<Objects, InputError> {
    let (Some(nodes), Some(pods)) = (&args.nodes, &args.pods) else {
        return Err(InputError::NoFiles);
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if tty {
        eprint!(
            "{}: reading {} and {} ...",
            crate::live::program(),
            nodes.display(),
            pods.display()
        );
    }
    let result = read_all(args, nodes, pods, keep);
    if tty {
        eprint!("\r\x1b[2K");
    }
    result
}

fn read_all(
    args: &PlanArgs,
    nodes: &Path,
    pods: &Path,
    keep: Option<&str>,
) -> Result<Objects, InputError> {
    let mut skipped = Vec::new();
    let mut kept = None;
    let nodes = read_items_map(nodes, |n: Node| {
        let view = NodeView::of(&n);
        if keep.is_some() && n.metadata.name.as_deref() == keep {
            kept = Some(n);
        }
        view
    })?
    .items_noting(&mut skipped);
    let pods = read_items_map(pods, |p: Pod| PodInfo::from_pod(&p, None))?;
    let pods = pods.items_noting(&mut skipped);
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
    let daemonsets = match &args.daemonsets {
        Some(p) => read_items(p)?.items_noting(&mut skipped),
        None => Vec::new(),
    };
    for s in &skipped {
        say!("{s}");
    }
    Ok(Objects {
        nodes,
        kept,
        pods,
        pdbs,
        lease,
        events,
        daemonsets,
    })
}

/// Read nodes, pods, PodDisruptionBudgets and the drainer's Lease from the cluster (read-only).
pub(super) fn read_live(
    args: &PlanArgs,
    cfg: &crate::config::Config,
    keep: Option<&str>,
) -> Result<Result<Objects, InputError>, ExitCode> {
    block_on(async {
        let (kubeconfig, context) = (
            args.cluster.kubeconfig.as_deref(),
            args.cluster.context.as_deref(),
        );
        let client = crate::live::client(kubeconfig, context).await?;
        let s = crate::live::read(&client, &args.lease_namespace, &args.lease_name).await?;
        let daemonsets = match &cfg.watchdog.daemonset {
            Some((ns, name)) => crate::live::daemon_set(&client, ns, name).await?,
            None => None,
        };
        let mut events = s.flapping;
        if let Some(node) = keep {
            events.extend(crate::live::node_events(&client, node).await?);
        }
        Ok(Objects {
            nodes: s.nodes.iter().map(NodeView::of).collect(),
            kept: keep.and_then(|k| {
                s.nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(k))
                    .cloned()
            }),
            pods: s.pods.iter().map(|p| PodInfo::from_pod(p, None)).collect(),
            pdbs: s.pdbs,
            lease: s.lease,
            events,
            daemonsets: daemonsets.into_iter().collect(),
        })
    })
}

/// The settings to decide with: with `--live` and neither conditions nor `--config` given, the
/// running drainer's, as it publishes them (`config::published`), said on stderr; otherwise (or
/// when none are published) the flags'.
pub(super) fn settings(args: &PlanArgs) -> Result<crate::config::Config, ExitCode> {
    use super::config::{Unread, read_published};
    if !args.live || args.policy.config.is_some() || !args.policy.conditions.is_empty() {
        return config_or_exit(&args.policy);
    }
    let read = match read_published(&args.cluster, &args.lease_namespace, &args.lease_name) {
        Ok(read) => read,
        Err(Unread::Missing { at }) => {
            say!(
                "no running drainer's settings in {at} (--lease-namespace, --lease-name); deciding with the flags given"
            );
            return config_or_exit(&args.policy);
        }
        // Without conditions or a config file, the running drainer's settings are all there is to
        // decide with: going on with the flags alone would only end in "no problem conditions".
        Err(Unread::Cluster(e)) => {
            say!(
                "{e}\n(given no conditions and no --config, plan and explain decide with the running drainer's settings; give conditions or --config to decide without them)"
            );
            return Err(ExitCode::from(1));
        }
        Err(Unread::Bad { at, why }) => {
            say!("the settings in {at} cannot be used: {why}");
            return Err(ExitCode::from(1));
        }
    };
    match read.settings.config() {
        Ok(cfg) => {
            say!(
                "deciding with the running drainer's settings ({}, published by {} at {}); give conditions or --config to decide with others (`kubectl nodemedic config` prints them)",
                read.at,
                read.by,
                read.when
            );
            Ok(cfg)
        }
        Err(errors) => {
            let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
            say!(
                "the settings in {} cannot be used: {}",
                read.at,
                all.join("; ")
            );
            Err(ExitCode::from(1))
        }
    }
}

pub(super) fn plan(args: PlanArgs) -> ExitCode {
    let cfg = match settings(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let read = if args.live {
        match read_live(&args, &cfg, None) {
            Ok(r) => r,
            Err(code) => return code,
        }
    } else {
        read_files(&args, None)
    };
    let Objects {
        nodes,
        kept: _,
        pods,
        pdbs,
        lease,
        events,
        daemonsets,
    } = match read {
        Ok(x) => x,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(1);
        }
    };
    let now = args.now.unwrap_or_else(Timestamp::now);
    let stdout = std::io::stdout();
    let mut out = nodemedic_common::events::PrintableWriter(std::io::BufWriter::new(stdout.lock()));
    let recorded = crate::decide::gates::snapshot::Recorded {
        paused: lease
            .as_ref()
            .and_then(crate::decide::gates::pause::pause_of),
        flapping: crate::decide::gates::snapshot::flapping_from_events(&events, &cfg.safety, now),
        placement: crate::decide::silence::placement_among(&daemonsets, &cfg.watchdog),
    };
    match crate::plan::run(
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
            say!(
                "planned {}, {} at {now}",
                nodemedic_common::cli::counted(plans.len(), "node"),
                nodemedic_common::cli::counted(pods.len(), "pod")
            );
            super::shared::say_settings_warnings(&cfg, &nodes);
            say_records_unchecked(&nodes);
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("writing the plan failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// The plan holds no record key: records are taken as they are, which may show an action (an
/// uncordon, a drain going on) the running drainer would refuse for a forged record. Said once.
fn say_records_unchecked(nodes: &[crate::model::node::NodeView]) {
    let with = nodes
        .iter()
        .filter(|n| {
            n.annotations
                .contains_key(nodemedic_common::keys::DRAIN_RECORD_ANNOTATION)
        })
        .count();
    if with > 0 {
        let nodes = if with == 1 {
            "node carries a drain record"
        } else {
            "nodes carry drain records"
        };
        say!(
            "{with} {nodes}, taken as written: only the running drainer checks a record's seal \
             (it acts on none it did not write), so a forged one may show here an action it would refuse"
        );
    }
}
