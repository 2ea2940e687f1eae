//! `drainer simulate`: each scenario file run through the controller (`crate::simulate`), its
//! report printed. I/O: files in, text or JSON out, exit 1 when an expectation fails.

use std::path::PathBuf;
use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use super::shared::ReportOutput;

#[derive(clap::Args)]
pub(crate) struct SimulateArgs {
    /// Scenario files (YAML).
    #[arg(required_unless_present = "history")]
    pub(crate) scenarios: Vec<PathBuf>,
    /// Backtest (as `drainer backtest --history`): replay this recorded history (`kubectl get
    /// events -A -o json` dumps, concatenated or not, or a drainer --history-file) instead of
    /// scenarios (repeatable).
    #[arg(long, requires = "policies", conflicts_with = "scenarios")]
    pub(crate) history: Vec<PathBuf>,
    /// With --history: `kubectl get nodes -o json`, for the nodes' labels and software.
    #[arg(long, requires = "history")]
    pub(crate) nodes: Option<PathBuf>,
    /// With --history: a drainer --config file to backtest (repeatable: compared side by side).
    #[arg(long = "policy", requires = "history")]
    pub(crate) policies: Vec<PathBuf>,
    /// With --history: how long past the last recorded transition to keep replaying.
    #[arg(long, default_value = "1h", value_parser = nodemedic_common::time::parse_duration)]
    pub(crate) after: std::time::Duration,
    /// How to write what happened.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) output: ReportOutput,
}

pub(super) fn simulate(args: SimulateArgs) -> ExitCode {
    use crate::simulate;
    use std::io::Write as _;
    let stdout = std::io::stdout();
    let mut out = nodemedic_common::events::PrintableWriter(std::io::BufWriter::new(stdout.lock()));
    let mut code = ExitCode::SUCCESS;
    // A fixed start, so the output of a scenario is the same every run.
    let start: Timestamp = "2026-01-05T00:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let mut drawn = Vec::new();
    for path in &args.scenarios {
        let file = path.display().to_string();
        let result = std::fs::read_to_string(path)
            .map_err(|e| format!("{file}: cannot read: {e}"))
            .and_then(|text| simulate::parse(&file, &text).map_err(|e| e.to_string()))
            .and_then(|s| {
                let started = std::time::Instant::now();
                simulate::run(&file, &s, start)
                    .map(|r| (s, r, started.elapsed()))
                    .map_err(|e| e.to_string())
            });
        let written = match result {
            Err(e) => {
                say!("{e}");
                code = ExitCode::from(2);
                continue;
            }
            Ok((s, report, took)) => {
                if !report.failed.is_empty() {
                    code = ExitCode::from(1);
                }
                match args.output {
                    ReportOutput::Json => serde_json::to_writer(&mut out, &report)
                        .map_err(std::io::Error::other)
                        .and_then(|()| writeln!(out)),
                    ReportOutput::Text => writeln!(out, "== {file}")
                        .and_then(|()| simulate::print(&report, &s.description, &mut out))
                        .and_then(|()| writeln!(out, "simulated in {:.2} s", took.as_secs_f64())),
                    ReportOutput::Html => {
                        drawn.push((file, s.description.clone(), report));
                        Ok(())
                    }
                }
            }
        };
        if let Err(e) = written {
            say!("writing failed: {e}");
            return ExitCode::from(1);
        }
    }
    if args.output == ReportOutput::Html {
        use simulate::timeline::{Axis, Run, page};
        let runs: Vec<Run> = drawn
            .iter()
            .map(|(title, about, report)| Run {
                title: title.clone(),
                about: about.clone(),
                report,
            })
            .collect();
        let html = page(
            "drainer simulate",
            "Times are from the start of each scenario. Hover a bar for its reason.",
            &runs,
            Axis::Each,
            &[],
        );
        if let Err(e) = out.write_all(html.as_bytes()) {
            say!("writing failed: {e}");
            return ExitCode::from(1);
        }
    }
    let _ = out.flush();
    code
}
