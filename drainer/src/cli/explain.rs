//! `drainer explain NODE` and `kubectl nodemedic explain NODE`: the whole chain for one node, from
//! files or the live cluster (read-only), as text or JSON. The shell around `plan::chain`.

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use super::plan::{Objects, PlanArgs, read_files, read_live};
use super::shared::Output;

#[derive(clap::Args)]
pub(crate) struct ExplainArgs {
    /// The node to explain.
    pub(crate) node: String,
    #[command(flatten)]
    pub(crate) plan: PlanArgs,
}

pub(super) fn explain(args: ExplainArgs) -> ExitCode {
    let ExplainArgs { node, plan: args } = args;
    let cfg = match super::plan::settings(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let read = if args.live {
        match read_live(&args, &cfg, Some(&node)) {
            Ok(r) => r,
            Err(code) => return code,
        }
    } else {
        read_files(&args, Some(&node))
    };
    let o: Objects = match read {
        Ok(x) => x,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(1);
        }
    };
    let Some(full) = &o.kept else {
        say!("no node named {node:?}");
        return ExitCode::from(1);
    };
    let now = args.now.unwrap_or_else(Timestamp::now);
    let recorded = crate::decide::gates::snapshot::Recorded {
        paused: o
            .lease
            .as_ref()
            .and_then(crate::decide::gates::pause::pause_of),
        flapping: crate::decide::gates::snapshot::flapping_from_events(&o.events, &cfg.safety, now),
        placement: crate::decide::silence::placement_among(&o.daemonsets, &cfg.watchdog),
    };
    let snapshot = crate::plan::chain::Snapshot {
        views: &o.nodes,
        node: full,
        pods: &o.pods,
        pdbs: &o.pdbs,
        events: &o.events,
        recorded: &recorded,
    };
    let Some(e) = crate::plan::chain::explain(&snapshot, &cfg, now) else {
        say!("no node named {node:?}");
        return ExitCode::from(1);
    };
    let stdout = std::io::stdout();
    let mut out = nodemedic_common::events::PrintableWriter(std::io::BufWriter::new(stdout.lock()));
    let written = if args.output == Output::Json {
        serde_json::to_writer(&mut out, &e)
            .map_err(std::io::Error::other)
            .and_then(|()| std::io::Write::write_all(&mut out, b"\n"))
    } else {
        crate::plan::chain::print(&e, &mut out)
    };
    match written.and_then(|()| std::io::Write::flush(&mut out)) {
        Ok(()) => {
            super::shared::say_settings_warnings(&cfg, &o.nodes);
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("writing the explanation failed: {e}");
            ExitCode::from(1)
        }
    }
}
