//! The kubelets' sandbox failures (Events with reason `FailedCreatePodSandBox`), by node: I/O, a
//! watch of those Events only, into a small store. They add words to a PodsNotStarting message
//! (how often the node's kubelet said it could not create a sandbox) and never set it: anyone who
//! may write Events can write one naming any node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use nodemedic_common::throttle::Throttle;
use tokio::task::JoinHandle;

use crate::model::intern::{ArcStr, intern};

/// The kubelet's Event reason when it cannot create a pod's sandbox (a wedged runtime or CNI).
pub(crate) const REASON: &str = "FailedCreatePodSandBox";

/// Events kept per node at most (the newest; a node failing every sandbox repeats one Event with a
/// growing count, so a few suffice).
const PER_NODE: usize = 32;

/// How long an Event is kept after it was last seen.
const KEEP_SECS: i64 = 3600;

/// One node's Events (namespace/name): how many failures each counts and when it was last seen.
type NodeEvents = HashMap<String, (u64, Timestamp)>;

/// The sandbox failure Events by node.
#[derive(Clone, Default)]
pub(crate) struct SandboxFailures {
    events: Arc<Mutex<HashMap<ArcStr, NodeEvents>>>,
    /// The watch started and its first list is not in yet (nor failed).
    pending: Arc<std::sync::atomic::AtomicBool>,
}

/// An Event's node (the kubelet's `source.host`, or its reporting instance), key, count and last
/// time.
fn read(e: &Event) -> Option<(&str, String, u64, Timestamp)> {
    let node = e
        .source
        .as_ref()
        .and_then(|s| s.host.as_deref())
        .or(e.reporting_instance.as_deref())?;
    let key = format!(
        "{}/{}",
        e.metadata.namespace.as_deref().unwrap_or_default(),
        e.metadata.name.as_deref().unwrap_or_default()
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

impl SandboxFailures {
    pub(crate) fn apply(&self, e: &Event) {
        let Some((node, key, count, last)) = read(e) else {
            return;
        };
        let mut all = self.events.lock().unwrap();
        let events = all.entry(intern(node)).or_default();
        events.insert(key, (count, last));
        let oldest = last.as_second() - KEEP_SECS;
        events.retain(|_, (_, t)| t.as_second() >= oldest);
        while events.len() > PER_NODE {
            let Some(k) = events
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            events.remove(&k);
        }
    }

    pub(crate) fn delete(&self, e: &Event) {
        if let Some((node, key, ..)) = read(e)
            && let Some(events) = self.events.lock().unwrap().get_mut(node)
        {
            events.remove(&key);
        }
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
    pub(crate) fn spawn(&self, api: Api<Event>) -> JoinHandle<()> {
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
                        store.apply(&e);
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
        s.apply(&event("a", "n1", 5, "2026-11-27T10:00:00Z"));
        s.apply(&event("b", "n1", 2, "2026-11-27T10:05:00Z"));
        s.apply(&event("c", "n2", 9, "2026-11-27T09:00:00Z"));
        // The same Event again with a higher count replaces it.
        s.apply(&event("a", "n1", 7, "2026-11-27T10:06:00Z"));
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
    }
}
