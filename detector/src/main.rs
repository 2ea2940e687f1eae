//! `detector`: thin binary. Parses flags, sets up logging, and calls the library.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use nodemedic_detector::check::{self, Finding, InputFormat};
use nodemedic_detector::config;

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
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the rules over a file offline (no cluster) and print what would be reported.
    Check(CheckArgs),
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

#[derive(clap::Args)]
struct RunArgs {
    /// This node's name. Default: $NODE_NAME, else the hostname.
    #[arg(long = "node-name", visible_alias = "hostname-override")]
    node_name: Option<String>,
    /// Rule file or directory (repeatable; YAML rule files and NPD's JSON monitor files); watched
    /// and hot-reloaded. Default: /etc/nodemedic/rules, unless NPD's --config.* flags name files.
    #[arg(long = "rules")]
    rules: Vec<PathBuf>,
    /// Another directory exec checks may run programs from (repeatable), besides the rules'
    /// directories, /usr/lib/nodemedic/checks and /etc/nodemedic/checks (NPD's plugin directory, say).
    #[arg(long = "check-dir")]
    check_dirs: Vec<PathBuf>,
    /// The kernel log device, or a regular file in kmsg format (followed like tail -f).
    #[arg(long = "kmsg-path", default_value = "/dev/kmsg")]
    kmsg_path: PathBuf,
    /// journalctl binary used by journal inputs.
    #[arg(long, default_value = "journalctl")]
    journalctl: PathBuf,
    /// Journal directory for journal inputs that name none (default: the system journal).
    #[arg(long = "journal-dir")]
    journal_dir: Option<PathBuf>,
    /// Where input positions are kept across restarts.
    #[arg(
        long = "state-file",
        default_value = "/var/lib/nodemedic/detector-state.json"
    )]
    state_file: PathBuf,
    /// Address of /metrics /healthz /readyz /conditions. Loopback by default, as NPD's: on a host
    /// (or under hostNetwork) every interface would expose it; the manifests give the pod's address.
    #[arg(long, default_value = "127.0.0.1:20257", value_parser = nodemedic_common::serve::listen_addr)]
    listen: std::net::SocketAddr,
    /// Refresh of lastHeartbeatTime on our conditions.
    #[arg(long = "heartbeat-period", default_value = "5m", value_parser = humantime::parse_duration)]
    heartbeat: std::time::Duration,
    /// Minimum time between two updates of the same aggregated Event.
    #[arg(long = "event-interval", default_value = "10s", value_parser = humantime::parse_duration)]
    event_interval: std::time::Duration,
    /// Moved to the drainer (`drainer run --stale-readiness-threshold`); accepted here so an
    /// existing DaemonSet still starts, with a warning.
    #[arg(long = "stale-readiness-threshold", hide = true)]
    stale_threshold: Option<String>,
    /// Moved to the drainer (`drainer run --evict-stale-pods`).
    #[arg(long = "evict-stale-pods", hide = true)]
    evict_stale_pods: bool,
    /// Log format.
    #[arg(long = "log-format", default_value = "text")]
    log_format: nodemedic_common::telemetry::LogFormat,
    #[command(flatten)]
    npd: nodemedic_detector::npd_flags::NpdFlags,
}

#[derive(Subcommand)]
enum Probe {
    /// GET an http:// URL (e.g. the kubelet's http://127.0.0.1:10248/healthz); 2xx is healthy.
    Http {
        /// The URL to GET.
        url: String,
        /// Give up (a problem) after this long.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
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
    /// Whether the root filesystem is mounted read-only.
    ReadonlyRoot {
        /// A mounts file: /proc/1/mounts is the host's with hostPID: true.
        #[arg(long, default_value = "/proc/1/mounts")]
        mounts: PathBuf,
    },
}

#[derive(clap::Args)]
struct ConvertArgs {
    /// NPD monitor files (system-log-monitor or custom-plugin-monitor JSON).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write each as DIR/<name>.yaml instead of printing them (several files on stdout are separated
    /// by `---` lines; split them into one file each).
    #[arg(long = "out-dir", value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Rule file or directory (repeatable). Default: the bundled rules. Invalid files: exit code 2.
    #[arg(long = "rules")]
    rules: Vec<PathBuf>,
    /// The log file to read. Without it the rule files are only validated.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Input layout; detected from the first line when omitted.
    #[arg(long = "input-format", value_enum)]
    input_format: Option<InputFormat>,
    /// text: a table for people; json: one JSON object per reported problem.
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// Evaluate as of this time (RFC 3339) instead of now: the time of lines that carry none (plain
    /// and syslog files), so the output is reproducible.
    #[arg(long)]
    now: Option<k8s_openapi::jiff::Timestamp>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn main() -> ExitCode {
    let args = nodemedic_detector::npd_flags::normalize_args(std::env::args_os());
    let cli = Cli::parse_from(args);
    match cli.command {
        None => run_daemon(cli.run),
        Some(command) => run_command(command),
    }
}

fn run_command(command: Command) -> ExitCode {
    match command {
        Command::Check(args) => run_check(args),
        Command::Run(args) => run_daemon(*args),
        Command::ConvertNpd(args) => run_convert(args),
        Command::Probe(p) => {
            use nodemedic_detector::probe;
            let found = match p {
                Probe::Http { url, timeout } => probe::http(&url, timeout),
                Probe::Conntrack {
                    threshold,
                    netfilter,
                } => probe::conntrack(&netfilter, threshold),
                Probe::ReadonlyRoot { mounts } => probe::readonly_root(&mounts),
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

fn run_daemon(mut args: RunArgs) -> ExitCode {
    let npd = match nodemedic_detector::npd_flags::resolve(&args.npd, args.listen) {
        Ok(m) => m,
        Err(refused) => {
            for r in &refused {
                eprintln!("detector: {r}");
            }
            return ExitCode::from(2);
        }
    };
    nodemedic_common::telemetry::init_with_default(args.log_format, npd.log_level);
    for w in &npd.warnings {
        tracing::warn!("{w}");
    }
    args.rules.extend(npd.rules.iter().cloned());
    if args.rules.is_empty() {
        args.rules.push(PathBuf::from("/etc/nodemedic/rules"));
    }
    args.listen = npd.listen;
    if let Some(h) = npd.heartbeat {
        args.heartbeat = h;
    }
    // The rule files are checked before anything talks to a cluster: a bad file is the error shown.
    match config::load_paths(&args.rules) {
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("detector: {} error(s) in rule files", errors.0.len());
            return ExitCode::from(2);
        }
        Ok(r) if r.monitors.is_empty() => {
            eprintln!("{}", no_rule_files(&args.rules));
            return ExitCode::from(2);
        }
        Ok(_) => {}
    }
    let node_name = args
        .node_name
        .clone()
        .or_else(|| std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
    // One thread for the async work: the detector's I/O is light, and blocking inputs have their own
    // threads. This keeps idle memory small.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result: anyhow::Result<()> = rt.block_on(async move {
        let (client, credential) = nodemedic_common::client::infer_with_credential(
            nodemedic_common::keys::DETECTOR_MANAGER,
        )
        .await?;
        let opts = nodemedic_detector::run::Options {
            node_name,
            rules: args.rules,
            kmsg_path: args.kmsg_path,
            journalctl: args.journalctl,
            journal_dir: args.journal_dir,
            state_file: args.state_file,
            listen: args.listen,
            extra_listen: npd.extra_listen,
            heartbeat: args.heartbeat,
            events: nodemedic_detector::report::aggregate::Limits {
                min_interval: args.event_interval,
                ..Default::default()
            },
            report_tick: std::time::Duration::from_millis(250),
            check_dirs: args.check_dirs,
            credential,
        };
        if args.stale_threshold.is_some() || args.evict_stale_pods {
            tracing::warn!(
                "--stale-readiness-threshold and --evict-stale-pods moved to the drainer (drainer run \
                 --stale-readiness-threshold / --evict-stale-pods): it sees every node, Kosmos leaves \
                 included, with one watch; ignored here"
            );
        }
        let running = nodemedic_detector::run::start(opts, client).await?;
        nodemedic_common::runtime::shutdown_signal().await;
        tracing::info!("shutting down");
        running.shutdown().await;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once, on stderr (where the logs go too).
            eprintln!(
                "detector: {}",
                nodemedic_common::cli::error_chain(e.as_ref())
            );
            ExitCode::from(1)
        }
    }
}

/// What to say when `--rules` names no rule file: which files were there instead.
fn no_rule_files(paths: &[PathBuf]) -> String {
    let mut others = Vec::new();
    for p in paths {
        if let Ok(dir) = std::fs::read_dir(p) {
            others.extend(
                dir.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.')),
            );
        }
    }
    others.sort();
    let listed: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut msg = format!(
        "detector: no rule files in {}: *.yaml and *.yml rule files and NPD's *.json monitor files are read",
        listed.join(", ")
    );
    if !others.is_empty() {
        msg.push_str(&format!(" (found: {})", others.join(", ")));
    }
    msg
}

fn run_convert(args: ConvertArgs) -> ExitCode {
    let mut failed = 0;
    let mut printed = 0;
    for path in &args.files {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("detector: cannot read {}: {e}", path.display());
                failed += 1;
                continue;
            }
        };
        let (yaml, notes) = match config::convert_npd(path, &text) {
            Ok(c) => c,
            Err(errors) => {
                eprintln!("{errors}");
                failed += 1;
                continue;
            }
        };
        for n in &notes {
            eprintln!("{n} (not carried over)");
        }
        match &args.out_dir {
            Some(dir) => {
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("monitor");
                let out = dir.join(format!("{stem}.yaml"));
                if let Err(e) = std::fs::write(&out, &yaml) {
                    eprintln!("detector: cannot write {}: {e}", out.display());
                    failed += 1;
                    continue;
                }
                eprintln!("detector: wrote {}", out.display());
            }
            None => {
                if printed > 0 {
                    println!("---");
                }
                print!("{yaml}");
                printed += 1;
            }
        }
    }
    if failed > 0 {
        eprintln!("detector: {failed} file(s) not converted");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

fn run_check(args: CheckArgs) -> ExitCode {
    let rules = if args.rules.is_empty() {
        config::bundled_defaults()
    } else {
        match config::load_paths(&args.rules) {
            Ok(r) => r,
            Err(errors) => {
                eprintln!("{errors}");
                eprintln!("detector: {} error(s) in rule files", errors.0.len());
                return ExitCode::from(2);
            }
        }
    };
    if !args.rules.is_empty() && rules.monitors.is_empty() {
        eprintln!("{}", no_rule_files(&args.rules));
        return ExitCode::from(2);
    }
    for n in &rules.notes {
        eprintln!("{n} (not carried over)");
    }
    let Some(input) = args.input.clone() else {
        let names: Vec<&str> = rules.monitors.iter().map(|m| m.name.as_str()).collect();
        println!("{} monitor(s) valid: {}", names.len(), names.join(", "));
        return ExitCode::SUCCESS;
    };
    let exec: Vec<&str> = rules
        .monitors
        .iter()
        .filter(|m| matches!(m.input, config::Input::Exec(_)))
        .map(|m| m.name.as_str())
        .collect();
    if !exec.is_empty() {
        eprintln!(
            "detector: {} run checks, not lines; `check` does not run them (`detector probe` and `detector run` do)",
            exec.join(", ")
        );
    }
    let file = match std::fs::File::open(&input) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("detector: cannot open {}: {e}", input.display());
            return ExitCode::from(1);
        }
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let format = match args.input_format {
        Some(f) => f,
        None => match reader.fill_buf() {
            Ok(buf) => {
                let text = String::from_utf8_lossy(buf);
                InputFormat::detect(text.lines().find(|l| !l.trim().is_empty()).unwrap_or(""))
            }
            Err(e) => {
                eprintln!("detector: cannot read {}: {e}", input.display());
                return ExitCode::from(1);
            }
        },
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let colour = args.output == Output::Text && std::io::stdout().is_terminal();
    let mut table = Vec::new();
    let mut sink = |f: Finding| match args.output {
        Output::Json => {
            let _ = serde_json::to_writer(&mut out, &f);
            let _ = out.write_all(b"\n");
        }
        Output::Text => table.push(f),
    };
    // Long runs show progress, on a terminal only (stderr, so stdout stays clean for pipes).
    let started = std::time::Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut progress = |s: &check::Stats| {
        if tty {
            let secs = started.elapsed().as_secs_f64().max(0.001);
            eprint!(
                "\r\x1b[2Kdetector: {} lines, {:.1} MB read ({:.0} lines/s)",
                s.lines,
                s.bytes as f64 / 1e6,
                s.lines as f64 / secs
            );
        }
    };
    let now = args.now.unwrap_or_else(k8s_openapi::jiff::Timestamp::now);
    let stats =
        match check::check_with_progress(&rules, reader, format, now, &mut sink, &mut progress) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("detector: reading {} failed: {e}", input.display());
                return ExitCode::from(1);
            }
        };
    if tty && stats.lines >= check::PROGRESS_EVERY {
        eprint!("\r\x1b[2K");
    }
    if args.output == Output::Text {
        let _ = write_table(&mut out, &table, colour);
    }
    let _ = out.flush();
    eprintln!(
        "detector: {} lines ({} bytes, format {:?}) read, {} malformed skipped, {} problems reported by {} monitors",
        stats.lines,
        stats.bytes,
        format,
        stats.malformed,
        stats.findings,
        rules.monitors.len()
    );
    ExitCode::SUCCESS
}

fn write_table(out: &mut impl Write, rows: &[Finding], colour: bool) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "no problems found");
    }
    let headers = ["LINE", "KIND", "CONDITION", "STATUS", "REASON", "MESSAGE"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|f| {
            [
                f.line.to_string(),
                f.kind.to_string(),
                f.condition.clone().unwrap_or_else(|| "-".into()),
                f.status.unwrap_or("-").to_string(),
                f.reason.clone(),
                f.message.replace('\n', "\\n"),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row.iter()).take(5) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: &[String; 6]| {
        let mut s = String::new();
        for (i, c) in cols.iter().enumerate() {
            if i < 5 {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            } else {
                s.push_str(c);
            }
        }
        s
    };
    let head = line(&headers.map(String::from));
    if colour {
        writeln!(out, "\x1b[1m{head}\x1b[0m")?
    } else {
        writeln!(out, "{head}")?
    }
    for row in &cells {
        let text = line(row);
        let warn = row[1] == "event" || row[3] == "True";
        if colour && warn {
            writeln!(out, "\x1b[33m{text}\x1b[0m")?
        } else {
            writeln!(out, "{text}")?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_says_what_it_does() {
        let missing =
            nodemedic_common::cli::undocumented(&<Cli as clap::CommandFactory>::command());
        assert!(missing.is_empty(), "no --help text: {missing:#?}");
    }
}
