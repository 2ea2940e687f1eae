//! A plain log file followed across rotation: rename + new file (the path points at a new inode: the
//! old file is read to its end, then the new one from its start) and copytruncate (the file shrinks
//! below our offset: read again from the start). Position = device, inode and byte offset.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::sync::{mpsc, watch};

use super::{IDLE_POLL, SourceEvent};
use crate::checkpoint::Position;
use crate::config::LineFormat;
use crate::parse::syslog;

/// Longest line kept whole; longer lines are cut (the rest is dropped) so one runaway line cannot
/// exhaust memory.
const MAX_LINE: usize = 64 * 1024;

/// Follow `path`. Without a checkpoint for the current inode it starts at the end (like `tail -f`).
pub fn follow(
    path: PathBuf,
    format: LineFormat,
    checkpoint: Option<Position>,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    stop: watch::Receiver<bool>,
) {
    let mut resume = checkpoint;
    let mut from_start = false;
    loop {
        if *stop.borrow() || tx.is_closed() {
            return;
        }
        match tail(&path, format, resume.take(), from_start, &tx, &beat, &stop) {
            Ok(Next::Stop) => return,
            Ok(Next::Reopen) => from_start = true,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "log file not readable yet; retrying");
                from_start = true;
                for _ in 0..4 {
                    std::thread::sleep(IDLE_POLL);
                    beat.beat();
                }
            }
        }
    }
}

enum Next {
    Stop,
    Reopen,
}

fn tail(
    path: &Path,
    format: LineFormat,
    checkpoint: Option<Position>,
    from_start: bool,
    tx: &mpsc::Sender<SourceEvent>,
    beat: &Beater,
    stop: &watch::Receiver<bool>,
) -> std::io::Result<Next> {
    let mut f = File::open(path)?;
    let meta = f.metadata()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let mut offset = match checkpoint {
        Some(Position::File {
            dev: d,
            ino: i,
            offset,
        }) if d == dev && i == ino && offset <= meta.len() => offset,
        _ if from_start => 0,
        _ => meta.len(),
    };
    f.seek(SeekFrom::Start(offset))?;
    let mut reader = BufReader::new(f);
    let mut buf = Vec::new();
    loop {
        if *stop.borrow() || tx.is_closed() {
            return Ok(Next::Stop);
        }
        beat.beat();
        buf.clear();
        let n = reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)?;
        if n > 0 && buf.last() == Some(&b'\n') {
            offset += n as u64;
            let line = String::from_utf8_lossy(&buf[..n - 1]);
            let text = match format {
                LineFormat::Syslog => syslog::message(&line),
                LineFormat::Plain => &line,
            };
            let ev = SourceEvent::Line {
                text: text.trim_end_matches('\r').to_string(),
                at: Timestamp::now(),
                position: Position::File { dev, ino, offset },
            };
            if tx.blocking_send(ev).is_err() {
                return Ok(Next::Stop);
            }
            continue;
        }
        if n >= MAX_LINE {
            // An over-long line: skip to its end.
            offset += n as u64;
            let mut rest = Vec::new();
            offset += reader.read_until(b'\n', &mut rest)? as u64;
            let _ = tx.blocking_send(SourceEvent::Malformed {
                why: format!("line longer than {MAX_LINE} bytes cut"),
            });
            continue;
        }
        // A partial line (writer mid-line) or the end: go back to its start and wait.
        if n > 0 {
            reader.seek(SeekFrom::Start(offset))?;
        }
        match std::fs::metadata(path) {
            Ok(m) if m.dev() != dev || m.ino() != ino => {
                // Rotated by rename: finish the old file first (done: we are at its end), then switch.
                return Ok(Next::Reopen);
            }
            Ok(m) if m.len() < offset => {
                tracing::info!(path = %path.display(), "log file truncated (copytruncate); reading from the start");
                offset = 0;
                reader.seek(SeekFrom::Start(0))?;
                continue;
            }
            _ => {}
        }
        std::thread::sleep(IDLE_POLL);
    }
}

/// Poll interval used by the tests to bound their waits.
pub const POLL: Duration = IDLE_POLL;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
