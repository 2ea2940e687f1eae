//! The systemd journal, read through `journalctl --follow --all --output=json` (the Vector project's
//! approach): no libsystemd at build time, and journalctl understands every journal file version. The
//! cursor of each entry is its position; a restart resumes with `--after-cursor`. The child is killed
//! when the source stops and restarted with backoff when it exits; its stderr becomes warnings.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::{IDLE_POLL, SourceEvent};
use crate::checkpoint::Position;
use crate::parse::journal;

/// What to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSpec {
    pub journalctl: PathBuf,
    pub directory: Option<PathBuf>,
    pub identifiers: Vec<String>,
    pub units: Vec<String>,
    pub lookback: Duration,
}

/// The journalctl arguments: a pure function, tested below.
pub fn args(spec: &JournalSpec, cursor: Option<&str>) -> Vec<String> {
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
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let stderr = child.stderr.take().expect("piped");
        tokio::spawn(async move {
            let mut err = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = err.next_line().await {
                tracing::warn!(journalctl = %l, "journalctl");
            }
        });
        let mut tick = tokio::time::interval(IDLE_POLL);
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tick.tick() => { beat.beat(); if tx.is_closed() { return; } }
                line = lines.next_line() => match line {
                    Ok(Some(l)) => {
                        beat.beat();
                        backoff = Duration::from_secs(1);
                        let ev = match journal::parse(&l) {
                            Err(e) => SourceEvent::Malformed { why: e.to_string() },
                            Ok(entry) => {
                                let Some(c) = entry.cursor.clone() else {
                                    continue;
                                };
                                cursor = Some(c.clone());
                                if !journal::accepts(&entry, &spec.identifiers, &spec.units) {
                                    continue;
                                }
                                let at = entry.line.realtime_us.and_then(|us| Timestamp::from_microsecond(us).ok()).unwrap_or_else(Timestamp::now);
                                SourceEvent::Line { text: entry.line.text, at, position: Position::Journal { cursor: c } }
                            }
                        };
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let status = child.wait().await;
        tracing::warn!(?status, "journalctl exited; restarting");
        if wait_or_stop(&mut stop, &beat, backoff).await {
            return;
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
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

    fn spec() -> JournalSpec {
        JournalSpec {
            journalctl: "journalctl".into(),
            directory: Some("/var/log/journal".into()),
            identifiers: vec!["dockerd".into(), "containerd".into()],
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
