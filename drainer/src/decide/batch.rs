//! A round of decisions (pure): every node (`drainer plan`) or the few that changed against
//! running totals (the controller's fleet), both through [`decide_some`]. Nodes are decided oldest
//! problem first (then by name), so budgets go to the oldest problems whatever the order nodes
//! arrive in.

use std::borrow::Borrow;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;

use super::candidate::Candidate;
use super::context::Context;
use super::counts::{Budgets, Totals};
use super::decision::{Action, DrainJob, Effect, NodeDecision, ToEvict, Why};
use super::evictions::{self, PodAction, PodPlan};
use super::gates::Gates;
use super::gates::outage::domain_of;
use super::gates::snapshot::{Recorded, gates_of_snapshot};
use super::one_node::decide_node;
use super::problem::{Problem, problem};
use super::silence;
use crate::config::Config;
use crate::config::policy::PolicyAction;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::Record;

/// Decide every node. Nodes are considered oldest problem first (then by name), so budgets go to
/// the oldest problems whatever the order nodes arrive in.
pub fn decide_nodes<N: Borrow<Node>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    cfg: &Config,
    now: Timestamp,
) -> Vec<NodeDecision> {
    decide_snapshot(nodes, pods, cfg, &Recorded::default(), now)
}

/// [`decide_nodes`] with what the cluster recorded besides the objects (a pause on the Lease, nodes
/// reported flapping). The other gates are what the snapshot shows: the breaker by its thresholds
/// (no cooldown is known), outages, windows.
pub fn decide_snapshot<N: Borrow<Node>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    cfg: &Config,
    recorded: &Recorded,
    now: Timestamp,
) -> Vec<NodeDecision> {
    let views: Vec<NodeView> = nodes.iter().map(|n| NodeView::of(n.borrow())).collect();
    decide_views(&views, pods, cfg, recorded, now)
}

/// [`decide_snapshot`] over node views already made (`drainer plan` makes them as it reads).
pub fn decide_views<P: Borrow<PodInfo>>(
    views: &[NodeView],
    pods: &[P],
    cfg: &Config,
    recorded: &Recorded,
    now: Timestamp,
) -> Vec<NodeDecision> {
    let mut by_node: HashMap<&str, Vec<&PodInfo>> = HashMap::new();
    for p in pods.iter().map(Borrow::borrow) {
        if let Some(n) = p.node.as_deref() {
            by_node.entry(n).or_default().push(p);
        }
    }
    let records: Vec<Option<Record>> = views
        .iter()
        .map(|v| Record::of(v, &cfg.records, &cfg.owner))
        .collect();
    let domains: Vec<Option<String>> = views.iter().map(|v| domain_of(v, cfg)).collect();
    let candidates: Vec<Candidate> = views
        .iter()
        .zip(&records)
        .zip(&domains)
        .map(|((v, r), d)| Candidate {
            node: v,
            selected: cfg.selector.matches(v).unwrap_or(false),
            record: r.as_ref(),
            pods: by_node.remove(v.name.as_str()).unwrap_or_default(),
            domain: d.as_deref(),
            flapping: recorded.flapping.get(v.name.as_str()).copied(),
            silent: silence::silence(v, cfg, &recorded.placement, now).map(|s| s.declared),
            // A preview of one snapshot (plan, simulate) takes the symptom conditions as written.
            symptoms: None,
            newest: None,
            reboots_today: (0, 0),
            gave_up: None,
        })
        .collect();
    let totals = Totals::of(candidates.iter().map(|c| {
        (
            c.selected,
            c.record.filter(|r| r.owned_by(&cfg.owner, c.selected)),
        )
    }));
    let selected: Vec<(&NodeView, bool)> =
        candidates.iter().map(|c| (c.node, c.selected)).collect();
    let gates = gates_of_snapshot(&selected, cfg, recorded.paused.clone(), now);
    decide_some(&candidates, &totals, &gates, cfg, now)
}

/// Decide `candidates` (some or all of the nodes) against `totals` over all nodes, oldest problem
/// first (then by name); decisions come back in the order of `candidates`. A node's own decision
/// reads only the node, its record and its pods; budgets read the totals and the decisions made
/// before it in this call.
pub fn decide_some(
    candidates: &[Candidate],
    totals: &Totals,
    gates: &Gates,
    cfg: &Config,
    now: Timestamp,
) -> Vec<NodeDecision> {
    // Records of other drainers (another Lease name) are theirs: not acted on, not counted.
    let records: Vec<Option<&Record>> = candidates
        .iter()
        .map(|c| c.record.filter(|r| r.owned_by(&cfg.owner, c.selected)))
        .collect();
    let mut budgets = Budgets {
        cordoned: totals.cordoned,
        cordon_limit: cfg.max_cordoned.limit(totals.selected),
        draining: totals.draining,
        last_drain_start: totals.last_drain_start,
        prior_drain_start: None,
        domain_cordoned: gates
            .domains
            .iter()
            .map(|(d, t)| (d.clone(), t.cordoned))
            .collect(),
        replaced: gates.replaced.clone(),
        remediating: gates
            .remediating
            .iter()
            .map(|(d, n)| (d.clone(), *n))
            .collect(),
    };
    let problems: Vec<Problem> = candidates
        .iter()
        .map(|c| problem(c.node, c.silent, c.symptoms, cfg, now))
        .collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                problems[i].since.map(|t| t.as_second()).unwrap_or(i64::MAX),
                candidates[i].node.name.as_str(),
            )
        };
        key(a).cmp(&key(b))
    });
    let x = Context { gates, cfg, now };
    let mut out: Vec<Option<NodeDecision>> = vec![None; candidates.len()];
    for i in order {
        let d = decide_one(&candidates[i], records[i], &problems[i], &x, &mut budgets);
        out[i] = Some(d);
    }
    // Gathered into a vector of the exact size: a collected `flatten` starts at four decisions
    // (2.6 KB), past glibc's small sizes, and each such request makes malloc first consolidate
    // every small block freed since; a round deciding one node paid that every time.
    let mut decided = Vec::with_capacity(out.len());
    decided.extend(out.into_iter().flatten());
    decided
}

/// Decide one candidate: its own decision, then the pods of a cordon or drain, then a drain
/// that protected pods block (which gives its slot back).
fn decide_one(
    c: &Candidate,
    record: Option<&Record>,
    p: &Problem,
    x: &Context,
    budgets: &mut Budgets,
) -> NodeDecision {
    let Context { cfg, now, .. } = *x;
    let node = c.node;
    let name = node.name.clone();
    let node_pods = &c.pods;
    let (why, effect) = match (c.record, record) {
        // A node outside our selection is invisible to us, whoever acts on it (with two
        // drainers on disjoint pools, each would otherwise log the other's every move); an
        // ownerless legacy record is named as before.
        (Some(theirs), None) if !c.selected && !theirs.owner.is_empty() => {
            (Why::NotSelected, Effect::Nothing)
        }
        (Some(theirs), None) => (Why::OwnedByOther(theirs.owner.clone()), Effect::Nothing),
        _ => decide_node(c, record, p, x, budgets),
    };
    let pods: Vec<PodPlan> = match Action::of(&why, &effect) {
        // A NoExecute problem taint evicts what does not tolerate it as soon as it is on.
        Action::Cordon if cfg.remedy.evicts() => {
            let taints = cfg.remedy.node_taints();
            node_pods
                .iter()
                .map(|p| evictions::under_no_execute(p, evictions::decide(p, cfg), &taints))
                .collect()
        }
        Action::Cordon | Action::Drain => node_pods
            .iter()
            .map(|p| evictions::decide(p, cfg))
            .collect(),
        _ => Vec::new(),
    };
    // The drain carries its record and the pods it evicts (same order as `pods`).
    let effect = match (effect, record) {
        (Effect::Drain(_), Some(record)) => Effect::Drain(DrainJob {
            record: record.clone(),
            evict: node_pods
                .iter()
                .zip(&pods)
                .filter(|(_, plan)| matches!(plan.action, PodAction::Evict | PodAction::Wait))
                .map(|(info, plan)| ToEvict {
                    pod: (*info).clone(),
                    policy: plan
                        .policy_action
                        .clone()
                        .filter(|a| !matches!(a, PolicyAction::Evict | PolicyAction::Skip))
                        .zip(plan.policy.clone())
                        .map(|(a, n)| (n, a)),
                })
                .collect(),
            kept: pods
                .iter()
                .filter(|p| p.action == PodAction::Skip && p.reason != "finished")
                .map(|p| format!("{}/{} ({})", p.namespace, p.name, p.reason))
                .collect(),
        }),
        (effect, _) => effect,
    };
    let effect = bound(effect, c, record, now);
    let (why, effect) = held_back((why, effect), &pods, x, budgets);
    NodeDecision {
        node: name,
        wake: wake(&why, p, now),
        why,
        effect,
        pods,
    }
}

/// `effect` with the record it writes bound to the candidate's Node object, as the version after
/// the one it follows (its record's, or the newest the controller saw on the node).
fn bound(effect: Effect, c: &Candidate, record: Option<&Record>, now: Timestamp) -> Effect {
    let prev = record.map(|r| r.at).max(c.newest);
    let bind = |r: Record| r.bound(c.node, prev, now);
    match effect {
        Effect::Cordon(r) => Effect::Cordon(bind(r)),
        Effect::Release(r) => Effect::Release(bind(r)),
        Effect::Probation(r) => Effect::Probation(bind(r)),
        Effect::Relapse(r) => Effect::Relapse(bind(r)),
        Effect::Reboot(r) => Effect::Reboot(bind(r)),
        Effect::Replace(r) => Effect::Replace(bind(r)),
        Effect::Escalate(r) => Effect::Escalate(bind(r)),
        other => other,
    }
}

/// When the decision for a node changes by the clock alone, if it does.
fn wake(why: &Why, p: &Problem, now: Timestamp) -> Option<Timestamp> {
    match why {
        Why::NotHeldLongEnough { .. } | Why::ProblemBack { .. } => {
            p.pending.iter().map(|(_, left)| add(now, *left)).min()
        }
        Why::Recovering { left } => Some(add(now, *left)),
        Why::DrainScheduled { at, .. } | Why::RetryScheduled { at, .. } => Some(*at),
        Why::StartProbation { until } | Why::Probation { until } => Some(*until),
        Why::DrainSpacing { next } => Some(*next),
        Why::Flapping { stable_at, .. } => Some(*stable_at),
        Why::OutsideDrainWindow { next, .. } => *next,
        Why::DeleteDrained { at, .. } if *at > now => Some(*at),
        Why::Ladder(w) => w.wake(),
        _ => None,
    }
}

/// A drain (or what else needs every pod known) held back: by protected pods, which block it, or
/// by a pod list still coming. A drain start gives back the slot it took this round (one already
/// in flight, its record saying draining, stays counted).
fn held_back(
    (why, effect): (Why, Effect),
    pods: &[PodPlan],
    x: &Context,
    budgets: &mut Budgets,
) -> (Why, Effect) {
    let action = Action::of(&why, &effect);
    let blockers: Vec<String> = pods
        .iter()
        .filter(|p| action == Action::Drain && p.action == PodAction::Block)
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    let held = if !blockers.is_empty() {
        Why::BlockedByPods { pods: blockers }
    } else {
        match waits_for_pods(&effect, x.cfg) {
            Some(what) if !x.gates.pods_listed => Why::PodsNotListed { what },
            _ => return (why, effect),
        }
    };
    if matches!(why, Why::StartDrain { .. }) {
        budgets.draining -= 1;
        budgets.last_drain_start = budgets.prior_drain_start;
    }
    (held, Effect::Nothing)
}

/// What of `effect` needs every pod known (a new leader's pod list may still be coming): what
/// evicts (a drain, a NoExecute taint) and the steps that end a node's workloads for good.
fn waits_for_pods(effect: &Effect, cfg: &Config) -> Option<&'static str> {
    match effect {
        Effect::Drain(_) => Some("the drain"),
        Effect::Cordon(_) if cfg.remedy.evicts() => Some("the NoExecute taint"),
        Effect::Reboot(_) => Some("the reboot"),
        Effect::Replace(_) => Some("the replacement"),
        Effect::DeleteNode => Some("deleting the drained Node"),
        _ => None,
    }
}
