//! `detector check`: the rules run over a log file once, offline, and what they would report printed
//! as a table or JSON lines. Shell around `check`.

use nodemedic_common::cli::counted;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::check::{self, Finding, InputFormat};
use crate::config;

#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// Rule file or directory (repeatable). Default: the bundled rules. Invalid files: exit code 2.
    #[arg(long = "rules")]
    rules: Vec<PathBuf>,
    /// The log file to read. Without it the rule files are only validated.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Input layout; detected from the first line when omitted.
    #[arg(long = "input-format", value_enum)]
    input_format: Option<InputFormat>,
    /// text: a table for people; json: one JSON object per reported problem, a line each, for
    /// scripts.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// Evaluate as of this time (RFC 3339) instead of now: the time of lines that carry none (plain
    /// and syslog files), so the output is reproducible.
    #[arg(long)]
    now: Option<k8s_openapi::jiff::Timestamp>,
    /// Say which monitor reported each problem (a MONITOR column in the table). NPD's `-v=N`
    /// (glog's verbosity) is taken as this: any level above 0.
    #[arg(short = 'v', long = "verbose", num_args = 0..=1, require_equals = true,
        default_missing_value = "1", value_name = "LEVEL")]
    verbose: Option<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

pub(crate) fn run_check(args: CheckArgs) -> ExitCode {
    let rules = match rules_of(&args) {
        Ok(r) => r,
        Err(code) => return code,
    };
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
    let (reader, format) = match open(&input, args.input_format) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Some(why) = mismatch(&rules, format) {
        eprintln!("detector: {}: {why}", input.display());
        return ExitCode::from(1);
    }
    report(&args, &rules, &input, reader, format)
}

/// Why no rule can read `format` at all (readings of resources against log rules, or the other way
/// round): "no problems found" would be a false all-clear.
fn mismatch(rules: &config::RuleSet, format: InputFormat) -> Option<String> {
    let resources = |m: &&config::Monitor| matches!(m.input, config::Input::Resources(_));
    let names = |f: &dyn Fn(&&config::Monitor) -> bool| {
        let n: Vec<&str> = rules
            .monitors
            .iter()
            .filter(f)
            .map(|m| m.name.as_str())
            .collect();
        n.join(", ")
    };
    let any_resources = rules.monitors.iter().any(|m| resources(&m));
    let all_resources = rules.monitors.iter().all(|m| resources(&m));
    match format {
        InputFormat::Samples if !any_resources => Some(format!(
            "readings of a node's resources, and none of the rules ({}) reads them; give a resources rule file (e.g. --rules config/rules-extra/resource-monitor.yaml)",
            names(&|_| true)
        )),
        InputFormat::Samples => None,
        _ if all_resources && !rules.monitors.is_empty() => Some(format!(
            "a log, and the rules given ({}) read a node's resources, not lines (their input is what `detector sample` prints)",
            names(&resources)
        )),
        _ => None,
    }
}

/// The rules `check` runs: the files given, else the bundled ones. Errors are printed.
fn rules_of(args: &CheckArgs) -> Result<config::RuleSet, ExitCode> {
    let rules = if args.rules.is_empty() {
        config::bundled_defaults()
    } else {
        match config::load_paths(&args.rules) {
            Ok(r) => r,
            Err(errors) => {
                eprintln!("{errors}");
                eprintln!("detector: {} error(s) in rule files", errors.0.len());
                return Err(ExitCode::from(2));
            }
        }
    };
    if !args.rules.is_empty() && rules.monitors.is_empty() {
        eprintln!("{}", super::daemon::no_rule_files(&args.rules));
        return Err(ExitCode::from(2));
    }
    for n in &rules.notes {
        eprintln!("{n} (not carried over)");
    }
    Ok(rules)
}

/// The input file, and its format (given, else detected from its first line). Errors are printed.
fn open(
    input: &std::path::Path,
    given: Option<InputFormat>,
) -> Result<(BufReader<std::fs::File>, InputFormat), ExitCode> {
    let file = std::fs::File::open(input).map_err(|e| {
        eprintln!("detector: cannot open {}: {e}", input.display());
        ExitCode::from(1)
    })?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let format = match given {
        Some(f) => f,
        None => match reader.fill_buf() {
            Ok(buf) => {
                let text = String::from_utf8_lossy(buf);
                InputFormat::detect(text.lines().find(|l| !l.trim().is_empty()).unwrap_or(""))
            }
            Err(e) => {
                eprintln!("detector: cannot read {}: {e}", input.display());
                return Err(ExitCode::from(1));
            }
        },
    };
    Ok((reader, format))
}

/// Run the rules over `reader` and print what they report.
fn report(
    args: &CheckArgs,
    rules: &config::RuleSet,
    input: &std::path::Path,
    reader: BufReader<std::fs::File>,
    format: InputFormat,
) -> ExitCode {
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
        match check::check_with_progress(rules, reader, format, now, &mut sink, &mut progress) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("detector: reading {} failed: {e}", input.display());
                return ExitCode::from(1);
            }
        };
    if tty && stats.lines >= check::PROGRESS_EVERY {
        eprint!("\r\x1b[2K");
    }
    // Nothing read as a line of the format: the wrong file, or the wrong --input-format; "no
    // problems found" would be a false all-clear.
    let unreadable = stats.parsed == 0 && stats.malformed > 0;
    if args.output == Output::Text && !unreadable {
        let monitors = args.verbose.is_some_and(|v| v > 0);
        let _ = write_table(&mut out, &table, colour, monitors);
    }
    let _ = out.flush();
    let format = format
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    eprintln!(
        "detector: {} ({} bytes, format {format}) read, {} malformed skipped, {} reported by {}",
        counted(stats.lines as usize, "line"),
        stats.bytes,
        stats.malformed,
        counted(stats.findings as usize, "problem"),
        counted(rules.monitors.len(), "monitor")
    );
    if unreadable {
        eprintln!(
            "detector: none of the {} lines of {} reads as {format} input: not a log file of that layout (--input-format names it: kmsg, syslog, plain, journal-json)",
            stats.malformed,
            input.display()
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn write_table(
    out: &mut impl Write,
    rows: &[Finding],
    colour: bool,
    monitors: bool,
) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "no problems found");
    }
    let mut headers = vec!["LINE", "KIND", "CONDITION", "STATUS", "REASON", "MESSAGE"];
    if monitors {
        headers.insert(2, "MONITOR");
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|f| {
            let mut row = vec![
                f.line.to_string(),
                f.kind.to_string(),
                f.condition.clone().unwrap_or_else(|| "-".into()),
                f.status.unwrap_or("-").to_string(),
                f.reason.clone(),
                f.message.replace('\n', "\\n"),
            ];
            if monitors {
                row.insert(2, f.monitor.clone());
            }
            row
        })
        .collect();
    let last = headers.len() - 1;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row.iter()).take(last) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: &[String]| {
        let mut s = String::new();
        for (i, c) in cols.iter().enumerate() {
            if i < last {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            } else {
                s.push_str(c);
            }
        }
        s
    };
    let head = line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    if colour {
        writeln!(out, "\x1b[1m{head}\x1b[0m")?
    } else {
        writeln!(out, "{head}")?
    }
    let status = if monitors { 4 } else { 3 };
    for row in &cells {
        let text = line(row);
        let warn = row[1] == "event" || row[status] == "True";
        if colour && warn {
            writeln!(out, "\x1b[33m{text}\x1b[0m")?
        } else {
            writeln!(out, "{text}")?
        }
    }
    Ok(())
}
