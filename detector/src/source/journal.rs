//! The systemd journal, read through `journalctl --follow --all --output=json` (the Vector project's
//! approach): no libsystemd at build time, and journalctl understands every journal file version. The
//! cursor of each entry is its position; a restart resumes with `--after-cursor`. The child is killed
//! when the source stops and restarted with backoff when it exits; its stderr becomes warnings.
//! I/O (a journalctl child).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::event::{IDLE_POLL, SourceEvent};
use crate::checkpoint::Position;
use crate::parse::journal;

/// The longest journal entry read, as a JSON line: its message and the fields journalctl adds. Longer
/// entries are skipped and counted as malformed (journald's own `LineMax` is 48 KiB for stdout streams).
pub(crate) const MAX_ENTRY: usize = 256 * 1024;

/// What [`read_line_capped`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Capped {
    /// A complete line is in the buffer (without its newline).
    Line,
    /// A line longer than the limit was skipped to its end; the buffer is empty.
    TooLong,
    /// The end of the stream.
    End,
}

/// Read one line, keeping at most `limit` bytes of it in memory whatever its length.
pub(crate) async fn read_line_capped<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Capped> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            // A last line without a newline still counts.
            return Ok(if too_long {
                Capped::TooLong
            } else if buf.is_empty() {
                Capped::End
            } else {
                Capped::Line
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > limit {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long {
                Capped::TooLong
            } else {
                Capped::Line
            });
        }
    }
}

/// What to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSpec {
    pub journalctl: PathBuf,
    pub directory: Option<PathBuf>,
    pub identifiers: Vec<String>,
    pub how: crate::parse::journal::IdentifierMatch,
    pub units: Vec<String>,
    pub lookback: Duration,
}

/// The journalctl arguments: a pure function, tested below.
pub(crate) fn args(spec: &JournalSpec, cursor: Option<&str>) -> Vec<String> {
    let mut a = vec![
        "--follow".to_string(),
        "--all".into(),
        "--output=json".into(),
        "--no-pager".into(),
    ];
    if let Some(d) = &spec.directory {
        a.push(format!("--directory={}", d.display()));
    }
    match cursor {
        Some(c) => a.push(format!("--after-cursor={c}")),
        None => a.push(format!("--since=-{}s", spec.lookback.as_secs().max(1))),
    }
    // Matches on the same field are OR-ed; `+` ORs the groups of different fields.
    for id in &spec.identifiers {
        a.push(format!("SYSLOG_IDENTIFIER={id}"));
    }
    if !spec.identifiers.is_empty() && !spec.units.is_empty() {
        a.push("+".into());
    }
    for u in &spec.units {
        a.push(format!("_SYSTEMD_UNIT={u}"));
    }
    a
}

/// Follow the journal until `stop`. `checkpoint` is this monitor's last cursor, if any.
pub async fn follow(
    spec: JournalSpec,
    checkpoint: Option<Position>,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    mut stop: watch::Receiver<bool>,
) {
    let mut cursor = match checkpoint {
        Some(Position::Journal { cursor }) => Some(cursor),
        _ => None,
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        let argv = args(&spec, cursor.as_deref());
        tracing::debug!(args = ?argv, "starting journalctl");
        let child = tokio::process::Command::new(&spec.journalctl)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(journalctl = %spec.journalctl.display(), error = %e, "cannot start journalctl");
                if wait_or_stop(&mut stop, &beat, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        let mut lines = BufReader::new(child.stdout.take().expect("piped"));
        let mut buf = Vec::new();
        let stderr = child.stderr.take().expect("piped");
        tokio::spawn(async move {
            let mut err = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                match read_line_capped(&mut err, &mut line, 4096).await {
                    Ok(Capped::Line) => {
                        tracing::warn!(journalctl = %String::from_utf8_lossy(&line), "journalctl")
                    }
                    Ok(Capped::TooLong) => tracing::warn!("journalctl wrote an over-long line"),
                    Ok(Capped::End) | Err(_) => break,
                }
            }
        });
        let mut tick = tokio::time::interval(IDLE_POLL);
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tick.tick() => { beat.beat(); if tx.is_closed() { return; } }
                line = read_line_capped(&mut lines, &mut buf, MAX_ENTRY) => match line {
                    Ok(Capped::TooLong) => {
                        beat.beat();
                        let why = format!("journal entry longer than {MAX_ENTRY} bytes skipped");
                        if tx.send(SourceEvent::Malformed { why }).await.is_err() {
                            return;
                        }
                    }
                    Ok(Capped::Line) => {
                        beat.beat();
                        backoff = Duration::from_secs(1);
                        let l = String::from_utf8_lossy(&buf);
                        let ev = match journal::parse(&l) {
                            Err(e) => SourceEvent::Malformed { why: e.to_string() },
                            Ok(entry) => {
                                let Some(c) = entry.cursor.clone() else {
                                    continue;
                                };
                                cursor = Some(c.clone());
                                if !journal::accepts(&entry, &spec.identifiers, &spec.units, spec.how) {
                                    continue;
                                }
                                let at = entry.line.realtime_us.and_then(|us| Timestamp::from_microsecond(us).ok()).unwrap_or_else(Timestamp::now);
                                SourceEvent::Line { text: entry.line.text, at, position: Position::Journal { cursor: c }, user: false }
                            }
                        };
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                    Ok(Capped::End) | Err(_) => break,
                }
            }
        }
        let status = exit_words(child.wait().await);
        let again = format!("{}s", backoff.as_secs());
        tracing::warn!(%status, restarting_in = %again, "journalctl exited; restarting");
        if wait_or_stop(&mut stop, &beat, backoff).await {
            return;
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

/// "exit status: 1", "signal: 9 (SIGKILL)": how a child ended, in words (not a Debug dump).
fn exit_words(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => s.to_string(),
        Err(e) => format!("not known ({e})"),
    }
}

async fn wait_or_stop(stop: &mut watch::Receiver<bool>, beat: &Beater, d: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + d;
    loop {
        beat.beat();
        tokio::select! {
            _ = stop.changed() => return true,
            _ = tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + IDLE_POLL)) => {
                if tokio::time::Instant::now() >= deadline { return false; }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_with_bounded_memory() {
        let long = "x".repeat(10_000);
        let input = format!("short\n{long}\nafter\n{long}");
        // A reader that hands out small chunks, as a pipe does.
        let mut r = BufReader::with_capacity(7, input.as_bytes());
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            match read_line_capped(&mut r, &mut buf, 100).await.unwrap() {
                Capped::End => break,
                Capped::TooLong => {
                    assert!(buf.capacity() <= 200, "{}", buf.capacity());
                    got.push("<too long>".to_string())
                }
                Capped::Line => got.push(String::from_utf8_lossy(&buf).into_owned()),
            }
        }
        assert_eq!(got, ["short", "<too long>", "after", "<too long>"]);
    }

    fn spec() -> JournalSpec {
        JournalSpec {
            journalctl: "journalctl".into(),
            directory: Some("/var/log/journal".into()),
            identifiers: vec!["dockerd".into(), "containerd".into()],
            how: crate::parse::journal::IdentifierMatch::Backed,
            units: vec!["kubelet.service".into()],
            lookback: Duration::from_secs(300),
        }
    }

    #[test]
    fn first_start_uses_the_lookback_and_filters() {
        assert_eq!(
            args(&spec(), None),
            [
                "--follow",
                "--all",
                "--output=json",
                "--no-pager",
                "--directory=/var/log/journal",
                "--since=-300s",
                "SYSLOG_IDENTIFIER=dockerd",
                "SYSLOG_IDENTIFIER=containerd",
                "+",
                "_SYSTEMD_UNIT=kubelet.service"
            ]
        );
    }

    #[test]
    fn restart_resumes_after_the_cursor() {
        let mut s = spec();
        s.units.clear();
        s.directory = None;
        let a = args(&s, Some("s=abc;i=1"));
        assert!(a.contains(&"--after-cursor=s=abc;i=1".to_string()));
        assert!(!a.iter().any(|x| x.starts_with("--since") || x == "+"));
    }
}
