//! `detector stats`: NPD system-stats-monitor files collected here and printed as `/metrics` shows
//! them, to see what a dashboard will read before deploying (and what the benchmark times). Shell
//! around `stats::collect_now`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub(crate) struct StatsArgs {
    /// NPD system-stats-monitor files (JSON), as `--config.system-stats-monitor` takes them
    /// (comma separated or repeated).
    #[arg(required = true, value_delimiter = ',', value_name = "FILE")]
    files: Vec<PathBuf>,
    /// How many collections to make; the last is printed (a second one has the disks' average
    /// queue length, which needs two).
    #[arg(long, default_value_t = 1)]
    count: u32,
    /// Time between collections.
    #[arg(long, default_value = "1s", value_parser = nodemedic_common::time::parse_duration)]
    interval: Duration,
}

pub(crate) fn run_stats(args: StatsArgs) -> ExitCode {
    let files = match crate::stats::load(&args.files) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("detector: {e}");
            return ExitCode::from(2);
        }
    };
    for s in &files {
        for note in &s.notes {
            eprintln!("detector: {}: {note}", s.file.display());
        }
    }
    let (exposition, missing) = crate::stats::collect_now(&files, args.count, args.interval);
    for (what, why) in missing {
        eprintln!("detector: cannot read {what}: {why}; its metrics are left out");
    }
    let mut out = std::io::stdout().lock();
    // A reader gone away (`| head`) is not an error.
    let _ = out.write_all(exposition.text().as_bytes());
    ExitCode::SUCCESS
}
