//! The command lines of `drainer` and `kubectl nodemedic`, and each subcommand's body: the shell
//! around the library (I/O: arguments, files, the terminal, exit codes). `main.rs` only hands the
//! process's arguments here, as controller-rs keeps its main to its wiring.
//!
//! ```text
//!  run         the controller (`drainer`, `drainer run`), draino's flags included
//!  plan        `drainer plan` and `kubectl nodemedic plan`: from files or the live cluster
//!  explain     `drainer explain NODE` and `kubectl nodemedic explain NODE`: one node's whole chain
//!  simulate    `drainer simulate`: scenarios through the controller
//!  backtest    `drainer backtest`, `kubectl nodemedic backtest` (and `drainer simulate --history`):
//!              recorded history through the controller, per policy
//!  conditions  `kubectl nodemedic conditions`
//!  shared      what they share (cluster flags, output format, a runtime)
//! ```

/// A message on stderr, starting with the name the command was run as (`kubectl nodemedic` as
/// the plugin, else `drainer`).
macro_rules! say {
    ($($t:tt)*) => {
        eprintln!("{}: {}", crate::live::program(), format_args!($($t)*))
    };
}

mod backtest;
mod conditions;
mod config;
mod explain;
mod plan;
mod run;
mod shared;
mod simulate;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::draino;
pub(crate) use conditions::ConditionsArgs;
pub(crate) use explain::ExplainArgs;
pub(crate) use plan::PlanArgs;
pub(crate) use run::RunArgs;
pub(crate) use simulate::SimulateArgs;

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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Subcommand)]
// Parsed once per process: the size of the plan's flags does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    /// Print what the controller would do now and why (changes nothing): from files, or with
    /// --live from the cluster, read-only.
    Plan(PlanArgs),
    /// One node's whole chain: its conditions against the configured ones, the selection, every
    /// gate with its numbers, the drain record and history, each pod's rule, and what happens next.
    Explain(ExplainArgs),
    /// Run the controller (leader-elected); also what `drainer` with no subcommand does.
    Run(Box<RunArgs>),
    /// Print the settings `drainer run` would run with, given the same flags: every config key with
    /// its value in force and where it comes from (flag, config file, default), as a config file.
    Config(Box<RunArgs>),
    /// Replay a fleet scenario (nodes, condition changes over time) through the drainer's decisions,
    /// and print what it did; exits 1 when the scenario's expectations fail (config/scenarios/).
    Simulate(SimulateArgs),
    /// Replay recorded history (--history files, or the cluster's Events about Nodes) under each
    /// --policy and say what each would have done, side by side (changes nothing); the same as
    /// `kubectl nodemedic backtest`.
    Backtest(backtest::BacktestArgs),
    /// Print draino's command line (or `drainer run`'s) as a drainer config file (YAML), naming what
    /// does not carry over; give the flags and conditions after `--`
    /// (`drainer convert-draino -- --node-label-expr=... --drain-buffer=10m KernelDeadlock`).
    ConvertDraino {
        /// draino's flags and conditions, as in its Deployment.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
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

/// `kubectl nodemedic ...`: the drainer binary under the name kubectl looks plugins up by.
#[derive(Parser)]
#[command(
    name = "kubectl-nodemedic",
    bin_name = "kubectl nodemedic",
    version,
    about = "nodemedic for kubectl: what the drainer would do now, and every node's nodemedic conditions"
)]
pub(crate) struct KubectlCli {
    #[command(subcommand)]
    pub(crate) command: KubectlCommand,
}

#[derive(Subcommand)]
// Parsed once per process: the size of the plan's flags does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum KubectlCommand {
    /// What the drainer would do now and why, from the live cluster (changes nothing).
    Plan(PlanArgs),
    /// One node's whole chain and what happens to it next, from the live cluster (changes nothing).
    Explain(ExplainArgs),
    /// Every node's nodemedic conditions and drain record at a glance.
    Conditions(ConditionsArgs),
    /// The running drainer's settings, as it publishes them, written as a config file: every key
    /// with its value in force and where it comes from.
    Config(config::PublishedArgs),
    /// Replay recorded history (--history files, or the cluster's Events about Nodes) under each
    /// --policy and say what each would have done, side by side (changes nothing).
    Backtest(backtest::BacktestArgs),
}

/// Run the binary with `args` (the first is the name it was invoked as: installed or linked as
/// `kubectl-nodemedic`, it is the kubectl plugin).
pub fn main(args: Vec<OsString>) -> ExitCode {
    let argv0 = args.first().cloned().unwrap_or_default();
    let invoked_as = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if invoked_as.starts_with("kubectl-nodemedic") {
        crate::live::set_program("kubectl nodemedic");
        let cli = match KubectlCli::try_parse_from(&args) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        };
        return match cli.command {
            // As a plugin, `plan` reads the cluster unless files are given.
            KubectlCommand::Plan(mut args) => {
                args.live |= args.nodes.is_none() && args.pods.is_none();
                plan::plan(args)
            }
            KubectlCommand::Explain(mut args) => {
                let p = &mut args.plan;
                p.live |= p.nodes.is_none() && p.pods.is_none();
                explain::explain(args)
            }
            KubectlCommand::Conditions(args) => conditions::conditions(args),
            KubectlCommand::Config(args) => config::published(args),
            KubectlCommand::Backtest(args) => backtest::backtest(args),
        };
    }
    let (cli, notes) = match parse(args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    // The controller says them in its own log (JSON where it logs JSON), after it starts logging.
    let Some(command) = cli.command else {
        return run::run(cli.run, notes);
    };
    if let Command::Run(args) = command {
        return run::run(*args, notes);
    }
    for line in notes {
        say!("{line}");
    }
    match command {
        Command::Plan(args) => plan::plan(args),
        Command::Explain(args) => explain::explain(args),
        Command::Run(_) => unreachable!("run above"),
        Command::Config(args) => config::effective(&args.policy),
        Command::Simulate(args) if !args.history.is_empty() => backtest::from_files(
            &args.history,
            args.nodes.as_deref(),
            &args.policies,
            args.after,
            args.output,
        ),
        Command::Backtest(args) => backtest::backtest(args),
        Command::Simulate(args) => simulate::simulate(args),
        Command::ConvertDraino { args } => convert_draino(args),
        Command::Completions { shell } => {
            nodemedic_common::cli::completions_command(Cli::command(), shell)
        }
        Command::Man { dir } => nodemedic_common::cli::man_command(Cli::command(), &dir),
    }
}

/// Parse `drainer`'s command line as draino's flag parser (kingpin) read its booleans: `--FLAG=false`
/// taken as kingpin did, with what to tell the operator about it (the caller says it), `--no-FLAG`
/// (the last of it and `--FLAG` wins, over DRAINO_*).
fn parse(args: Vec<OsString>) -> Result<(Cli, Vec<String>), ExitCode> {
    let (args, notes) = match crate::config::kingpin::bool_values(args) {
        Ok(parsed) => parsed,
        Err(refused) => {
            say!("{refused}");
            return Err(ExitCode::from(2));
        }
    };
    let cmd = draino::without_env(Cli::command(), &draino::negated_last(&args));
    match cmd.try_get_matches_from(draino::drop_negations(args)) {
        Ok(m) => Ok((
            Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit()),
            notes,
        )),
        Err(e) => e.exit(),
    }
}

/// `drainer convert-draino -- ARGS`: the config file those flags give, on stdout; notes on stderr.
/// The file is checked to build the same settings as the flags (else exit 2).
fn convert_draino(args: Vec<OsString>) -> ExitCode {
    let mut argv = vec![OsString::from("drainer")];
    argv.extend(args);
    let staying = run_flags_given(&argv);
    let cli = match parse(argv) {
        Ok((cli, notes)) => {
            for line in notes {
                say!("{line}");
            }
            cli
        }
        Err(code) => return code,
    };
    if cli.command.is_some() {
        say!("convert-draino takes draino's flags and conditions, not a subcommand");
        return ExitCode::from(2);
    }
    let policy = cli.run.policy;
    if let Err(errors) = crate::config::build::build(&policy) {
        for e in &errors {
            say!("{e}");
        }
        return ExitCode::from(2);
    }
    let (yaml, notes) = crate::config::convert::to_file(&policy);
    for n in notes {
        say!("{n}");
    }
    if !staying.is_empty() {
        say!(
            "{}: not settings of the file; keep them on the command line (the Lease's name above all: without it the drainer uses nodemedic-drainer's)",
            staying.join(" ")
        );
    }
    print!("{yaml}");
    ExitCode::SUCCESS
}

/// The flags given in `argv` that set how `drainer run` runs rather than what it decides (its
/// cluster, Lease, namespace, listener, logs): the config file holds none of them.
fn run_flags_given(argv: &[OsString]) -> Vec<String> {
    use clap::Args as _;
    let policy = crate::config::flags::PolicyArgs::augment_args(clap::Command::new("p"));
    let ours: Vec<String> = (policy.get_arguments())
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    let cmd = Cli::command();
    let run_only: Vec<String> = (cmd.get_arguments())
        .filter_map(|a| a.get_long().map(String::from))
        .filter(|l| !ours.contains(l) && l != "help" && l != "version")
        .collect();
    argv.iter()
        .filter_map(|a| a.to_str())
        .filter_map(|a| a.strip_prefix("--"))
        .filter(|a| {
            let name = a.split_once('=').map_or(*a, |(n, _)| n);
            run_only.iter().any(|l| l == name)
        })
        .map(|a| format!("--{a}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reference/drainer.md and kubectl-nodemedic.md are what clap generates.
    #[test]
    fn the_committed_command_line_reference_is_what_the_code_generates() {
        use nodemedic_common::cli::{check_reference, markdown};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let drainer = markdown(&Cli::command());
        check_reference(&root, "docs/reference/drainer.md", &drainer).unwrap();
        let plugin = markdown(&KubectlCli::command());
        check_reference(&root, "docs/reference/kubectl-nodemedic.md", &plugin).unwrap();
    }

    /// The reference lists each option once, however many commands take it, after a list of the
    /// commands (it once repeated the ~150 policy flags under five of them, 922 lines, no contents).
    #[test]
    fn the_reference_lists_each_option_once_after_its_contents() {
        let text = nodemedic_common::cli::markdown(&Cli::command());
        let rows = |flag: &str| {
            text.lines()
                .filter(|l| l.starts_with(&format!("| `{flag}")))
                .count()
        };
        for flag in [
            "--max-drains-in-flight",
            "--node-label-expr",
            "--reboot-deadline",
        ] {
            assert_eq!(rows(flag), 1, "{flag}");
        }
        assert!(
            text.contains("- [`drainer plan`](#drainer-plan)"),
            "contents"
        );
        assert!(
            text.contains("**Budgets**: as under [`drainer`](#drainer)."),
            "a shared group is named where it is listed"
        );
    }

    #[test]
    fn every_flag_says_what_it_does() {
        use nodemedic_common::cli::undocumented;
        let mut missing = undocumented(&Cli::command());
        missing.extend(undocumented(&KubectlCli::command()));
        assert!(missing.is_empty(), "no --help text: {missing:#?}");
    }

    /// `drainer run --help` groups its flags under headings (it was 258 flat lines), every option
    /// but --help is under one, and a default is written one way, `[default: X]`, whether clap
    /// applies it or the config file may set it.
    #[test]
    fn run_help_groups_flags_and_writes_defaults_one_way() {
        let mut cmd = Cli::command();
        let run = cmd.find_subcommand_mut("run").unwrap();
        let ungrouped: Vec<String> = run
            .get_arguments()
            .filter(|a| a.get_long().is_some() && a.get_long() != Some("help"))
            .filter(|a| a.get_help_heading().is_none())
            .map(|a| a.get_id().to_string())
            .collect();
        assert!(
            ungrouped.is_empty(),
            "flags under no heading: {ungrouped:?}"
        );
        let help = run.render_long_help().to_string();
        for heading in [
            "Selection:",
            "Conditions:",
            "Budgets:",
            "Safety gates:",
            "Eviction:",
            "Holding and after the drain:",
            "Detector watchdog:",
            "Notifications:",
            "Leader election:",
            "Output and operation:",
        ] {
            assert!(help.contains(heading), "no {heading} in\n{help}");
        }
        let other: Vec<&str> = help
            .lines()
            .filter(|l| l.contains("Default ") || l.contains("Default:") || l.contains("(default"))
            .collect();
        assert!(other.is_empty(), "defaults written another way: {other:#?}");
    }
}
