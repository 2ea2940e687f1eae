//! What the fleet remembers of the records it has seen, so that an older record written back on a
//! node (a replay) is told from the current one across restarts and leader changes: per node, the
//! newest record of ours the watch showed and whether it has been removed since. The leader keeps it
//! on its Lease (`nodemedic.io/records`, which only the drainer may write); a new leader reads it
//! back before it decides. Pure.
//!
//! It stays small: removed records are forgotten after [`FORGET_AFTER`], and the newest time
//! forgotten is kept instead (`forgotten_before`): a record that old on a node with no entry is a
//! replay, since a current one would still have its entry.
//!
//! It also remembers the remediation ladder's steps the records showed, for its limits: each
//! node's reboots of the last 24 hours (`--max-reboots-per-node-per-day`, which must hold across
//! episodes, whose records are removed) and the fleet's replacements of the last hour
//! (`--max-replacements-per-hour`, whose Nodes are gone), and each failure domain's slow start
//! (`decide::gates::slow_start`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::config::ladder::Step;
use crate::decide::gates::slow_start::SlowStart;

/// How long a removed record's time is kept per node.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// The newest of our records seen on a node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Newest {
    pub(crate) at: Timestamp,
    /// The watch has shown the node without it since.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) removed: bool,
    /// When the ladder's reboots of this node started, the last 24 hours'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) reboots: Vec<Timestamp>,
}

/// How long a reboot counts against its node's limit.
const DAY: Duration = Duration::from_secs(24 * 3600);
/// How long a replacement counts against the fleet's.
const HOUR: Duration = Duration::from_secs(3600);

/// Every node's [`Newest`], and the newest time forgotten.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Seen {
    #[serde(default)]
    pub(crate) nodes: BTreeMap<String, Newest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) forgotten_before: Option<Timestamp>,
    /// When the ladder's replacements started, the last hour's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) replaced: Vec<Timestamp>,
    /// Each failure domain's slow start.
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) pace: SlowStart,
}

fn is_default(s: &SlowStart) -> bool {
    s.domains.is_empty()
}

/// The fleet's memory of records: what the watch showed ([`Seen`]), whether it changed since it
/// was last kept on the Lease, and the records refused (each reported once).
#[derive(Default)]
pub(crate) struct Records {
    /// Per node, the newest of our records the watch showed (`Record::at`), and whether the watch
    /// has since shown it removed: an older one seen later, or that one again once removed, was
    /// written back by someone else (a replay) and is not ours to act on. Kept on the Lease.
    pub(super) seen: Seen,
    /// The memory changed since it was last handed out, and when it was last pruned.
    pub(super) changed: bool,
    pub(super) pruned: Option<Timestamp>,
    /// Per node, a hash of the record text last refused (each refused record is reported once).
    pub(super) refused: crate::model::intern::ByName<u64>,
    /// Records refused since the controller last took them.
    pub(super) rejected: Vec<(String, crate::model::record::Rejection)>,
}

/// What the Lease annotation holds that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable record memory on the Lease: {0}")]
pub(crate) struct Unreadable(String);

impl Seen {
    pub(crate) fn from_annotation(s: &str) -> Result<Seen, Unreadable> {
        serde_json::from_str(s).map_err(|e| Unreadable(e.to_string()))
    }

    pub(crate) fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("plain data serialises")
    }

    /// Forget removed records older than [`FORGET_AFTER`] at `now`, keeping the newest such time;
    /// whether any was.
    pub(crate) fn prune(&mut self, now: Timestamp) -> bool {
        let cutoff = nodemedic_common::time::sub(now, FORGET_AFTER);
        let old: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.removed && n.at < cutoff)
            .map(|(k, _)| k.clone())
            .collect();
        let mut pruned = !old.is_empty();
        let day_ago = nodemedic_common::time::sub(now, DAY);
        for n in self.nodes.values_mut() {
            let before = n.reboots.len();
            n.reboots.retain(|t| *t > day_ago);
            pruned |= n.reboots.len() != before;
        }
        let hour_ago = nodemedic_common::time::sub(now, HOUR);
        let before = self.replaced.len();
        self.replaced.retain(|t| *t > hour_ago);
        pruned |= self.replaced.len() != before;
        for k in old {
            if let Some(n) = self.nodes.remove(&k) {
                self.forgotten_before = Some(self.forgotten_before.map_or(n.at, |f| f.max(n.at)));
            }
        }
        pruned
    }

    /// Whether a record of ours written at `at` on `node` is an older one written back.
    pub(crate) fn replayed(&self, node: &str, at: Timestamp) -> Option<Timestamp> {
        match self.nodes.get(node) {
            Some(n) if at < n.at || (n.removed && at == n.at) => Some(n.at),
            Some(_) => None,
            None => self.forgotten_before.filter(|f| at <= *f),
        }
    }

    /// The watch showed our record of `at` on `node` (None: no record); whether that changed
    /// anything.
    pub(crate) fn saw(&mut self, node: &str, at: Option<Timestamp>) -> bool {
        match (at, self.nodes.get_mut(node)) {
            (Some(at), Some(n)) if at > n.at => {
                n.at = at;
                n.removed = false;
                true
            }
            (Some(at), None) => {
                let n = Newest {
                    at,
                    removed: false,
                    reboots: Vec::new(),
                };
                self.nodes.insert(node.to_string(), n);
                true
            }
            (None, Some(n)) if !n.removed => {
                n.removed = true;
                true
            }
            _ => false,
        }
    }
}

impl Seen {
    /// A record of ours showed the ladder's `step` on `node`, started at `at`; whether that is new.
    pub(crate) fn stepped(&mut self, node: &str, step: Step, at: Timestamp) -> bool {
        let list = match step {
            Step::Reboot => match self.nodes.get_mut(node) {
                Some(n) => &mut n.reboots,
                None => return false,
            },
            Step::Replace => &mut self.replaced,
            Step::Drain => return false,
        };
        if list.contains(&at) {
            return false;
        }
        list.push(at);
        true
    }

    /// How many reboots of `node` started within the 24 hours before `now`.
    pub(crate) fn reboots_today(&self, node: &str, now: Timestamp) -> u32 {
        let from = nodemedic_common::time::sub(now, DAY);
        self.nodes.get(node).map_or(0, |n| {
            n.reboots.iter().filter(|t| **t > from).count() as u32
        })
    }

    /// When the replacements of the hour before `now` started.
    pub(crate) fn replaced_within_the_hour(&self, now: Timestamp) -> Vec<Timestamp> {
        let from = nodemedic_common::time::sub(now, HOUR);
        self.replaced
            .iter()
            .copied()
            .filter(|t| *t > from)
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
    fn older_records_and_the_removed_one_are_replays_and_the_memory_survives_its_annotation() {
        let mut s = Seen::default();
        s.saw("n", Some(t(100)));
        s.saw("n", Some(t(200)));
        assert_eq!(s.replayed("n", t(100)), Some(t(200)));
        assert_eq!(s.replayed("n", t(200)), None, "the current one");
        s.saw("n", None);
        assert_eq!(s.replayed("n", t(200)), Some(t(200)), "the removed one");
        assert_eq!(s.replayed("n", t(300)), None, "a later one");
        let back = Seen::from_annotation(&s.to_annotation()).unwrap();
        assert_eq!(back, s);
        assert!(Seen::from_annotation("{not json").is_err());
    }

    #[test]
    fn removed_records_are_forgotten_after_a_week_and_what_old_stays_a_replay() {
        let mut s = Seen::default();
        s.saw("gone", Some(t(0)));
        s.saw("gone", None);
        s.saw("held", Some(t(10)));
        let week = FORGET_AFTER.as_secs() as i64;
        s.prune(t(week + 100));
        assert!(!s.nodes.contains_key("gone"));
        assert!(
            s.nodes.contains_key("held"),
            "a current record is never forgotten"
        );
        assert_eq!(s.forgotten_before, Some(t(0)));
        assert_eq!(s.replayed("gone", t(0)), Some(t(0)));
        assert_eq!(s.replayed("new", t(week)), None, "a record written since");
    }
}
