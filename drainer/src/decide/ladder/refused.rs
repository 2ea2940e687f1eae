//! The refusals every step that takes the machine down passes before it starts, written once
//! (issue 76, principle 3): pods the drain left that would go down with it, a control-plane node
//! without `--remediate-control-plane`, and before a replacement any pod a Node deletion would
//! have force-deleted. Pure; the live drainer, `plan` and `explain` all ask these.

use crate::decide::candidate::Candidate;
use crate::config::Config;
use crate::config::ladder::Step;

/// Why `step` may not start on `c`'s node at all, whatever the ladder says next: the node goes to
/// a person, told why. Written once for every step that takes the machine down, the node's own
/// reboot, a power-cycle from outside and the replacement alike (a power-cycle once went where the
/// detector refused the reboot): pods that would go down with it, and a control-plane node without
/// `--remediate-control-plane`. The live drainer, `plan` and `explain` all ask this.
pub(crate) fn step_refused(c: &Candidate, step: Step, cfg: &Config) -> Option<String> {
    let left = match step {
        Step::Reboot | Step::PowerCycle => pods_in_the_way(c),
        Step::Replace => pods_left(c),
        Step::Drain | Step::RestartKubelet | Step::RestartContainerd => return None,
    };
    if left.is_some() {
        return left;
    }
    let role = CONTROL_PLANE_LABELS
        .into_iter()
        .find(|l| c.node.labels.get(l).is_some());
    match role {
        Some(role) if !cfg.ladder.control_plane => Some(format!(
            "it is a control-plane node ({role}): a ladder takes one down only with --remediate-control-plane"
        )),
        _ => None,
    }
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
