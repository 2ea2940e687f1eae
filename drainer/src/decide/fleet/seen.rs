//! What the fleet remembers of the records it has seen, so that an older record written back on a
//! node (a replay) is told from the current one across restarts and leader changes: per node, the
//! newest record of ours the watch showed and whether it has been removed since. The leader keeps it
//! in [`SHARDS`] ConfigMaps of its own (`act::recall`), each node's entry in the one its name hashes
//! to; a new leader reads them back before it decides. Pure.
//!
//! Never on the Lease: the API server refuses an object whose annotations pass 256 KiB, and a
//! renewal carrying the memory of 3,300 nodes with records was refused, so leadership ended for
//! good. Kept apart, a write of the memory that fails is tried again and leadership never waits
//! on it.
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

/// How many ConfigMaps the memory is kept in. Sized for 65,000 nodes with records: at the longest
/// node names (253 characters) and the default reboot limit a shard holds about 640 KiB of the
/// 1 MiB a ConfigMap may (`a_shard_stays_within_a_configmap_at_65000_nodes_with_records`).
pub const SHARDS: usize = 32;

/// Which shard holds `node`'s entry: a hash that stays the same across releases.
pub(crate) fn shard_of(node: &str) -> usize {
    crc32fast::hash(node.as_bytes()) as usize % SHARDS
}

/// A bit per shard: those whose text may have changed.
pub(crate) type Dirty = u32;
/// Every shard.
pub(crate) const ALL_SHARDS: Dirty = Dirty::MAX;
/// The shard that holds the fleet's part (the newest time forgotten, replacements, slow start).
const FLEET_SHARD: usize = 0;

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
    /// When its power-cycles (reboots from outside) started, the last 24 hours'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) power_cycles: Vec<Timestamp>,
}

/// A node whose labels moved it out of the failure domain it had when first seen: the domain it is
/// kept in (`None`: it had none), for that Node object (its UID; a Node made again is read afresh).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Pinned {
    pub(crate) uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) domain: Option<String>,
}

/// Pinned domains kept at most: a node moves itself rarely, and each entry costs up to ~350 bytes
/// of its shard (past it, the pin of the least name goes: that node is read afresh at a restart).
pub(crate) const MAX_PINNED: usize = 8192;

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
    /// The nodes kept in a failure domain their labels no longer name, by name: a restart or a
    /// new leader keeps them there too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) pinned: BTreeMap<String, Pinned>,
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
    /// The shards that changed since they were last handed out, and when it was last pruned.
    pub(super) dirty: Dirty,
    pub(super) pruned: Option<Timestamp>,
    /// Per node, a hash of the record text last refused (each refused record is reported once).
    pub(super) refused: crate::model::intern::ByName<u64>,
    /// Records refused since the controller last took them.
    pub(super) rejected: Vec<(String, crate::model::record::Rejection)>,
}

impl Records {
    /// `node`'s entry changed (when `changed`).
    pub(super) fn node_changed(&mut self, node: &str, changed: bool) {
        if changed {
            self.dirty |= 1 << shard_of(node);
        }
    }

    /// The fleet's part changed (when `changed`).
    pub(super) fn fleet_changed(&mut self, changed: bool) {
        if changed {
            self.dirty |= 1 << FLEET_SHARD;
        }
    }
}

/// Memory text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable record memory: {0}")]
pub(crate) struct Unreadable(String);

/// One shard's part of the memory, as written: borrowed from the whole, never copied.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    nodes: BTreeMap<&'a str, &'a Newest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forgotten_before: Option<Timestamp>,
    #[serde(skip_serializing_if = "<[Timestamp]>::is_empty")]
    replaced: &'a [Timestamp],
    #[serde(skip_serializing_if = "Option::is_none")]
    pace: Option<&'a SlowStart>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pinned: BTreeMap<&'a str, &'a Pinned>,
}

impl Seen {
    pub(crate) fn from_annotation(s: &str) -> Result<Seen, Unreadable> {
        serde_json::from_str(s).map_err(|e| Unreadable(e.to_string()))
    }

    /// Shard `i`'s text: the entries of the nodes it holds, and in the first the fleet's part.
    pub(crate) fn shard_text(&self, i: usize) -> String {
        let fleet = i == FLEET_SHARD;
        let part = Part {
            nodes: (self.nodes.iter())
                .filter(|(n, _)| shard_of(n) == i)
                .map(|(n, e)| (n.as_str(), e))
                .collect(),
            forgotten_before: self.forgotten_before.filter(|_| fleet),
            replaced: if fleet { &self.replaced } else { &[] },
            pace: (fleet && !is_default(&self.pace)).then_some(&self.pace),
            pinned: (self.pinned.iter())
                .filter(|(n, _)| shard_of(n) == i)
                .map(|(n, p)| (n.as_str(), p))
                .collect(),
        };
        serde_json::to_string(&part).expect("plain data serialises")
    }

    /// The memory from its shards' texts (one missing counts as empty); a shard that does not
    /// parse counts as empty too, and is named in the second half.
    pub(crate) fn from_shards<'a>(
        texts: impl IntoIterator<Item = (usize, Option<&'a str>)>,
    ) -> (Seen, Vec<(usize, Unreadable)>) {
        let mut whole = Seen::default();
        let mut bad = Vec::new();
        for (i, text) in texts {
            let part = match text.map(Seen::from_annotation) {
                None => continue,
                Some(Ok(p)) => p,
                Some(Err(e)) => {
                    bad.push((i, e));
                    continue;
                }
            };
            whole.absorb(part);
        }
        (whole, bad)
    }

    /// Take in `other`'s entries, keeping the newer of each node's and the later forgotten time.
    pub(crate) fn absorb(&mut self, other: Seen) {
        for (node, e) in other.nodes {
            match self.nodes.get(&node) {
                Some(mine) if mine.at >= e.at => {}
                _ => {
                    self.nodes.insert(node, e);
                }
            }
        }
        self.forgotten_before = self.forgotten_before.max(other.forgotten_before);
        self.replaced.extend(other.replaced);
        self.replaced.sort();
        self.replaced.dedup();
        for (domain, pace) in other.pace.domains {
            self.pace.domains.entry(domain).or_insert(pace);
        }
        for (node, p) in other.pinned {
            self.pinned.entry(node).or_insert(p);
        }
    }

    /// Keep `node` (the Node object `uid`) in `domain`; whether that changed the memory.
    pub(crate) fn pin(&mut self, node: &str, uid: &str, domain: Option<&str>) -> bool {
        let p = Pinned {
            uid: uid.to_string(),
            domain: domain.map(String::from),
        };
        if self.pinned.get(node) == Some(&p) {
            return false;
        }
        self.pinned.insert(node.to_string(), p);
        while self.pinned.len() > MAX_PINNED {
            self.pinned.pop_first();
        }
        true
    }

    /// `node` is back in its domain, or gone; whether that changed the memory.
    pub(crate) fn unpin(&mut self, node: &str) -> bool {
        self.pinned.remove(node).is_some()
    }

    /// The domain `node` (the Node object `uid`) is kept in, if it is pinned.
    pub(crate) fn pinned(&self, node: &str, uid: &str) -> Option<Option<&str>> {
        (self.pinned.get(node))
            .filter(|p| p.uid == uid)
            .map(|p| p.domain.as_deref())
    }

    /// The whole memory as one text (the Lease annotation earlier releases kept it in).
    #[cfg(test)]
    pub(crate) fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("plain data serialises")
    }

    /// Forget removed records older than [`FORGET_AFTER`] at `now`, keeping the newest such time;
    /// the shards that changed.
    pub(crate) fn prune(&mut self, now: Timestamp) -> Dirty {
        let mut dirty: Dirty = 0;
        let cutoff = nodemedic_common::time::sub(now, FORGET_AFTER);
        let old: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.removed && n.at < cutoff)
            .map(|(k, _)| k.clone())
            .collect();
        let day_ago = nodemedic_common::time::sub(now, DAY);
        for (name, n) in self.nodes.iter_mut() {
            let before = n.reboots.len() + n.power_cycles.len();
            n.reboots.retain(|t| *t > day_ago);
            n.power_cycles.retain(|t| *t > day_ago);
            if n.reboots.len() + n.power_cycles.len() != before {
                dirty |= 1 << shard_of(name);
            }
        }
        let hour_ago = nodemedic_common::time::sub(now, HOUR);
        let before = self.replaced.len();
        self.replaced.retain(|t| *t > hour_ago);
        if self.replaced.len() != before {
            dirty |= 1 << FLEET_SHARD;
        }
        for k in old {
            if let Some(n) = self.nodes.remove(&k) {
                self.forgotten_before = Some(self.forgotten_before.map_or(n.at, |f| f.max(n.at)));
                dirty |= 1 << shard_of(&k) | 1 << FLEET_SHARD;
            }
        }
        dirty
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
                    power_cycles: Vec::new(),
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
            // Counted apart: a power-cycle is what follows a reboot that did not happen.
            Step::PowerCycle => match self.nodes.get_mut(node) {
                Some(n) => &mut n.power_cycles,
                None => return false,
            },
            Step::Replace => &mut self.replaced,
            // Restarts are limited by the node's detector (--restart-max-per-day).
            Step::Drain | Step::RestartKubelet | Step::RestartContainerd => return false,
        };
        if list.contains(&at) {
            return false;
        }
        list.push(at);
        true
    }

    /// The reboot or power-cycle of `node` started at `at` was never carried out (withheld, then
    /// started again): it is not one of the day's; whether that changed anything.
    pub(crate) fn unstepped(&mut self, node: &str, step: Step, at: Timestamp) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        let list = match step {
            Step::Reboot => &mut n.reboots,
            Step::PowerCycle => &mut n.power_cycles,
            _ => return false,
        };
        let before = list.len();
        list.retain(|t| *t != at);
        list.len() != before
    }

    /// How many reboots of `node` started within the 24 hours before `now`: (its own, power-cycles).
    pub(crate) fn reboots_today(&self, node: &str, now: Timestamp) -> (u32, u32) {
        let from = nodemedic_common::time::sub(now, DAY);
        let within = |l: &[Timestamp]| l.iter().filter(|t| **t > from).count() as u32;
        self.nodes
            .get(node)
            .map_or((0, 0), |n| (within(&n.reboots), within(&n.power_cycles)))
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

    #[test]
    fn reboots_and_power_cycles_count_for_a_day_then_are_forgotten() {
        let mut s = Seen::default();
        s.saw("n", Some(t(0)));
        assert!(s.stepped("n", Step::Reboot, t(10)));
        assert!(s.stepped("n", Step::PowerCycle, t(20)));
        assert_eq!(s.reboots_today("n", t(100)), (1, 1));
        let day = DAY.as_secs() as i64;
        let dirty = s.prune(t(day + 30));
        assert_ne!(dirty, 0, "the node's shard changed");
        assert_eq!(s.reboots_today("n", t(day + 30)), (0, 0));
        let n = &s.nodes["n"];
        assert!(
            n.reboots.is_empty() && n.power_cycles.is_empty(),
            "nothing kept past the day"
        );
    }

    #[test]
    fn the_memory_comes_back_whole_from_its_shards_and_a_change_marks_its_own_shard() {
        let mut s = Seen::default();
        for i in 0..200 {
            s.saw(&format!("node-{i}"), Some(t(i)));
        }
        s.saw("node-7", None);
        s.stepped("node-9", Step::Reboot, t(50));
        s.stepped("node-9", Step::Replace, t(60));
        s.forgotten_before = Some(t(-5));
        let texts: Vec<String> = (0..SHARDS).map(|i| s.shard_text(i)).collect();
        assert!(
            texts.iter().filter(|t| t.contains("node-")).count() > SHARDS / 2,
            "the nodes spread over the shards"
        );
        let (back, bad) =
            Seen::from_shards(texts.iter().enumerate().map(|(i, t)| (i, Some(t.as_str()))));
        assert!(bad.is_empty());
        assert_eq!(back, s);
        // A shard lost or unreadable loses its own nodes only, and is named.
        let (part, bad) = Seen::from_shards(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| (i, Some(if i == 3 { "{nope" } else { t.as_str() }))),
        );
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, 3);
        let lost = s.nodes.keys().filter(|n| shard_of(n) == 3).count();
        assert_eq!(part.nodes.len(), s.nodes.len() - lost);
        // Pruning marks the shards it changed, and the fleet's.
        let week = FORGET_AFTER.as_secs() as i64;
        let dirty = s.prune(t(week + 100));
        assert_eq!(
            dirty,
            1 << shard_of("node-7") | 1 << shard_of("node-9") | 1 << FLEET_SHARD
        );
    }

    /// Every object the memory is kept in stays within what a ConfigMap may hold with 65,000 nodes
    /// each with a record, at the longest names a Node may have, each node at its reboot limit.
    #[test]
    fn a_shard_stays_within_a_configmap_at_65000_nodes_with_records() {
        let mut s = Seen::default();
        for i in 0..65_000 {
            let name = format!("{i:06}-{}", "n".repeat(246));
            assert_eq!(name.len(), 253);
            s.saw(&name, Some(t(i)));
            s.stepped(&name, Step::Reboot, t(i + 1));
        }
        for i in 0..60 {
            s.stepped("x", Step::Replace, t(i));
        }
        // And as many nodes as may be pinned away from their labels' domain, more tried.
        for i in 0..(MAX_PINNED + 100) {
            let name = format!("{i:06}-{}", "n".repeat(246));
            let zone = format!("{}-{i}", "z".repeat(56));
            assert!(s.pin(&name, "0b6e0c36-8a6c-4b1e-9d3e-1f2a3b4c5d6e", Some(&zone)));
        }
        assert_eq!(s.pinned.len(), MAX_PINNED);
        let largest = (0..SHARDS).map(|i| s.shard_text(i).len()).max().unwrap();
        // A ConfigMap holds 1 MiB of keys and values; the key is a few bytes.
        assert!(largest < 800 * 1024, "the largest shard is {largest} bytes");
        eprintln!("the largest of {SHARDS} shards at 65,000 nodes with records: {largest} bytes");
        let smallest = (0..SHARDS).map(|i| s.shard_text(i).len()).min().unwrap();
        assert!(
            smallest > largest / 2,
            "shards are even: {smallest} against {largest}"
        );
    }
}
