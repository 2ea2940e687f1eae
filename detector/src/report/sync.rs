//! Condition sync, pure: what to write to the Node and when.
//!
//! The desired state is each monitor's full condition list. A patch is due when it differs from what
//! was last written, when an owned type must be removed, or when the heartbeat is due; nothing is
//! written otherwise. A failed write is retried with exponential backoff, and since every patch carries
//! the *current* desired state, the latest state wins and no change is lost.
//!
//! A monitor whose input has stalled (not even an idle beat for `MAX_SILENCE`: the reader hung or
//! lost its file) can no longer vouch for health: its healthy (False) conditions are written as
//! `Unknown` with reason [`INPUT_STALLED`] from when the stall was noticed, as the node lifecycle
//! controller does to a silent kubelet's Ready; a True condition stays True (a problem seen is not
//! unseen). They return to what the monitor holds when its input beats again.
//!
//! A change of status or reason is written at once; a change of a condition's message alone (a flood
//! of problem lines, each with its own text, keeps a True condition True) at most once per
//! [`MESSAGE_INTERVAL`]: the last message is written, the API server is not hammered.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::conditions::DesiredCondition;

use crate::problem::Condition;

/// A patch to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) set: Vec<DesiredCondition>,
    pub(crate) remove: Vec<String>,
    /// The ownership annotation's new value.
    pub(crate) owned: Vec<String>,
    /// The rules revision written with them (None: not known yet).
    pub(crate) revision: Option<String>,
}

#[derive(Debug)]
pub(crate) struct SyncState {
    heartbeat: Duration,
    desired: BTreeMap<String, Vec<Condition>>,
    /// What the last successful patch wrote (type -> condition).
    written: Option<BTreeMap<String, DesiredCondition>>,
    /// Types listed in the Node's ownership annotation.
    owned_on_node: BTreeSet<String>,
    last_write: Option<Timestamp>,
    failures: u32,
    /// Consecutive refusals (4xx) among them.
    refusals: u32,
    retry_at: Option<Timestamp>,
    /// Monitors that have not sent their first snapshot yet: removal waits for them, so a slow-starting
    /// monitor's conditions are not deleted and re-added.
    waiting_for: BTreeSet<String>,
    /// Monitors whose input stalled, and since when.
    stalled: BTreeMap<String, Timestamp>,
    /// The rules revision in force (written with every patch).
    revision: Option<String>,
}

/// The reason of a condition whose monitor's input stalled.
pub(crate) const INPUT_STALLED: &str = "DetectorInputStalled";

/// Message-only updates of the conditions are written at most this often.
pub(crate) const MESSAGE_INTERVAL: Duration = Duration::from_secs(10);

/// The conditions without their messages (what decides whether a change is urgent).
fn without_messages(c: &BTreeMap<String, DesiredCondition>) -> BTreeMap<&str, (&str, &str, &str)> {
    c.iter()
        .map(|(k, d)| {
            (
                k.as_str(),
                (
                    d.status.as_str(),
                    d.reason.as_str(),
                    d.last_transition_time.as_str(),
                ),
            )
        })
        .collect()
}

/// Backoff after the n-th consecutive failure: 1s, 2s, 4s ... capped at 30s.
/// Consecutive condition writes refused by the API server (about a minute of backoff) after which
/// the checkpoint stops waiting for them. Failures to reach it (an outage) never count: then the
/// checkpoint waits, so a restart reads the lines again.
pub(crate) const GIVE_UP_AFTER: u32 = 6;

pub(crate) fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

fn to_desired(c: &Condition) -> DesiredCondition {
    DesiredCondition {
        type_: c.type_.clone(),
        status: c.status.as_str().to_string(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: nodemedic_common::time::rfc3339(c.transition),
    }
}

fn stalled_desired(c: &Condition, monitor: &str, since: Timestamp) -> DesiredCondition {
    let at = nodemedic_common::time::rfc3339(since);
    DesiredCondition {
        type_: c.type_.clone(),
        status: "Unknown".into(),
        reason: INPUT_STALLED.into(),
        message: format!(
            "The detector's input for {monitor} has stalled since {at} (its reader hung or lost its source): this condition's status is unknown"
        ),
        last_transition_time: at,
    }
}

impl SyncState {
    /// `owned_on_node`: the types listed in the Node's ownership annotation at start. `monitors`: the
    /// monitors expected to report.
    pub(crate) fn new(
        heartbeat: Duration,
        owned_on_node: Vec<String>,
        monitors: impl IntoIterator<Item = String>,
    ) -> Self {
        SyncState {
            heartbeat,
            desired: BTreeMap::new(),
            written: None,
            owned_on_node: owned_on_node.into_iter().collect(),
            last_write: None,
            failures: 0,
            refusals: 0,
            retry_at: None,
            waiting_for: monitors.into_iter().collect(),
            stalled: BTreeMap::new(),
            revision: None,
        }
    }

    /// The rules now in force are `revision` (at start and after each reload): written with the
    /// next patch made for another reason (a change, the heartbeat), which is the first one these
    /// rules set conditions with.
    pub(crate) fn set_revision(&mut self, revision: &str) {
        self.revision = Some(revision.to_string());
    }

    /// The monitors whose input is stalled at `now` (from the health of their `input:` loops):
    /// those newly stalled are noted from `now`, those no longer stalled are forgotten. True when
    /// the set changed.
    pub(crate) fn set_stalled(&mut self, stalled: &BTreeSet<String>, now: Timestamp) -> bool {
        let before = self.stalled.len();
        self.stalled.retain(|m, _| stalled.contains(m));
        let mut changed = self.stalled.len() != before;
        for m in stalled {
            if self.desired.contains_key(m) && !self.stalled.contains_key(m) {
                self.stalled.insert(m.clone(), now);
                changed = true;
            }
        }
        changed
    }

    /// A monitor's full condition list.
    pub(crate) fn set_monitor(&mut self, monitor: &str, conditions: Vec<Condition>) {
        self.waiting_for.remove(monitor);
        self.desired.insert(monitor.to_string(), conditions);
    }

    /// A monitor was removed by a reload: its conditions are no longer declared.
    pub(crate) fn remove_monitor(&mut self, monitor: &str) {
        self.waiting_for.remove(monitor);
        self.desired.remove(monitor);
    }

    /// A monitor was added by a reload.
    pub(crate) fn expect_monitor(&mut self, monitor: &str) {
        if !self.desired.contains_key(monitor) {
            self.waiting_for.insert(monitor.to_string());
        }
    }

    /// The current desired conditions, by type (a stalled monitor's healthy ones `Unknown`).
    pub(crate) fn current(&self) -> BTreeMap<String, DesiredCondition> {
        self.desired
            .iter()
            .flat_map(|(monitor, cs)| {
                let stalled = self.stalled.get(monitor);
                cs.iter().map(move |c| match stalled {
                    Some(since) if c.status == crate::problem::Status::False => {
                        (c.type_.clone(), stalled_desired(c, monitor, *since))
                    }
                    _ => (c.type_.clone(), to_desired(c)),
                })
            })
            .collect()
    }

    /// The desired conditions as the monitors hold them (for /conditions).
    pub(crate) fn conditions(&self) -> Vec<Condition> {
        self.desired.values().flatten().cloned().collect()
    }

    /// The patch due at `now`, if any.
    pub(crate) fn plan(&self, now: Timestamp) -> Option<Plan> {
        if self.retry_at.is_some_and(|r| r > now) {
            return None;
        }
        let current = self.current();
        let remove: Vec<String> = if self.waiting_for.is_empty() {
            self.owned_on_node
                .iter()
                .filter(|t| !current.contains_key(*t))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let owned_now: BTreeSet<String> = current
            .keys()
            .cloned()
            .chain(if self.waiting_for.is_empty() {
                Vec::new()
            } else {
                self.owned_on_node.iter().cloned().collect()
            })
            .collect();
        let changed = match &self.written {
            None => true,
            Some(w) if w == &current => false,
            // Only messages differ: not before MESSAGE_INTERVAL after the last write.
            Some(w) if without_messages(w) == without_messages(&current) => self
                .last_write
                .is_none_or(|t| nodemedic_common::time::add(t, MESSAGE_INTERVAL) <= now),
            Some(_) => true,
        };
        let heartbeat_due = self
            .last_write
            .is_none_or(|t| nodemedic_common::time::add(t, self.heartbeat) <= now);
        // A new rules revision alone is no reason to write (a reload that changes no condition
        // stays quiet): it goes with the next write, the one that sets conditions by those rules.
        let annotation_stale = owned_now != self.owned_on_node;
        if current.is_empty() && remove.is_empty() && !annotation_stale {
            return None;
        }
        (changed || !remove.is_empty() || heartbeat_due || annotation_stale).then(|| Plan {
            set: current.into_values().collect(),
            remove,
            owned: owned_now.into_iter().collect(),
            revision: self.revision.clone(),
        })
    }

    pub(crate) fn succeeded(&mut self, plan: &Plan, now: Timestamp) {
        self.written = Some(
            plan.set
                .iter()
                .map(|c| (c.type_.clone(), c.clone()))
                .collect(),
        );
        self.owned_on_node = plan.owned.iter().cloned().collect();
        self.last_write = Some(now);
        self.failures = 0;
        self.refusals = 0;
        self.retry_at = None;
    }

    /// Returns the delay before the next attempt. `refused`: the API server answered and refused it
    /// (not an outage).
    pub(crate) fn failed(&mut self, now: Timestamp, refused: bool) -> Duration {
        self.failures += 1;
        self.refusals = if refused { self.refusals + 1 } else { 0 };
        let d = backoff(self.failures);
        self.retry_at = Some(nodemedic_common::time::add(now, d));
        d
    }

    /// Consecutive refused writes.
    pub(crate) fn refusals(&self) -> u32 {
        self.refusals
    }

    /// Writes have been refused [`GIVE_UP_AFTER`] times in a row (they are still retried).
    pub(crate) fn given_up(&self) -> bool {
        self.refusals >= GIVE_UP_AFTER
    }

    /// True when everything desired has been written (checkpoints may advance).
    pub(crate) fn in_sync(&self) -> bool {
        self.written.as_ref() == Some(&self.current())
            || (self.current().is_empty() && self.written.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Status;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn cond(ty: &str, status: Status) -> Condition {
        Condition {
            type_: ty.into(),
            status,
            reason: "R".into(),
            message: "m".into(),
            transition: t(0),
        }
    }

    #[test]
    fn the_rules_revision_goes_with_the_conditions_it_sets_and_never_alone() {
        let mut s = SyncState::new(Duration::from_secs(300), vec![], ["k".to_string()]);
        s.set_revision("aaaaaaaaaaaa");
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::False)]);
        let p = s.plan(t(0)).unwrap();
        assert_eq!(p.revision.as_deref(), Some("aaaaaaaaaaaa"));
        s.succeeded(&p, t(0));
        assert!(s.plan(t(10)).is_none(), "written: nothing more");
        s.set_revision("bbbbbbbbbbbb");
        assert!(
            s.plan(t(20)).is_none(),
            "a reload that changes no condition writes nothing"
        );
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::True)]);
        let p = s.plan(t(30)).expect("a change");
        assert_eq!(
            p.revision.as_deref(),
            Some("bbbbbbbbbbbb"),
            "set by the new rules"
        );
        s.succeeded(&p, t(30));
        s.set_revision("cccccccccccc");
        let p = s.plan(t(330)).expect("the heartbeat");
        assert_eq!(p.revision.as_deref(), Some("cccccccccccc"));
    }

    #[test]
    fn a_stalled_inputs_healthy_conditions_become_unknown_until_it_beats_again() {
        let mut s = SyncState::new(
            Duration::from_secs(300),
            vec![],
            ["k".to_string(), "j".to_string()],
        );
        s.set_monitor(
            "k",
            vec![
                cond("KernelDeadlock", Status::False),
                cond("Frozen", Status::True),
            ],
        );
        s.set_monitor("j", vec![cond("DockerHung", Status::False)]);
        let p = s.plan(t(0)).unwrap();
        s.succeeded(&p, t(0));
        assert!(s.plan(t(10)).is_none());
        let stalled: BTreeSet<String> = ["k".to_string(), "gone".to_string()].into();
        assert!(s.set_stalled(&stalled, t(70)));
        assert!(!s.set_stalled(&stalled, t(75)), "the same stall");
        let p = s.plan(t(75)).expect("written at once");
        let by_type: BTreeMap<&str, &DesiredCondition> =
            p.set.iter().map(|c| (c.type_.as_str(), c)).collect();
        let kd = by_type["KernelDeadlock"];
        assert_eq!(
            (kd.status.as_str(), kd.reason.as_str()),
            ("Unknown", INPUT_STALLED)
        );
        assert_eq!(
            kd.last_transition_time,
            nodemedic_common::time::rfc3339(t(70))
        );
        assert!(
            kd.message.contains("input for k has stalled"),
            "{}",
            kd.message
        );
        assert_eq!(by_type["Frozen"].status, "True", "a problem seen stays");
        assert_eq!(
            by_type["DockerHung"].status, "False",
            "another input is fine"
        );
        s.succeeded(&p, t(75));
        assert!(
            s.plan(t(80)).is_none(),
            "nothing more while it stays stalled"
        );
        assert!(s.set_stalled(&BTreeSet::new(), t(90)));
        let p = s.plan(t(90)).expect("healthy again at once");
        assert!(p.set.iter().all(|c| c.reason == "R"), "{p:?}");
    }

    #[test]
    fn writes_on_change_and_on_heartbeat_only() {
        let mut s = SyncState::new(Duration::from_secs(300), vec![], ["k".to_string()]);
        assert!(s.plan(t(0)).is_none(), "nothing desired yet");
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::False)]);
        let p = s.plan(t(0)).unwrap();
        assert_eq!(p.set.len(), 1);
        assert_eq!(p.owned, vec!["KernelDeadlock"]);
        s.succeeded(&p, t(0));
        assert!(s.in_sync());
        assert!(s.plan(t(10)).is_none(), "no change, no heartbeat due");
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::True)]);
        assert!(!s.in_sync());
        assert_eq!(s.plan(t(11)).unwrap().set[0].status, "True");
        s.succeeded(&s.plan(t(11)).unwrap(), t(11));
        assert!(s.plan(t(310)).is_none());
        assert!(s.plan(t(311)).is_some(), "heartbeat after 5 minutes");
    }

    #[test]
    fn owned_types_no_longer_declared_are_removed_once_all_monitors_reported() {
        let mut s = SyncState::new(
            Duration::from_secs(300),
            vec!["Old".into(), "KernelDeadlock".into()],
            ["k".to_string(), "j".to_string()],
        );
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::False)]);
        let p = s.plan(t(0)).unwrap();
        assert!(p.remove.is_empty(), "monitor j has not reported yet");
        assert!(
            p.owned.contains(&"Old".to_string()),
            "ownership kept while waiting"
        );
        s.set_monitor("j", vec![]);
        let p = s.plan(t(0)).unwrap();
        assert_eq!(p.remove, vec!["Old"]);
        assert_eq!(p.owned, vec!["KernelDeadlock"]);
        s.succeeded(&p, t(0));
        assert!(s.plan(t(1)).is_none(), "removed once");
        s.remove_monitor("k");
        assert_eq!(s.plan(t(2)).unwrap().remove, vec!["KernelDeadlock"]);
    }

    #[test]
    fn failures_back_off_and_the_latest_state_wins() {
        let mut s = SyncState::new(Duration::from_secs(300), vec![], ["k".to_string()]);
        s.set_monitor("k", vec![cond("A", Status::True)]);
        assert!(s.plan(t(0)).is_some());
        assert_eq!(s.failed(t(0), false), Duration::from_secs(1));
        assert!(s.plan(t(0)).is_none());
        s.set_monitor("k", vec![cond("A", Status::False)]);
        assert_eq!(s.failed(t(1), false), Duration::from_secs(2));
        let p = s.plan(t(3)).unwrap();
        assert_eq!(
            p.set[0].status, "False",
            "the retry carries the newest state"
        );
        assert_eq!(backoff(10), Duration::from_secs(30));
    }

    #[test]
    fn message_only_changes_are_written_at_most_every_interval_and_the_last_one_wins() {
        let mut s = SyncState::new(Duration::from_secs(300), vec![], ["k".to_string()]);
        let with = |msg: &str| Condition {
            message: msg.into(),
            ..cond("KernelDeadlock", Status::True)
        };
        s.set_monitor("k", vec![with("task docker:1 blocked")]);
        s.succeeded(&s.plan(t(0)).unwrap(), t(0));
        for i in 2..200 {
            s.set_monitor("k", vec![with(&format!("task docker:{i} blocked"))]);
            assert!(s.plan(t(5)).is_none(), "a flood of new messages waits");
        }
        let p = s.plan(t(10)).unwrap();
        assert_eq!(
            p.set[0].message, "task docker:199 blocked",
            "the last message"
        );
        s.succeeded(&p, t(10));
        // a status change is never held back
        s.set_monitor("k", vec![cond("KernelDeadlock", Status::False)]);
        assert!(s.plan(t(11)).is_some());
    }
}
