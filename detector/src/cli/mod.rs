//! `detector`'s command line: the subcommands, their flags, and what each runs (the binary,
//! `main.rs`, only hands this its arguments). The shell around the library: flags in, exit codes and
//! messages out.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod convert;
mod daemon;
mod offline;
mod sample;
mod stats;

use convert::ConvertArgs;
use daemon::RunArgs;
use offline::CheckArgs;
use sample::SampleArgs;
use stats::StatsArgs;

#[derive(Parser)]
#[command(
    name = "detector",
    version,
    about = "nodemedic node agent: log lines and checks -> NodeConditions and Events",
    long_about = "nodemedic node agent: log lines and checks -> NodeConditions and Events.\n\n\
        With no subcommand it runs the node agent (`detector run`), so node-problem-detector's \
        command line works unchanged: `detector --logtostderr --config.system-log-monitor=/config/kernel-monitor.json`.",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run the rules over a file offline (no cluster) and print what would be reported.
    Check(CheckArgs),
    /// Read the node's resources as a `resources` input does and print them as JSON lines (a
    /// recording `check --input` replays).
    Sample(SampleArgs),
    /// Collect node-problem-detector system-stats-monitor files' host metrics and print them as
    /// /metrics shows them (NPD's names and labels).
    Stats(StatsArgs),
    /// Run the node agent: follow the inputs and report to the API server (also with no subcommand).
    Run(Box<RunArgs>),
    /// Print node-problem-detector monitor files (JSON) as rule files (YAML), naming what does not
    /// carry over. The JSON files also load as they are; this is for moving to YAML.
    ConvertNpd(ConvertArgs),
    /// Built-in health checks for exec rule files (config/checks/): print one line, exit 0 healthy,
    /// 1 a problem, 2 unknown.
    #[command(subcommand)]
    Probe(Probe),
    /// Print the shell completion script (e.g. `detector completions bash > /etc/bash_completion.d/detector`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: nodemedic_common::cli::Shell,
    },
    /// Write man pages for detector and each subcommand into DIR (e.g. /usr/local/share/man/man1).
    Man {
        /// The directory to write the pages into (created if missing).
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
pub(crate) enum Probe {
    /// GET an http:// URL (e.g. the kubelet's http://127.0.0.1:10248/healthz); 2xx is healthy.
    Http {
        /// The URL to GET.
        url: String,
        /// Give up (a problem) after this long.
        #[arg(long, default_value = "5s", value_parser = nodemedic_common::time::parse_duration)]
        timeout: std::time::Duration,
    },
    /// The conntrack table's fill (the node's with hostNetwork: true).
    Conntrack {
        /// A problem at this percentage full or more.
        #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u8).range(1..=100))]
        threshold: u8,
        /// Where nf_conntrack_count and nf_conntrack_max are.
        #[arg(long, default_value = "/proc/sys/net/netfilter")]
        netfilter: PathBuf,
    },
    /// Whether the kernel's clock is synchronised (as timedatectl's NTPSynchronized: its maximum
    /// error under 16s), whichever NTP daemon keeps it. Needs nothing mounted.
    Clock,
    /// The container runtime's own status over its CRI socket (as `crictl info`): healthy when it
    /// reports RuntimeReady. The socket must be mounted; it is root's (the check runs as root).
    ContainerRuntime {
        /// The runtime's CRI endpoint.
        #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT", default_value = crate::probe::cri::DEFAULT_ENDPOINT)]
        endpoint: String,
        /// A problem when it has not answered after this long (a wedged runtime).
        #[arg(long, default_value = "10s", value_parser = nodemedic_common::time::parse_duration)]
        timeout: std::time::Duration,
    },
    /// What the cloud's instance metadata announces for this machine (scheduled maintenance,
    /// reboots, retirement, spot interruptions, preemption): a problem when it begins within
    /// --ahead, its time in the line; unknown when the service cannot be asked.
    CloudMaintenance {
        /// Whose metadata service: aws, azure or gcp.
        #[arg(long, value_enum)]
        provider: crate::probe::maintenance::Provider,
        /// The metadata service's address: scheme://host[:port], no path, query or fragment.
        #[arg(long, default_value = crate::probe::maintenance::DEFAULT_ENDPOINT, value_parser = crate::probe::maintenance::endpoint)]
        endpoint: String,
        /// A problem once what is announced begins within this long (or has begun).
        #[arg(long, default_value = "1h", value_parser = nodemedic_common::time::parse_duration)]
        ahead: std::time::Duration,
        /// Give up (unknown) on a request not answered within this long.
        #[arg(long, default_value = "10s", value_parser = nodemedic_common::time::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Whether the root filesystem is mounted read-only.
    ReadonlyRoot {
        /// A mounts file: /proc/1/mounts is the host's with hostPID: true.
        #[arg(long, default_value = "/proc/1/mounts")]
        mounts: PathBuf,
    },
}

/// Run `detector` with `args` (the program's name first); its exit code.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let args = crate::npd_flags::normalize_args(args);
    let cli = Cli::parse_from(args);
    match cli.command {
        None => daemon::run_daemon(cli.run),
        Some(command) => run_command(command),
    }
}

fn run_command(command: Command) -> ExitCode {
    match command {
        Command::Check(args) => offline::run_check(args),
        Command::Run(args) => daemon::run_daemon(*args),
        Command::Sample(args) => sample::run_sample(args),
        Command::Stats(args) => stats::run_stats(args),
        Command::ConvertNpd(args) => convert::run_convert(args),
        Command::Probe(p) => {
            use crate::probe;
            let found = match p {
                Probe::Http { url, timeout } => probe::http(&url, timeout),
                Probe::Conntrack {
                    threshold,
                    netfilter,
                } => probe::conntrack(&netfilter, threshold),
                Probe::ReadonlyRoot { mounts } => probe::readonly_root(&mounts),
                Probe::Clock => probe::clock::probe(),
                Probe::ContainerRuntime { endpoint, timeout } => {
                    probe::cri::probe(&endpoint, timeout)
                }
                Probe::CloudMaintenance {
                    provider,
                    endpoint,
                    ahead,
                    timeout,
                } => probe::maintenance::probe(provider, &endpoint, ahead, timeout),
            };
            println!("{}", found.message);
            ExitCode::from(found.code)
        }
        Command::Completions { shell } => nodemedic_common::cli::completions_command(
            <Cli as clap::CommandFactory>::command(),
            shell,
        ),
        Command::Man { dir } => {
            nodemedic_common::cli::man_command(<Cli as clap::CommandFactory>::command(), &dir)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reference/detector.md is what clap generates.
    #[test]
    fn the_committed_command_line_reference_is_what_the_code_generates() {
        use nodemedic_common::cli::{check_reference, markdown};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let generated = markdown(&<Cli as clap::CommandFactory>::command());
        check_reference(&root, "docs/reference/detector.md", &generated).unwrap();
    }

    #[test]
    fn every_flag_says_what_it_does() {
        let missing =
            nodemedic_common::cli::undocumented(&<Cli as clap::CommandFactory>::command());
        assert!(missing.is_empty(), "no --help text: {missing:#?}");
    }
}
