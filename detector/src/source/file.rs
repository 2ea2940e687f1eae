//! A plain log file followed across rotation and copytruncate (`follow::Follower`), its lines
//! stripped of their syslog prefix when asked. Position = device, inode and byte offset.
//! I/O (a thread).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::sync::{mpsc, watch};

use super::event::{IDLE_POLL, SourceEvent};
use super::follow::{Follower, Next, StartAt};
use crate::checkpoint::Position;
use crate::config::LineFormat;
use crate::parse::syslog;

/// Longest line kept whole; longer lines are cut (the rest is dropped) so one runaway line cannot
/// exhaust memory.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Follow `path`. Without a checkpoint for the current inode it starts at the end (like `tail -f`).
pub(crate) fn follow(
    path: PathBuf,
    format: LineFormat,
    checkpoint: Option<Position>,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    stop: watch::Receiver<bool>,
) {
    let mut start = match checkpoint {
        Some(Position::File { dev, ino, offset }) => StartAt::Resume { dev, ino, offset },
        _ => StartAt::End,
    };
    loop {
        if *stop.borrow() || tx.is_closed() {
            return;
        }
        match tail(&path, format, start, &tx, &beat, &stop) {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "log file not readable yet; retrying");
                // A file that appears later is read from its start.
                start = StartAt::Beginning;
                for _ in 0..4 {
                    std::thread::sleep(IDLE_POLL);
                    beat.beat();
                }
            }
        }
    }
}

fn tail(
    path: &Path,
    format: LineFormat,
    start: StartAt,
    tx: &mpsc::Sender<SourceEvent>,
    beat: &Beater,
    stop: &watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut f = Follower::open(path, start)?;
    let wake = super::wake::FileWake::new(path);
    let mut buf = Vec::new();
    loop {
        if *stop.borrow() || tx.is_closed() {
            return Ok(());
        }
        beat.beat();
        let ev = match f.next_line(&mut buf, MAX_LINE)? {
            Next::Line => {
                let line = String::from_utf8_lossy(&buf);
                let text = match format {
                    LineFormat::Syslog => syslog::message(&line),
                    LineFormat::Plain => &line,
                };
                let (dev, ino, offset) = f.position();
                SourceEvent::Line {
                    text: text.trim_end_matches('\r').to_string(),
                    at: Timestamp::now(),
                    position: Position::File { dev, ino, offset },
                    user: false,
                }
            }
            Next::TooLong => SourceEvent::Malformed {
                why: format!("line longer than {MAX_LINE} bytes cut"),
            },
            Next::Idle => {
                // Until the file is written (inotify), at most the idle poll.
                wake.wait(IDLE_POLL);
                continue;
            }
        };
        if tx.blocking_send(ev).is_err() {
            return Ok(());
        }
    }
}

/// Poll interval used by the tests to bound their waits.
pub const POLL: Duration = IDLE_POLL;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn next_text(rx: &mut mpsc::Receiver<SourceEvent>) -> String {
        match rx.blocking_recv().unwrap() {
            SourceEvent::Line { text, .. } => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn follows_across_rename_rotation_and_copytruncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "old line before start\n").unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let (stop_tx, stop) = watch::channel(false);
        let health = nodemedic_common::health::Health::default();
        let beat = health.register("file", Duration::from_secs(5));
        let p = path.clone();
        let t = std::thread::spawn(move || follow(p, LineFormat::Syslog, None, tx, beat, stop));
        std::thread::sleep(POLL * 2);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "Nov 22 03:27:01 node-1 app[1]: first").unwrap();
        assert_eq!(
            next_text(&mut rx),
            "first",
            "starts at the end, strips the syslog prefix"
        );

        // rename rotation: a last line in the old file, then a new file
        writeln!(f, "Nov 22 03:27:02 node-1 app[1]: last of old").unwrap();
        drop(f);
        std::fs::rename(&path, dir.path().join("app.log.1")).unwrap();
        std::fs::write(&path, "Nov 22 03:27:03 node-1 app[1]: first of new\n").unwrap();
        assert_eq!(next_text(&mut rx), "last of old");
        assert_eq!(next_text(&mut rx), "first of new");

        // copytruncate
        std::thread::sleep(POLL * 2);
        std::fs::write(&path, "").unwrap();
        std::thread::sleep(POLL * 2);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "after truncate").unwrap();
        assert_eq!(next_text(&mut rx), "after truncate");
        stop_tx.send(true).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn resumes_from_a_checkpoint_of_the_same_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "seen\nnot seen yet\n").unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let cp = Position::File {
            dev: m.dev(),
            ino: m.ino(),
            offset: 5,
        };
        let (tx, mut rx) = mpsc::channel(16);
        let (stop_tx, stop) = watch::channel(false);
        let health = nodemedic_common::health::Health::default();
        let beat = health.register("file", Duration::from_secs(5));
        let p = path.clone();
        let t = std::thread::spawn(move || follow(p, LineFormat::Plain, Some(cp), tx, beat, stop));
        assert_eq!(next_text(&mut rx), "not seen yet");
        stop_tx.send(true).unwrap();
        t.join().unwrap();
    }
}
