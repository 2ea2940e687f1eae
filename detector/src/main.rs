//! `detector`: thin binary. Parses flags, sets up logging, and calls the library.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use nodemedic_detector::check::{self, Finding, InputFormat};
use nodemedic_detector::config;

#[derive(Parser)]
#[command(name = "detector", version, about = "nodemedic node agent: log lines -> NodeConditions and Events")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the rules over a file offline (no cluster) and print what would be reported.
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Rule file or directory (repeatable). Default: the bundled rules. Invalid files: exit code 2.
    #[arg(long = "rules")]
    rules: Vec<PathBuf>,
    /// The log file to read.
    #[arg(long)]
    input: PathBuf,
    /// Input layout; detected from the first line when omitted.
    #[arg(long = "input-format", value_enum)]
    input_format: Option<InputFormat>,
    /// text: a table for people; json: one JSON object per reported problem.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(args),
    }
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
    let file = match std::fs::File::open(&args.input) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("detector: cannot open {}: {e}", args.input.display());
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
                eprintln!("detector: cannot read {}: {e}", args.input.display());
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
    let stats = match check::check(&rules, reader, format, &mut sink) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("detector: reading {} failed: {e}", args.input.display());
            return ExitCode::from(1);
        }
    };
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
    if colour { writeln!(out, "\x1b[1m{head}\x1b[0m")? } else { writeln!(out, "{head}")? }
    for row in &cells {
        let text = line(row);
        let warn = row[1] == "event" || row[3] == "True";
        if colour && warn { writeln!(out, "\x1b[33m{text}\x1b[0m")? } else { writeln!(out, "{text}")? }
    }
    Ok(())
}
