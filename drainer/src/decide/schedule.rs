//! When the controller speaks, pure: the WaitingForBudget note of each waiting node (one Event per
//! wait, its count refreshed at most every `refresh`), and the stale-readiness reports (each stale pod
//! at most every `STALE_REPORT_EVERY`) and eviction retries (every `retry`). The controller executes
//! what these return.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::stale::Stale;
use crate::metrics::Budget;
use crate::model::intern::ArcStr;

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
    /// The budget its Event names (`None`: a wait without one: a domain's budget, the slow start,
    /// the replacement budget).
    budget: Option<Budget>,
    event: Option<String>,
    count: i32,
    first_seen: Timestamp,
    noted_at: Timestamp,
}

/// The nodes waiting for a budget, by name (decided every round, as a freed slot may be theirs),
/// each with its WaitingForBudget Event so far, and the notes due since they were last taken. The
/// fleet's queue owns it: the one place a wait is kept.
#[derive(Debug, Default)]
pub(crate) struct BudgetWaits {
    waits: BTreeMap<ArcStr, Wait>,
    notes: Vec<(ArcStr, Note)>,
}

impl BudgetWaits {
    /// `node` waits at `now`, for `budget` (`None`: for one no Event names): a note is due when the
    /// wait begins and then at most every `refresh`.
    pub(crate) fn wait(
        &mut self,
        node: &ArcStr,
        budget: Option<Budget>,
        now: Timestamp,
        refresh: Duration,
    ) {
        match self.waits.get_mut(node) {
            Some(w) if w.budget == budget => {
                if since(now, w.noted_at) < refresh {
                    return;
                }
                w.count += 1;
                w.noted_at = now;
            }
            _ => {
                let w = Wait {
                    budget,
                    event: None,
                    count: 1,
                    first_seen: now,
                    noted_at: now,
                };
                self.waits.insert(node.clone(), w);
            }
        }
        let w = &self.waits[node];
        if let Some(budget) = w.budget {
            let note = Note {
                budget,
                count: w.count,
                first_seen: w.first_seen,
                existing: w.event.clone(),
            };
            self.notes.push((node.clone(), note));
        }
    }

    /// `node` waits no more (decided otherwise, or gone).
    pub(crate) fn end(&mut self, node: &str) {
        self.waits.remove(node);
    }

    /// The notes due since the last call.
    pub(crate) fn take_notes(&mut self) -> Vec<(ArcStr, Note)> {
        std::mem::take(&mut self.notes)
    }

    /// The note of `node` was written as `event` (`None`: the write failed; the next creates one).
    pub(crate) fn noted(&mut self, node: &str, event: Option<String>) {
        if let Some(w) = self.waits.get_mut(node) {
            w.event = event;
        }
    }

    /// The waiting nodes.
    pub(crate) fn names(&self) -> impl Iterator<Item = &ArcStr> {
        self.waits.keys()
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

    /// The note `w.wait` made due, if any.
    fn wait(w: &mut BudgetWaits, budget: Option<Budget>, at: Timestamp) -> Option<Note> {
        w.wait(&"n".into(), budget, at, Duration::from_secs(60));
        let mut notes = w.take_notes();
        assert!(notes.len() <= 1);
        notes.pop().map(|(n, note)| {
            assert_eq!(n.as_str(), "n");
            note
        })
    }

    #[test]
    fn a_wait_is_one_note_refreshed_at_most_every_refresh() {
        let mut w = BudgetWaits::default();
        let first = wait(&mut w, Some(Budget::Cordons), t(0)).unwrap();
        assert_eq!((first.count, first.existing.clone()), (1, None));
        w.noted("n", Some("n.ev".into()));
        assert_eq!(wait(&mut w, Some(Budget::Cordons), t(30)), None);
        let again = wait(&mut w, Some(Budget::Cordons), t(61)).unwrap();
        assert_eq!(
            (again.count, again.first_seen, again.existing.as_deref()),
            (2, t(0), Some("n.ev"))
        );
        // a wait no Event names: still waiting (decided every round), no note
        assert_eq!(wait(&mut w, None, t(70)), None);
        assert_eq!(w.names().count(), 1);
        // a wait for another budget is a new Event
        let new = wait(&mut w, Some(Budget::Drains), t(80)).unwrap();
        assert_eq!((new.count, new.existing), (1, None));
        w.end("n");
        assert_eq!(w.names().count(), 0);
        let after = wait(&mut w, Some(Budget::Drains), t(90)).unwrap();
        assert_eq!(
            (after.count, after.first_seen),
            (1, t(90)),
            "a wait that ended is forgotten"
        );
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
