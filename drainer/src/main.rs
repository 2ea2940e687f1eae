//! `drainer`: thin binary. `plan` explains offline; `run` is the controller.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use nodemedic_drainer::policy::{self, PolicyArgs};

#[derive(Parser)]
#[command(
    name = "drainer",
    version,
    about = "nodemedic drainer: cordon, drain and uncordon nodes by their conditions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print, without a cluster, what the controller would do and why.
    Plan(PlanArgs),
}

#[derive(clap::Args)]
struct PlanArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// `kubectl get nodes -o json` output.
    #[arg(long)]
    nodes: PathBuf,
    /// `kubectl get pods -A -o json` output.
    #[arg(long)]
    pods: PathBuf,
    /// `kubectl get pdb -A -o json` output (optional).
    #[arg(long)]
    pdbs: Option<PathBuf>,
    /// Evaluate at this time (RFC 3339) instead of now, for reproducible durations.
    #[arg(long)]
    now: Option<Timestamp>,
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Plan(args) => plan(args),
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

fn plan(args: PlanArgs) -> ExitCode {
    let cfg = match config_or_exit(&args.policy) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let read = || -> Result<_, String> {
        let nodes = nodemedic_drainer::plan::read_items(&args.nodes)?;
        let pods = nodemedic_drainer::plan::read_items(&args.pods)?;
        let pdbs = match &args.pdbs {
            Some(p) => nodemedic_drainer::plan::read_items(p)?,
            None => Vec::new(),
        };
        Ok((nodes, pods, pdbs))
    };
    let (nodes, pods, pdbs) = match read() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("drainer: {e}");
            return ExitCode::from(1);
        }
    };
    let now = args.now.unwrap_or_else(Timestamp::now);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match nodemedic_drainer::plan::run(
        &cfg,
        &nodes,
        &pods,
        &pdbs,
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
