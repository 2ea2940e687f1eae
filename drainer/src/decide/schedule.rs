//! When the controller speaks, pure: the WaitingForBudget note of each waiting node (one Event per
//! wait, its count refreshed at most every `refresh`), and the stale-readiness reports (each stale pod
//! at most every `STALE_REPORT_EVERY`) and eviction retries (every `retry`). The controller executes
//! what these return.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::stale::Stale;
use crate::metrics::Budget;

/// Report one stale pod again only after this long (one Event per episode, not per round).
pub(crate) const STALE_REPORT_EVERY: Duration = Duration::from_secs(600);

fn since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

/// A WaitingForBudget note to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) budget: Budget,
    pub(crate) count: i32,
    pub(crate) first_seen: Timestamp,
    /// The wait's Event so far (update it) or `None` (create one).
    pub(crate) existing: Option<String>,
}

impl Note {
    pub(crate) fn message(&self) -> &'static str {
        match self.budget {
            Budget::Cordons => "waiting for the cordon budget (--max-cordoned) to free a slot",
            Budget::Drains => {
                "waiting for the drain budget (--max-drains-in-flight) to free a slot"
            }
        }
    }
}

#[derive(Debug)]
struct Wait {
    budget: Budget,
    event: Option<String>,
    count: i32,
    first_seen: Timestamp,
    noted_at: Timestamp,
}

/// The nodes waiting for a budget, by name.
#[derive(Debug, Default)]
pub(crate) struct BudgetWaits {
    waits: HashMap<String, Wait>,
}

impl BudgetWaits {
    /// `node` waits for `budget` (or for none) at `now`: the note due, if any.
    pub(crate) fn observe(
        &mut self,
        node: &str,
        budget: Option<Budget>,
        now: Timestamp,
        refresh: Duration,
    ) -> Option<Note> {
        let Some(budget) = budget else {
            self.waits.remove(node);
            return None;
        };
        match self.waits.get_mut(node) {
            Some(w) if w.budget == budget => {
                if since(now, w.noted_at) < refresh {
                    return None;
                }
                w.count += 1;
                w.noted_at = now;
            }
            _ => {
                self.waits.insert(
                    node.to_string(),
                    Wait {
                        budget,
                        event: None,
                        count: 1,
                        first_seen: now,
                        noted_at: now,
                    },
                );
            }
        }
        let w = &self.waits[node];
        Some(Note {
            budget,
            count: w.count,
            first_seen: w.first_seen,
            existing: w.event.clone(),
        })
    }

    /// The note of `node` was written as `event` (`None`: the write failed; the next creates one).
    pub(crate) fn noted(&mut self, node: &str, event: Option<String>) {
        if let Some(w) = self.waits.get_mut(node) {
            w.event = event;
        }
    }

    /// Forget nodes that are gone.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.waits.retain(|n, _| keep(n));
    }
}

/// What to do about one stale pod this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaleDue {
    pub(crate) stale: Stale,
    pub(crate) report: bool,
    pub(crate) evict: bool,
}

/// When stale pods were last reported and their eviction last tried.
#[derive(Debug, Default)]
pub(crate) struct StaleSchedule {
    reported: HashMap<String, Timestamp>,
    evicted: HashMap<String, Timestamp>,
}

impl StaleSchedule {
    /// For the stale pods of this round: whether to report each (at most every
    /// [`STALE_REPORT_EVERY`]) and whether to try its eviction (when `evict`, never for exempt pods,
    /// at most every `retry`). Pods no longer stale are forgotten.
    pub(crate) fn plan(
        &mut self,
        stale: Vec<Stale>,
        now: Timestamp,
        evict: bool,
        retry: Duration,
    ) -> Vec<StaleDue> {
        let key = |s: &Stale| {
            s.uid
                .clone()
                .unwrap_or_else(|| format!("{}/{}", s.namespace, s.name))
        };
        let keys: Vec<String> = stale.iter().map(key).collect();
        self.reported.retain(|k, _| keys.contains(k));
        self.evicted.retain(|k, _| keys.contains(k));
        stale
            .into_iter()
            .zip(keys)
            .map(|(s, k)| {
                let report = self
                    .reported
                    .get(&k)
                    .is_none_or(|t| since(now, *t) >= STALE_REPORT_EVERY);
                if report {
                    self.reported.insert(k.clone(), now);
                }
                let try_evict = evict
                    && s.exempt.is_none()
                    && self.evicted.get(&k).is_none_or(|t| since(now, *t) >= retry);
                if try_evict {
                    self.evicted.insert(k, now);
                }
                StaleDue {
                    stale: s,
                    report,
                    evict: try_evict,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_wait_is_one_note_refreshed_at_most_every_refresh() {
        let mut w = BudgetWaits::default();
        let m = Duration::from_secs(60);
        let first = w.observe("n", Some(Budget::Cordons), t(0), m).unwrap();
        assert_eq!((first.count, first.existing.clone()), (1, None));
        w.noted("n", Some("n.ev".into()));
        assert_eq!(w.observe("n", Some(Budget::Cordons), t(30), m), None);
        let again = w.observe("n", Some(Budget::Cordons), t(61), m).unwrap();
        assert_eq!(
            (again.count, again.first_seen, again.existing.as_deref()),
            (2, t(0), Some("n.ev"))
        );
        // the wait ends; a new one is a new Event
        assert_eq!(w.observe("n", None, t(70), m), None);
        let new = w.observe("n", Some(Budget::Drains), t(80), m).unwrap();
        assert_eq!((new.count, new.existing), (1, None));
    }

    fn stale(name: &str, exempt: bool) -> Stale {
        Stale {
            namespace: "app".into(),
            name: name.into(),
            uid: Some(name.into()),
            node: "n".into(),
            exempt: exempt.then(|| "mirror pod".to_string()),
        }
    }

    #[test]
    fn stale_pods_are_reported_once_per_episode_and_evictions_retried() {
        let mut s = StaleSchedule::default();
        let retry = Duration::from_secs(5);
        let round = |s: &mut StaleSchedule, at: i64| -> Vec<(String, bool, bool)> {
            s.plan(
                vec![stale("web", false), stale("mirror", true)],
                t(at),
                true,
                retry,
            )
            .into_iter()
            .map(|d| (d.stale.name, d.report, d.evict))
            .collect()
        };
        assert_eq!(
            round(&mut s, 0),
            vec![("web".into(), true, true), ("mirror".into(), true, false)]
        );
        assert_eq!(
            round(&mut s, 2),
            vec![
                ("web".into(), false, false),
                ("mirror".into(), false, false)
            ]
        );
        assert_eq!(
            round(&mut s, 6)[0],
            ("web".into(), false, true),
            "eviction retried"
        );
        assert!(round(&mut s, 601)[0].1, "reported again after 10 minutes");
        // no longer stale: forgotten, so a new episode is reported at once
        s.plan(vec![], t(602), true, retry);
        assert_eq!(round(&mut s, 603)[0], ("web".into(), true, true));
    }
}
