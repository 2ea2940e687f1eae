//! The drain decision: a pure function of (Nodes, Pods, config, now) -> one [`NodePlan`] per node.
//!
//! Order of checks for a node: opt-out label, selection, Kosmos exemption, then either what our
//! record says we did (release after a manual uncordon, uncordon on recovery, drain when due, retry
//! after failure) or whether a new problem warrants a cordon. Budgets (cordoned nodes, drains in
//! flight, spacing of drain starts) are counted across the plan, oldest problem first, so the plan
//! never exceeds them whatever the order nodes arrive in.

pub mod pods;

use std::borrow::Borrow;
use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::Timestamp;

use crate::config::Config;
use crate::record::{Phase, Record};
pub use pods::{PodAction, PodInfo, PodPlan};

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
}

/// Why the plan says what it says: the stable part of a decision (the `reason` text also carries
/// durations and times, which change every round). The shell logs a decision when this changes and
/// matches on it to choose metrics and Events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Excluded,
    NotSelected,
    /// The record belongs to another drainer (its Lease name).
    OwnedByOther(String),
    Healthy,
    KosmosExempt,
    NotHeldLongEnough,
    CordonedBySomeoneElse,
    CordonBudget {
        used: usize,
        limit: usize,
    },
    Cordon,
    ReleasedEpisode,
    ForgetReleased,
    ManualUncordon,
    ProblemBack,
    Recovering,
    FinishingDrain,
    Uncordon,
    Draining,
    Drained,
    SkipDrain,
    DrainScheduled,
    RetryScheduled,
    DrainBudget {
        used: usize,
        limit: usize,
    },
    DrainSpacing,
    StartDrain,
    BlockedByPods,
}

impl Why {
    /// The decision without its numbers (what decides whether a decision is news).
    pub fn kind(&self) -> std::mem::Discriminant<Why> {
        std::mem::discriminant(self)
    }
}

/// What a drain needs: the node's record as read, and the pods to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainJob {
    pub record: Record,
    pub evict: Vec<PodInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    pub node: String,
    pub action: Action,
    pub why: Why,
    pub reason: String,
    pub effect: Effect,
    /// For cordon and drain: what would happen to each pod.
    pub pods: Vec<PodPlan>,
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

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn problem(node: &Node, cfg: &Config, now: Timestamp) -> Problem {
    let empty = Vec::new();
    let conditions: &Vec<NodeCondition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .unwrap_or(&empty);
    let kosmos = label(node, &cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str());
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
        let Some(c) = conditions.iter().find(|c| c.type_ == spec.type_) else {
            continue;
        };
        let transition = c
            .last_transition_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(Timestamp::UNIX_EPOCH);
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

/// Running totals while planning.
struct Budgets {
    cordoned: usize,
    cordon_limit: usize,
    draining: usize,
    last_drain_start: Option<Timestamp>,
}

/// Plan every node. Nodes are considered oldest problem first (then by name).
pub fn plan<N: Borrow<Node>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    cfg: &Config,
    now: Timestamp,
) -> Vec<NodePlan> {
    let nodes: Vec<&Node> = nodes.iter().map(Borrow::borrow).collect();
    let mut by_node: HashMap<&str, Vec<&PodInfo>> = HashMap::new();
    for p in pods.iter().map(Borrow::borrow) {
        if let Some(n) = p.node.as_deref() {
            by_node.entry(n).or_default().push(p);
        }
    }
    let selected: Vec<bool> = nodes
        .iter()
        .map(|n| cfg.selector.matches(n).unwrap_or(false))
        .collect();
    // Records of other drainers (another Lease name) are theirs: not acted on, not counted.
    let all_records: Vec<Option<Record>> = nodes.iter().map(|n| Record::of(n)).collect();
    let records: Vec<Option<Record>> = all_records
        .iter()
        .zip(&selected)
        .map(|(r, sel)| r.clone().filter(|r| r.owned_by(&cfg.owner, *sel)))
        .collect();
    let mut budgets = Budgets {
        cordoned: records
            .iter()
            .flatten()
            .filter(|r| r.holds_cordon())
            .count(),
        cordon_limit: cfg
            .max_cordoned
            .limit(selected.iter().filter(|s| **s).count()),
        draining: records
            .iter()
            .flatten()
            .filter(|r| r.phase == Phase::Draining)
            .count(),
        last_drain_start: records
            .iter()
            .flatten()
            .filter_map(|r| r.drain_started)
            .max(),
    };
    let problems: Vec<Problem> = nodes.iter().map(|n| problem(n, cfg, now)).collect();
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                problems[i].since.map(|t| t.as_second()).unwrap_or(i64::MAX),
                nodes[i].metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut out: Vec<Option<NodePlan>> = vec![None; nodes.len()];
    for i in order {
        let node = &nodes[i];
        let name = node.metadata.name.clone().unwrap_or_default();
        let node_pods = by_node.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        let (action, why, reason, effect) = match (&all_records[i], &records[i]) {
            (Some(theirs), None) => (
                Action::Skip,
                Why::OwnedByOther(theirs.owner.clone()),
                format!("handled by another drainer ({}); not touched", theirs.owner),
                Effect::Nothing,
            ),
            _ => decide_node(
                node,
                selected[i],
                records[i].as_ref(),
                &problems[i],
                cfg,
                now,
                &mut budgets,
            ),
        };
        let pods: Vec<PodPlan> = if matches!(action, Action::Cordon | Action::Drain) {
            node_pods.iter().map(|p| pods::decide(p, cfg)).collect()
        } else {
            Vec::new()
        };
        // The drain carries its record and the pods it evicts (same order as `pods`).
        let effect = match (effect, &records[i]) {
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
        let (action, why, reason, effect) =
            if action == Action::Drain && pods.iter().any(|p| p.action == PodAction::Block) {
                budgets.draining -= 1;
                let blockers: Vec<String> = pods
                    .iter()
                    .filter(|p| p.action == PodAction::Block)
                    .map(|p| format!("{}/{}", p.namespace, p.name))
                    .collect();
                (
                    Action::Wait,
                    Why::BlockedByPods,
                    format!("drain blocked by protected pods: {}", blockers.join(", ")),
                    Effect::Nothing,
                )
            } else {
                (action, why, reason, effect)
            };
        out[i] = Some(NodePlan {
            node: name,
            action,
            why,
            reason,
            effect,
            pods,
        });
    }
    out.into_iter().flatten().collect()
}

fn decide_node(
    node: &Node,
    selected: bool,
    record: Option<&Record>,
    p: &Problem,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, String, Effect) {
    if label(node, &cfg.exclude_label.0) == Some(cfg.exclude_label.1.as_str()) {
        return (
            Action::Skip,
            Why::Excluded,
            format!(
                "excluded by label {}={}",
                cfg.exclude_label.0, cfg.exclude_label.1
            ),
            Effect::Nothing,
        );
    }
    if !selected && record.is_none() {
        return (
            Action::Skip,
            Why::NotSelected,
            "not selected by the node selector".into(),
            Effect::Nothing,
        );
    }
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let bad = !p.held.is_empty();
    if let Some(r) = record {
        if r.phase == Phase::Released {
            return if bad && p.episode == r.episode {
                (
                    Action::None,
                    Why::ReleasedEpisode,
                    "uncordoned by a person during this problem episode; not cordoned again".into(),
                    Effect::Nothing,
                )
            } else if !bad && p.pending.is_empty() {
                (
                    Action::None,
                    Why::ForgetReleased,
                    "problem cleared; forgetting the released episode".into(),
                    Effect::Forget,
                )
            } else {
                // A new episode: fall through to the no-record path.
                return decide_new(node, unschedulable, p, cfg, now, b);
            };
        }
        if !unschedulable {
            let mut released = r.clone();
            released.phase = Phase::Released;
            b.cordoned -= 1;
            if r.phase == Phase::Draining {
                b.draining -= 1;
            }
            return (
                Action::None,
                Why::ManualUncordon,
                "uncordoned by a person; not cordoned again for this problem episode".into(),
                Effect::Release(released),
            );
        }
        if !bad {
            if !p.pending.is_empty() {
                let what: Vec<&str> = p.pending.iter().map(|(d, _)| d.as_str()).collect();
                return (
                    Action::Wait,
                    Why::ProblemBack,
                    format!(
                        "problem back before its min duration ({}); staying cordoned",
                        what.join(", ")
                    ),
                    Effect::Nothing,
                );
            }
            if let Some(left) = p.recovering {
                return (
                    Action::Wait,
                    Why::Recovering,
                    format!("recovering; uncordon in {}", fmt_d(left)),
                    Effect::Nothing,
                );
            }
            if r.phase == Phase::Draining {
                // Finish what was started: evictions already went out.
                return (
                    Action::Drain,
                    Why::FinishingDrain,
                    "recovered while draining; finishing the drain in progress".into(),
                    Effect::Drain(DrainJob::pending()),
                );
            }
            b.cordoned -= 1;
            let why = match r.phase {
                Phase::Cordoned => {
                    "recovered during the drain buffer: drain cancelled, uncordoning"
                }
                _ => "conditions cleared: uncordoning",
            };
            return (
                Action::Uncordon,
                Why::Uncordon,
                why.into(),
                Effect::Uncordon,
            );
        }
        let problem = p.held.join(", ");
        return match r.phase {
            Phase::Draining => (
                Action::Drain,
                Why::Draining,
                format!("drain in progress ({problem})"),
                Effect::Drain(DrainJob::pending()),
            ),
            Phase::Drained => (
                Action::None,
                Why::Drained,
                format!("drained; stays cordoned until recovery ({problem})"),
                Effect::Nothing,
            ),
            Phase::Cordoned if cfg.skip_drain => (
                Action::None,
                Why::SkipDrain,
                format!("cordoned; drain skipped (--skip-drain) ({problem})"),
                Effect::Nothing,
            ),
            Phase::Cordoned | Phase::Failed => {
                let due = match r.phase {
                    Phase::Failed => r.retry_at.unwrap_or(r.drain_at),
                    _ => r.drain_at,
                };
                if due > now {
                    let what = if r.phase == Phase::Failed {
                        "drain failed; retry"
                    } else {
                        "drain scheduled"
                    };
                    return (
                        Action::Wait,
                        if r.phase == Phase::Failed {
                            Why::RetryScheduled
                        } else {
                            Why::DrainScheduled
                        },
                        format!(
                            "{what} at {} ({problem})",
                            due.strftime("%Y-%m-%dT%H:%M:%SZ")
                        ),
                        Effect::Nothing,
                    );
                }
                if b.draining >= cfg.max_drains_in_flight {
                    return (
                        Action::Wait,
                        Why::DrainBudget {
                            used: b.draining,
                            limit: cfg.max_drains_in_flight,
                        },
                        format!(
                            "drain budget full: {} of {} drains in flight",
                            b.draining, cfg.max_drains_in_flight
                        ),
                        Effect::Nothing,
                    );
                }
                if let Some(last) = b.last_drain_start {
                    let next = last + cfg.drain_buffer;
                    if next > now {
                        return (
                            Action::Wait,
                            Why::DrainSpacing,
                            format!(
                                "drain starts are spaced by the buffer; next start at {}",
                                next.strftime("%Y-%m-%dT%H:%M:%SZ")
                            ),
                            Effect::Nothing,
                        );
                    }
                }
                b.draining += 1;
                b.last_drain_start = Some(now);
                (
                    Action::Drain,
                    Why::StartDrain,
                    format!("draining ({problem})"),
                    Effect::Drain(DrainJob::pending()),
                )
            }
            Phase::Released => unreachable!("handled above"),
        };
    }
    decide_new(node, unschedulable, p, cfg, now, b)
}

/// A node without a record of ours.
fn decide_new(
    node: &Node,
    unschedulable: bool,
    p: &Problem,
    cfg: &Config,
    now: Timestamp,
    b: &mut Budgets,
) -> (Action, Why, String, Effect) {
    let _ = node;
    if p.held.is_empty() {
        if !p.pending.is_empty() {
            let what: Vec<&str> = p.pending.iter().map(|(d, _)| d.as_str()).collect();
            return (
                Action::Wait,
                Why::NotHeldLongEnough,
                format!("condition not held long enough: {}", what.join(", ")),
                Effect::Nothing,
            );
        }
        if !p.exempted.is_empty() {
            return (
                Action::Skip,
                Why::KosmosExempt,
                format!(
                    "Kosmos leaf node: not cordoned or drained for {}",
                    p.exempted.join(", ")
                ),
                Effect::Nothing,
            );
        }
        return (
            Action::None,
            Why::Healthy,
            "healthy".into(),
            Effect::Nothing,
        );
    }
    let problem = p.held.join(", ");
    if unschedulable {
        return (
            Action::None,
            Why::CordonedBySomeoneElse,
            format!("already cordoned by someone else; not touched ({problem})"),
            Effect::Nothing,
        );
    }
    if b.cordoned >= b.cordon_limit {
        return (
            Action::Wait,
            Why::CordonBudget {
                used: b.cordoned,
                limit: b.cordon_limit,
            },
            format!(
                "cordon budget full: {} of {} nodes cordoned ({problem})",
                b.cordoned, b.cordon_limit
            ),
            Effect::Nothing,
        );
    }
    b.cordoned += 1;
    let record = Record {
        owner: cfg.owner.clone(),
        episode: p.episode.clone(),
        reason: problem.clone(),
        phase: Phase::Cordoned,
        cordoned_at: now,
        drain_at: now + cfg.drain_buffer,
        drain_started: None,
        finished_at: None,
        attempts: 0,
        retry_at: None,
    };
    let when = if cfg.skip_drain {
        "drain skipped (--skip-drain)".to_string()
    } else {
        format!(
            "drain at {}",
            record.drain_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    };
    (
        Action::Cordon,
        Why::Cordon,
        format!("{problem}; {when}"),
        Effect::Cordon(record),
    )
}

#[cfg(test)]
mod tests;
