//! `detector check`: the offline mode. The same parse -> match -> problem-state code the daemon runs,
//! over a file, with no cluster; every reported problem is handed to a sink (printed by `main`).

use std::io::BufRead;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::config::{Input, RuleSet};
use crate::parse::{self, journal, kmsg, syslog};
use crate::problem::{MonitorState, Report};

/// How the input file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// /dev/kmsg records (`PRI,SEQ,TS,FLAGS;MESSAGE`).
    Kmsg,
    /// syslog lines; the `Mmm dd hh:mm:ss host tag:` prefix is stripped.
    Syslog,
    /// Each line is a message.
    Plain,
    /// `journalctl -o json` output.
    JournalJson,
}

impl InputFormat {
    /// Guess from the first non-empty line.
    pub fn detect(first_line: &str) -> InputFormat {
        let l = first_line.trim_start();
        if l.starts_with('{') {
            InputFormat::JournalJson
        } else if kmsg::parse(l.as_bytes()).is_ok() {
            InputFormat::Kmsg
        } else if syslog::message(l) != l {
            InputFormat::Syslog
        } else {
            InputFormat::Plain
        }
    }
}

/// One reported problem.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// "event" or "condition".
    pub kind: &'static str,
    pub monitor: String,
    pub source: String,
    pub reason: String,
    pub message: String,
    /// 1-based line of the input where it was detected.
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// When: the record's own time (kmsg, journal), else the run's `now` (`--now`).
    #[serde(serialize_with = "rfc3339")]
    pub time: Timestamp,
}

fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&nodemedic_common::time::rfc3339(*t))
}

/// What was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub lines: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub findings: u64,
}

/// Which monitors see a given input format: kmsg records go to kmsg monitors and journal entries to
/// journal monitors (when the rules have any); plain and syslog files go to every monitor.
fn applies(input: &Input, format: InputFormat) -> bool {
    match format {
        InputFormat::Kmsg => matches!(input, Input::Kmsg),
        InputFormat::JournalJson => matches!(input, Input::Journal { .. }),
        InputFormat::Syslog | InputFormat::Plain => !matches!(input, Input::Exec(_)),
    }
}

/// Run the rules over `reader`. `sink` receives findings in input order.
pub fn check(
    rules: &RuleSet,
    reader: impl BufRead,
    format: InputFormat,
    sink: &mut dyn FnMut(Finding),
) -> std::io::Result<Stats> {
    check_with_progress(rules, reader, format, Timestamp::now(), sink, &mut |_| {})
}

/// Lines between two progress reports.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// [`check`] as of `now` (the time of undated lines: a fixed `now` makes the output reproducible),
/// calling `progress` with the running totals every [`PROGRESS_EVERY`] lines.
pub fn check_with_progress(
    rules: &RuleSet,
    mut reader: impl BufRead,
    format: InputFormat,
    now: Timestamp,
    sink: &mut dyn FnMut(Finding),
    progress: &mut dyn FnMut(&Stats),
) -> std::io::Result<Stats> {
    let mut selected: Vec<MonitorState> = rules
        .monitors
        .iter()
        .filter(|m| applies(&m.input, format))
        .map(|m| MonitorState::new(Arc::new(m.clone()), &[], now))
        .collect();
    if selected.is_empty() {
        selected = rules
            .monitors
            .iter()
            .map(|m| MonitorState::new(Arc::new(m.clone()), &[], now))
            .collect();
    }
    let mut stats = Stats::default();
    let mut reports = Vec::new();
    let mut feed = |text: &str, line_no: usize, at: Timestamp, from: From, stats: &mut Stats| {
        for state in selected.iter_mut() {
            if let Input::Journal {
                identifiers, units, ..
            } = &state.monitor().input
            {
                let accepted = match from {
                    From::Journal(entry) => journal::accepts(entry, identifiers, units),
                    From::Syslog(tag) => syslog_accepts(tag, identifiers, units),
                    From::Other => true,
                };
                if !accepted {
                    continue;
                }
            }
            reports.clear();
            state.tick(at, &mut reports);
            state.process(text, at, &mut reports);
            for r in reports.drain(..) {
                stats.findings += 1;
                sink(finding(state, r, line_no, at));
            }
        }
    };

    if format == InputFormat::Kmsg {
        let mut records = kmsg::RecordReader::new(reader);
        while let Some((line_no, rec)) = records.next_record()? {
            stats.lines += 1;
            if stats.lines % PROGRESS_EVERY == 0 {
                progress(&stats);
            }
            stats.bytes += rec.len() as u64 + 1;
            match kmsg::parse(rec) {
                Ok(r) => {
                    let at = nodemedic_common::time::add(
                        Timestamp::UNIX_EPOCH,
                        std::time::Duration::from_micros(r.monotonic_us),
                    );
                    feed(&r.message, line_no, at, From::Other, &mut stats);
                }
                Err(e) => {
                    stats.malformed += 1;
                    tracing::debug!(line = line_no, error = %e, "skipped");
                }
            }
        }
        return Ok(stats);
    }

    let mut buf = String::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = read_line_lossy(&mut reader, &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        stats.lines += 1;
        if stats.lines % PROGRESS_EVERY == 0 {
            progress(&stats);
        }
        stats.bytes += n as u64;
        let line = buf.trim_end_matches(['\n', '\r']);
        match format {
            InputFormat::JournalJson => {
                if line.trim().is_empty() {
                    continue;
                }
                match journal::parse(line) {
                    Ok(entry) => {
                        let at = entry
                            .line
                            .realtime_us
                            .and_then(|us| Timestamp::from_microsecond(us).ok())
                            .unwrap_or(now);
                        feed(
                            &entry.line.text,
                            line_no,
                            at,
                            From::Journal(&entry),
                            &mut stats,
                        );
                    }
                    Err(e) => {
                        stats.malformed += 1;
                        tracing::debug!(line = line_no, error = %e, "skipped");
                    }
                }
            }
            InputFormat::Syslog => match syslog::split(line) {
                Some((tag, message)) => feed(message, line_no, now, From::Syslog(tag), &mut stats),
                None => feed(line, line_no, now, From::Other, &mut stats),
            },
            _ => feed(line, line_no, now, From::Other, &mut stats),
        }
    }
    Ok(stats)
}

/// Where a line came from, for journal monitors' identifiers.
#[derive(Clone, Copy)]
enum From<'a> {
    Journal(&'a journal::Entry),
    /// A syslog line with this tag.
    Syslog(&'a str),
    Other,
}

/// Whether a journal monitor reads a syslog line tagged `tag`: the tag is one of its identifiers, or
/// names one of its units (`kubelet` for `kubelet.service`); a monitor with neither reads every line.
fn syslog_accepts(tag: &str, identifiers: &[String], units: &[String]) -> bool {
    (identifiers.is_empty() && units.is_empty())
        || identifiers.iter().any(|i| i == tag)
        || units
            .iter()
            .any(|u| u.strip_suffix(".service").unwrap_or(u) == tag)
}

/// Read one line; invalid UTF-8 is replaced instead of failing the run.
fn read_line_lossy(reader: &mut impl BufRead, buf: &mut String) -> std::io::Result<usize> {
    let mut bytes = Vec::new();
    let n = reader.read_until(b'\n', &mut bytes)?;
    match String::from_utf8(bytes) {
        Ok(s) => buf.push_str(&s),
        Err(e) => buf.push_str(&String::from_utf8_lossy(e.as_bytes())),
    }
    Ok(n)
}

fn finding(state: &MonitorState, report: Report, line: usize, time: Timestamp) -> Finding {
    let m = state.monitor();
    match report {
        Report::Problem {
            reason, message, ..
        } => Finding {
            kind: "event",
            monitor: m.name.clone(),
            source: m.source.clone(),
            reason,
            message,
            line,
            condition: None,
            status: None,
            time,
        },
        Report::Condition { condition, .. } => Finding {
            kind: "condition",
            monitor: m.name.clone(),
            source: m.source.clone(),
            reason: condition.reason,
            message: condition.message,
            line,
            condition: Some(condition.type_),
            status: Some(condition.status.as_str()),
            time,
        },
    }
}

/// Lines of a file as [`parse::Line`]s are not needed here; re-exported for the benchmark's generator.
pub use parse::Line;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bundled_defaults;

    fn run(input: &str, format: InputFormat) -> (Vec<Finding>, Stats) {
        let mut out = Vec::new();
        let stats = check(&bundled_defaults(), input.as_bytes(), format, &mut |f| {
            out.push(f)
        })
        .unwrap();
        (out, stats)
    }

    #[test]
    fn kmsg_sample_reports_events_and_conditions_with_line_numbers() {
        let input = "6,1,100,-;Linux version 6.1.0\n\
                     3,2,200,-;Out of memory: Killed process 4242 (stress) total-vm:123kB, anon-rss:100kB, file-rss:0kB, shmem-rss:0kB, UID:0\n \
                     SUBSYSTEM=memory\n\
                     garbage line\n\
                     3,3,300,-;INFO: task docker:1234 blocked for more than 120 seconds.\n\
                     3,4,400,-;EXT4-fs (sda1): Remounting filesystem read-only\n";
        let (f, stats) = run(input, InputFormat::Kmsg);
        assert_eq!(stats.malformed, 1);
        assert_eq!(stats.lines, 5);
        let summary: Vec<(&str, &str, usize, Option<&str>)> = f
            .iter()
            .map(|f| (f.kind, f.reason.as_str(), f.line, f.status))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("event", "OOMKilling", 2, None),
                ("event", "TaskHung", 5, None),
                ("condition", "DockerHung", 5, Some("True")),
                ("condition", "FilesystemIsReadOnly", 6, Some("True")),
            ]
        );
        assert_eq!(f[2].condition.as_deref(), Some("KernelDeadlock"));
        assert_eq!(f[3].condition.as_deref(), Some("ReadonlyFilesystem"));
    }

    #[test]
    fn old_and_new_oom_lines_both_match() {
        let input = "6,1,1,-;Killed process 1 (a) total-vm:1kB, anon-rss:1kB, file-rss:0kB\n\
                     6,2,2,-;Out of memory: Killed process 2 (b) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n\
                     6,3,3,-;Memory cgroup out of memory: Killed process 3 (c) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n";
        let (f, _) = run(input, InputFormat::Kmsg);
        assert_eq!(
            f.iter().filter(|f| f.reason == "OOMKilling").count(),
            3,
            "{f:?}"
        );
    }

    #[test]
    fn journal_json_goes_through_the_identifier_filter() {
        let input = r#"{"SYSLOG_IDENTIFIER":"systemd","MESSAGE":"Started Kubernetes kubelet."}
{"SYSLOG_IDENTIFIER":"bash","MESSAGE":"Started Kubernetes kubelet."}
not json
{"SYSLOG_IDENTIFIER":"containerd","MESSAGE":"RunPodSandbox for &PodSandboxMetadata{Name:x} failed, error=\"no IP\""}
"#;
        let (f, stats) = run(input, InputFormat::JournalJson);
        assert_eq!(stats.malformed, 1);
        let got: Vec<(&str, usize, &str)> = f
            .iter()
            .map(|f| (f.reason.as_str(), f.line, f.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("KubeletStart", 1, "Started Kubernetes kubelet."),
                (
                    "ContainerdSandboxCreateFailure",
                    4,
                    "containerd failed to create a pod sandbox: no IP"
                ),
            ]
        );
    }

    #[test]
    fn syslog_lines_reach_journal_monitors_by_their_tag_and_lose_the_uptime_stamp() {
        // The same text under two tags: only the systemd monitor's identifier gets it.
        let input = "Nov 22 03:27:01 node-1 systemd[1]: Started Kubernetes kubelet.\n\
                     Nov 22 03:27:02 node-1 bash[77]: Started Kubernetes kubelet.\n\
                     Nov 22 03:27:03 node-1 kernel: [ 4242.000017] Out of memory: Killed process 42 (java) total-vm:10kB, anon-rss:5kB, file-rss:0kB\n";
        let (f, _) = run(input, InputFormat::Syslog);
        let got: Vec<(&str, usize)> = f.iter().map(|f| (f.reason.as_str(), f.line)).collect();
        assert!(got.contains(&("KubeletStart", 1)), "{got:?}");
        assert!(!got.contains(&("KubeletStart", 2)), "{got:?}");
        let oom = f
            .iter()
            .find(|f| f.reason == "OOMKilling")
            .expect("OOM found");
        assert!(
            !oom.message.contains("4242.000017"),
            "the uptime stamp is not part of the message: {}",
            oom.message
        );
    }

    #[test]
    fn progress_is_reported_while_reading() {
        let input: String = (0..PROGRESS_EVERY * 2 + 5)
            .map(|i| format!("6,{i},1,-;line {i}\n"))
            .collect();
        let mut reports = Vec::new();
        check_with_progress(
            &bundled_defaults(),
            input.as_bytes(),
            InputFormat::Kmsg,
            Timestamp::now(),
            &mut |_| {},
            &mut |s| reports.push(s.lines),
        )
        .unwrap();
        assert_eq!(reports, vec![PROGRESS_EVERY, PROGRESS_EVERY * 2]);
    }

    #[test]
    fn format_detection() {
        assert_eq!(InputFormat::detect("6,1,2,-;x"), InputFormat::Kmsg);
        assert_eq!(
            InputFormat::detect("{\"MESSAGE\":\"x\"}"),
            InputFormat::JournalJson
        );
        assert_eq!(
            InputFormat::detect("Nov 22 03:27:01 n kernel: x"),
            InputFormat::Syslog
        );
        assert_eq!(InputFormat::detect("just words"), InputFormat::Plain);
    }
}
