//! The remediation ladder as `explain` shows it (pure): the node's ladder, each step done, now or
//! to come, the proof awaited and its deadline, and what comes next and when.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::config::Config;
use crate::config::ladder::{Ladder, Step};
use crate::decide::ladder::LadderWhy;
use crate::decide::{Action, NodeDecision, Why};
use crate::model::node::NodeView;
use crate::model::record::{Phase, Record};

/// Why a restart rung is shown skipped on a node held without one.
const PASSED_OVER: &str =
    "the node was cordoned without it: a restart comes only before the cordon";

/// One node's ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LadderLine {
    /// As the condition writes it (`drain, reboot, replace`).
    pub(crate) ladder: String,
    /// Each step and where it stands, in order, then the end ("a person").
    pub(crate) steps: Vec<StepLine>,
    /// What the step under way waits for, and until when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) awaiting: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StepLine {
    pub(crate) step: String,
    /// `done`, `now`, `next` or `later` (`skipped`: passed over, e.g. past the day's reboots).
    pub(crate) state: &'static str,
    /// Why it is passed over (the words the live drainer's decision uses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) why: Option<String>,
}

/// The ladder of the node `view` (its record's, else its held condition's), if it has one;
/// `reboots_today`: the node's reboots in the last 24 hours, as far as the caller knows them.
pub(crate) fn ladder(
    view: &NodeView,
    record: Option<&Record>,
    d: &NodeDecision,
    reboots_today: (u32, u32),
    cfg: &Config,
) -> Option<LadderLine> {
    let ladder: Ladder = record
        .and_then(|r| r.ladder)
        .or_else(|| held_ladder(view, cfg))?;
    let (taken, phase) = match record {
        Some(r) => (r.step, Some(r.phase)),
        None => (None, None),
    };
    let drained = phase.is_some_and(|p| {
        matches!(
            p,
            Phase::Drained | Phase::Rebooting | Phase::Replacing | Phase::NeedsPerson
        )
    });
    let now_step = match phase {
        Some(Phase::Rebooting) => Some(record.and_then(|r| r.step).unwrap_or(Step::Reboot)),
        Some(Phase::Restarting) => taken,
        None if d.action() == Action::Restart => ladder.restart,
        // A restart to come goes first; the drain after it.
        None if ladder.restart.is_some()
            && crate::decide::ladder::refused::skipped(
                ladder.restart.unwrap_or(Step::RestartKubelet),
                view,
                reboots_today,
                cfg,
            )
            .is_none() =>
        {
            None
        }
        Some(Phase::Replacing) => Some(Step::Replace),
        Some(Phase::NeedsPerson) => None,
        _ if drained => None,
        _ => Some(Step::Drain),
    };
    let mut steps = Vec::new();
    let mut next_said = false;
    for s in ladder.steps() {
        let done = match s {
            Step::Drain => drained,
            _ => taken.is_some_and(|t| s <= t),
        };
        // A reboot still to come that the live drainer would pass over (as decide::ladder asks).
        let skipped = if s.restarts() {
            match record {
                None if Some(s) != now_step => {
                    crate::decide::ladder::refused::skipped(s, view, reboots_today, cfg)
                }
                Some(r) if !done && r.phase != Phase::Restarting => Some(PASSED_OVER.into()),
                _ => None,
            }
        } else {
            (s.reboots() && !done && Some(s) != now_step)
                .then(|| crate::decide::ladder::refused::skipped(s, view, reboots_today, cfg))
                .flatten()
        };
        let state = if Some(s) == now_step {
            "now"
        } else if done {
            "done"
        } else if skipped.is_some() {
            "skipped"
        } else if !next_said {
            next_said = true;
            "next"
        } else {
            "later"
        };
        steps.push(StepLine {
            step: s.to_string(),
            state,
            why: skipped,
        });
    }
    let person = if phase == Some(Phase::NeedsPerson) {
        "now"
    } else if next_said {
        "later"
    } else {
        "next"
    };
    steps.push(StepLine {
        step: "a person".into(),
        state: person,
        why: None,
    });
    Some(LadderLine {
        ladder: ladder.to_string(),
        steps,
        awaiting: awaiting(record, d),
    })
}

/// The ladder of the first held configured condition that names one.
fn held_ladder(view: &NodeView, cfg: &Config) -> Option<Ladder> {
    cfg.conditions.iter().find_map(|spec| {
        let held = view.conditions.iter().any(|c| spec.matches(c));
        spec.ladder.filter(|_| held)
    })
}

/// What the step under way waits for.
fn awaiting(record: Option<&Record>, d: &NodeDecision) -> Option<String> {
    let r = record?;
    match (&d.why, r.phase) {
        (Why::Ladder(LadderWhy::AwaitingReboot { until, booted, .. }), _) => Some(if *booted {
            format!("Ready and the problem clear by {until} (back with a new bootID)")
        } else {
            format!(
                "a bootID other than {} by {until}, then Ready and the problem clear",
                r.boot_id
            )
        }),
        (Why::Ladder(LadderWhy::AwaitingReplacement { until }), _) => {
            Some(format!("the Node gone by {until}"))
        }
        (Why::Ladder(LadderWhy::AwaitingRestart { step, until }), _) => Some(format!(
            "Ready and the problem clear by {until} ({step} requested of the node's detector)"
        )),
        (_, Phase::NeedsPerson) => Some(format!("a person: {}", r.escalated)),
        _ => None,
    }
}

/// What comes next for a node on its ladder: when, the action then, in words (None: not a ladder
/// decision that waits).
pub(crate) fn next(d: &NodeDecision) -> Option<(Option<Timestamp>, Option<Action>, String)> {
    let Why::Ladder(w) = &d.why else {
        return None;
    };
    let (at, action, what) = match w {
        LadderWhy::AwaitingReboot {
            until,
            next: Some(step),
            ..
        } => (
            Some(*until),
            Some(Action::of_step(*step)),
            format!("{step} at {until} unless the reboot is proven by then"),
        ),
        LadderWhy::AwaitingReboot {
            until, next: None, ..
        } => (
            Some(*until),
            Some(Action::Escalate),
            format!("a person is needed at {until} unless the reboot is proven by then"),
        ),
        LadderWhy::AwaitingReplacement { until } => (
            Some(*until),
            Some(Action::Escalate),
            format!("a person is needed at {until} if the Node is still here"),
        ),
        LadderWhy::AwaitingRestart { step, until } => (
            Some(*until),
            Some(Action::Cordon),
            format!("cordon and drain at {until} unless the {step} is proven by then"),
        ),
        LadderWhy::ReplaceBudget { next, .. } => (
            *next,
            Some(Action::Replace),
            match next {
                Some(t) => format!("replace at {t}, when the hour's replacement budget frees"),
                None => "replace when the hour's replacement budget frees".into(),
            },
        ),
        _ => return None,
    };
    Some((at, action, what))
}

/// The ladder for people: one line of steps, then what the step waits for.
pub(crate) fn print(l: &LadderLine, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let steps: Vec<String> = l
        .steps
        .iter()
        .map(|s| match (s.state, &s.why) {
            ("now", _) => format!("[{}: now]", s.step),
            (state, Some(why)) => format!("{} ({state}: {why})", s.step),
            (state, None) => format!("{} ({state})", s.step),
        })
        .collect();
    writeln!(out, "\nRemediation ladder ({}):", l.ladder)?;
    writeln!(out, "  {}", steps.join(" -> "))?;
    if let Some(a) = &l.awaiting {
        writeln!(out, "  awaiting {a}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    use crate::decide::gates::snapshot::Recorded;
    use crate::model::node::NodeView;
    use crate::plan::chain::{Snapshot, explain, print};

    fn t(s: &str) -> k8s_openapi::jiff::Timestamp {
        s.parse().unwrap()
    }

    /// A node whose reboot was requested at 10:00 (proof due 10:20), still on its old boot.
    fn rebooting() -> Node {
        let record = json!({"owner": "nodemedic-drainer", "episode": "KernelDeadlock=True@1", "reason": "KernelDeadlock=True",
            "phase": "rebooting", "cordonedAt": "2026-11-27T09:40:00Z", "drainAt": "2026-11-27T09:50:00Z",
            "finishedAt": "2026-11-27T09:55:00Z", "taints": ["nodemedic.io/remediation=reboot:NoSchedule"],
            "ladder": "drain, reboot, replace", "step": "reboot", "stepAt": "2026-11-27T10:00:00Z",
            "stepUntil": "2026-11-27T10:20:00Z", "bootId": "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b"});
        serde_json::from_value(json!({
            "metadata": {"name": "n", "uid": "5d9c1f52-1b1e-4f0e-9a53-1f6a8c2b7e01",
                "annotations": {"nodemedic.io/drain": record.to_string()}},
            "spec": {"unschedulable": true, "taints": [{"key": "nodemedic.io/remediation", "value": "reboot", "effect": "NoSchedule"}]},
            "status": {"nodeInfo": {"bootID": "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b", "machineID": "", "systemUUID": "",
                "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"},
                "conditions": [
                {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "lastTransitionTime": "2026-11-27T09:30:00Z"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": "2026-11-27T08:00:00Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn explain_shows_the_step_under_way_its_proof_and_deadline_and_what_comes_next() {
        let args = crate::config::flags::PolicyArgs {
            conditions: vec!["KernelDeadlock=True: drain, reboot, replace".into()],
            ..Default::default()
        };
        let cfg = crate::config::build::build(&args).unwrap();
        let node = rebooting();
        let views = vec![NodeView::of(&node)];
        let recorded = Recorded::default();
        let s = Snapshot {
            views: &views,
            node: &node,
            pods: &[],
            pdbs: &[],
            events: &[],
            recorded: &recorded,
        };
        let e = explain(&s, &cfg, t("2026-11-27T10:05:00Z")).unwrap();
        let mut out = Vec::new();
        print(&e, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "Remediation ladder (drain, reboot, replace):\n  drain (done) -> [reboot: now] -> replace (next) -> a person (later)\n  awaiting a bootID other than 0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b by 2026-11-27T10:20:00Z, then Ready and the problem clear"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Next: replace at 2026-11-27T10:20:00Z unless the reboot is proven by then"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json["ladder"]["steps"][1],
            json!({"step": "reboot", "state": "now"})
        );
        assert_eq!(json["next"]["action"], "replace");
    }

    /// The text explain prints for `node` under `conditions` at `now`.
    fn explained(node: &Node, conditions: &str, now: &str) -> String {
        let args = crate::config::flags::PolicyArgs {
            conditions: vec![conditions.into()],
            ..Default::default()
        };
        let cfg = crate::config::build::build(&args).unwrap();
        let views = vec![NodeView::of(node)];
        let recorded = Recorded::default();
        let s = Snapshot {
            views: &views,
            node,
            pods: &[],
            pdbs: &[],
            events: &[],
            recorded: &recorded,
        };
        let e = explain(&s, &cfg, t(now)).unwrap();
        let mut out = Vec::new();
        print(&e, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn explain_shows_a_restart_to_come_before_the_drain_and_one_that_will_not() {
        // Held since 09:30, no record yet: the restart comes first, the drain after it.
        let mut node = rebooting();
        node.metadata.annotations = None;
        node.spec = None;
        let ladder = "KernelDeadlock=True,10m: restart kubelet, drain, reboot";
        let text = explained(&node, ladder, "2026-11-27T09:35:00Z");
        assert!(
            text.contains(
                "  restart kubelet (next) -> drain (later) -> reboot (later) -> a person (later)"
            ),
            "{text}"
        );
        let text = explained(&node, ladder, "2026-11-27T10:05:00Z");
        assert!(
            text.contains("[restart kubelet: now] -> drain (next)"),
            "{text}"
        );
        assert!(text.contains("Decision: restart"), "{text}");
        // Without a bootID no request can be bound to it: the cordon comes instead.
        node.status.as_mut().unwrap().node_info = None;
        let text = explained(&node, ladder, "2026-11-27T10:05:00Z");
        assert!(
            text.contains("restart kubelet (skipped: the node reports no bootID"),
            "{text}"
        );
        assert!(text.contains("Decision: cordon"), "{text}");
    }
}
