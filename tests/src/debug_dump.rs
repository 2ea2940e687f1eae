//! Operators read what nodemedic logs and writes, not Rust (issue 42, point 7): a `Debug` dump in
//! an INFO line or an Event (`NotFound (Status { status: Some(Failure) ...`, a 1 KB
//! `DaemonSet { ... }`) is a bug. Every scenario checks its processes' log lines
//! (`process::Logged`), what the code it runs in its own process logs ([`watch_logs`]), and the
//! Events written to its test API server (`cluster::Cluster`, when it is dropped) with [`find`].

use std::sync::OnceLock;

use regex::Regex;

/// The first `Debug`-looking part of `text`: `Some(`, `None`, `Ok(`, `Err(`, or a struct written
/// as `Name { field: `.
pub fn find(text: &str) -> Option<&str> {
    static DUMP: OnceLock<Regex> = OnceLock::new();
    let re = DUMP.get_or_init(|| {
        Regex::new(r"\b(Some|Ok|Err)\(|\bNone\b|\b[A-Z][A-Za-z0-9]+ \{ [a-z_][a-z0-9_]*: ")
            .expect("a valid pattern")
    });
    re.find(text).map(|m| m.as_str())
}

/// INFO-and-above events of nodemedic's own code, in this process, that hold a dump.
static FOUND: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Watch what nodemedic's code logs in this process (once; a subscriber set before stays): each
/// event at INFO or above whose message or fields hold a `Debug` dump is kept for [`take_found`].
pub fn watch_logs() {
    use tracing_subscriber::layer::SubscriberExt;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Scan));
    });
}

/// What [`watch_logs`] found since it was last asked.
pub fn take_found() -> Vec<String> {
    std::mem::take(&mut *FOUND.lock().unwrap_or_else(|e| e.into_inner()))
}

struct Scan;

/// An event's message and fields as the text formatter writes them.
struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Scan {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        // More verbose levels compare greater: DEBUG and TRACE are not read by default.
        if *meta.level() > tracing::Level::INFO || !meta.target().starts_with("nodemedic") {
            return;
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        if let Some(d) = find(&fields.0) {
            let line = format!("`{d}` in {} {}:{}", meta.level(), meta.target(), fields.0);
            FOUND.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }
}

/// Whether a process's log line is one an operator reads by default: INFO and above, in the
/// text format (`... INFO target: message`) or JSON (`"level":"INFO"`).
pub fn read_by_default(line: &str) -> bool {
    [
        " INFO ",
        " WARN ",
        " ERROR ",
        "\"level\":\"INFO\"",
        "\"level\":\"WARN\"",
        "\"level\":\"ERROR\"",
    ]
    .iter()
    .any(|l| line.contains(l))
}

/// The lines among `lines` read by default that hold a `Debug` dump, each with what was found.
pub fn in_log<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|l| read_by_default(l))
        .filter_map(|l| find(l).map(|d| format!("`{d}` in: {l}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_are_found_and_prose_is_not() {
        for dump in [
            "NotFound (Status { status: Some(Failure), message: \"x\" })",
            "daemonset=DaemonSet { metadata: ObjectMeta { name: Some(\"d\") } }",
            "reason=None",
            "error=Err(Timeout)",
        ] {
            assert!(find(dump).is_some(), "{dump}");
        }
        for prose in [
            "breaker open: 3 of 5 nodes unhealthy > 30%",
            "none of the pods could be evicted",
            "selected 4 of 5 nodes (label selector pool=blue)",
            "Node condition KernelDeadlock is now: True, reason: DockerHung",
            "watching 2 condition(s) { KernelDeadlock, Ready }",
        ] {
            assert_eq!(find(prose), None, "{prose}");
        }
    }

    #[test]
    fn only_lines_read_by_default_count() {
        let lines = [
            "2026-11-27T01:00:00Z DEBUG drainer: state Some(1)",
            "2026-11-27T01:00:00Z  INFO drainer: cordoned node-a",
            "2026-11-27T01:00:00Z  WARN drainer: write failed: Err(Timeout)",
        ];
        let found = in_log(lines);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("Err("));
    }
}
