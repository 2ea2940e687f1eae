//! The drain decision: a pure function of (Nodes, Pods, config, now) -> one [`NodeDecision`] per node.
//! [`decide_nodes`] decides all nodes (`drainer plan`); [`decide_some`] decides the few that changed
//! against running totals ([`fleet::Fleet`], what the controller uses); both are the same code.
//!
//! Order of checks for a node: opt-out label, selection, Kosmos exemption, then either what our
//! record says we did (release after a manual uncordon, uncordon on recovery, drain when due, retry
//! after failure) or whether a new problem warrants a cordon. Budgets (cordoned nodes, drains in
//! flight, spacing of drain starts) are counted across the plan, oldest problem first, so the plan
//! never exceeds them whatever the order nodes arrive in.

pub mod fleet;
pub mod pods;
pub mod safety;
pub mod schedule;
pub mod stale;

use std::borrow::Borrow;
use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use crate::config::Config;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::{Phase, Record};
pub use pods::{PodAction, PodPlan};

/// What the plan says for a node (the `action` of `drainer plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    None,
    Cordon,
    Drain,
    Uncordon,
    Wait,
    Skip,
    /// Held back by a fleet safety gate (breaker, outage, flapping, pause).
    Hold,
    /// Delete the drained Node (`--delete-drained-node-after`).
    Delete,
}

/// What the controller must write besides the action itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Nothing,
    /// Cordon and store this record.
    Cordon(Record),
    /// Start (or resume) the drain: everything the drain needs.
    Drain(DrainJob),
    /// Uncordon and remove the record and the DrainScheduled condition.
    Uncordon,
    /// A person uncordoned the node: store the record as released.
    Release(Record),
    /// The problem is gone and the node is not cordoned by us: remove the record.
    Forget,
    /// Delete the Node object (drained long enough ago).
    DeleteNode,
}

/// Why the decision is what it is, with the facts behind it; `Display` gives the human text (the
/// `reason` of `drainer plan`). The shell matches on variants to choose metrics and Events, and logs
/// a decision when its [`Why::kind`] changes (the text ages with durations every round).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Opted out by `label` (`KEY=VALUE`).
    Excluded {
        label: String,
    },
    NotSelected,
    /// The record belongs to another drainer (its Lease name).
    OwnedByOther(String),
    Healthy,
    /// A Kosmos leaf node: these held conditions do not count.
    KosmosExempt {
        conditions: Vec<String>,
    },
    /// Matching conditions, not held their min duration yet.
    NotHeldLongEnough {
        pending: Vec<String>,
    },
    CordonedBySomeoneElse {
        problem: String,
    },
    CordonBudget {
        used: usize,
        limit: usize,
        problem: String,
    },
    /// Cordon now; drain at `drain_at` (`None`: `--skip-drain`).
    Cordon {
        problem: String,
        drain_at: Option<Timestamp>,
    },
    ReleasedEpisode,
    ForgetReleased,
    ManualUncordon,
    ProblemBack {
        pending: Vec<String>,
    },
    Recovering {
        left: Duration,
    },
    FinishingDrain,
    /// Recovered: uncordon (`during_buffer`: before the drain started).
    Uncordon {
        during_buffer: bool,
    },
    Draining {
        problem: String,
    },
    Drained {
        problem: String,
    },
    /// Drained this long ago: the Node is deleted (or at `at`).
    DeleteDrained {
        at: Timestamp,
        problem: String,
    },
    SkipDrain {
        problem: String,
    },
    DrainScheduled {
        at: Timestamp,
        problem: String,
    },
    RetryScheduled {
        at: Timestamp,
        problem: String,
    },
    DrainBudget {
        used: usize,
        limit: usize,
    },
    DrainSpacing {
        next: Timestamp,
    },
    StartDrain {
        problem: String,
    },
    BlockedByPods {
        pods: Vec<String>,
    },
    /// The circuit breaker is open (its reason, with the counts).
    BreakerOpen {
        reason: String,
    },
    /// The node's failure domain is in an outage.
    DomainOutage {
        outage: String,
    },
    /// The domain's cordon budget is full.
    DomainBudget {
        domain: String,
        used: usize,
        limit: usize,
        problem: String,
    },
    /// Its watched conditions flap: nothing until stable.
    Flapping {
        changes: usize,
        window: Duration,
        stable_at: Timestamp,
    },
    /// Paused through the drainer's Lease (who, since when, why).
    Paused {
        by: String,
    },
    /// Cordoned; drains start only inside a drain window (`None`: none opens within a week).
    OutsideDrainWindow {
        next: Option<Timestamp>,
        problem: String,
    },
}

impl Why {
    /// The decision without its facts (what decides whether a decision is news).
    pub fn kind(&self) -> std::mem::Discriminant<Why> {
        std::mem::discriminant(self)
    }
}

use nodemedic_common::time::{add, rfc3339 as ts};

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Excluded { label } => write!(f, "excluded by label {label}"),
            Why::NotSelected => f.write_str("not selected by the node selector"),
            Why::OwnedByOther(owner) => {
                write!(f, "handled by another drainer ({owner}); not touched")
            }
            Why::Healthy => f.write_str("healthy"),
            Why::KosmosExempt { conditions } => write!(
                f,
                "Kosmos leaf node: not cordoned or drained for {}",
                conditions.join(", ")
            ),
            Why::NotHeldLongEnough { pending } => {
                write!(f, "condition not held long enough: {}", pending.join(", "))
            }
            Why::CordonedBySomeoneElse { problem } => {
                write!(
                    f,
                    "already cordoned by someone else; not touched ({problem})"
                )
            }
            Why::CordonBudget {
                used,
                limit,
                problem,
            } => write!(
                f,
                "cordon budget full: {used} of {limit} nodes cordoned ({problem})"
            ),
            Why::Cordon {
                problem,
                drain_at: Some(at),
            } => write!(f, "{problem}; drain at {}", ts(*at)),
            Why::Cordon {
                problem,
                drain_at: None,
            } => write!(f, "{problem}; drain skipped (--skip-drain)"),
            Why::ReleasedEpisode => f.write_str(
                "uncordoned by a person during this problem episode; not cordoned again",
            ),
            Why::ForgetReleased => f.write_str("problem cleared; forgetting the released episode"),
            Why::ManualUncordon => {
                f.write_str("uncordoned by a person; not cordoned again for this problem episode")
            }
            Why::ProblemBack { pending } => write!(
                f,
                "problem back before its min duration ({}); staying cordoned",
                pending.join(", ")
            ),
            Why::Recovering { left } => write!(f, "recovering; uncordon in {}", fmt_d(*left)),
            Why::FinishingDrain => {
                f.write_str("recovered while draining; finishing the drain in progress")
            }
            Why::Uncordon {
                during_buffer: true,
            } => f.write_str("recovered during the drain buffer: drain cancelled, uncordoning"),
            Why::Uncordon {
                during_buffer: false,
            } => f.write_str("conditions cleared: uncordoning"),
            Why::Draining { problem } => write!(f, "drain in progress ({problem})"),
            Why::Drained { problem } => {
                write!(f, "drained; stays cordoned until recovery ({problem})")
            }
            Why::DeleteDrained { at, problem } => write!(
                f,
                "drained; the Node is deleted at {} (--delete-drained-node-after) ({problem})",
                ts(*at)
            ),
            Why::SkipDrain { problem } => {
                write!(f, "cordoned; drain skipped (--skip-drain) ({problem})")
            }
            Why::DrainScheduled { at, problem } => {
                write!(f, "drain scheduled at {} ({problem})", ts(*at))
            }
            Why::RetryScheduled { at, problem } => {
                write!(f, "drain failed; retry at {} ({problem})", ts(*at))
            }
            Why::DrainBudget { used, limit } => {
                write!(f, "drain budget full: {used} of {limit} drains in flight")
            }
            Why::DrainSpacing { next } => write!(
                f,
                "drain starts are spaced by the buffer; next start at {}",
                ts(*next)
            ),
            Why::StartDrain { problem } => write!(f, "draining ({problem})"),
            Why::BlockedByPods { pods } => {
                write!(f, "drain blocked by protected pods: {}", pods.join(", "))
            }
            Why::BreakerOpen { reason } => write!(f, "breaker open: {reason}"),
            Why::DomainOutage { outage } => {
                write!(f, "{outage}; nothing in it is cordoned or drained")
            }
            Why::DomainBudget {
                domain,
                used,
                limit,
                problem,
            } => write!(
                f,
                "cordon budget of {domain} full: {used} of {limit} nodes cordoned ({problem})"
            ),
            Why::Flapping {
                changes,
                window,
                stable_at,
            } => write!(
                f,
                "flapping: {changes} condition changes within {}; not cordoned or drained until stable at {}",
                fmt_d(*window),
                ts(*stable_at)
            ),
            Why::Paused { by } => f.write_str(by),
            Why::OutsideDrainWindow {
                next: Some(at),
                problem,
            } => write!(
                f,
                "cordoned; drains start inside the drain windows, next at {} ({problem})",
                ts(*at)
            ),
            Why::OutsideDrainWindow {
                next: None,
                problem,
            } => write!(
                f,
                "cordoned; no drain window opens within a week ({problem})"
            ),
        }
    }
}

/// What a drain needs: the node's record as read, and the pods to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainJob {
    pub record: Record,
    pub evict: Vec<PodInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDecision {
    pub node: String,
    pub action: Action,
    pub why: Why,
    pub reason: String,
    pub effect: Effect,
    /// For cordon and drain: what would happen to each pod.
    pub pods: Vec<PodPlan>,
    /// When the clock alone changes this decision (a min duration or drain time reached).
    pub wake: Option<Timestamp>,
}

impl DrainJob {
    /// Filled in by [`plan`] once the node's pods are decided.
    fn pending() -> DrainJob {
        DrainJob {
            record: Record {
                owner: String::new(),
                episode: String::new(),
                reason: String::new(),
                phase: Phase::Draining,
                cordoned_at: Timestamp::UNIX_EPOCH,
                drain_at: Timestamp::UNIX_EPOCH,
                drain_started: None,
                finished_at: None,
                attempts: 0,
                retry_at: None,
            },
            evict: Vec::new(),
        }
    }
}

/// The state of the problem on a node.
struct Problem {
    /// Conditions held at least their min duration (`Type=Status since T`).
    held: Vec<String>,
    /// Episode identity of the held conditions.
    episode: String,
    /// Matching but not yet held long enough: (description, remaining).
    pending: Vec<(String, Duration)>,
    /// Oldest transition among held/pending (for ordering).
    since: Option<Timestamp>,
    /// Kosmos exemption removed conditions.
    exempted: Vec<String>,
    /// When conditions cleared recently: the longest remaining wait before recovery counts.
    recovering: Option<Duration>,
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::from_millis((now.as_millisecond() - since.as_millisecond()).max(0) as u64)
}

fn fmt_d(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn problem(node: &NodeView, cfg: &Config, now: Timestamp) -> Problem {
    let conditions = &node.conditions;
    let kosmos = node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str());
    let mut p = Problem {
        held: vec![],
        episode: String::new(),
        pending: vec![],
        since: None,
        exempted: vec![],
        recovering: None,
    };
    let mut episode = Vec::new();
    for spec in &cfg.conditions {
        let Some(c) = conditions.iter().find(|c| *c.type_ == *spec.type_) else {
            continue;
        };
        let transition = c.since;
        if c.status != spec.status {
            // Cleared: recovery counts once the healthy status held the min duration too.
            let held_for = elapsed(transition, now);
            if held_for < spec.min_duration {
                let left = spec.min_duration - held_for;
                p.recovering = Some(p.recovering.map_or(left, |r| r.max(left)));
            }
            continue;
        }
        let desc = format!("{}={}", spec.type_, spec.status);
        if kosmos && (spec.type_ == "Ready" || !cfg.kosmos_other_conditions) {
            p.exempted.push(desc);
            continue;
        }
        p.since = Some(p.since.map_or(transition, |s: Timestamp| s.min(transition)));
        let held_for = elapsed(transition, now);
        if held_for >= spec.min_duration {
            p.held.push(format!("{desc} for {}", fmt_d(held_for)));
            episode.push(format!("{desc}@{}", transition.as_second()));
        } else {
            p.pending.push((
                format!(
                    "{desc} for {} of {}",
                    fmt_d(held_for),
                    fmt_d(spec.min_duration)
                ),
                spec.min_duration - held_for,
            ));
        }
    }
    p.episode = episode.join(",");
    p
}

/// The cluster-wide quantities budgets are counted from, over the records this drainer owns: kept as
/// running totals by the controller ([`fleet::Fleet`]), summed over all nodes by a full plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Nodes the selector selects (what a percentage cordon budget is of).
    pub selected: usize,
    /// Nodes cordoned by us (records not released).
    pub cordoned: usize,
    /// Drains in flight (records draining).
    pub draining: usize,
    /// The latest drain start.
    pub last_drain_start: Option<Timestamp>,
}

impl Totals {
    /// Sum over (selected, the record we own) pairs.
    pub fn of<'a>(nodes: impl IntoIterator<Item = (bool, Option<&'a Record>)>) -> Totals {
        let mut t = Totals::default();
        for (selected, record) in nodes {
            t.selected += selected as usize;
            if let Some(r) = record {
                t.cordoned += r.holds_cordon() as usize;
                t.draining += (r.phase == Phase::Draining) as usize;
                t.last_drain_start = t.last_drain_start.max(r.drain_started);
            }
        }
        t
    }
}

/// Running totals while planning.
struct Budgets {
    cordoned: usize,
    cordon_limit: usize,
    draining: usize,
    last_drain_start: Option<Timestamp>,
    /// `last_drain_start` before this round's latest start (restored when that start is blocked).
    prior_drain_start: Option<Timestamp>,
    /// Cordoned by us, per domain (the per-domain budget).
    domain_cordoned: HashMap<String, usize>,
}

impl Budgets {
    fn uncordoned(&mut self, domain: Option<&str>) {
        self.cordoned -= 1;
        if let Some(n) = domain.and_then(|d| self.domain_cordoned.get_mut(d)) {
            *n = n.saturating_sub(1);
        }
    }
}

/// One node to decide, with what the decision reads besides the node.
pub struct Candidate<'a> {
    pub node: &'a NodeView,
    /// Whether the selector selects it.
    pub selected: bool,
    /// The record on the node, whichever drainer owns it.
    pub record: Option<&'a Record>,
    /// Its pods.
    pub pods: Vec<&'a PodInfo>,
    /// Its failure domain, if it has one.
    pub domain: Option<&'a str>,
    /// Flapping now (known to the controller, which sees every change; a snapshot cannot tell).
    pub flapping: Option<safety::Flapping>,
}

/// Decide every node. Nodes are considered oldest problem first (then by name), so budgets go to
/// the oldest problems whatever the order nodes arrive in.
pub fn decide_nodes<N: Borrow<Node>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    cfg: &Config,
    now: Timestamp,
) -> Vec<NodeDecision> {
    decide_snapshot(nodes, pods, cfg, &safety::Recorded::default(), now)
}

/// [`decide_nodes`] with what the cluster recorded besides the objects (a pause on the Lease, nodes
/// reported flapping). The other gates are what the snapshot shows: the breaker by its thresholds
/// (no cooldown is known), outages, windows.
pub fn decide_snapshot<N: Borrow<Node>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    cfg: &Config,
    recorded: &safety::Recorded,
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
    recorded: &safety::Recorded,
    now: Timestamp,
) -> Vec<NodeDecision> {
    let mut by_node: HashMap<&str, Vec<&PodInfo>> = HashMap::new();
    for p in pods.iter().map(Borrow::borrow) {
        if let Some(n) = p.node.as_deref() {
            by_node.entry(n).or_default().push(p);
        }
    }
    let records: Vec<Option<Record>> = views.iter().map(Record::of).collect();
    let domains: Vec<Option<String>> = views.iter().map(|v| safety::domain_of(v, cfg)).collect();
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
            flapping: recorded.flapping.get(&v.name).copied(),
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
    let gates = safety::gates_of_snapshot(&selected, cfg, recorded.paused.clone(), now);
    decide_some(&candidates, &totals, &gates, cfg, now)
}

/// Decide `candidates` (some or all of the nodes) against `totals` over all nodes, oldest problem
/// first (then by name); decisions come back in the order of `candidates`. A node's own decision
/// reads only the node, its record and its pods; budgets read the totals and the decisions made
/// before it in this call.
pub fn decide_some(
    candidates: &[Candidate],
    totals: &Totals,
    gates: &safety::Gates,
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
    };
    let problems: Vec<Problem> = candidates
        .iter()
        .map(|c| problem(c.node, cfg, now))
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
    let mut out: Vec<Option<NodeDecision>> = vec![None; candidates.len()];
    for i in order {
        let c = &candidates[i];
        let node = c.node;
        let name = node.name.clone();
        let node_pods = &c.pods;
        let (action, why, effect) = match (c.record, records[i]) {
            // A node outside our selection is invisible to us, whoever acts on it (with two
            // drainers on disjoint pools, each would otherwise log the other's every move); an
            // ownerless legacy record is named as before.
            (Some(theirs), None) if !c.selected && !theirs.owner.is_empty() => {
                (Action::Skip, Why::NotSelected, Effect::Nothing)
            }
            (Some(theirs), None) => (
                Action::Skip,
                Why::OwnedByOther(theirs.owner.clone()),
                Effect::Nothing,
            ),
            _ => decide_node(c, records[i], &problems[i], gates, cfg, now, &mut budgets),
        };
        let pods: Vec<PodPlan> = if matches!(action, Action::Cordon | Action::Drain) {
            node_pods.iter().map(|p| pods::decide(p, cfg)).collect()
        } else {
            Vec::new()
        };
        // The drain carries its record and the pods it evicts (same order as `pods`).
        let effect = match (effect, records[i]) {
            (Effect::Drain(_), Some(record)) => Effect::Drain(DrainJob {
                record: record.clone(),
                evict: node_pods
                    .iter()
                    .zip(&pods)
                    .filter(|(_, plan)| plan.action == PodAction::Evict)
                    .map(|(info, _)| (*info).clone())
                    .collect(),
            }),
            (effect, _) => effect,
        };
        // A drain blocked by protected pods does not start.
        let (action, why, effect) =
            if action == Action::Drain && pods.iter().any(|p| p.action == PodAction::Block) {
                // Only a drain starting now took a slot this round; one already in flight (its
                // record says draining) stays counted.
                if matches!(why, Why::StartDrain { .. }) {
                    budgets.draining -= 1;
                    budgets.last_drain_start = budgets.prior_drain_start;
                }
                let blockers: Vec<String> = pods
                    .iter()
                    .filter(|p| p.action == PodAction::Block)
                    .map(|p| format!("{}/{}", p.namespace, p.name))
                    .collect();
                (
                    Action::Wait,
                    Why::BlockedByPods { pods: blockers },
                    Effect::Nothing,
                )
            } else {
                (action, why, effect)
            };
        out[i] = Some(NodeDecision {
            node: name,
            action,
            reason: why.to_string(),
            wake: wake(&why, &problems[i], now),
            why,
            effect,
            pods,
        });
    }
    out.into_iter().flatten().collect()
}

/// When the decision for a node changes by the clock alone, if it does.
fn wake(why: &Why, p: &Problem, now: Timestamp) -> Option<Timestamp> {
    match why {
        Why::NotHeldLongEnough { .. } | Why::ProblemBack { .. } => {
            p.pending.iter().map(|(_, left)| add(now, *left)).min()
        }
        Why::Recovering { left } => Some(add(now, *left)),
        Why::DrainScheduled { at, .. } | Why::RetryScheduled { at, .. } => Some(*at),
        Why::DrainSpacing { next } => Some(*next),
        Why::Flapping { stable_at, .. } => Some(*stable_at),
        Why::OutsideDrainWindow { next, .. } => *next,
        Why::DeleteDrained { at, .. } if *at > now => Some(*at),
        _ => None,
    }
}

/// A fleet safety gate holding new cordons and drain starts of `c`, if one does (in this order:
/// pause, flapping, the domain's outage, the breaker).
fn hold(c: &Candidate, gates: &safety::Gates, cfg: &Config) -> Option<Why> {
    if let Some(p) = &gates.paused {
        return Some(Why::Paused { by: p.to_string() });
    }
    if let Some(f) = c.flapping {
        return Some(Why::Flapping {
            changes: f.changes,
            window: cfg.safety.flap_window,
            stable_at: f.stable_at,
        });
    }
    if let Some(o) = c.domain.and_then(|d| gates.outages.get(d)) {
        return Some(Why::DomainOutage {
            outage: o.to_string(),
        });
    }
    gates.breaker.as_ref().map(|reason| Why::BreakerOpen {
        reason: reason.clone(),
    })
}

fn decide_node(
    c: &Candidate,
    record: Option<&Record>,
    p: &Problem,
    gates: &safety::Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
    let (node, selected) = (c.node, c.selected);
    if node.label(&cfg.exclude_label.0) == Some(cfg.exclude_label.1.as_str()) {
        let label = format!("{}={}", cfg.exclude_label.0, cfg.exclude_label.1);
        return (Action::Skip, Why::Excluded { label }, Effect::Nothing);
    }
    if !selected && record.is_none() {
        return (Action::Skip, Why::NotSelected, Effect::Nothing);
    }
    let unschedulable = node.unschedulable;
    let bad = !p.held.is_empty();
    let pending = || p.pending.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
    let Some(r) = record else {
        return decide_new(c, unschedulable, p, gates, cfg, now, b);
    };
    // Paused: nothing is written (a drain already evicting finishes).
    let paused = || {
        gates.paused.as_ref().map(|p| {
            (
                Action::Hold,
                Why::Paused { by: p.to_string() },
                Effect::Nothing,
            )
        })
    };
    if r.phase == Phase::Released {
        return if bad && p.episode == r.episode {
            (Action::None, Why::ReleasedEpisode, Effect::Nothing)
        } else if !bad && p.pending.is_empty() {
            if let Some(h) = paused() {
                return h;
            }
            (Action::None, Why::ForgetReleased, Effect::Forget)
        } else {
            // A new episode: as if there were no record.
            decide_new(c, unschedulable, p, gates, cfg, now, b)
        };
    }
    if !unschedulable {
        if let Some(h) = paused() {
            return h;
        }
        let mut released = r.clone();
        released.phase = Phase::Released;
        b.uncordoned(c.domain);
        if r.phase == Phase::Draining {
            b.draining -= 1;
        }
        return (Action::None, Why::ManualUncordon, Effect::Release(released));
    }
    if !bad {
        if !p.pending.is_empty() {
            let why = Why::ProblemBack { pending: pending() };
            return (Action::Wait, why, Effect::Nothing);
        }
        if let Some(left) = p.recovering {
            return (Action::Wait, Why::Recovering { left }, Effect::Nothing);
        }
        if r.phase == Phase::Draining {
            // Finish what was started: evictions already went out.
            return (
                Action::Drain,
                Why::FinishingDrain,
                Effect::Drain(DrainJob::pending()),
            );
        }
        if let Some(h) = paused() {
            return h;
        }
        b.uncordoned(c.domain);
        let during_buffer = r.phase == Phase::Cordoned;
        return (
            Action::Uncordon,
            Why::Uncordon { during_buffer },
            Effect::Uncordon,
        );
    }
    let problem = p.held.join(", ");
    match r.phase {
        Phase::Draining => (
            Action::Drain,
            Why::Draining { problem },
            Effect::Drain(DrainJob::pending()),
        ),
        Phase::Drained => match (cfg.after_drain.delete_after, r.finished_at) {
            (Some(after), Some(finished)) => {
                let at = add(finished, after);
                if at > now {
                    return (
                        Action::None,
                        Why::DeleteDrained { at, problem },
                        Effect::Nothing,
                    );
                }
                if let Some(why) = hold(c, gates, cfg) {
                    return (Action::Hold, why, Effect::Nothing);
                }
                (
                    Action::Delete,
                    Why::DeleteDrained { at, problem },
                    Effect::DeleteNode,
                )
            }
            _ => (Action::None, Why::Drained { problem }, Effect::Nothing),
        },
        Phase::Cordoned if cfg.skip_drain => {
            (Action::None, Why::SkipDrain { problem }, Effect::Nothing)
        }
        Phase::Cordoned | Phase::Failed => {
            let failed = r.phase == Phase::Failed;
            let due = if failed {
                r.retry_at.unwrap_or(r.drain_at)
            } else {
                r.drain_at
            };
            if due > now {
                let why = if failed {
                    Why::RetryScheduled { at: due, problem }
                } else {
                    Why::DrainScheduled { at: due, problem }
                };
                return (Action::Wait, why, Effect::Nothing);
            }
            if let Some(why) = hold(c, gates, cfg) {
                return (Action::Hold, why, Effect::Nothing);
            }
            if let Err(next) = gates.window {
                let why = Why::OutsideDrainWindow { next, problem };
                return (Action::Wait, why, Effect::Nothing);
            }
            if b.draining >= cfg.max_drains_in_flight {
                let why = Why::DrainBudget {
                    used: b.draining,
                    limit: cfg.max_drains_in_flight,
                };
                return (Action::Wait, why, Effect::Nothing);
            }
            if let Some(next) = b.last_drain_start.map(|last| add(last, cfg.drain_buffer))
                && next > now
            {
                return (Action::Wait, Why::DrainSpacing { next }, Effect::Nothing);
            }
            b.draining += 1;
            b.prior_drain_start = b.last_drain_start;
            b.last_drain_start = Some(now);
            (
                Action::Drain,
                Why::StartDrain { problem },
                Effect::Drain(DrainJob::pending()),
            )
        }
        Phase::Released => unreachable!("handled above"),
    }
}

/// A node without a record of ours.
fn decide_new(
    c: &Candidate,
    unschedulable: bool,
    p: &Problem,
    gates: &safety::Gates,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, Effect) {
    if p.held.is_empty() {
        if !p.pending.is_empty() {
            let pending = p.pending.iter().map(|(d, _)| d.clone()).collect();
            return (
                Action::Wait,
                Why::NotHeldLongEnough { pending },
                Effect::Nothing,
            );
        }
        if !p.exempted.is_empty() {
            let why = Why::KosmosExempt {
                conditions: p.exempted.clone(),
            };
            return (Action::Skip, why, Effect::Nothing);
        }
        return (Action::None, Why::Healthy, Effect::Nothing);
    }
    let problem = p.held.join(", ");
    if unschedulable {
        return (
            Action::None,
            Why::CordonedBySomeoneElse { problem },
            Effect::Nothing,
        );
    }
    if let Some(why) = hold(c, gates, cfg) {
        return (Action::Hold, why, Effect::Nothing);
    }
    if let (Some(d), Some(budget)) = (c.domain, &cfg.safety.max_cordoned_per_domain) {
        let size = gates.domains.get(d).map_or(1, |t| t.size);
        let (used, limit) = (
            b.domain_cordoned.get(d).copied().unwrap_or(0),
            budget.limit(size),
        );
        if used >= limit {
            let why = Why::DomainBudget {
                domain: d.to_string(),
                used,
                limit,
                problem,
            };
            return (Action::Wait, why, Effect::Nothing);
        }
    }
    if b.cordoned >= b.cordon_limit {
        let why = Why::CordonBudget {
            used: b.cordoned,
            limit: b.cordon_limit,
            problem,
        };
        return (Action::Wait, why, Effect::Nothing);
    }
    b.cordoned += 1;
    if let Some(d) = c.domain {
        *b.domain_cordoned.entry(d.to_string()).or_default() += 1;
    }
    let record = Record {
        owner: cfg.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Cordoned,
        cordoned_at: now,
        drain_at: add(now, cfg.drain_buffer),
        drain_started: None,
        finished_at: None,
        attempts: 0,
        retry_at: None,
    };
    let drain_at = (!cfg.skip_drain).then_some(record.drain_at);
    (
        Action::Cordon,
        Why::Cordon { problem, drain_at },
        Effect::Cordon(record),
    )
}

#[cfg(test)]
mod tests;
