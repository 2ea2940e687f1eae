//! Event aggregation and rate limiting, pure.
//!
//! Occurrences are keyed by (source, reason). The first occurrence of a key is written at once (a new
//! Event); repeats only bump a count and the latest message, and are written as an update of that
//! Event at most once per `min_interval`. A key untouched for `ttl` is forgotten (the next occurrence
//! starts a new Event). Memory is bounded by `max_keys`: beyond it new keys are dropped and counted, so
//! a flood of 100k lines/s produces at most one write per key per interval and no growth.
//!
//! Crash consistency: each key's Event name is chosen when the key is first seen, and counts are
//! written as absolute values, so repeating a write is harmless (a create that finds the name taken
//! becomes an update). The checkpoint stores, with the input positions, each key's count as far as
//! those positions go ([`Aggregator::saved`]: occurrences are confirmed when their monitor reports
//! progress past them). After a kill -9 the restored counts plus the lines read again after the
//! checkpoint give exactly the occurrences: none lost, none counted twice.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::{NodeEvent, Severity};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub min_interval: Duration,
    pub ttl: Duration,
    pub max_keys: usize,
    /// Wait after a failed write.
    pub retry: Duration,
    /// Consecutive refused writes after which a key is given up (dropped, counted). Failures to
    /// reach the API server never count: an outage delays Events, it does not drop them.
    pub max_tries: u32,
}

impl Default for Limits {
    fn default() -> Self {
        // 10 s between updates of one Event: a flood costs ~6 writes/min per reason. 10 min ttl: the same
        // problem an hour later is a new Event, as operators expect from `kubectl get events`. 12 tries
        // 5 s apart: a minute of refusals (quota, RBAC, a rejected object) gives a key up.
        Limits {
            min_interval: Duration::from_secs(10),
            ttl: Duration::from_secs(600),
            max_keys: 512,
            retry: Duration::from_secs(5),
            max_tries: 12,
        }
    }
}

/// (source, reason).
pub(crate) type Key = (String, String);

#[derive(Debug, Clone)]
struct Entry {
    event: NodeEvent,
    /// The Event's name, chosen when the key was first seen.
    name: String,
    /// Whether the Event exists (a create succeeded, or it was restored as created).
    created: bool,
    /// Count already written.
    written: i32,
    /// Occurrences whose input position has been reported (what a checkpoint may claim).
    confirmed: i32,
    last_write: Option<Timestamp>,
    retry_at: Option<Timestamp>,
    /// Consecutive refused writes.
    failures: u32,
    /// Its name is in the state file (saved or reserved).
    saved: bool,
}

/// One write to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Write {
    pub(crate) key: (String, String),
    /// The Event's name.
    pub(crate) name: String,
    /// Create it (a create that finds the name taken is an update).
    pub(crate) create: bool,
    pub(crate) event: NodeEvent,
}

/// A key as the checkpoint stores it (the checkpoint owns its format).
pub(crate) use crate::checkpoint::Saved;

/// What became of a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    RetryIn(Duration),
    /// Failed `max_tries` times in a row: the key is forgotten.
    GivenUp {
        tries: u32,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    limits: Limits,
    /// The object Events are about (a node name): the prefix of their names.
    object: String,
    entries: HashMap<Key, Entry>,
    /// Occurrences dropped because `max_keys` was reached.
    pub(crate) dropped: u64,
}

fn later(t: Timestamp, d: Duration) -> Timestamp {
    nodemedic_common::time::add(t, d)
}

impl Aggregator {
    pub(crate) fn new(limits: Limits, object: &str) -> Self {
        Aggregator {
            limits,
            object: object.to_string(),
            entries: HashMap::new(),
            dropped: 0,
        }
    }

    /// Record one occurrence. Returns false when it was dropped (too many distinct keys). It counts
    /// towards the checkpoint once [`Aggregator::confirm`] is called for its key.
    pub(crate) fn observe(
        &mut self,
        source: &str,
        severity: Severity,
        reason: &str,
        message: &str,
        at: Timestamp,
    ) -> bool {
        let key = (source.to_string(), reason.to_string());
        if let Some(e) = self.entries.get_mut(&key) {
            if e.event.count == 0 {
                e.event.first_seen = at;
            }
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
                name: nodemedic_common::events::event_name(&self.object, at),
                created: false,
                written: 0,
                confirmed: 0,
                last_write: None,
                retry_at: None,
                failures: 0,
                saved: false,
            },
        );
        true
    }

    /// `n` occurrences of `key` are covered by a reported input position.
    pub(crate) fn confirm(&mut self, key: &Key, n: i32) {
        if let Some(e) = self.entries.get_mut(key) {
            e.confirmed = e.confirmed.saturating_add(n).min(e.event.count);
        }
    }

    /// Writes due at `now`; expired keys are forgotten.
    pub(crate) fn due(&mut self, now: Timestamp) -> Vec<Write> {
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
                    name: e.name.clone(),
                    create: !e.created,
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

    /// A write succeeded.
    pub(crate) fn written(&mut self, w: &Write, now: Timestamp) {
        if let Some(e) = self.entries.get_mut(&w.key) {
            e.created = true;
            e.written = w.event.count;
            e.last_write = Some(now);
            e.retry_at = None;
            e.failures = 0;
        }
    }

    /// A write failed (`refused`: the API server refused it, see `report::reporter::Error::is_refusal`).
    /// The occurrences stay counted and the write is retried after `retry`, unless the key has now
    /// been refused `max_tries` times in a row: then it is forgotten.
    pub(crate) fn failed(&mut self, w: &Write, now: Timestamp, refused: bool) -> AfterFailure {
        let retry = self.limits.retry;
        let Some(e) = self.entries.get_mut(&w.key) else {
            return AfterFailure::RetryIn(retry);
        };
        e.failures = if refused {
            e.failures.saturating_add(1)
        } else {
            0
        };
        if e.failures >= self.limits.max_tries {
            let tries = e.failures;
            self.entries.remove(&w.key);
            return AfterFailure::GivenUp { tries };
        }
        e.retry_at = Some(later(now, retry));
        AfterFailure::RetryIn(retry)
    }

    /// The Event was deleted server-side (404 on update): create it again next time.
    pub(crate) fn recreate(&mut self, w: &Write) {
        if let Some(e) = self.entries.get_mut(&w.key) {
            e.created = false;
        }
    }

    /// Every key as far as confirmed occurrences go (for the checkpoint; a key with none confirmed
    /// is saved with count 0, which keeps its name).
    pub(crate) fn saved(&mut self) -> Vec<Saved> {
        let mut out: Vec<Saved> = self
            .entries
            .values_mut()
            .map(|e| {
                e.saved = true;
                Saved {
                    name: e.name.clone(),
                    created: e.created,
                    written: e.written,
                    event: NodeEvent {
                        count: e.confirmed,
                        ..e.event.clone()
                    },
                    last_write: e.last_write,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Names of keys not in the state file yet, as count-0 entries, to be saved before their Events
    /// are created: a process killed right after a create then creates the same name again (an
    /// update) instead of a second Event.
    pub(crate) fn reservations(&mut self) -> Vec<Saved> {
        let mut out = Vec::new();
        for e in self.entries.values_mut().filter(|e| !e.saved) {
            e.saved = true;
            out.push(Saved {
                name: e.name.clone(),
                created: false,
                written: 0,
                event: NodeEvent {
                    count: 0,
                    ..e.event.clone()
                },
                last_write: None,
            });
        }
        out
    }

    /// Restore keys from a checkpoint (at start, before any occurrence).
    pub(crate) fn restore(&mut self, saved: Vec<Saved>) {
        for s in saved {
            if self.entries.len() >= self.limits.max_keys || s.event.count < 0 {
                continue;
            }
            let key = (s.event.source.clone(), s.event.reason.clone());
            let count = s.event.count;
            self.entries.insert(
                key,
                Entry {
                    name: s.name,
                    created: s.created,
                    // A write that covered lines past the checkpoint is redone with the count they
                    // reach when read again.
                    written: s.written.min(count),
                    confirmed: count,
                    last_write: s.last_write,
                    retry_at: None,
                    failures: 0,
                    saved: true,
                    event: s.event,
                },
            );
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
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
        Aggregator::new(
            Limits {
                min_interval: Duration::from_secs(10),
                ttl: Duration::from_secs(600),
                max_keys: 3,
                retry: Duration::from_secs(5),
                max_tries: 3,
            },
            "node-1",
        )
    }

    fn key(r: &str) -> Key {
        ("s".to_string(), r.to_string())
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
        assert_eq!((w[0].create, w[0].event.count), (true, 1));
        assert!(w[0].name.starts_with("node-1."), "{}", w[0].name);
        let name = w[0].name.clone();
        a.written(&w[0], t(0));
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
        assert_eq!((w[0].create, w[0].name.clone()), (false, name));
        assert_eq!(w[0].event.count, 1001);
        assert_eq!(w[0].event.message, "m999");
        a.written(&w[0], t(10));
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
        let first = w[0].name.clone();
        assert_eq!(
            a.failed(&w[0], t(0), true),
            AfterFailure::RetryIn(Duration::from_secs(5))
        );
        assert!(a.due(t(1)).is_empty());
        let w = a.due(t(5));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].name, first, "a retry keeps the name");
        a.written(&w[0], t(5));
        assert!(a.due(t(700)).is_empty());
        assert!(a.is_empty(), "forgotten after ttl");
        a.observe("s", Severity::Warning, "R", "again", t(701));
        let w = a.due(t(701));
        assert!(w[0].create);
        assert_ne!(w[0].name, first);
    }

    #[test]
    fn a_key_that_keeps_failing_is_given_up_and_a_success_resets_the_tries() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        let w = a.due(t(0)).remove(0);
        a.failed(&w, t(0), true);
        a.failed(&w, t(5), true);
        a.written(&w, t(10));
        a.observe("s", Severity::Warning, "R", "m", t(11));
        let w = a.due(t(20)).remove(0);
        a.failed(&w, t(20), true);
        a.failed(&w, t(25), true);
        assert_eq!(
            a.failed(&w, t(30), true),
            AfterFailure::GivenUp { tries: 3 }
        );
        assert!(a.is_empty());
        assert!(a.due(t(40)).is_empty());
    }

    #[test]
    fn an_outage_never_gives_a_key_up() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        let w = a.due(t(0)).remove(0);
        for i in 0..100 {
            assert!(matches!(
                a.failed(&w, t(i * 5), false),
                AfterFailure::RetryIn(_)
            ));
        }
        a.failed(&w, t(600), true);
        a.failed(&w, t(605), true);
        a.failed(&w, t(610), false);
        a.failed(&w, t(615), true);
        assert_eq!(a.len(), 1, "refusals must come in a row");
    }

    #[test]
    fn a_deleted_event_is_created_again_under_its_name() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        let w = a.due(t(0)).remove(0);
        a.written(&w, t(0));
        a.observe("s", Severity::Warning, "R", "m", t(1));
        let w = a.due(t(10)).remove(0);
        assert!(!w.create);
        a.recreate(&w);
        let again = a.due(t(10)).remove(0);
        assert!(again.create);
        assert_eq!((again.name, again.event.count), (w.name, 2));
    }

    /// The checkpoint claims only confirmed occurrences; a restart from it plus the lines read again
    /// after it ends with exactly the occurrences, whatever was written before the crash.
    #[test]
    fn restored_counts_plus_lines_read_again_give_exactly_the_occurrences() {
        let mut a = agg();
        for _ in 0..5 {
            a.observe("s", Severity::Warning, "R", "m", t(0));
        }
        a.confirm(&key("R"), 5);
        // two more lines seen, their position not yet reported
        a.observe("s", Severity::Warning, "R", "m", t(1));
        a.observe("s", Severity::Warning, "R", "m", t(1));
        let w = a.due(t(1)).remove(0);
        assert_eq!(w.event.count, 7);
        a.written(&w, t(1));
        let saved = a.saved();
        assert_eq!(saved.len(), 1);
        assert_eq!((saved[0].event.count, saved[0].written), (5, 7));
        assert!(saved[0].created);
        // Crash. The restart reads the two lines after the checkpoint again.
        let json = serde_json::to_string(&saved).unwrap();
        let mut b = agg();
        b.restore(serde_json::from_str(&json).unwrap());
        assert!(
            b.due(t(2)).is_empty(),
            "nothing to write before the lines come back"
        );
        b.observe("s", Severity::Warning, "R", "m", t(2));
        b.observe("s", Severity::Warning, "R", "m", t(2));
        b.observe("s", Severity::Warning, "R", "m", t(2));
        let w = b.due(t(20)).remove(0);
        assert_eq!(
            (w.create, w.name, w.event.count),
            (false, saved[0].name.clone(), 8)
        );
    }

    #[test]
    fn an_event_created_after_the_checkpoint_is_created_under_the_same_name() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        a.confirm(&key("R"), 1);
        let saved = a.saved();
        assert!(!saved[0].created);
        let w = a.due(t(0)).remove(0);
        a.written(&w, t(0)); // landed, then the process died before the next checkpoint
        let mut b = agg();
        b.restore(saved);
        let again = b.due(t(1)).remove(0);
        assert!(
            again.create,
            "a create: the API server turns it into an update (409)"
        );
        assert_eq!((again.name, again.event.count), (w.name, 1));
    }

    #[test]
    fn unconfirmed_occurrences_are_not_claimed_but_their_names_are_kept() {
        let mut a = agg();
        a.observe("s", Severity::Warning, "R", "m", t(0));
        let reserved = a.reservations();
        assert_eq!(reserved.len(), 1);
        assert_eq!(reserved[0].event.count, 0);
        assert!(a.reservations().is_empty(), "reserved once");
        assert_eq!(a.saved()[0].event.count, 0);
        a.confirm(&key("R"), 9);
        assert_eq!(a.saved()[0].event.count, 1, "never more than observed");
        // Killed after the create: the restart reads the line again and creates the same name.
        let name = reserved[0].name.clone();
        let mut b = agg();
        b.restore(reserved);
        assert!(b.due(t(1)).is_empty());
        b.observe("s", Severity::Warning, "R", "m", t(2));
        let w = b.due(t(2)).remove(0);
        assert_eq!((w.create, w.name, w.event.count), (true, name, 1));
        assert_eq!(w.event.first_seen, t(2));
    }
}
