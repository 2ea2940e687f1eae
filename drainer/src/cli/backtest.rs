//! `drainer backtest` and `kubectl nodemedic backtest` (one command under both names; `drainer
//! simulate --history` is the same with files): a recorded history (`--history` files, or without
//! them the cluster's Events and Nodes read live, read-only) replayed through the controller under
//! each policy
//! (`crate::simulate::history`), what each did and a summary, side by side. I/O: files or the
//! cluster in, text or JSON out.

use std::io::Write;
use std::process::ExitCode;

use super::shared::ReportOutput;
use crate::simulate::{self, Report, history};

/// What a backtest prints at the end for each policy.
#[derive(serde::Serialize)]
struct Summary {
    policy: String,
    nodes_drained: usize,
    cordons: usize,
    drains: usize,
    uncordons: usize,
    max_cordoned_at_once: usize,
    breaker_openings: usize,
    report: Report,
}

impl Summary {
    fn of(policy: String, report: Report) -> Summary {
        let count = |what: &str| report.happenings.iter().filter(|h| h.what == what).count();
        let drained: std::collections::BTreeSet<&str> = report
            .happenings
            .iter()
            .filter(|h| h.what == "drained")
            .filter_map(|h| h.node.as_deref())
            .collect();
        Summary {
            policy,
            nodes_drained: drained.len(),
            cordons: report.cordons,
            drains: report.drains,
            uncordons: report.uncordons,
            max_cordoned_at_once: report.max_cordoned_at_once,
            breaker_openings: count("breaker opened"),
            report,
        }
    }
}

fn read_history(paths: &[std::path::PathBuf]) -> Result<history::History, String> {
    let mut all = history::History::default();
    for path in paths {
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read: {e}"))?;
        let h = history::read(&file, &text).map_err(|e| e.to_string())?;
        // Nothing of its kind in it (a policy or a node list given as the history): an error
        // naming this file, not a replay of nothing.
        if h.transitions.is_empty() {
            return Err(format!(
                "{file}: no condition transitions in it ({} records skipped): not a history (the drainer's --history-file, or `kubectl get events -A -o json`)",
                h.skipped
            ));
        }
        all.transitions.extend(h.transitions);
        all.skipped += h.skipped;
    }
    all.transitions
        .sort_by(|a, b| a.at.cmp(&b.at).then(a.node.cmp(&b.node)));
    Ok(all)
}

fn nodes(path: Option<&std::path::Path>) -> Result<Vec<k8s_openapi::api::core::v1::Node>, String> {
    match path {
        None => Ok(Vec::new()),
        Some(p) => crate::plan::read_items(p)
            .map(|r| r.items)
            .map_err(|e| e.to_string()),
    }
}

/// Backtest the `history` files (and `nodes`, for the nodes' labels) under `policies`.
pub(super) fn from_files(
    history: &[std::path::PathBuf],
    nodes_file: Option<&std::path::Path>,
    policies: &[std::path::PathBuf],
    after: std::time::Duration,
    output: ReportOutput,
) -> ExitCode {
    // Inputs that cannot be read: 1, as for every subcommand; a policy that does not load: 2.
    let read = read_history(history).and_then(|h| nodes(nodes_file).map(|n| (h, n)));
    let (h, nodes) = match read {
        Ok(x) => x,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(1);
        }
    };
    write(replay(h, &nodes, policies, after), output)
}

fn replay(
    h: history::History,
    nodes: &[k8s_openapi::api::core::v1::Node],
    policies: &[std::path::PathBuf],
    after: std::time::Duration,
) -> Result<(history::History, Vec<Summary>), String> {
    let mut out = Vec::new();
    for p in policies {
        let name = p.display().to_string();
        let policy = crate::config::flags::PolicyArgs {
            config: Some(p.clone()),
            ..Default::default()
        };
        let cfg = crate::config::build::build(&policy).map_err(|errors| {
            let e: Vec<String> = errors.iter().map(ToString::to_string).collect();
            e.join("; ")
        })?;
        let mut plan = history::plan("the history", &h.transitions, nodes, cfg, after)
            .map_err(|e| e.to_string())?;
        let report = simulate::run_plan(&mut plan).map_err(|e| e.to_string())?;
        out.push(Summary::of(name, report));
    }
    Ok((h, out))
}

/// `drainer backtest` and `kubectl nodemedic backtest`: recorded history files, or without them the
/// history the cluster keeps (its Events about Nodes) and its Nodes, read live.
#[derive(clap::Args)]
pub(crate) struct BacktestArgs {
    /// Replay this recorded history (`kubectl get events -A -o json` dumps, concatenated or not,
    /// or a drainer --history-file; repeatable). Without it: the cluster's Events about Nodes.
    #[arg(long)]
    pub(crate) history: Vec<std::path::PathBuf>,
    /// With --history: `kubectl get nodes -o json`, for the nodes' labels and software (without
    /// --history the cluster's Nodes are read).
    #[arg(long, requires = "history")]
    pub(crate) nodes: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) cluster: super::shared::ClusterArgs,
    /// A drainer --config file to backtest (repeatable: compared side by side).
    #[arg(long = "policy", required = true)]
    pub(crate) policies: Vec<std::path::PathBuf>,
    /// How long past the last recorded transition to keep replaying.
    #[arg(long, default_value = "1h", value_parser = nodemedic_common::time::parse_duration)]
    pub(crate) after: std::time::Duration,
    /// How to write what each policy would have done.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) output: ReportOutput,
}

pub(super) fn backtest(args: BacktestArgs) -> ExitCode {
    if !args.history.is_empty() {
        return from_files(
            &args.history,
            args.nodes.as_deref(),
            &args.policies,
            args.after,
            args.output,
        );
    }
    let read = super::shared::block_on(async {
        let (kubeconfig, context) = (
            args.cluster.kubeconfig.as_deref(),
            args.cluster.context.as_deref(),
        );
        let client = crate::live::client(kubeconfig, context).await?;
        let nodes = crate::live::read_nodes(&client).await?;
        let events = crate::live::node_events_all(&client).await?;
        Ok::<_, crate::live::LiveError>((nodes, events))
    });
    let (nodes, events) = match read {
        Err(code) => return code,
        Ok(Err(e)) => {
            say!("{e}");
            return ExitCode::from(1);
        }
        Ok(Ok(x)) => x,
    };
    let h = history::of_events(&events);
    write(replay(h, &nodes, &args.policies, args.after), args.output)
}

fn write(
    result: Result<(history::History, Vec<Summary>), String>,
    output: ReportOutput,
) -> ExitCode {
    let (h, summaries) = match result {
        Ok(x) => x,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = nodemedic_common::events::PrintableWriter(std::io::BufWriter::new(stdout.lock()));
    let written = match output {
        ReportOutput::Json => summaries.iter().try_for_each(|s| {
            serde_json::to_writer(&mut out, s)
                .map_err(std::io::Error::other)
                .and_then(|()| writeln!(out))
        }),
        ReportOutput::Text => print(&h, &summaries, &mut out),
        ReportOutput::Html => out.write_all(html(&h, &summaries).as_bytes()),
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("writing failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// A line of the summary table: its name and what it shows of a policy's run.
type Row = (&'static str, fn(&Summary) -> String);

const ROWS: [Row; 6] = [
    ("nodes drained", |x| x.nodes_drained.to_string()),
    ("cordons", |x| x.cordons.to_string()),
    ("drains", |x| x.drains.to_string()),
    ("uncordons", |x| x.uncordons.to_string()),
    ("max cordoned at once", |x| {
        x.max_cordoned_at_once.to_string()
    }),
    ("breaker openings", |x| x.breaker_openings.to_string()),
];

/// The policies' timelines side by side on one page, the summary table on top.
fn html(h: &history::History, s: &[Summary]) -> String {
    use simulate::timeline::{Axis, Run, page};
    let runs: Vec<Run> = s
        .iter()
        .map(|x| Run {
            title: format!("policy {}", x.policy),
            about: String::new(),
            report: &x.report,
        })
        .collect();
    let rows: Vec<(String, Vec<String>)> = ROWS
        .iter()
        .map(|(name, f)| (name.to_string(), s.iter().map(f).collect()))
        .collect();
    let note = match h.transitions.first() {
        Some(f) => format!(
            "{} condition transitions replayed; times are from a minute before the first, {}. Hover a bar for its reason.",
            h.transitions.len(),
            f.at
        ),
        None => "No transitions.".to_string(),
    };
    page("backtest", &note, &runs, Axis::Shared, &rows)
}

fn print(h: &history::History, s: &[Summary], out: &mut impl Write) -> std::io::Result<()> {
    let (first, last) = (h.transitions.first(), h.transitions.last());
    if let (Some(f), Some(l)) = (first, last) {
        writeln!(
            out,
            "history: {} condition transitions from {} to {} ({} other records skipped)",
            h.transitions.len(),
            f.at,
            l.at,
            h.skipped
        )?;
    }
    let start =
        first.map(|f| nodemedic_common::time::sub(f.at, std::time::Duration::from_secs(60)));
    for x in s {
        writeln!(out, "== policy {}", x.policy)?;
        simulate::print_from(&x.report, "", start, out)?;
    }
    writeln!(
        out,
        "\n{:<24}{}",
        "",
        s.iter()
            .map(|x| format!("{:>24}", short(&x.policy)))
            .collect::<String>()
    )?;
    for (name, f) in ROWS {
        writeln!(
            out,
            "{name:<24}{}",
            s.iter()
                .map(|x| format!("{:>24}", f(x)))
                .collect::<String>()
        )?;
    }
    Ok(())
}

/// A policy's file name, for the table's heading.
fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
