//! KEP-5683's node lifecycle conditions, as a drain goes (`--lifecycle-conditions`). Pure.
//!
//! The proposal (sig-node, alpha behind `NodeLifecycleConditions`) has controllers that drain say
//! so on the Node: `DrainInProgress` True while a drain runs, `Drained` True once it has (and
//! False again when a new one starts), cleared by False or by removal; no ownership. Here:
//! the drain's start sets `DrainInProgress=True` and `Drained=False`; its success
//! `DrainInProgress=False` and `Drained=True` (reason `DrainCompleted`, the proposal's example); a
//! failed attempt leaves the drain in progress (its retry said); the uncordon removes both, as it
//! removes draino's DrainScheduled.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;

use super::cluster::ConditionPatch;

pub(crate) const DRAIN_IN_PROGRESS: &str = "DrainInProgress";
pub(crate) const DRAINED: &str = "Drained";

/// Where a drain is.
pub(crate) enum Stage<'a> {
    /// Its evictions start, for `problem`.
    Started {
        problem: &'a str,
    },
    Succeeded,
    /// An attempt failed; the next is due at `retry`.
    Failed {
        retry: Timestamp,
    },
    /// The node is uncordoned: no drain holds it.
    Ended,
}

/// The conditions to write for `stage`, at `at`.
pub(crate) fn patches(stage: Stage, at: Timestamp) -> Vec<ConditionPatch> {
    let set = |type_: &str, status, reason: &str, message: String| ConditionPatch::Set {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message,
        at,
    };
    let ts = nodemedic_common::time::rfc3339;
    match stage {
        Stage::Started { problem } => vec![
            set(
                DRAIN_IN_PROGRESS,
                Status::True,
                "DrainStarted",
                format!("nodemedic-drainer is draining the node: {problem}"),
            ),
            set(
                DRAINED,
                Status::False,
                "DrainStarted",
                "A drain is in progress".into(),
            ),
        ],
        Stage::Succeeded => vec![
            set(
                DRAIN_IN_PROGRESS,
                Status::False,
                "DrainCompleted",
                "The drain completed".into(),
            ),
            set(
                DRAINED,
                Status::True,
                "DrainCompleted",
                format!("Drained by nodemedic-drainer at {}", ts(at)),
            ),
        ],
        Stage::Failed { retry } => vec![set(
            DRAIN_IN_PROGRESS,
            Status::True,
            "DrainRetrying",
            format!("An attempt failed; the next is due at {}", ts(retry)),
        )],
        Stage::Ended => [DRAIN_IN_PROGRESS, DRAINED]
            .map(|t| ConditionPatch::Remove { type_: t.into() })
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(p: &[ConditionPatch]) -> Vec<(String, Option<Status>, String)> {
        p.iter()
            .map(|p| match p {
                ConditionPatch::Set {
                    type_,
                    status,
                    reason,
                    ..
                } => (type_.clone(), Some(*status), reason.clone()),
                ConditionPatch::Remove { type_ } => (type_.clone(), None, String::new()),
            })
            .collect()
    }

    #[test]
    fn a_drain_says_it_runs_then_that_it_is_done_and_the_uncordon_clears_both() {
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let s = |t: &str, st, r: &str| (t.to_string(), Some(st), r.to_string());
        assert_eq!(
            said(&patches(
                Stage::Started {
                    problem: "KernelDeadlock=True for 10m"
                },
                at
            )),
            [
                s(DRAIN_IN_PROGRESS, Status::True, "DrainStarted"),
                s(DRAINED, Status::False, "DrainStarted")
            ]
        );
        assert_eq!(
            said(&patches(Stage::Succeeded, at)),
            [
                s(DRAIN_IN_PROGRESS, Status::False, "DrainCompleted"),
                s(DRAINED, Status::True, "DrainCompleted")
            ]
        );
        assert_eq!(
            said(&patches(Stage::Failed { retry: at }, at)),
            [s(DRAIN_IN_PROGRESS, Status::True, "DrainRetrying")]
        );
        let ended = said(&patches(Stage::Ended, at));
        assert!(ended.iter().all(|(_, st, _)| st.is_none()) && ended.len() == 2);
    }
}
