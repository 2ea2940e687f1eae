//! What the drainer did to a node, kept as JSON in the node annotation `nodemedic.io/drain`, and its
//! transitions (pure). It is the drainer's only state: a restarted or new leader reads it back from
//! the Nodes. Each record is sealed ([`super::seal`]): one the drainer did not write for this Node
//! object is never taken as its own.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

use super::node::{NodeTaint, NodeView};
use super::seal::RecordTrust;
use crate::model::ladder::{Ladder, Step};

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
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
    /// Not cordoned, a component's restart requested of the node's detector (a ladder's first
    /// step, before the drain): proven when the node is Ready and the problem clear by
    /// `step_until`; otherwise cordoned and drained as the ladder goes on.
    Restarting,
    /// Drained, and a reboot requested (a ladder step): proven when the node is back with a bootID
    /// other than `boot_id`, Ready and the problem clear, by `step_until`.
    Rebooting,
    /// Drained, and the Node deleted so the cluster's node lifecycle replaces it (a ladder step):
    /// proven when the Node is gone by `step_until`.
    Replacing,
    /// The ladder has ended: the node stays cordoned until a person acts (or the problem clears).
    NeedsPerson,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The drainer that owns the record (its Lease name): two drainers with disjoint selectors never
    /// act on, or count, each other's nodes. Empty in records written before owners were recorded:
    /// those belong to whichever drainer selects the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) owner: String,
    /// Identity of the problem episode: the matched conditions with their transition times.
    pub(crate) episode: String,
    /// Human-readable: which conditions, since when.
    pub(crate) reason: String,
    pub(crate) phase: Phase,
    pub(crate) cordoned_at: Timestamp,
    /// Not drained before this time (cordon time + drain buffer).
    pub(crate) drain_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) drain_started: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) finished_at: Option<Timestamp>,
    #[serde(default)]
    pub(crate) attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_at: Option<Timestamp>,
    /// The taints this drainer put on the node (`KEY[=VALUE]:EFFECT`): only these are removed
    /// again, and a person removing one releases the node, as an uncordon does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) taints: Vec<String>,
    /// Whether this drainer holds the node's cordon (`spec.unschedulable`) now: not in taint-only
    /// mode (`--cordon=false`), nor during a probation that swapped the cordon for a taint. Records
    /// written before taints existed hold it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub(crate) cordoned: bool,
    /// In probation, uncordoned at this time if the node stays healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) probation_until: Option<Timestamp>,
    /// The remediation ladder this episode climbs (the held condition's, taken when its first
    /// step past the drain starts; None: draino's form, drain and wait).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "ladder_text")]
    pub(crate) ladder: Option<Ladder>,
    /// The last ladder step taken past the drain (kept through probation and a relapse, so a
    /// problem that comes back goes on to the next step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) step: Option<Step>,
    /// When that step started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) step_at: Option<Timestamp>,
    /// Its proof is due by then; without it the ladder goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) step_until: Option<Timestamp>,
    /// The node's `bootID` when its reboot was requested: the reboot is proven by another one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) boot_id: String,
    /// How this episode's ladder attempts ended (the last few: `model::attempt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) ended: Vec<super::attempt::Attempt>,
    /// Why the ladder ended with a person (phase `needsperson`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) escalated: String,
    /// The Node this record is for, by name and UID (sealed with it: a record copied to another
    /// node, or to a new Node object of the same name, fails the check).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) node: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) uid: String,
    /// When this version of the record was decided; every later version of a node's record is
    /// later, so an older one written back (a replay) is told from the current one.
    #[serde(default = "epoch", skip_serializing_if = "is_epoch")]
    pub(crate) at: Timestamp,
    /// The drainer's seal over all of the above ([`super::seal`]); last, and empty when unsealed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) seal: String,
}

fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

fn is_epoch(t: &Timestamp) -> bool {
    *t == Timestamp::UNIX_EPOCH
}

/// A ladder in a record as its conditions write it (`drain, reboot, replace`).
mod ladder_text {
    use crate::model::ladder::Ladder;

    pub(super) fn serialize<S: serde::Serializer>(
        l: &Option<Ladder>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match l {
            Some(l) => s.serialize_str(&l.to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Ladder>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// What reading a node's record came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Checked {
    /// No record on the node.
    Absent,
    /// Written by this drainer, for this Node object.
    Authentic(Record),
    /// It names another drainer (another Lease name) as its owner: that drainer's to check, never
    /// acted on nor counted here ([`Record::owned_by`]).
    Foreign(Record),
    /// There is one, and it is not ours to act on.
    Rejected(Rejection),
}

/// Why a record on a node is not taken as the drainer's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejection {
    #[error("it does not parse ({0})")]
    Unreadable(String),
    #[error(
        "it carries no seal (forged, or written by a nodemedic release from before records were sealed)"
    )]
    Unsealed,
    #[error(
        "its seal does not match (forged or altered: the drainer's key did not seal this content)"
    )]
    BadSeal,
    #[error("it was sealed for node {node} (uid {uid}), not this Node object")]
    OtherNode { node: String, uid: String },
    #[error(
        "it is an older record of this node written back (written at {at}, the newest seen is from {newest})"
    )]
    Replayed { at: Timestamp, newest: Timestamp },
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
            ladder: None,
            step: None,
            step_at: None,
            step_until: None,
            boot_id: String::new(),
            ended: Vec::new(),
            escalated: String::new(),
            node: String::new(),
            uid: String::new(),
            at: Timestamp::UNIX_EPOCH,
            seal: String::new(),
        }
    }
}

/// A record annotation that does not parse (the decision treats the node as having none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable drain record in {DRAIN_RECORD_ANNOTATION}: {0}")]
pub struct Unreadable(pub String);

/// Why a pod of a drain was not evicted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EvictError {
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
pub(crate) enum DrainOutcome {
    /// Every pod to evict is gone.
    Drained,
    /// Some pods could not be evicted in time; each entry says which and why.
    Failed(Vec<EvictError>),
}

impl Record {
    /// Read from a node as it is, unchecked (what `explain` shows): `Ok(None)` without a record,
    /// `Err` for one that does not parse.
    pub fn parse(node: &NodeView) -> Result<Option<Record>, Unreadable> {
        let Some(raw) = node.annotations.get(DRAIN_RECORD_ANNOTATION) else {
            return Ok(None);
        };
        serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| Unreadable(e.to_string()))
    }

    /// Read from a node and checked under `trust`: ours (drainer `owner`) for this Node object,
    /// another drainer's, or why not. (A replay needs the history of the node: the fleet tells it,
    /// see [`Rejection::Replayed`].)
    pub(crate) fn check(node: &NodeView, trust: &RecordTrust, owner: &str) -> Checked {
        let r = match Record::parse(node) {
            Ok(None) => return Checked::Absent,
            Ok(Some(r)) => r,
            Err(Unreadable(e)) => return Checked::Rejected(Rejection::Unreadable(e)),
        };
        let RecordTrust::Sealed(key) = trust else {
            return Checked::Authentic(r);
        };
        if !r.owner.is_empty() && r.owner != owner {
            return Checked::Foreign(r);
        }
        if r.seal.is_empty() {
            return Checked::Rejected(Rejection::Unsealed);
        }
        if !key.verify(r.body().as_bytes(), &r.seal) {
            return Checked::Rejected(Rejection::BadSeal);
        }
        // The seal belongs to the text; the record is what it says.
        let mut r = r;
        r.seal.clear();
        if r.node != node.name.as_str() || r.uid != node.uid.to_string() {
            return Checked::Rejected(Rejection::OtherNode {
                node: r.node,
                uid: r.uid,
            });
        }
        Checked::Authentic(r)
    }

    /// The node's record if it is ours or another drainer's ([`Record::check`]); one that fails
    /// the check counts as none.
    pub(crate) fn of(node: &NodeView, trust: &RecordTrust, owner: &str) -> Option<Record> {
        match Record::check(node, trust, owner) {
            Checked::Authentic(r) | Checked::Foreign(r) => Some(r),
            Checked::Absent | Checked::Rejected(_) => None,
        }
    }

    /// This record as the version after one written at `prev` (None: the node's first) for
    /// `node`, decided at `now`: bound to the Node object, and later than the version it follows.
    pub(crate) fn bound(
        mut self,
        node: &NodeView,
        prev: Option<Timestamp>,
        now: Timestamp,
    ) -> Record {
        self.node = node.name.to_string();
        self.uid = node.uid.to_string();
        self.at = later(now, prev);
        self
    }

    /// The JSON the seal covers: everything but the seal.
    fn body(&self) -> String {
        let mut r = self.clone();
        r.seal.clear();
        serde_json::to_string(&r).expect("record serialises")
    }

    /// The annotation's value: the record, sealed under `trust`'s key.
    pub(crate) fn to_annotation(&self, trust: &RecordTrust) -> String {
        let body = self.body();
        match trust {
            RecordTrust::Sealed(key) => {
                let mut r = self.clone();
                r.seal = key.seal(body.as_bytes());
                serde_json::to_string(&r).expect("record serialises")
            }
            RecordTrust::Unchecked => body,
        }
    }

    /// The record once a drain attempt starts at `now`.
    pub(crate) fn draining(&self, now: Timestamp) -> Record {
        let mut r = self.clone();
        r.at = later(now, Some(self.at));
        r.phase = Phase::Draining;
        r.drain_started.get_or_insert(now);
        r.attempts += 1;
        r
    }

    /// The record once the attempt ended with `outcome` at `now`: drained, or failed and retried after
    /// a backoff that doubles per attempt from `retry_base` up to `retry_max`.
    pub(crate) fn finished(
        &self,
        outcome: &DrainOutcome,
        now: Timestamp,
        retry_base: std::time::Duration,
        retry_max: std::time::Duration,
    ) -> Record {
        let mut r = self.clone();
        r.at = later(now, Some(self.at));
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

    /// Whether a drainer named `owner` may act on this record of a node it does (`selected`) or does
    /// not select.
    pub(crate) fn owned_by(&self, owner: &str, selected: bool) -> bool {
        if self.owner.is_empty() {
            selected
        } else {
            self.owner == owner
        }
    }

    /// Still held by us (not released to a person): counted against the cordon budgets.
    pub(crate) fn holds_cordon(&self) -> bool {
        self.phase != Phase::Released
    }

    /// The taints this record says we hold (those that do not parse, from an edited annotation,
    /// are skipped).
    pub(crate) fn held_taints(&self) -> Vec<NodeTaint> {
        self.taints.iter().filter_map(|t| t.parse().ok()).collect()
    }

    /// Whether our hold is still in place on `node`: the cordon we set (if we hold it) and every
    /// taint we put on. A person lifting either has released the node for this episode; the
    /// taint or cordon not yet lifted is named too.
    pub(crate) fn lifted(&self, node: &NodeView) -> Option<String> {
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

/// `now`, or just after `prev` if that is later (a leader whose clock is behind the last one's still
/// writes versions that come later).
fn later(now: Timestamp, prev: Option<Timestamp>) -> Timestamp {
    match prev {
        Some(p) if p >= now => p.saturating_add(SignedDuration::from_nanos(1)).unwrap_or(p),
        _ => now,
    }
}

/// The wait before retrying after failed attempt number `attempts` (1-based): `base`, doubling, at most
/// `max`.
pub(crate) fn retry_backoff(
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

    fn view_with(name: &str, uid: &str, annotation: &str) -> NodeView {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": uid,
                "annotations": {DRAIN_RECORD_ANNOTATION: annotation}}}))
        .unwrap();
        NodeView::of(&node)
    }

    const UID: &str = "5cbc7f88-f0c1-4ee8-ad90-fa31dcf1b425";

    #[test]
    fn a_sealed_record_is_authentic_only_on_its_own_node_object_and_unaltered() {
        let key = RecordTrust::Sealed(std::sync::Arc::new(
            super::super::seal::SealKey::new(&[3u8; 32]).unwrap(),
        ));
        let on = view_with("n", UID, "");
        let r = cordoned().bound(&on, None, t(5));
        assert_eq!((r.node.as_str(), r.uid.as_str(), r.at), ("n", UID, t(5)));
        let text = r.to_annotation(&key);
        assert_eq!(text, r.to_annotation(&key), "sealing is deterministic");
        // Authentic where it was written, and read back as it was written.
        assert_eq!(
            Record::check(&view_with("n", UID, &text), &key, "d"),
            Checked::Authentic(r.clone())
        );
        // Another key (a forger's), an altered field, another node, another Node object.
        let forger = RecordTrust::Sealed(std::sync::Arc::new(
            super::super::seal::SealKey::new(&[4u8; 32]).unwrap(),
        ));
        let forged = r.to_annotation(&forger);
        assert_eq!(
            Record::check(&view_with("n", UID, &forged), &key, "d"),
            Checked::Rejected(Rejection::BadSeal)
        );
        let altered = text.replace("\"cordoned\"", "\"draining\"");
        assert_ne!(altered, text);
        assert_eq!(
            Record::check(&view_with("n", UID, &altered), &key, "d"),
            Checked::Rejected(Rejection::BadSeal)
        );
        let other_uid = "00000000-0000-4000-8000-000000000009";
        for (name, uid) in [("m", UID), ("n", other_uid)] {
            assert!(matches!(
                Record::check(&view_with(name, uid, &text), &key, "d"),
                Checked::Rejected(Rejection::OtherNode { .. })
            ));
            assert_eq!(Record::of(&view_with(name, uid, &text), &key, "d"), None);
        }
        // Unsealed (a release before seals, or a forger without the key).
        let bare = r.to_annotation(&RecordTrust::Unchecked);
        assert_eq!(
            Record::check(&view_with("n", UID, &bare), &key, "d"),
            Checked::Rejected(Rejection::Unsealed)
        );
        // Another drainer's: not ours to check, nor to act on.
        let mut theirs = r.clone();
        theirs.owner = "other".into();
        let theirs_text = theirs.to_annotation(&forger);
        assert!(matches!(
            Record::check(&view_with("n", UID, &theirs_text), &key, "d"),
            Checked::Foreign(f) if !f.owned_by("d", true)
        ));
    }

    #[test]
    fn each_version_of_a_record_is_later_than_the_one_it_follows() {
        let (base, max) = (Duration::from_secs(60), Duration::from_secs(1800));
        let on = view_with("n", UID, "");
        let first = cordoned().bound(&on, None, t(10));
        // A leader whose clock is behind still writes a later version.
        let next = cordoned().bound(&on, Some(first.at), t(3));
        assert!(next.at > first.at);
        let draining = first.draining(t(2));
        assert!(draining.at > first.at);
        let done = draining.finished(&DrainOutcome::Drained, t(1), base, max);
        assert!(done.at > draining.at);
        assert_eq!(done.node, "n", "node and uid kept through transitions");
    }

    #[test]
    fn an_unreadable_record_is_an_error_not_a_panic_or_a_log() {
        let node: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n",
            "annotations": {DRAIN_RECORD_ANNOTATION: "{not json"}}}))
            .unwrap();
        let node = NodeView::of(&node);
        assert!(Record::parse(&node).is_err());
        let trust = RecordTrust::process();
        assert_eq!(Record::of(&node, &trust, "d"), None);
        assert!(matches!(
            Record::check(&node, &trust, "d"),
            Checked::Rejected(Rejection::Unreadable(_))
        ));
        let none = NodeView::default();
        assert_eq!(Record::parse(&none), Ok(None));
    }
}
