//! The kubelets' sandbox failures (Events with reason `FailedCreatePodSandBox`), by node: I/O, a
//! watch of those Events only, into a small store. They add words to a PodsNotStarting message
//! (how often the node's kubelet said it could not create a sandbox) and never set it: anyone who
//! may write Events can write one naming any node.
//!
//! So the store holds only what such a writer cannot grow: an Event counts only when the kubelet
//! reported it (`source.component` or `reportingController`) about a host that is a Node the
//! drainer knows, at most [`PER_NODE`] a node (each by a hash of its name, not the name) and
//! [`NODES`] nodes, each gone an hour after its last Event, and a node's entry goes with its last
//! Event. (150 Events of 512 KiB naming made-up hosts once grew the drainer from 14 to 92 MiB, for
//! good; an attacker's review then filled it with 20,000 made-up hosts' Events under kubelet's
//! name, 286 MiB, past the drainer's memory limit.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use nodemedic_common::throttle::Throttle;
use tokio::task::JoinHandle;

/// The kubelet's Event reason when it cannot create a pod's sandbox (a wedged runtime or CNI).
pub(crate) const REASON: &str = "FailedCreatePodSandBox";

/// Events kept per node at most (the newest; a node failing every sandbox repeats one Event with a
/// growing count, so a few suffice): some 8 x 48 bytes a node.
const PER_NODE: usize = 8;

/// How long an Event is kept after it was last seen.
const KEEP_SECS: i64 = 3600;

/// Nodes whose Events are kept at most (Kubernetes supports 5,000 to 65,000 nodes a cluster): past
/// it, the Event of the node least recently heard from goes.
const NODES: usize = 100_000;

/// The longest name a Node may have (a DNS subdomain).
const MAX_NAME: usize = 253;

/// One node's Events (a hash of namespace/name): how many failures each counts and when it was
/// last seen.
type NodeEvents = HashMap<u64, (u64, Timestamp)>;

/// The sandbox failure Events by node.
#[derive(Clone, Default)]
pub(crate) struct SandboxFailures {
    events: Arc<Mutex<HashMap<String, NodeEvents>>>,
    /// Keys the Events' names (per store, so no writer can aim a name at another's entry).
    keys: std::hash::RandomState,
    /// The watch started and its first list is not in yet (nor failed).
    pending: Arc<std::sync::atomic::AtomicBool>,
}

/// An Event's node (the kubelet's `source.host`, or its reporting instance), key, count and last
/// time.
fn read(e: &Event) -> Option<(&str, (&str, &str), u64, Timestamp)> {
    let source = e.source.as_ref();
    let kubelet = source.and_then(|s| s.component.as_deref()) == Some("kubelet")
        || e.reporting_component.as_deref() == Some("kubelet");
    let node = source
        .and_then(|s| s.host.as_deref())
        .or(e.reporting_instance.as_deref())
        .filter(|n| kubelet && could_be_node(n))?;
    let key = (
        e.metadata.namespace.as_deref().unwrap_or_default(),
        e.metadata.name.as_deref().unwrap_or_default(),
    );
    let series = e.series.as_ref();
    let count = series
        .and_then(|s| s.count)
        .or(e.count)
        .map_or(1, |c| c.max(1) as u64);
    let last = series
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or(e.last_timestamp.as_ref().map(|t| t.0))
        .or(e.event_time.as_ref().map(|t| t.0))?;
    Some((node, key, count, last))
}

/// Whether `name` could be a Node's: a DNS subdomain (lowercase letters, digits, `-` and `.`) of
/// at most [`MAX_NAME`] characters.
fn could_be_node(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

impl SandboxFailures {
    fn key(&self, (namespace, name): (&str, &str)) -> u64 {
        use std::hash::BuildHasher;
        self.keys.hash_one((namespace, name))
    }

    /// Keep `e` if it is the kubelet's about a Node the drainer knows (`known`).
    pub(crate) fn apply(&self, e: &Event, known: &dyn Fn(&str) -> bool) {
        let Some((node, key, count, last)) = read(e).filter(|(node, ..)| known(node)) else {
            return;
        };
        let key = self.key(key);
        let mut all = self.events.lock().unwrap();
        if !all.contains_key(node) && all.len() >= NODES {
            let quietest = all
                .iter()
                .min_by_key(|(_, ev)| ev.values().map(|(_, t)| *t).max())
                .map(|(n, _)| n.clone());
            if let Some(n) = quietest {
                all.remove(&n);
            }
        }
        let events = all.entry(node.to_string()).or_default();
        events.insert(key, (count, last));
        let oldest = last.as_second() - KEEP_SECS;
        events.retain(|_, (_, t)| t.as_second() >= oldest);
        while events.len() > PER_NODE {
            let Some(k) = events.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k) else {
                break;
            };
            events.remove(&k);
        }
    }

    pub(crate) fn delete(&self, e: &Event) {
        let Some((node, key, ..)) = read(e) else {
            return;
        };
        let key = self.key(key);
        let mut all = self.events.lock().unwrap();
        if let Some(events) = all.get_mut(node) {
            events.remove(&key);
            if events.is_empty() {
                all.remove(node);
            }
        }
    }

    /// How many nodes the store holds Events of.
    #[cfg(test)]
    fn nodes(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    /// Whether the first list of these Events is in (or failed): a message written before would
    /// lack their words, and is not rewritten while its reason stays.
    pub(crate) fn settled(&self) -> bool {
        !self.pending.load(std::sync::atomic::Ordering::Acquire)
    }

    fn settle(&self) {
        self.pending
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// The failures the Events seen on `node` since `since` count, and the last one's time.
    pub(crate) fn since(&self, node: &str, since: Timestamp) -> Option<(u64, Timestamp)> {
        let all = self.events.lock().unwrap();
        let recent = all.get(node)?.values().filter(|(_, t)| *t >= since);
        recent.fold(None, |acc, (n, t)| match acc {
            None => Some((*n, *t)),
            Some((m, u)) => Some((m + n, u.max(*t))),
        })
    }

    /// Watch the sandbox failure Events of every namespace into the store. A failing watch (an
    /// older install without the right to list Events) is logged at most once a minute; the
    /// drainer goes on without these words.
    pub(crate) fn spawn(
        &self,
        api: Api<Event>,
        known: impl Fn(&str) -> bool + Send + 'static,
    ) -> JoinHandle<()> {
        self.pending
            .store(true, std::sync::atomic::Ordering::Release);
        let store = self.clone();
        tokio::spawn(async move {
            let cfg = watcher::Config::default().fields(&format!("reason={REASON}"));
            let stream = watcher(api, cfg).default_backoff();
            futures::pin_mut!(stream);
            let mut failing = Throttle::default();
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => {
                        failing.reset();
                        store.apply(&e, &known);
                    }
                    Ok(watcher::Event::Delete(e)) => store.delete(&e),
                    Ok(watcher::Event::Init) => {}
                    Ok(watcher::Event::InitDone) => store.settle(),
                    Err(e) => {
                        store.settle();
                        super::watch_errors::watch_failed(
                            &mut failing,
                            "sandbox failure events",
                            &e,
                        )
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, node: &str, count: i32, last: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "app"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "app"},
            "reason": REASON, "count": count, "lastTimestamp": last,
            "source": {"component": "kubelet", "host": node}
        }))
        .unwrap()
    }

    #[test]
    fn failures_add_up_per_node_since_a_time_and_a_deleted_event_is_gone() {
        let s = SandboxFailures::default();
        s.apply(&event("a", "n1", 5, "2026-11-27T10:00:00Z"), &|_| true);
        s.apply(&event("b", "n1", 2, "2026-11-27T10:05:00Z"), &|_| true);
        s.apply(&event("c", "n2", 9, "2026-11-27T09:00:00Z"), &|_| true);
        // The same Event again with a higher count replaces it.
        s.apply(&event("a", "n1", 7, "2026-11-27T10:06:00Z"), &|_| true);
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(
            s.since("n1", t("2026-11-27T09:55:00Z")),
            Some((9, t("2026-11-27T10:06:00Z")))
        );
        assert_eq!(
            s.since("n1", t("2026-11-27T10:06:00Z")),
            Some((7, t("2026-11-27T10:06:00Z")))
        );
        assert_eq!(s.since("n2", t("2026-11-27T09:55:00Z")), None);
        assert_eq!(s.since("n3", t("2026-11-27T09:55:00Z")), None);
        s.delete(&event("a", "n1", 7, "2026-11-27T10:06:00Z"));
        assert_eq!(
            s.since("n1", t("2026-11-27T09:55:00Z")),
            Some((2, t("2026-11-27T10:05:00Z")))
        );
        s.delete(&event("b", "n1", 2, "2026-11-27T10:05:00Z"));
        s.delete(&event("c", "n2", 9, "2026-11-27T09:00:00Z"));
        assert_eq!(s.nodes(), 0, "a node's entry goes with its last Event");
    }

    /// Issue 64, point 7: anyone who may create Events may name any host, as long as they like,
    /// as any component. Only the kubelet's, about a host that could be a Node, are kept.
    #[test]
    fn events_a_writer_makes_up_cannot_grow_the_store() {
        let s = SandboxFailures::default();
        let huge = "n".repeat(512 * 1024);
        for (i, host) in [huge.as_str(), "Not_A_Node", ""].iter().enumerate() {
            s.apply(
                &event(&format!("e{i}"), host, 1, "2026-11-27T10:00:00Z"),
                &|_| true,
            );
        }
        let mut theirs = event("x", "n1", 1, "2026-11-27T10:00:00Z");
        theirs.source.as_mut().unwrap().component = Some("tenant-app".into());
        s.apply(&theirs, &|_| true);
        assert_eq!(s.nodes(), 0);
        // Under kubelet's name about hosts no Node has (an attacker's review grew the drainer by
        // 286 MiB so): none kept.
        let nodes = |n: &str| n == "n1";
        for i in 0..1000 {
            let host = format!("made-up-{i}");
            s.apply(
                &event(&format!("f{i}"), &host, 1, "2026-11-27T11:00:00Z"),
                &nodes,
            );
        }
        assert_eq!(s.nodes(), 0);
        // A real node's Events, however many and however long their names: at most PER_NODE.
        for i in 0..1000 {
            let name = format!("{i}-{}", "x".repeat(240));
            s.apply(&event(&name, "n1", 1, "2026-11-27T11:00:00Z"), &nodes);
        }
        assert_eq!(s.nodes(), 1);
        assert_eq!(s.events.lock().unwrap()["n1"].len(), PER_NODE);
        // More known nodes than the store keeps: it stays bounded.
        for i in 0..NODES + 10 {
            let host = format!("node-{i}");
            s.apply(
                &event(&format!("g{i}"), &host, 1, "2026-11-27T12:00:00Z"),
                &|_| true,
            );
        }
        assert_eq!(s.nodes(), NODES);
    }
}
