//! What the fleet is told of the remediation objects its medik8s power-cycles made (pure): which
//! stand for a node's current attempt, and whether the remediator gave up on it (the ladder then
//! goes on at once, as NodeHealthCheck escalates on `Succeeded=False`, rather than at the reboot
//! deadline); which are over, to be deleted (as NodeHealthCheck deletes its own once the node is
//! healthy or gone: Fence Agents Remediation lifts its taints then).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{Fleet, GaveUp};
use crate::config::ladder::Step;
use crate::model::intern::ArcStr;
use crate::model::medik8s::{Outcome, Remediation};
use crate::model::record::Phase;

/// An object younger than this is never over: its record might not have reached the fleet yet
/// (the record is written, then the object made, then the fleet told, all in one round; this is
/// a margin, not a wait the protocol needs).
pub(crate) const SETTLE: Duration = Duration::from_secs(15);

impl Fleet {
    /// Our remediation objects as listed at `now`: a remediator that gave up on a node's current
    /// attempt is kept for the node's next decision (decided again at once); the objects returned
    /// are over (their attempt proven, gone on, forgotten, or the node gone) and to be deleted.
    /// One that expects its node's deletion for good is kept until it succeeds.
    pub(crate) fn follow(&mut self, listed: Vec<Remediation>, now: Timestamp) -> Vec<Remediation> {
        let mut gave_up = GaveUp::new();
        let mut over = Vec::new();
        let settled = nodemedic_common::time::sub(now, SETTLE);
        for r in listed {
            if let Some(name) = self.attempt_of(&r) {
                if let Outcome::Failed(why) = &r.outcome {
                    gave_up.insert(name, (r.operation.clone(), why.clone()));
                }
            } else if r.outcome != Outcome::NodeDeletionExpected
                && r.created.is_some_and(|c| c <= settled)
            {
                over.push(r);
            }
        }
        for name in gave_up.keys() {
            if !self.gave_up.contains_key(name) {
                self.queue.dirty.insert(name.clone());
            }
        }
        self.gave_up = gave_up;
        over
    }

    /// The node whose current attempt `r` stands for, if one does: its record ours, rebooting
    /// through a power-cycle, with `r`'s operation ID.
    fn attempt_of(&self, r: &Remediation) -> Option<ArcStr> {
        let e = self.nodes.get(r.node.as_str())?;
        let current = self.operation(&r.node)? == r.operation;
        current.then(|| e.view.name.clone())
    }

    /// The operation ID of `name`'s power-cycle under way, if one is.
    fn operation(&self, name: &str) -> Option<String> {
        let e = self.nodes.get(name)?;
        let r = e.record.as_deref()?;
        let ours = r.owner.is_empty() || r.owner == self.cfg.owner;
        let cycling = r.phase == Phase::Rebooting && r.step == Some(Step::PowerCycle);
        (ours && cycling).then(|| format!("{}-{}", e.view.uid, r.boot_id))
    }

    /// Whether a node of ours is power-cycling now.
    pub(crate) fn power_cycling(&self) -> bool {
        self.nodes.keys().any(|n| self.operation(n).is_some())
    }

    /// What `name`'s remediator said when it gave up on its current attempt, if it did.
    pub(crate) fn gave_up(&self, name: &str) -> Option<&str> {
        let (operation, why) = self.gave_up.get(name)?;
        (self.operation(name).as_ref() == Some(operation)).then_some(why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::medik8s::Outcome;
    use crate::model::node::NodeView;
    use crate::model::record::Record;
    use std::sync::Arc;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    /// A fleet holding node `n` (UID `u-n`), power-cycling from boot `b1` as its record says.
    fn cycling() -> Fleet {
        let mut f = Fleet::new(Arc::new(crate::config::Config::default()));
        let view = NodeView {
            name: "n".into(),
            uid: crate::model::node::Uid::parse("u-n"),
            resource_version: "1".into(),
            ..Default::default()
        };
        f.observe(Arc::new(view.clone()), t(0));
        let record = Record {
            owner: crate::config::DEFAULT_OWNER.into(),
            phase: Phase::Rebooting,
            step: Some(Step::PowerCycle),
            boot_id: "b1".into(),
            ..Default::default()
        }
        .bound(&view, None, t(0));
        f.wrote("n", Some(&record), t(0));
        let rejected = f.take_rejected();
        assert!(
            rejected.is_empty(),
            "{:?}",
            rejected.iter().map(|r| r.1.to_string()).collect::<Vec<_>>()
        );
        f
    }

    fn listed(node: &str, operation: &str, outcome: Outcome, created: i64) -> Remediation {
        Remediation {
            name: node.into(),
            uid: format!("uid-{node}"),
            node: node.into(),
            operation: operation.into(),
            outcome,
            created: Some(t(created)),
        }
    }

    #[test]
    fn a_remediator_giving_up_on_the_current_attempt_is_told_and_the_rest_are_over() {
        let mut f = cycling();
        let op = f.operation("n").expect("power-cycling");
        assert!(f.power_cycling());
        let now = t(1000);
        let failed = Outcome::Failed("FenceAgentFailed: m".into());
        let over = f.follow(
            vec![
                listed("n", &op, failed.clone(), 900),
                // An earlier attempt's object, and one for a node the fleet does not hold.
                listed("n", "u-n-b0", Outcome::Succeeded, 0),
                listed("gone", "u-gone-b0", Outcome::Pending, 0),
                // Too young to be over: its record may still be on its way to the fleet.
                listed("new", "u-new-b0", Outcome::Pending, 990),
                // Machine Deletion Remediation's, kept until it succeeds.
                listed("m", "u-m-b0", Outcome::NodeDeletionExpected, 0),
            ],
            now,
        );
        let over: Vec<&str> = over.iter().map(|r| r.operation.as_str()).collect();
        assert_eq!(over, ["u-n-b0", "u-gone-b0"]);
        assert_eq!(f.gave_up("n"), Some("FenceAgentFailed: m"));
        assert!(f.queue.dirty.contains("n"), "decided again at once");
        // Said for that attempt only: the next one starts clean.
        let mut next = f.nodes["n"].record.as_deref().unwrap().clone();
        next.boot_id = "b2".into();
        f.wrote("n", Some(&next), now);
        assert_eq!(f.gave_up("n"), None);
        // Listed again without a verdict: none kept.
        let mut f = cycling();
        f.follow(vec![listed("n", &op, Outcome::Pending, 900)], now);
        assert_eq!(f.gave_up("n"), None);
    }
}
