//! The refusals every ladder step passes before it starts, as one table ([`REFUSALS`]): for each
//! step, the checks it passes in order and what a refusal does: the ladder goes on to the next step
//! (the step cannot be taken here: the day's cap, no bootID to prove it by), the node goes to a
//! person (pods that would go down with the machine, a control-plane node without
//! `--remediate-control-plane`), or the step waits (a veto, the gates, the slow start, the drain
//! windows, the replacement budget). Written once for every step (issue 76, principle 3: a
//! power-cycle once went where the detector refused the reboot); the live drainer, `plan` and
//! `explain` all ask it. Pure.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION;
use nodemedic_common::time::add;

use super::why::LadderWhy;
use crate::config::Config;
use crate::config::ladder::Step;
use crate::decide::candidate::Candidate;
use crate::decide::context::Context;
use crate::decide::counts::Budgets;
use crate::decide::decision::Why;
use crate::decide::gates::slow_start::NO_DOMAIN;
use crate::model::node::{NodeView, Uid};

/// A check a ladder step passes before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The node vetoes its remediation (`nodemedic.io/do-not-remediate`).
    Veto,
    /// A Kosmos leaf runs no component of its own and is never rebooted nor replaced.
    KosmosLeaf,
    /// The node reports the bootID the step is bound to (its request, its proof).
    BootId,
    /// The day's cap of its kind (`--max-reboots-per-node-per-day`), each kind its own.
    DayCap,
    /// Pods the drain left that would go down with the machine.
    PodsInTheWay,
    /// Pods a Node deletion would have force-deleted.
    PodsLeft,
    /// A control-plane node, without `--remediate-control-plane`.
    ControlPlane,
    /// The fleet's gates: the pause, a peer that took the node, flapping, an outage of its
    /// domain, the breaker.
    Gates,
    /// Another remediator's reboots under way (kured's lock, full with other nodes).
    RebootLock,
    /// Its failure domain's slow start.
    SlowStart,
    /// The drain windows.
    Window,
    /// The replacements of the last hour (`--max-replacements-per-hour`).
    ReplaceBudget,
}

/// What a refused check does to the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// The step is passed over: the next one on the ladder is asked (after a restart, the cordon).
    NextStep,
    /// The ladder ends with a person, told why.
    Person,
    /// Nothing now: the step is asked again when what holds it changes.
    Wait,
}

use Check::*;
use Then::*;

const RESTART: &[(Check, Then)] = &[
    (Veto, NextStep),
    (KosmosLeaf, NextStep),
    (BootId, NextStep),
    (Gates, Wait),
    (SlowStart, Wait),
];

const REBOOT: &[(Check, Then)] = &[
    (DayCap, NextStep),
    (BootId, NextStep),
    (PodsInTheWay, Person),
    (ControlPlane, Person),
    (Veto, Wait),
    (KosmosLeaf, Wait),
    (Gates, Wait),
    (RebootLock, Wait),
    (SlowStart, Wait),
    (Window, Wait),
];

const REPLACE: &[(Check, Then)] = &[
    (PodsLeft, Person),
    (ControlPlane, Person),
    (Veto, Wait),
    (KosmosLeaf, Wait),
    (Gates, Wait),
    (SlowStart, Wait),
    (Window, Wait),
    (ReplaceBudget, Wait),
];

/// Every step past the drain (and the restart before it), with the checks it passes in order. The
/// drain itself is the cordon's, held by the gates and budgets of `decide::one_node`.
pub(crate) const REFUSALS: [(Step, &[(Check, Then)]); 5] = [
    (Step::RestartKubelet, RESTART),
    (Step::RestartContainerd, RESTART),
    (Step::Reboot, REBOOT),
    (Step::PowerCycle, REBOOT),
    (Step::Replace, REPLACE),
];

/// The checks `step` passes, in order.
pub(crate) fn checks(step: Step) -> &'static [(Check, Then)] {
    REFUSALS
        .iter()
        .find(|(s, _)| *s == step)
        .map_or(&[], |(_, row)| *row)
}

/// A refusal: the words a person reads, and for a wait the decision's reason.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refused {
    NextStep(String),
    Person(String),
    Wait(Why),
}

/// The first check of `step`'s row that refuses `c` now, if one does (`problem`: the held
/// problem, in the words a wait for the window says).
pub(crate) fn refused(
    step: Step,
    c: &Candidate,
    x: &Context,
    b: &Budgets,
    problem: &str,
) -> Option<Refused> {
    checks(step).iter().find_map(|&(check, then)| match then {
        Wait => held(check, step, c, x, b, problem).map(Refused::Wait),
        NextStep | Person => {
            let words =
                said(check, step, c.node, c.reboots_today, x.cfg).or_else(|| pods(check, c));
            words.map(|w| match then {
                NextStep => Refused::NextStep(w),
                _ => Refused::Person(w),
            })
        }
    })
}

/// Why `step` is passed over on `node` (rebooted `today` times in the last 24 hours: its own,
/// power-cycles), if it is: the checks of its row that send the ladder on and read the node alone.
/// `plan` and `explain` show a step still to come as skipped for this.
pub(crate) fn skipped(
    step: Step,
    node: &NodeView,
    today: (u32, u32),
    cfg: &Config,
) -> Option<String> {
    checks(step)
        .iter()
        .filter(|(_, then)| *then == NextStep)
        .find_map(|&(check, _)| said(check, step, node, today, cfg))
}

/// The words of a check that reads the node alone, if it refuses.
fn said(
    check: Check,
    step: Step,
    node: &NodeView,
    today: (u32, u32),
    cfg: &Config,
) -> Option<String> {
    match check {
        Veto => vetoed(node).then(|| format!("{DO_NOT_REMEDIATE_ANNOTATION} is set")),
        KosmosLeaf => {
            kosmos(node, cfg).then(|| "a Kosmos leaf node runs no component of its own".to_string())
        }
        BootId => (node.boot == Uid::NONE).then(|| {
            let bound = if step.restarts() {
                "which its detector's request is bound to"
            } else {
                "so a reboot could not be proven"
            };
            format!("the node reports no bootID (status.nodeInfo.bootID), {bound}")
        }),
        DayCap => {
            let max = cfg.ladder.max_reboots_per_day;
            let (done, what) = match step {
                Step::PowerCycle => (today.1, "power-cycled"),
                _ => (today.0, "rebooted"),
            };
            (done >= max).then(|| format!(
                "{what} {done} time(s) in the last 24h, the most --max-reboots-per-node-per-day allows ({max})"
            ))
        }
        ControlPlane => {
            let role = CONTROL_PLANE_LABELS
                .into_iter()
                .find(|l| node.labels.get(l).is_some());
            role.filter(|_| !cfg.ladder.control_plane).map(|role| format!(
                "it is a control-plane node ({role}): a ladder takes one down only with --remediate-control-plane"
            ))
        }
        PodsInTheWay | PodsLeft | Gates | RebootLock | SlowStart | Window | ReplaceBudget => None,
    }
}

/// The words of a check on the node's pods, if it refuses.
fn pods(check: Check, c: &Candidate) -> Option<String> {
    match check {
        PodsInTheWay => pods_in_the_way(c),
        PodsLeft => pods_left(c),
        _ => None,
    }
}

/// The reason a check that holds the step gives, if it holds it.
fn held(
    check: Check,
    step: Step,
    c: &Candidate,
    x: &Context,
    b: &Budgets,
    problem: &str,
) -> Option<Why> {
    let Context { gates, cfg, now } = *x;
    let ladder = |w: LadderWhy| Some(Why::Ladder(w));
    match check {
        Veto if vetoed(c.node) => ladder(LadderWhy::Vetoed { step }),
        KosmosLeaf if kosmos(c.node, cfg) => ladder(LadderWhy::KosmosLeaf),
        Gates => gates.hold(c),
        RebootLock => gates
            .peers
            .reboot_waits(&c.node.name)
            .map(|why| Why::WaitingForPeer { why }),
        SlowStart => paced_out(c, x, b).and_then(ladder),
        Window => gates.window.err().map(|next| Why::OutsideDrainWindow {
            next,
            problem: problem.to_string(),
        }),
        ReplaceBudget => replace_budget(cfg, b, now).and_then(ladder),
        _ => None,
    }
}

fn vetoed(node: &NodeView) -> bool {
    node.annotations.get(DO_NOT_REMEDIATE_ANNOTATION).is_some()
}

fn kosmos(node: &NodeView, cfg: &Config) -> bool {
    node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str())
}

/// The slow start's hold on `c`'s domain, if as many remediations are under way there as its
/// width allows. A step under way that starts again keeps its place: only the steps that started
/// before it count.
fn paced_out(c: &Candidate, x: &Context, b: &Budgets) -> Option<LadderWhy> {
    let gates = x.gates;
    let domain = c.domain.unwrap_or(NO_DOMAIN);
    let used = gates
        .place(c)
        .unwrap_or_else(|| b.remediating.get(domain).copied().unwrap_or(0));
    let width = gates.pace.get(domain).copied().unwrap_or(1);
    (used >= width as usize).then(|| LadderWhy::SlowStart {
        domain: domain.to_string(),
        used,
        width,
    })
}

/// The replacement budget's hold, if it is used up.
fn replace_budget(cfg: &Config, b: &Budgets, now: Timestamp) -> Option<LadderWhy> {
    let hour = std::time::Duration::from_secs(3600);
    let from = nodemedic_common::time::sub(now, hour);
    let mut recent: Vec<Timestamp> = b.replaced.iter().copied().filter(|t| *t > from).collect();
    recent.sort();
    let limit = cfg.ladder.max_replacements_per_hour;
    (recent.len() >= limit as usize).then(|| LadderWhy::ReplaceBudget {
        used: recent.len(),
        limit,
        next: recent.first().map(|t| add(*t, hour)),
    })
}

/// The labels that give a Node a control-plane role (the detector's too).
const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// The pods a reboot or power-cycle would take down that the drain left in place: every pod still
/// on the node but finished, DaemonSet, mirror and never-evicted ones (`kube-system`'s not-evicted
/// and critical pods, which belong to the node) — what the detector refuses its reboot for too.
fn pods_in_the_way(c: &Candidate) -> Option<String> {
    let left: Vec<String> = c
        .pods
        .iter()
        .filter(|p| !matches!(p.owner_kind.as_deref(), Some("DaemonSet" | "Node")))
        .filter(|p| !p.phase.is_some_and(|ph| ph.finished()))
        .filter(|p| {
            nodemedic_common::exempt::never_evicted(&p.namespace, p.annotations(), p.priority)
                .is_none()
        })
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    named(&left).map(|(n, some)| {
        format!(
            "{n} pod(s) the drain left are still on it ({some}): taking the machine down would take them down past their budgets"
        )
    })
}

/// How many `pods` there are and the first three by name (`a, b, c and 2 more`); None for none.
fn named(pods: &[String]) -> Option<(usize, String)> {
    let n = pods.len();
    let more = if n > 3 {
        format!(" and {} more", n - 3)
    } else {
        String::new()
    };
    (n > 0).then(|| (n, format!("{}{more}", pods[..n.min(3)].join(", "))))
}

/// Why the Node may not be deleted, when pods other than DaemonSet and mirror pods are still on
/// it (those the drain left: `protectedPods: leave` keeps StatefulSet, unreplicated and annotated
/// pods there). Deleting the Node lets the pod garbage collector force-delete them while the
/// machine may still run them, past every PodDisruptionBudget: a StatefulSet's pod could then run
/// twice. Such a node needs a person.
pub(crate) fn pods_left(c: &Candidate) -> Option<String> {
    let left: Vec<String> = c
        .pods
        .iter()
        .filter(|p| !matches!(p.owner_kind.as_deref(), Some("DaemonSet" | "Node")))
        .filter(|p| !p.phase.is_some_and(|ph| ph.finished()))
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    named(&left).map(|(n, some)| {
        format!(
            "{n} pod(s) besides DaemonSet and mirror pods are still on it ({some}): deleting the Node would have them force-deleted while the machine may still run them"
        )
    })
}
