//! Event aggregation and rate limiting, pure.
//!
//! Occurrences are keyed by (source, reason). The first occurrence of a key is written at once (a new
//! Event); repeats only bump a count and the latest message, and are written as an update of that
//! Event at most once per `min_interval`. A key untouched for `ttl` is forgotten (the next occurrence
//! starts a new Event). Memory is bounded by `max_keys`: beyond it new keys are dropped and counted, so
//! a flood of 100k lines/s produces at most one write per key per interval and no growth.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::{NodeEvent, Severity};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub min_interval: Duration,
    pub ttl: Duration,
    pub max_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // 10 s between updates of one Event: a flood costs ~6 writes/min per reason. 10 min ttl: the same
        // problem an hour later is a new Event, as operators expect from `kubectl get events`.
        Limits {
            min_interval: Duration::from_secs(10),
            ttl: Duration::from_secs(600),
            max_keys: 512,
        }
    }
}

type Key = (String, String);

#[derive(Debug, Clone)]
struct Entry {
    event: NodeEvent,
    /// Name of the Event once created.
    name: Option<String>,
    /// Count already written.
    written: i32,
    last_write: Option<Timestamp>,
    retry_at: Option<Timestamp>,
}

/// One write to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub key: (String, String),
    /// `None`: create; `Some(name)`: update that Event.
    pub existing: Option<String>,
    pub event: NodeEvent,
}

#[derive(Debug, Default)]
pub struct Aggregator {
    limits: Limits,
    entries: HashMap<Key, Entry>,
    /// Occurrences dropped because `max_keys` was reached.
    pub dropped: u64,
}

fn later(t: Timestamp, d: Duration) -> Timestamp {
    nodemedic_common::time::add(t, d)
}

impl Aggregator {
    pub fn new(limits: Limits) -> Self {
        Aggregator {
            limits,
            entries: HashMap::new(),
            dropped: 0,
        }
    }

    /// Record one occurrence. Returns false when it was dropped (too many distinct keys).
    pub fn observe(
        &mut self,
        source: &str,
        severity: Severity,
        reason: &str,
        message: &str,
        at: Timestamp,
    ) -> bool {
        let key = (source.to_string(), reason.to_string());
        if let Some(e) = self.entries.get_mut(&key) {
            e.event.count = e.event.count.saturating_add(1);
            e.event.last_seen = at.max(e.event.last_seen);
            e.event.message = message.to_string();
            e.event.severity = severity;
            return true;
        }
        if self.entries.len() >= self.limits.max_keys {
            self.dropped += 1;
            return false;
        }
        self.entries.insert(
            key,
            Entry {
                event: NodeEvent {
                    source: source.to_string(),
                    severity,
                    reason: reason.to_string(),
                    message: message.to_string(),
                    count: 1,
                    first_seen: at,
                    last_seen: at,
                },
                name: None,
                written: 0,
                last_write: None,
                retry_at: None,
            },
        );
        true
    }

    /// Writes due at `now`; expired keys are forgotten.
    pub fn due(&mut self, now: Timestamp) -> Vec<Write> {
        let ttl = self.limits.ttl;
        self.entries
            .retain(|_, e| !(e.written == e.event.count && later(e.event.last_seen, ttl) <= now));
        let mut out = Vec::new();
        for (key, e) in &self.entries {
            if e.written == e.event.count || e.retry_at.is_some_and(|r| r > now) {
                continue;
            }
            let ready = match e.last_write {
                None => true,
                Some(t) => later(t, self.limits.min_interval) <= now,
            };
            if ready {
                out.push(Write {
                    key: key.clone(),
                    existing: e.name.clone(),
                    event: e.event.clone(),
                });
            }
        }
        out.sort_by(|a, b| {
            a.event
                .first_seen
                .cmp(&b.event.first_seen)
                .then(a.key.cmp(&b.key))
        });
        out
    }

    /// A write succeeded (`name` is the Event's name).
    pub fn written(&mut self, w: &Write, name: String, now: Timestamp) {
        if let Some(e) = self.entries.get_mut(&w.key) {
            e.name = Some(name);
            e.written = w.event.count;
            e.last_write = Some(now);
            e.retry_at = None;
        }
    }

    /// A write failed; try again after `retry`. The occurrences stay counted.
    pub fn failed(&mut self, w: &Write, now: Timestamp, retry: Duration) {
        if let Some(e) = self.entries.get_mut(&w.key) {
            e.retry_at = Some(later(now, retry));
            if w.existing.is_some() && e.name.is_none() {
                e.name = w.existing.clone();
            }
        }
    }

    /// The Event was deleted server-side (404 on update): create a new one next time.
    pub fn forget_name(&mut self, w: &Write) {
        if let Some(e) = self.entries.get_mut(&w.key) {
            e.name = None;
        }
    }

    /// Every occurrence has at least been created as an Event (repeats may still be folding).
    pub fn all_created(&self) -> bool {
        self.entries.values().all(|e| e.name.is_some())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn agg() -> Aggregator {
        Aggregator::new(Limits {
            min_interval: Duration::from_secs(10),
            ttl: Duration::from_secs(600),
            max_keys: 3,
        })
    }

    #[test]
    fn first_occurrence_is_written_at_once_then_repeats_are_folded() {
        let mut a = agg();
        a.observe(
            "kernel-monitor",
            Severity::Warning,
            "OOMKilling",
            "m1",
            t(0),
        );
        let w = a.due(t(0));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].existing.clone(), w[0].event.count), (None, 1));
        a.written(&w[0], "node.1".into(), t(0));
        for i in 0..1000 {
            a.observe(
                "kernel-monitor",
                Severity::Warning,
                "OOMKilling",
                &format!("m{i}"),
                t(1),
            );
        }
        assert!(a.due(t(5)).is_empty(), "rate limited within min_interval");
        let w = a.due(t(10));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].existing.as_deref(), Some("node.1"));
        assert_eq!(w[0].event.count, 1001);
        assert_eq!(w[0].event.message, "m999");
        a.written(&w[0], "node.1".into(), t(10));
        assert!(a.due(t(100)).is_empty(), "nothing new, nothing written");
    }

    #[test]
    fn memory_is_bounded_by_max_keys() {
        let mut a = agg();
        for r in ["A", "B", "C", "D", "E"] {
            a.observe("s", Severity::Warning, r, "m", t(0));
        }
        assert_eq!(a.len(), 3);
        assert_eq!(a.dropped, 2);
    }

    #[test]
    fn expired_keys_start_a_new_event_and_failures_are_retried() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        let w = a.due(t(0));
        a.failed(&w[0], t(0), Duration::from_secs(5));
        assert!(a.due(t(1)).is_empty());
        let w = a.due(t(5));
        assert_eq!(w.len(), 1);
        a.written(&w[0], "n.1".into(), t(5));
        assert!(a.due(t(700)).is_empty());
        assert!(a.is_empty(), "forgotten after ttl");
        a.observe("s", Severity::Warning, "R", "again", t(701));
        assert_eq!(a.due(t(701))[0].existing, None);
    }
}
