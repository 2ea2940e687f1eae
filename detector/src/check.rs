//! `detector check`: the offline mode. The file is read once as a non-following source
//! (`source::once`) into the same events the daemon's inputs send, and fed through the same monitor
//! state (`MonitorState::apply`), with no cluster; every reported problem is handed to a sink (printed
//! by `main`). Pure but for the reading.

use std::io::BufRead;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::config::RuleSet;
use crate::problem::{MonitorState, Report};
use crate::source::SourceEvent;
pub use crate::source::once::InputFormat;
use crate::source::once::Once;

/// One reported problem.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// "event" or "condition".
    pub(crate) kind: &'static str,
    pub(crate) monitor: String,
    pub(crate) source: String,
    pub(crate) reason: String,
    pub(crate) message: String,
    /// 1-based line of the input where it was detected.
    pub(crate) line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<&'static str>,
    /// When: the record's own time (kmsg, journal), else the run's `now` (`--now`).
    #[serde(serialize_with = "rfc3339")]
    pub(crate) time: Timestamp,
}

fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&nodemedic_common::time::rfc3339(*t))
}

/// What was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub lines: u64,
    pub(crate) bytes: u64,
    /// Lines read as lines of the input's format.
    pub(crate) parsed: u64,
    pub(crate) malformed: u64,
    pub(crate) findings: u64,
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
pub(crate) const PROGRESS_EVERY: u64 = 1 << 16;

/// [`check`] as of `now` (the time of undated lines: a fixed `now` makes the output reproducible),
/// calling `progress` with the running totals every [`PROGRESS_EVERY`] lines.
pub fn check_with_progress(
    rules: &RuleSet,
    reader: impl BufRead,
    format: InputFormat,
    now: Timestamp,
    sink: &mut dyn FnMut(Finding),
    progress: &mut dyn FnMut(&Stats),
) -> std::io::Result<Stats> {
    let start = |m: &crate::config::Monitor| MonitorState::new(Arc::new(m.clone()), &[], now);
    let mut monitors: Vec<MonitorState> = rules
        .monitors
        .iter()
        .filter(|m| format.feeds(&m.input))
        .map(start)
        .collect();
    if monitors.is_empty() {
        monitors = rules.monitors.iter().map(start).collect();
    }
    let mut stats = Stats::default();
    let mut reports = Vec::new();
    let mut input = Once::new(reader, format, now);
    while let Some(record) = input.next_record()? {
        (stats.lines, stats.bytes) = (record.read, record.offset);
        if stats.lines % PROGRESS_EVERY == 0 {
            progress(&stats);
        }
        let at = match record.event {
            SourceEvent::Line { at, .. } => {
                stats.parsed += 1;
                *at
            }
            SourceEvent::Sample(sample) => {
                stats.parsed += 1;
                sample.at
            }
            other => {
                stats.malformed += 1;
                tracing::debug!(line = record.line, event = ?other, "skipped");
                continue;
            }
        };
        for state in monitors.iter_mut() {
            if !record.origin.reaches(&state.monitor().input) {
                continue;
            }
            // Offline, the clock is the input's: quiet periods end at the next record's time.
            state.tick(at, &mut reports);
            state.apply(record.event, &mut reports);
            for r in reports.drain(..) {
                stats.findings += 1;
                sink(finding(state, r, record.line, at));
            }
        }
    }
    (stats.lines, stats.bytes) = input.read();
    Ok(stats)
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
                ("condition", "FilesystemIsReadOnly", 6, Some("True")),
            ]
        );
        assert_eq!(f[2].condition.as_deref(), Some("ReadonlyFilesystem"));
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
        // The third claims to be containerd but journald saw `logger` write it (`logger -t`).
        let input = r#"{"SYSLOG_IDENTIFIER":"systemd","_COMM":"systemd","_SYSTEMD_UNIT":"init.scope","_EXE":"/usr/lib/systemd/systemd","_UID":"0","MESSAGE":"Started Kubernetes kubelet."}
{"SYSLOG_IDENTIFIER":"bash","_COMM":"bash","MESSAGE":"Started Kubernetes kubelet."}
not json
{"SYSLOG_IDENTIFIER":"containerd","_COMM":"logger","MESSAGE":"RunPodSandbox for &PodSandboxMetadata{Name:y} failed, error=\"no IP\""}
{"SYSLOG_IDENTIFIER":"containerd","_COMM":"containerd","_EXE":"/usr/bin/containerd","_UID":"0","MESSAGE":"RunPodSandbox for &PodSandboxMetadata{Name:x} failed, error=\"no IP\""}
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
                    5,
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
    fn the_input_format_is_told_from_its_first_line() {
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
