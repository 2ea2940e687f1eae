//! Every `Why` says the same words wherever a decision is shown: the live drainer's log line (its
//! fields, from [`NodeDecision::said`]), `plan`'s row and `explain`'s decision and next step, with
//! and without a dry run. The table holds one value of each variant; the match below fails to
//! compile when a variant is added without one. Pure.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::chain::{DecisionLine, decision_text, next};
use super::table_row;
use crate::config::Budget;
use crate::config::ladder::Step;
use crate::decide::facts::{Outage, Pause, Trip};
use crate::decide::ladder::LadderWhy;
use crate::decide::{Action, Effect, NodeDecision, Why};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn p() -> String {
    "KernelDeadlock".to_string()
}

/// One value of each `Why` (and of each ladder `Why`), with the action it goes with.
fn table() -> Vec<(Action, Why)> {
    let mut rows = unrecorded();
    rows.extend(recorded());
    rows.extend(held());
    rows.extend(laddered());
    rows.extend(restarted());
    rows
}

/// Nodes without a record of ours.
fn unrecorded() -> Vec<(Action, Why)> {
    vec![
        (
            Action::Skip,
            Why::Excluded {
                label: "nodemedic.io/exclude=true".into(),
            },
        ),
        (Action::Skip, Why::NotSelected),
        (Action::Skip, Why::OwnedByOther("other".into())),
        (Action::None, Why::Healthy),
        (
            Action::Skip,
            Why::KosmosExempt {
                conditions: vec!["Ready".into()],
            },
        ),
        (
            Action::Wait,
            Why::NotHeldLongEnough {
                pending: vec!["KernelDeadlock for 1m of 10m".into()],
            },
        ),
        (Action::None, Why::CordonedBySomeoneElse { problem: p() }),
        (
            Action::Wait,
            Why::CordonBudget {
                used: 1,
                limit: 1,
                problem: p(),
            },
        ),
        (
            Action::Cordon,
            Why::Cordon {
                problem: p(),
                drain_at: Some(t(60)),
            },
        ),
    ]
}

/// Nodes with a record of ours.
fn recorded() -> Vec<(Action, Why)> {
    vec![
        (Action::None, Why::ReleasedEpisode),
        (Action::None, Why::ForgetReleased),
        (
            Action::None,
            Why::ManualUncordon {
                what: "uncordoned".into(),
            },
        ),
        (Action::Hold, Why::LeftSelection { released: false }),
        (Action::None, Why::LeftSelection { released: true }),
        (Action::Wait, Why::ProblemBack { pending: vec![p()] }),
        (
            Action::Wait,
            Why::Recovering {
                left: Duration::from_secs(30),
            },
        ),
        (Action::Drain, Why::FinishingDrain),
        (
            Action::Uncordon,
            Why::Uncordon {
                during_buffer: true,
            },
        ),
        (Action::Probation, Why::StartProbation { until: t(600) }),
        (Action::Wait, Why::Probation { until: t(600) }),
        (Action::Uncordon, Why::ProbationPassed),
        (Action::Cordon, Why::Relapse { problem: p() }),
        (Action::Drain, Why::Draining { problem: p() }),
        (Action::None, Why::Drained { problem: p() }),
        (
            Action::Delete,
            Why::DeleteDrained {
                at: t(0),
                problem: p(),
            },
        ),
        (Action::None, Why::SkipDrain { problem: p() }),
        (
            Action::Wait,
            Why::DrainScheduled {
                at: t(60),
                problem: p(),
            },
        ),
        (
            Action::Wait,
            Why::RetryScheduled {
                at: t(60),
                problem: p(),
            },
        ),
        (Action::Wait, Why::DrainBudget { used: 2, limit: 2 }),
        (Action::Wait, Why::DrainSpacing { next: t(30) }),
        (Action::Drain, Why::StartDrain { problem: p() }),
        (
            Action::Wait,
            Why::BlockedByPods {
                pods: vec!["default/db-0 (StatefulSet)".into()],
            },
        ),
        (Action::Hold, Why::PodsNotListed { what: "the drain" }),
    ]
}

/// Held back by a gate.
fn held() -> Vec<(Action, Why)> {
    vec![
        (
            Action::Hold,
            Why::BreakerOpen {
                trip: Trip::Unhealthy {
                    count: 3,
                    of: 5,
                    limit: Budget::Percent(30.0),
                },
                closing_at: Some(t(300)),
                cause: None,
            },
        ),
        (
            Action::Hold,
            Why::DomainOutage {
                outage: Outage {
                    domain: "z1".into(),
                    unhealthy: 3,
                    size: 4,
                    percent: 50.0,
                    cause: None,
                },
            },
        ),
        (
            Action::Wait,
            Why::DomainBudget {
                domain: "z1".into(),
                used: 1,
                limit: 1,
                problem: p(),
            },
        ),
        (
            Action::Hold,
            Why::Flapping {
                changes: 4,
                window: Duration::from_secs(600),
                stable_at: t(600),
            },
        ),
        (
            Action::Hold,
            Why::Paused {
                pause: Pause {
                    by: "kubectl-annotate".into(),
                    since: Some(t(0)),
                    reason: "rollout".into(),
                },
            },
        ),
        (
            Action::Hold,
            Why::TakenByPeer {
                peer: crate::decide::gates::peer::Peer::Karpenter,
                how: "disrupting it (its karpenter.sh/disrupted taint)".into(),
            },
        ),
        (
            Action::Wait,
            Why::WaitingForPeer {
                why: "kured is rebooting n1 under its lock (1 at once): reboots wait for it".into(),
            },
        ),
        (
            Action::Wait,
            Why::OutsideDrainWindow {
                next: Some(t(3600)),
                problem: p(),
            },
        ),
    ]
}

/// On a remediation ladder.
fn laddered() -> Vec<(Action, Why)> {
    let ladder = Why::Ladder;
    vec![
        (
            Action::Reboot,
            ladder(LadderWhy::Reboot {
                until: t(1200),
                problem: p(),
            }),
        ),
        (
            Action::PowerCycle,
            ladder(LadderWhy::PowerCycle {
                until: t(1200),
                problem: p(),
                provider: "the power-cycle endpoint https://bmc.example/…".into(),
            }),
        ),
        (
            Action::Wait,
            ladder(LadderWhy::AwaitingReboot {
                until: t(1200),
                booted: false,
                next: Some(Step::Replace),
            }),
        ),
        (
            Action::Uncordon,
            ladder(LadderWhy::RebootProven {
                probation_until: None,
            }),
        ),
        (
            Action::Replace,
            ladder(LadderWhy::Replace {
                until: t(1800),
                problem: p(),
                skipped: Some("the node reports no bootID".into()),
            }),
        ),
        (
            Action::Wait,
            ladder(LadderWhy::AwaitingReplacement { until: t(1800) }),
        ),
        (
            Action::Wait,
            ladder(LadderWhy::ReplaceBudget {
                used: 2,
                limit: 2,
                next: Some(t(900)),
            }),
        ),
        (
            Action::Escalate,
            ladder(LadderWhy::NeedsPerson {
                why: "no new bootID".into(),
            }),
        ),
        (
            Action::None,
            ladder(LadderWhy::WaitingForPerson {
                why: "no new bootID".into(),
                since: Some(t(0)),
            }),
        ),
        (
            Action::None,
            ladder(LadderWhy::Vetoed { step: Step::Reboot }),
        ),
        (Action::None, ladder(LadderWhy::KosmosLeaf)),
        (
            Action::Wait,
            ladder(LadderWhy::SlowStart {
                domain: "z1".into(),
                used: 1,
                width: 1,
            }),
        ),
    ]
}

/// The restart before the drain.
fn restarted() -> Vec<(Action, Why)> {
    let ladder = Why::Ladder;
    vec![
        (
            Action::Restart,
            ladder(LadderWhy::Restart {
                step: Step::RestartKubelet,
                until: t(300),
                problem: p(),
            }),
        ),
        (
            Action::Wait,
            ladder(LadderWhy::AwaitingRestart {
                step: Step::RestartContainerd,
                until: t(300),
            }),
        ),
        (
            Action::Uncordon,
            ladder(LadderWhy::RestartProven {
                step: Step::RestartKubelet,
            }),
        ),
        (
            Action::Hold,
            ladder(LadderWhy::RequestHeld {
                step: Step::Reboot,
                hold: "paused by kubectl-annotate".into(),
                until: t(300),
            }),
        ),
    ]
}

/// Which variant a value is: a new variant without a row here does not compile.
fn variant(w: &Why) -> usize {
    use Why::*;
    match w {
        Excluded { .. } => 0,
        NotSelected => 1,
        OwnedByOther(_) => 2,
        Healthy => 3,
        KosmosExempt { .. } => 4,
        NotHeldLongEnough { .. } => 5,
        CordonedBySomeoneElse { .. } => 6,
        CordonBudget { .. } => 7,
        Cordon { .. } => 8,
        ReleasedEpisode => 9,
        ForgetReleased => 10,
        ManualUncordon { .. } => 11,
        ProblemBack { .. } => 12,
        Recovering { .. } => 13,
        FinishingDrain => 14,
        Uncordon { .. } => 15,
        StartProbation { .. } => 16,
        Probation { .. } => 17,
        ProbationPassed => 18,
        Relapse { .. } => 19,
        Draining { .. } => 20,
        Drained { .. } => 21,
        DeleteDrained { .. } => 22,
        SkipDrain { .. } => 23,
        DrainScheduled { .. } => 24,
        RetryScheduled { .. } => 25,
        DrainBudget { .. } => 26,
        DrainSpacing { .. } => 27,
        StartDrain { .. } => 28,
        BlockedByPods { .. } => 29,
        PodsNotListed { .. } => 30,
        BreakerOpen { .. } => 31,
        DomainOutage { .. } => 32,
        DomainBudget { .. } => 33,
        Flapping { .. } => 34,
        Paused { .. } => 35,
        OutsideDrainWindow { .. } => 36,
        LeftSelection { .. } => 37,
        TakenByPeer { .. } => 38,
        WaitingForPeer { .. } => 39,
        Ladder(l) => {
            40 + match l {
                LadderWhy::Reboot { .. } => 0,
                LadderWhy::AwaitingReboot { .. } => 1,
                LadderWhy::RebootProven { .. } => 2,
                LadderWhy::Replace { .. } => 3,
                LadderWhy::AwaitingReplacement { .. } => 4,
                LadderWhy::ReplaceBudget { .. } => 5,
                LadderWhy::NeedsPerson { .. } => 6,
                LadderWhy::WaitingForPerson { .. } => 7,
                LadderWhy::Vetoed { .. } => 8,
                LadderWhy::KosmosLeaf => 9,
                LadderWhy::SlowStart { .. } => 10,
                LadderWhy::PowerCycle { .. } => 11,
                LadderWhy::Restart { .. } => 12,
                LadderWhy::AwaitingRestart { .. } => 13,
                LadderWhy::RestartProven { .. } => 14,
                LadderWhy::RequestHeld { .. } => 15,
            }
        }
    }
}

const VARIANTS: usize = 40 + 16;

/// A decision doing `action` for `why`: an effect of the kind that action writes (the action is
/// derived from it, or from `why` when it writes nothing).
fn decision(action: Action, why: Why) -> NodeDecision {
    use crate::decide::DrainJob;
    use crate::model::record::Record;
    let r = Record::default;
    let effect = match action {
        Action::Cordon => Effect::Cordon(r()),
        Action::Drain => Effect::Drain(DrainJob::pending()),
        Action::Uncordon => Effect::Uncordon(r()),
        Action::Probation => Effect::Probation(r()),
        Action::Delete => Effect::DeleteNode,
        Action::Reboot => Effect::Reboot(r()),
        Action::PowerCycle => Effect::Reboot(Record {
            step: Some(Step::PowerCycle),
            ..r()
        }),
        Action::Restart => Effect::Reboot(Record {
            step: Some(Step::RestartKubelet),
            ..r()
        }),
        Action::Replace => Effect::Replace(r()),
        Action::Escalate => Effect::Escalate(r()),
        Action::None | Action::Wait | Action::Skip | Action::Hold => Effect::Nothing,
    };
    let d = NodeDecision {
        node: "node-a".into(),
        why,
        effect,
        pods: Vec::new(),
        wake: None,
    };
    assert_eq!(d.action(), action, "{:?}", d.why);
    d
}

#[test]
fn every_why_says_the_same_words_in_every_form_with_and_without_a_dry_run() {
    let rows = table();
    let mut seen: Vec<usize> = rows.iter().map(|(_, w)| variant(w)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        (0..VARIANTS).collect::<Vec<_>>(),
        "one row per variant"
    );
    for (action, why) in rows {
        let words = why.to_string();
        assert!(!words.is_empty(), "{why:?} says nothing");
        let d = decision(action, why);
        for dry_run in [false, true] {
            let said = d.said(dry_run);
            // The words are the Why's, never another form of them.
            assert_eq!(said.reason, words);
            let expected = if dry_run && action.writes() {
                format!("would {action}")
            } else {
                action.to_string()
            };
            assert_eq!(said.action, expected, "{words}");
            // plan's row, explain's decision line, and explain's next step when it is now.
            let row = table_row(&d, dry_run, (6, 14));
            assert_eq!(row, format!("node-a  {expected:<14}  {words}"));
            let line = decision_text(&DecisionLine::of(&d, dry_run));
            assert_eq!(line, format!("Decision: {expected} — {words}"));
            if action.writes() {
                let n = next(&d, dry_run, t(0));
                assert_eq!(n.what, format!("now: {expected} ({words})"));
            }
        }
    }
}
