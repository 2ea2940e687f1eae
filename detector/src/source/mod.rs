//! Inputs, behind one seam: [`spawn`] starts a monitor's input (kmsg, journal, file, exec checks or
//! resources)
//! and returns the stream of [`SourceEvent`]s it produces; [`once`] reads a file start to end into the
//! same events for `detector check`. I/O: each input runs on its own (a thread for blocking
//! device/file reads, a task for the journalctl child and for checks) and sends over a bounded
//! channel, so one slow or broken input never stalls another. Each beats a health handle while it is
//! alive, also when idle.
//!
//! A new input is one module here, its `Input` variant in `config`, and one arm in [`spawn`].

mod event;
pub mod exec;
pub mod file;
pub mod follow;
pub mod host;
pub mod journal;
pub mod kmsg;
pub mod once;
pub mod resources;
pub mod wake;

use std::path::PathBuf;

use nodemedic_common::health::{Beater, Health};
use tokio::sync::{mpsc, watch};

use crate::checkpoint::Position;
use crate::config::{Input, Monitor};

pub use event::{DEFAULT_LOOKBACK, IDLE_POLL, MAX_SILENCE, SourceEvent};

/// Events an input may have in flight before it waits for its monitor.
const QUEUE: usize = 1024;

/// What every input needs from the process.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) kmsg_path: PathBuf,
    pub(crate) journalctl: PathBuf,
    pub(crate) journal_dir: Option<PathBuf>,
    pub(crate) boot_id: String,
    pub(crate) health: Health,
    /// Where exec checks may run from.
    pub(crate) check_dirs: exec::CheckDirs,
}

/// An input that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the {input} input of monitor {monitor}: {source}")]
pub(crate) struct SpawnError {
    pub(crate) monitor: String,
    pub(crate) input: &'static str,
    #[source]
    pub(crate) source: std::io::Error,
}

/// Start `monitor`'s input, resuming at `resume` (its checkpoint); it runs until `stop` turns true or
/// the returned receiver is dropped. Must be called within a tokio runtime.
pub(crate) fn spawn(
    monitor: &Monitor,
    ctx: &Context,
    resume: Option<Position>,
    stop: watch::Receiver<bool>,
) -> Result<mpsc::Receiver<SourceEvent>, SpawnError> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let lookback = monitor.lookback.unwrap_or(DEFAULT_LOOKBACK);
    let thread = |f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(format!("{}-{}", monitor.input.kind(), monitor.name))
            .spawn(f)
            .map(drop)
            .map_err(|source| SpawnError {
                monitor: monitor.name.clone(),
                input: monitor.input.kind(),
                source,
            })
    };
    match &monitor.input {
        Input::Kmsg { .. } => {
            let beat = beat(monitor, ctx);
            let start = kmsg::Start {
                boot_id: ctx.boot_id.clone(),
                checkpoint: resume,
                lookback,
            };
            let path = ctx.kmsg_path.clone();
            thread(Box::new(move || kmsg::follow(path, start, tx, beat, stop)))?;
        }
        Input::File { path, format } => {
            let beat = beat(monitor, ctx);
            let (path, format) = (path.clone(), *format);
            thread(Box::new(move || {
                file::follow(path, format, resume, tx, beat, stop)
            }))?;
        }
        Input::Journal {
            identifiers,
            how,
            units,
            directory,
        } => {
            let spec = journal::JournalSpec {
                journalctl: ctx.journalctl.clone(),
                directory: directory.clone().or_else(|| ctx.journal_dir.clone()),
                identifiers: identifiers.clone(),
                how: *how,
                units: units.clone(),
                lookback,
            };
            let beat = beat(monitor, ctx);
            tokio::spawn(journal::follow(spec, resume, tx, beat, stop));
        }
        Input::Exec(settings) => {
            // Checks beat one health entry each (`check:<monitor>/<reason>`).
            let runs = match resume {
                Some(Position::Exec { runs }) => runs,
                _ => 0,
            };
            let checks = exec::start(monitor, settings, &ctx.health, &ctx.check_dirs, stop);
            tokio::spawn(exec::number(checks, runs, tx));
        }
        Input::Resources(settings) => {
            let beat = beat(monitor, ctx);
            let (name, settings) = (monitor.name.clone(), settings.clone());
            tokio::spawn(resources::follow(name, settings, tx, beat, stop));
        }
    }
    Ok(rx)
}

/// The health entry of a line input: `input:<monitor>`.
fn beat(monitor: &Monitor, ctx: &Context) -> Beater {
    ctx.health
        .register(format!("input:{}", monitor.name), MAX_SILENCE)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    use std::time::Duration;

    use super::*;

    fn monitor(yaml: &str) -> Monitor {
        let set = crate::config::load_sources(&[("m.yaml".into(), yaml.to_string())]).unwrap();
        set.monitors.into_iter().next().unwrap()
    }

    fn ctx() -> Context {
        Context {
            kmsg_path: "/nonexistent/kmsg".into(),
            journalctl: "/nonexistent/journalctl".into(),
            journal_dir: None,
            boot_id: "boot".into(),
            health: Health::default(),
            check_dirs: exec::CheckDirs::new(["/bin".into(), "/usr/bin".into()]),
        }
    }

    const BOUND: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_file_input_resumes_at_its_checkpoint_and_sends_lines_with_positions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"old line\nnew line\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let m = monitor(&format!(
            "source: s\ninput: {{kind: file, path: {}}}\n",
            path.display()
        ));
        let resume = Position::File {
            dev: meta.dev(),
            ino: meta.ino(),
            offset: 9,
        };
        let (stop_tx, stop) = watch::channel(false);
        let mut rx = spawn(&m, &ctx(), Some(resume), stop).unwrap();
        let ev = tokio::time::timeout(BOUND, rx.recv())
            .await
            .unwrap()
            .unwrap();
        match ev {
            SourceEvent::Line { text, position, .. } => {
                assert_eq!(text, "new line");
                assert_eq!(
                    position,
                    Position::File {
                        dev: meta.dev(),
                        ino: meta.ino(),
                        offset: 18
                    }
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        stop_tx.send(true).unwrap();
    }

    #[tokio::test]
    async fn check_results_are_numbered_on_from_the_runs_before_a_restart() {
        let m = monitor(
            "source: s\ninput: {kind: exec}\nrules:\n  - {type: temporary, reason: Down, exec: {path: /bin/sh, args: [-c, 'echo down; exit 1']}}\n",
        );
        let (stop_tx, stop) = watch::channel(false);
        let mut rx = spawn(&m, &ctx(), Some(Position::Exec { runs: 41 }), stop).unwrap();
        let ev = tokio::time::timeout(BOUND, rx.recv())
            .await
            .unwrap()
            .unwrap();
        match ev {
            SourceEvent::Check { result, position } => {
                assert_eq!(position, Position::Exec { runs: 42 });
                assert_eq!(
                    (result.exit, result.message.as_str()),
                    (exec::Exit::Problem, "down")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        stop_tx.send(true).unwrap();
    }
}
