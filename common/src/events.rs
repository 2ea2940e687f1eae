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

/// `s` capped at [`MAX_MESSAGE`] bytes: cut at a character boundary, ending with `...`.
pub fn cap(mut s: String) -> String {
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
