//! `detector convert-npd`: NPD's monitor files (JSON) printed or written as rule files (YAML), with
//! what does not carry over named. Shell around `config::convert_npd`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config;

#[derive(clap::Args)]
pub(crate) struct ConvertArgs {
    /// NPD monitor files (system-log-monitor or custom-plugin-monitor JSON).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write each as DIR/<name>.yaml instead of printing them (DIR is made if missing; several files
    /// on stdout are separated by `---` lines; split them into one file each).
    #[arg(long = "out-dir", value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

pub(crate) fn run_convert(args: ConvertArgs) -> ExitCode {
    let mut failed = 0;
    let mut printed = 0;
    if let Some(dir) = &args.out_dir
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("detector: cannot make the directory {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    // Two files of one name (kernel-monitor.json from two directories) would write one output.
    let mut written = std::collections::BTreeSet::new();
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
                if !written.insert(out.clone()) {
                    eprintln!(
                        "detector: {} would overwrite {} written from another file of that name: not written",
                        path.display(),
                        out.display()
                    );
                    failed += 1;
                    continue;
                }
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
