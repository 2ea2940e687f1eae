//! `detector sample`: the node's resources read as the `resources` input reads them, printed as
//! JSON lines: to see what rules would see, and to record a series that `detector check` replays.
//! Shell around `source::resources::read`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::config::ResourceSettings;
use crate::source::resources;

#[derive(clap::Args)]
pub(crate) struct SampleArgs {
    /// A filesystem to read, as NAME=PATH (repeatable; signals NAME.available, NAME.inodesFree).
    /// Default: nodefs=/var/lib/kubelet and imagefs=/var/lib/containerd.
    #[arg(long = "filesystem", value_name = "NAME=PATH", value_parser = filesystem)]
    filesystems: Vec<(String, PathBuf)>,
    /// Where the kernel's files are (pressure/, meminfo, loadavg, sys/kernel/).
    #[arg(long = "proc-dir", default_value = "/proc")]
    proc_dir: PathBuf,
    /// How many readings to print (0: until stopped).
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Time between readings.
    #[arg(long, default_value = "10s", value_parser = nodemedic_common::time::parse_duration)]
    interval: Duration,
}

fn filesystem(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, path)) if !name.is_empty() && path.starts_with('/') => {
            Ok((name.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!(
            "{s:?}: expected NAME=/absolute/path, e.g. imagefs=/var/lib/containerd"
        )),
    }
}

pub(crate) fn run_sample(args: SampleArgs) -> ExitCode {
    let mut settings = ResourceSettings {
        proc_dir: args.proc_dir,
        ..ResourceSettings::default()
    };
    if !args.filesystems.is_empty() {
        settings.filesystems = args.filesystems;
    }
    let mut said = BTreeMap::new();
    let mut n = 0;
    let mut out = std::io::stdout().lock();
    loop {
        let mut missing = BTreeMap::new();
        let sample = resources::read(&settings, &mut missing);
        for (what, why) in missing {
            if said.insert(what.clone(), ()).is_none() {
                eprintln!("detector: cannot read {what}: {why}");
            }
        }
        if writeln!(out, "{}", sample.to_json_line())
            .and_then(|()| out.flush())
            .is_err()
        {
            // The reader went away (`| head`): done.
            return ExitCode::SUCCESS;
        }
        n += 1;
        if args.count != 0 && n >= args.count {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(args.interval);
    }
}
