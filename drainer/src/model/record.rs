//! What the drainer did to a node, kept as JSON in the node annotation `nodemedic.io/drain`, and its
//! transitions (pure). It is the drainer's only state: a restarted or new leader reads it back from
//! the Nodes.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

use super::node::{NodeTaint, NodeView};

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Cordoned (or tainted); the drain waits for its time.
    #[default]
    Cordoned,
    /// Evicting pods.
    Draining,
    /// All evictable pods are gone.
    Drained,
    /// The last drain failed; retried after `retry_at`.
    Failed,
    /// A person uncordoned the node during this episode: not cordoned again until the problem changes.
    Released,
    /// The problem cleared: the node is uncordoned once it has stayed healthy until
    /// `probation_until` (`--uncordon-after`), meanwhile cordoned or, with `--probation-taint`,
    /// only carrying that taint.
    Probation,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The drainer that owns the record (its Lease name): two drainers with disjoint selectors never
    /// act on, or count, each other's nodes. Empty in records written before owners were recorded:
    /// those belong to whichever drainer selects the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// Identity of the problem episode: the matched conditions with their transition times.
    pub episode: String,
    /// Human-readable: which conditions, since when.
    pub reason: String,
    pub phase: Phase,
    pub cordoned_at: Timestamp,
    /// Not drained before this time (cordon time + drain buffer).
    pub drain_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_started: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
    /// The taints this drainer put on the node (`KEY[=VALUE]:EFFECT`): only these are removed
    /// again, and a person removing one releases the node, as an uncordon does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
    /// Whether this drainer holds the node's cordon (`spec.unschedulable`) now: not in taint-only
    /// mode (`--cordon=false`), nor during a probation that swapped the cordon for a taint. Records
    /// written before taints existed hold it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub cordoned: bool,
    /// In probation, uncordoned at this time if the node stays healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probation_until: Option<Timestamp>,
}

impl Default for Record {
    fn default() -> Record {
        Record {
            owner: String::new(),
            episode: String::new(),
            reason: String::new(),
            phase: Phase::Cordoned,
            cordoned_at: Timestamp::UNIX_EPOCH,
            drain_at: Timestamp::UNIX_EPOCH,
            drain_started: None,
            finished_at: None,
            attempts: 0,
            retry_at: None,
            taints: Vec::new(),
            cordoned: true,
            probation_until: None,
        }
    }
}

/// A record annotation that does not parse (the decision treats the node as having none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable drain record in {DRAIN_RECORD_ANNOTATION}: {0}")]
pub struct Unreadable(pub String);

/// Why a pod of a drain was not evicted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictError {
    #[error("{pod}: leadership lost")]
    LeadershipLost { pod: String },
    #[error("{pod}: not evicted before the deadline")]
    NotEvicted { pod: String },
    #[error("{pod}: evicted but still present at the deadline")]
    StillPresent { pod: String },
    #[error("{pod}: cannot force-delete it: {error}")]
    ForceDeleteFailed { pod: String, error: String },
}

/// How a drain attempt ended, as the shell reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainOutcome {
    /// Every pod to evict is gone.
    Drained,
    /// Some pods could not be evicted in time; each entry says which and why.
    Failed(Vec<EvictError>),
}

impl Record {
    /// Read from a node: `Ok(None)` without a record, `Err` for one that does not parse.
    pub fn parse(node: &NodeView) -> Result<Option<Record>, Unreadable> {
        let Some(raw) = node.annotations.get(DRAIN_RECORD_ANNOTATION) else {
            return Ok(None);
        };
        serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| Unreadable(e.to_string()))
    }

    /// Read from a node; an unreadable record counts as none (see [`Record::parse`]).
    pub fn of(node: &NodeView) -> Option<Record> {
        Record::parse(node).ok().flatten()
    }

    /// The record once a drain attempt starts at `now`.
    pub fn draining(&self, now: Timestamp) -> Record {
        let mut r = self.clone();
        r.phase = Phase::Draining;
        r.drain_started.get_or_insert(now);
        r.attempts += 1;
        r
    }

    /// The record once the attempt ended with `outcome` at `now`: drained, or failed and retried after
    /// a backoff that doubles per attempt from `retry_base` up to `retry_max`.
    pub fn finished(
        &self,
        outcome: &DrainOutcome,
        now: Timestamp,
        retry_base: std::time::Duration,
        retry_max: std::time::Duration,
    ) -> Record {
        let mut r = self.clone();
        r.finished_at = Some(now);
        match outcome {
            DrainOutcome::Drained => {
                r.phase = Phase::Drained;
                r.retry_at = None;
            }
            DrainOutcome::Failed(_) => {
                r.phase = Phase::Failed;
                r.retry_at = Some(nodemedic_common::time::add(
                    now,
                    retry_backoff(r.attempts, retry_base, retry_max),
                ));
            }
        }
        r
    }

    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("record serialises")
    }

    /// Whether a drainer named `owner` may act on this record of a node it does (`selected`) or does
    /// not select.
    pub fn owned_by(&self, owner: &str, selected: bool) -> bool {
        if self.owner.is_empty() {
            selected
        } else {
            self.owner == owner
        }
    }

    /// Still held by us (not released to a person): counted against the cordon budgets.
    pub fn holds_cordon(&self) -> bool {
        self.phase != Phase::Released
    }

    /// The taints this record says we hold (those that do not parse, from an edited annotation,
    /// are skipped).
    pub fn held_taints(&self) -> Vec<NodeTaint> {
        self.taints.iter().filter_map(|t| t.parse().ok()).collect()
    }

    /// Whether our hold is still in place on `node`: the cordon we set (if we hold it) and every
    /// taint we put on. A person lifting either has released the node for this episode; the
    /// taint or cordon not yet lifted is named too.
    pub fn lifted(&self, node: &NodeView) -> Option<String> {
        if self.cordoned && !node.unschedulable {
            return Some("uncordoned".into());
        }
        let missing: Vec<&str> = self
            .taints
            .iter()
            .filter(|t| t.parse::<NodeTaint>().map_or(true, |t| !node.has_taint(&t)))
            .map(String::as_str)
            .collect();
        (!missing.is_empty()).then(|| format!("taint {} removed", missing.join(", ")))
    }
}

/// The wait before retrying after failed attempt number `attempts` (1-based): `base`, doubling, at most
/// `max`.
pub fn retry_backoff(
    attempts: u32,
    base: std::time::Duration,
    max: std::time::Duration,
) -> std::time::Duration {
    base.saturating_mul(1 << attempts.saturating_sub(1).min(10))
        .min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn cordoned() -> Record {
        Record {
            owner: "d".into(),
            episode: "KernelDeadlock=True@1".into(),
            reason: "KernelDeadlock=True".into(),
            phase: Phase::Cordoned,
            cordoned_at: t(0),
            drain_at: t(600),
            drain_started: None,
            finished_at: None,
            attempts: 0,
            retry_at: None,
            ..Default::default()
        }
    }

    #[test]
    fn a_drain_attempt_moves_the_record_through_its_phases() {
        let (base, max) = (Duration::from_secs(60), Duration::from_secs(1800));
        let d = cordoned().draining(t(600));
        assert_eq!(
            (d.phase, d.attempts, d.drain_started),
            (Phase::Draining, 1, Some(t(600)))
        );
        let ok = d.finished(&DrainOutcome::Drained, t(700), base, max);
        assert_eq!(
            (ok.phase, ok.finished_at, ok.retry_at),
            (Phase::Drained, Some(t(700)), None)
        );
        let failed = d.finished(&DrainOutcome::Failed(vec![]), t(700), base, max);
        assert_eq!(failed.phase, Phase::Failed);
        assert_eq!(failed.retry_at, Some(t(760)), "first retry after the base");
        // the second attempt keeps its first start and doubles the backoff
        let again = failed.draining(t(800));
        assert_eq!((again.attempts, again.drain_started), (2, Some(t(600))));
        let failed2 = again.finished(&DrainOutcome::Failed(vec![]), t(900), base, max);
        assert_eq!(failed2.retry_at, Some(t(1020)));
        assert_eq!(retry_backoff(30, base, max), max, "capped");
    }

    #[test]
    fn an_unreadable_record_is_an_error_not_a_panic_or_a_log() {
        let node: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n",
            "annotations": {DRAIN_RECORD_ANNOTATION: "{not json"}}}))
            .unwrap();
        let node = NodeView::of(&node);
        assert!(Record::parse(&node).is_err());
        assert_eq!(Record::of(&node), None);
        let none = NodeView::default();
        assert_eq!(Record::parse(&none), Ok(None));
    }
}
