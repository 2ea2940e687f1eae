//! Events about a Node, written as core/v1 Events.
//!
//! Why core/v1 and not `kube::runtime::events::Recorder` (events.k8s.io): `kubectl describe node` shows a
//! core/v1 Event's `source.component` in its "From" column and its `count` in "Age (xN over ...)", which is
//! what NPD and draino users read today. The Recorder keys repeats without the message and adds one to the
//! series per publish, so an aggregated count of N occurrences cannot be expressed. Aggregation and rate
//! limiting are decided by the caller (a pure core); this module only writes what it is told.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Warning or Normal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Severity {
    Normal,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
        }
    }
}

/// What to write: an occurrence (count 1) or an aggregate of `count` occurrences.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeEvent {
    /// Event source component, e.g. `kernel-monitor`; shown as "From".
    pub source: String,
    pub severity: Severity,
    pub reason: String,
    pub message: String,
    pub count: i32,
    pub first_seen: Timestamp,
    pub last_seen: Timestamp,
}

/// The longest Event or condition message written, in bytes (the events.k8s.io limit for a note,
/// and what NPD users' tooling expects).
pub const MAX_MESSAGE: usize = 1024;

/// Whether `c` must not reach an Event, a condition or a terminal as it is: control characters
/// (a log line's ANSI escapes or carriage returns would rewrite what `kubectl describe` or a
/// terminal shows) and the bidirectional overrides that reorder text on screen.
fn unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` as it may be shown: line breaks and tabs as spaces, other control characters and
/// bidirectional overrides removed. Borrowed when there is nothing to change.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(unprintable) {
        return std::borrow::Cow::Borrowed(s);
    }
    s.chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if unprintable(c) => None,
            c => Some(c),
        })
        .collect::<String>()
        .into()
}

/// Text for a terminal: [`printable`] line by line, our own line breaks kept.
pub fn printable_lines(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && unprintable(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let lines: Vec<std::borrow::Cow<'_, str>> = s.split('\n').map(printable).collect();
    lines.join("\n").into()
}

/// A writer for what a command prints for people: control characters and bidirectional overrides
/// that came from the cluster (a condition message, a node's annotation) are dropped on the way
/// out, so they cannot rewrite the terminal; line breaks stay.
pub struct PrintableWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for PrintableWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // `write!` hands over whole `str` pieces, so a piece is valid UTF-8; anything else loses
        // its C0 controls and DEL byte by byte.
        match std::str::from_utf8(buf) {
            Ok(s) => self.0.write_all(printable_lines(s).as_bytes())?,
            Err(_) => {
                let kept: Vec<u8> = buf
                    .iter()
                    .copied()
                    .filter(|&b| b == b'\n' || !(b < 0x20 || b == 0x7f))
                    .collect();
                self.0.write_all(&kept)?
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `s` as written to the API: [`printable_lines`] (a multi-line kernel message keeps its lines, as
/// NPD wrote them), and capped at [`MAX_MESSAGE`] bytes (cut at a character boundary, ending with
/// `...`).
pub fn cap(s: String) -> String {
    let mut s = match printable_lines(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(clean) => clean,
    };
    if s.len() <= MAX_MESSAGE {
        return s;
    }
    let mut end = MAX_MESSAGE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str("...");
    s
}

/// `<object>.<hex nanoseconds>`, as client-go names Events, with the nanoseconds made unique within
/// the process: two Events that start at the same instant (two conditions changing in one report)
/// got the same name, and the second was refused with 409 AlreadyExists.
pub fn event_name(object: &str, first_seen: Timestamp) -> String {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let wanted = i64::try_from(first_seen.as_nanosecond()).unwrap_or(i64::MAX);
    let mut last = LAST.load(Ordering::Relaxed);
    let unique = loop {
        let next = wanted.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    format!("{object}.{unique:x}")
}

/// Writes Events about one Node (namespace `default`, as the kubelet and NPD do).
#[derive(Clone)]
pub struct NodeEvents {
    api: Api<Event>,
    node: String,
}

impl NodeEvents {
    pub fn new(client: kube::Client, node: &str) -> Self {
        Self {
            api: Api::namespaced(client, "default"),
            node: node.to_string(),
        }
    }

    /// Create the Event named `name`, or update it if it exists already (a create repeated after a
    /// crash: counts are absolute, so the repeat is harmless).
    pub async fn create_or_update(&self, name: &str, ev: &NodeEvent) -> Result<(), kube::Error> {
        match self.create_named(name, ev).await {
            Err(kube::Error::Api(s)) if s.code == 409 => self.update(name, ev).await,
            r => r,
        }
    }

    /// Create a new Event and return its name (to update it later with [`NodeEvents::update`]).
    pub async fn create(&self, ev: &NodeEvent) -> Result<String, kube::Error> {
        let name = event_name(&self.node, ev.first_seen);
        self.create_named(&name, ev).await?;
        Ok(name)
    }

    async fn create_named(&self, name: &str, ev: &NodeEvent) -> Result<(), kube::Error> {
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: self.node_reference(),
            reason: Some(ev.reason.clone()),
            message: Some(cap(ev.message.clone())),
            type_: Some(ev.severity.as_str().into()),
            source: Some(EventSource {
                component: Some(ev.source.clone()),
                host: Some(self.node.clone()),
            }),
            count: Some(ev.count),
            first_timestamp: Some(Time(ev.first_seen)),
            last_timestamp: Some(Time(ev.last_seen)),
            reporting_component: Some(ev.source.clone()),
            reporting_instance: Some(self.node.clone()),
            ..Default::default()
        };
        self.api.create(&PostParams::default(), &event).await?;
        Ok(())
    }

    /// Update an existing Event's count, last timestamp and message (a strategic-merge patch, like
    /// client-go's event correlator).
    pub async fn update(&self, name: &str, ev: &NodeEvent) -> Result<(), kube::Error> {
        let patch = json!({
            "count": ev.count,
            "message": cap(ev.message.clone()),
            "lastTimestamp": Time(ev.last_seen),
        });
        self.api
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        Ok(())
    }

    /// kubectl describe node looks events up with `involvedObject.uid` = the node's *name* (the kubelet's
    /// convention), so that is what we write.
    fn node_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node.clone()),
            uid: Some(self.node.clone()),
            ..Default::default()
        }
    }
}

/// Create a core/v1 Event about any object (e.g. a Pod) in `namespace`.
pub async fn create_for(
    client: kube::Client,
    namespace: &str,
    regarding: ObjectReference,
    host: &str,
    ev: &NodeEvent,
) -> Result<String, kube::Error> {
    let api: Api<Event> = Api::namespaced(client, namespace);
    let name = event_name(regarding.name.as_deref().unwrap_or("object"), ev.first_seen);
    let event = Event {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        involved_object: regarding,
        reason: Some(ev.reason.clone()),
        message: Some(cap(ev.message.clone())),
        type_: Some(ev.severity.as_str().into()),
        source: Some(EventSource {
            component: Some(ev.source.clone()),
            host: Some(host.into()),
        }),
        count: Some(ev.count),
        first_timestamp: Some(Time(ev.first_seen)),
        last_timestamp: Some(Time(ev.last_seen)),
        reporting_component: Some(ev.source.clone()),
        reporting_instance: Some(host.into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &event).await?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(1000);
        let c = cap(long);
        assert!(c.len() <= MAX_MESSAGE && c.ends_with("..."), "{}", c.len());
        assert_eq!(cap("short".into()), "short");
        // What a log line can carry that would rewrite a terminal or `kubectl describe`.
        assert_eq!(
            cap("oom\u{1b}[2J\u{1b}[31mkilled\r\nfake line\u{7}\u{202e}txt".into()),
            "oom[2J[31mkilled \nfake linetxt"
        );
        assert!(matches!(
            printable("plain é"),
            std::borrow::Cow::Borrowed(_)
        ));
        let mut out = PrintableWriter(Vec::new());
        use std::io::Write;
        let (name, message) = ("n\u{1b}]0;pwned\u{7}", "ok\ttab");
        write!(out, "Node {name}\n  {message}\n").unwrap();
        assert_eq!(
            String::from_utf8(out.0).unwrap(),
            "Node n]0;pwned\n  ok tab\n"
        );
    }

    #[test]
    fn two_events_at_the_same_instant_get_different_names() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let a = event_name("node-1", t);
        let b = event_name("node-1", t);
        assert_ne!(a, b);
        assert!(a.starts_with("node-1.") && b.starts_with("node-1."));
    }
}
