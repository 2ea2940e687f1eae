//! Common cause, pure: when more than `--correlate-min` selected nodes gain the same condition
//! type and reason within `--correlate-window`, what do they share that the rest of the selected
//! fleet does not? Their software (`status.nodeInfo`: kernel, OS image, container runtime,
//! kubelet), their zone and region, instance type and node pool labels are compared; the
//! attributes most of them share and clearly fewer of the others do are reported, most telling
//! first: "12 nodes set KernelDeadlock/DockerHung within 3m; all 12 run kernel 5.15.0-1031-aws (31
//! of 200 others do); 11 in zone-b (60 of 200 others do)".

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::node::{Condition, NodeView};

/// A node gaining a watched condition's problem status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gain {
    pub(crate) at: Timestamp,
    pub(crate) node: ArcStr,
    pub(crate) type_: ArcStr,
    pub(crate) status: nodemedic_common::status::Status,
    pub(crate) reason: Option<ArcStr>,
}

/// The gains between an earlier and a later view of a node: each watched condition that moved
/// into its problem status.
pub(crate) fn gains(
    old: &NodeView,
    new: &NodeView,
    watched: &[crate::config::spec::ConditionSpec],
) -> Vec<Gain> {
    let find = |v: &NodeView, t: &str| -> Option<Condition> {
        v.conditions.iter().find(|c| *c.type_ == *t).cloned()
    };
    watched
        .iter()
        .filter_map(|spec| {
            let now = find(new, &spec.type_).filter(|c| spec.matches(c))?;
            let before = find(old, &spec.type_);
            if before.is_some_and(|c| spec.matches(&c)) {
                return None;
            }
            Some(Gain {
                at: now.since,
                node: new.name.clone(),
                type_: now.type_,
                status: now.status,
                reason: now.reason,
            })
        })
        .collect()
}

/// Labels compared besides the software: topology, instance type, node pools.
const LABELS: [&str; 10] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node-pool",
];

/// The name the detector's rules revision is compared under.
const RULES: &str = "detector rules";

/// Whether a label is one nodes are compared by: [`LABELS`], or a node pool's by its name's end.
fn compared_label(key: &str) -> bool {
    LABELS.contains(&key)
        || key.ends_with("nodepool")
        || key.ends_with("node-pool")
        || key.ends_with("nodegroup")
}

/// What a node is compared by: `(attribute, value)`, borrowed from its view (a comparison runs
/// over the whole selected fleet, in the round: nothing is allocated per node).
pub(crate) fn attributes<'a>(v: &'a NodeView) -> impl Iterator<Item = (&'a str, &'a str)> {
    let rules = v
        .annotations
        .get(nodemedic_common::keys::RULES_REVISION_ANNOTATION)
        .map(|r| (RULES, r));
    v.software()
        .map(|(k, val)| -> (&'a str, &'a str) { (k, val) })
        .chain(rules)
        .chain(v.labels.iter().filter(|(k, _)| compared_label(k)))
}

/// Whether `a` and `b` are compared by the same attributes ([`attributes`]): the same software,
/// rules revision and labels. Labels decoded unchanged are the same map, so this is cheap where it
/// matters (a condition's change); labels that changed count as different even when no compared
/// one did.
pub(crate) fn same_attributes(a: &NodeView, b: &NodeView) -> bool {
    let key = nodemedic_common::keys::RULES_REVISION_ANNOTATION;
    a.info == b.info && a.labels == b.labels && a.annotations.get(key) == b.annotations.get(key)
}

/// One attribute a group shares: `count` of its `of` nodes have it, and `others_with` of the
/// `others`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shared {
    pub(crate) attribute: String,
    pub(crate) value: String,
    pub(crate) count: usize,
    pub(crate) of: usize,
    pub(crate) others_with: usize,
    pub(crate) others: usize,
}

impl Shared {
    fn share(&self) -> f64 {
        self.count as f64 / self.of.max(1) as f64
    }
    fn others_share(&self) -> f64 {
        self.others_with as f64 / self.others.max(1) as f64
    }
}

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.count == self.of {
            format!("all {}", self.of)
        } else {
            self.count.to_string()
        };
        let what = match self.attribute.as_str() {
            "kernel" => format!("run kernel {}", self.value),
            "kubelet" => format!("run kubelet {}", self.value),
            "detector rules" => format!("were set by detector rules {}", self.value),
            "OS image" | "container runtime" => format!("run {}", self.value),
            a if a.ends_with("/zone") || a.ends_with("/region") => format!("in {}", self.value),
            a => format!("have {a}={}", self.value),
        };
        write!(
            f,
            "{who} {what} ({} of {} others do)",
            self.others_with, self.others
        )
    }
}

/// A group must share an attribute this much (three in four of its nodes) ...
const MOST: f64 = 0.75;
/// ... and that much more than the others, to be reported.
const APART: f64 = 0.25;

/// The attributes that set `group` apart from `others`, most telling first (at most three). An
/// attribute's value may be a set of up to three values (three zones going dark together).
///
/// The others are the rest of the selected fleet, read from `fleet` (the counts over all of it,
/// the group included, kept as nodes come and go): the round compares a growing group without a
/// pass over 50,000 nodes (it took 60 ms a round at that size).
pub(crate) fn compare(group: &[&NodeView], fleet: &AttributeCounts) -> Vec<Shared> {
    let others = fleet.nodes.saturating_sub(group.len());
    if others == 0 {
        return Vec::new();
    }
    let mut in_group: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for v in group {
        for (k, val) in attributes(v) {
            *in_group.entry(k).or_default().entry(val).or_default() += 1;
        }
    }
    // For each attribute: the fewest values (at most three) most of the group has, and how many
    // of the group have one of them. An attribute fewer than MOST of the group share is never
    // reported, so the others are not counted for it.
    let mut candidates: Vec<(&str, Vec<&str>, usize)> = Vec::new();
    for (attribute, values) in in_group {
        let mut values: Vec<(&str, usize)> = values.into_iter().collect();
        values.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut count = 0;
        let mut taken = Vec::new();
        for (v, c) in values.iter().take(3) {
            count += c;
            taken.push(*v);
            if count as f64 >= MOST * group.len() as f64 {
                break;
            }
        }
        if (count as f64) < MOST * group.len() as f64 {
            continue;
        }
        taken.sort_unstable();
        candidates.push((attribute, taken, count));
    }
    let mut out: Vec<Shared> = candidates
        .into_iter()
        .map(|(attribute, taken, count)| Shared {
            attribute: attribute.to_string(),
            value: one_of(&taken),
            count,
            of: group.len(),
            others_with: fleet.with(attribute, &taken).saturating_sub(count),
            others,
        })
        .filter(|s| s.share() >= MOST && s.share() - s.others_share() >= APART)
        .collect();
    out.sort_by(|a, b| {
        let key = |s: &Shared| (s.share() - s.others_share(), s.share());
        key(b)
            .partial_cmp(&key(a))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out.truncate(3);
    out
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(values: &[&str]) -> String {
    match values {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A common cause found: the condition, the nodes, over how long they gained it, and what sets
/// them apart (empty: nothing does).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommonCause {
    pub(crate) type_: String,
    pub(crate) status: nodemedic_common::status::Status,
    pub(crate) reason: Option<String>,
    pub(crate) nodes: Vec<String>,
    pub(crate) within: Duration,
    pub(crate) shared: Vec<Shared>,
    /// The other selected nodes.
    pub(crate) others: usize,
}

impl CommonCause {
    /// `Type/Reason` (or `Type=Status` without a reason).
    pub(crate) fn condition(&self) -> String {
        match &self.reason {
            Some(r) => format!("{}/{r}", self.type_),
            None => format!("{}={}", self.type_, self.status.as_str()),
        }
    }
}

impl std::fmt::Display for CommonCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let when = match self.within.as_secs() {
            0 => "at once".to_string(),
            s => format!(
                "within {}",
                humantime::format_duration(Duration::from_secs(s))
            ),
        };
        write!(
            f,
            "{} nodes set {} {when}",
            self.nodes.len(),
            self.condition()
        )?;
        if self.shared.is_empty() {
            return write!(
                f,
                "; nothing they share sets them apart from the other {} selected nodes",
                self.others
            );
        }
        for s in &self.shared {
            write!(f, "; {s}")?;
        }
        Ok(())
    }
}

/// The groups of gains at `now` with more than `min` distinct nodes within `window`, by
/// condition type and reason: `(type, reason) -> the latest gain of each node`.
pub(crate) fn groups(
    gains: &[Gain],
    min: usize,
    window: Duration,
    now: Timestamp,
) -> BTreeMap<(ArcStr, Option<ArcStr>), Vec<Gain>> {
    let since = nodemedic_common::time::sub(now, window);
    let mut by: BTreeMap<(ArcStr, Option<ArcStr>), BTreeMap<ArcStr, Gain>> = BTreeMap::new();
    for g in gains.iter().filter(|g| g.at >= since && g.at <= now) {
        by.entry((g.type_.clone(), g.reason.clone()))
            .or_default()
            .insert(g.node.clone(), g.clone());
    }
    by.into_iter()
        .filter(|(_, nodes)| nodes.len() > min)
        .map(|(k, nodes)| (k, nodes.into_values().collect()))
        .collect()
}

/// How many selected nodes have each value of each attribute ([`attributes`]), and how many
/// nodes were counted.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct AttributeCounts {
    values: HashMap<String, HashMap<String, usize>>,
    nodes: usize,
}

impl AttributeCounts {
    /// Count `v` in (`add`) or out.
    pub(crate) fn count(&mut self, v: &NodeView, add: bool) {
        self.nodes = if add {
            self.nodes + 1
        } else {
            self.nodes.saturating_sub(1)
        };
        for (k, val) in attributes(v) {
            match (add, self.values.get_mut(k)) {
                (true, Some(m)) => match m.get_mut(val) {
                    Some(n) => *n += 1,
                    None => {
                        m.insert(val.to_string(), 1);
                    }
                },
                (true, None) => {
                    let m = HashMap::from([(val.to_string(), 1)]);
                    self.values.insert(k.to_string(), m);
                }
                (false, Some(m)) => {
                    if let Some(n) = m.get_mut(val) {
                        *n -= 1;
                        if *n == 0 {
                            m.remove(val);
                        }
                    }
                }
                (false, None) => {}
            }
        }
    }

    /// Counts over `views`.
    #[cfg(test)]
    pub(crate) fn of<'a>(views: impl IntoIterator<Item = &'a NodeView>) -> AttributeCounts {
        let mut c = AttributeCounts::default();
        views.into_iter().for_each(|v| c.count(v, true));
        c
    }

    /// Nodes with one of `values` of `attribute`.
    fn with(&self, attribute: &str, values: &[&str]) -> usize {
        let Some(m) = self.values.get(attribute) else {
            return 0;
        };
        values.iter().filter_map(|v| m.get(*v)).sum()
    }
}

/// The common cause of `group` (gains of one condition) against the selected fleet: its nodes'
/// views `ins` (those of the group that are selected) and the `fleet`'s counts.
pub(crate) fn cause(group: &[Gain], ins: &[&NodeView], fleet: &AttributeCounts) -> CommonCause {
    let names: std::collections::HashSet<&str> = group.iter().map(|g| g.node.as_str()).collect();
    let first = group.iter().map(|g| g.at).min().unwrap_or_default();
    let last = group.iter().map(|g| g.at).max().unwrap_or_default();
    let mut nodes: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    nodes.sort();
    CommonCause {
        type_: group
            .first()
            .map(|g| g.type_.to_string())
            .unwrap_or_default(),
        status: group
            .first()
            .map_or(nodemedic_common::status::Status::True, |g| g.status),
        reason: group
            .first()
            .and_then(|g| g.reason.as_ref().map(|r| r.to_string())),
        nodes,
        within: crate::decide::problem::elapsed(first, last),
        shared: compare(ins, fleet),
        others: fleet.nodes.saturating_sub(ins.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node::node_info;
    use nodemedic_common::status::Status;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn node(name: &str, kernel: &str, zone: &str) -> NodeView {
        NodeView {
            name: name.into(),
            labels: [("topology.kubernetes.io/zone", zone), ("team", "x")]
                .into_iter()
                .collect(),
            info: node_info([kernel, "Ubuntu 22.04", "containerd://1.7", "v1.28.3"]),
            ..Default::default()
        }
    }

    /// The cause of `group` against the selected fleet `fleet` (the group's nodes among them).
    fn cause_over(group: &[Gain], fleet: &[&NodeView]) -> CommonCause {
        let ins: Vec<&NodeView> = (fleet.iter().copied())
            .filter(|v| group.iter().any(|g| g.node == v.name))
            .collect();
        cause(group, &ins, &AttributeCounts::of(fleet.iter().copied()))
    }

    fn gain(node: &str, at: i64, reason: &str) -> Gain {
        Gain {
            at: t(at),
            node: node.into(),
            type_: "KernelDeadlock".into(),
            status: Status::True,
            reason: Some(reason.into()),
        }
    }

    #[test]
    fn a_group_is_more_than_the_minimum_of_one_condition_and_reason_within_the_window() {
        let g: Vec<Gain> = (0..4)
            .map(|i| gain(&format!("n{i}"), i * 60, "DockerHung"))
            .chain([
                gain("m", 100, "AUFSUmountHung"),
                gain("n0", 200, "DockerHung"),
            ])
            .collect();
        let w = Duration::from_secs(600);
        let groups = groups(&g, 3, w, t(300));
        assert_eq!(groups.len(), 1, "the other reason has one node");
        let nodes = &groups.values().next().unwrap();
        assert_eq!(nodes.len(), 4, "n0 twice is one node");
        assert!(
            super::groups(&g, 4, w, t(300)).is_empty(),
            "more than the minimum"
        );
        assert!(
            super::groups(&g, 3, w, t(900)).is_empty(),
            "the early ones left the window"
        );
    }

    #[test]
    fn what_most_of_the_group_shares_and_few_others_do_is_named_most_telling_first() {
        let mut fleet: Vec<NodeView> = (0..12)
            .map(|i| {
                node(
                    &format!("bad{i}"),
                    "5.15.0-1031-aws",
                    if i == 0 { "zone-a" } else { "zone-b" },
                )
            })
            .collect();
        fleet.extend((0..200).map(|i| {
            let kernel = if i < 31 {
                "5.15.0-1031-aws"
            } else {
                "5.15.0-1028-aws"
            };
            node(
                &format!("ok{i}"),
                kernel,
                ["zone-a", "zone-b", "zone-c"][i % 3],
            )
        }));
        let group: Vec<Gain> = (0..12)
            .map(|i| gain(&format!("bad{i}"), i * 15, "DockerHung"))
            .collect();
        let views: Vec<&NodeView> = fleet.iter().collect();
        let c = cause_over(&group, &views);
        assert_eq!(
            c.to_string(),
            "12 nodes set KernelDeadlock/DockerHung within 2m 45s; all 12 run kernel 5.15.0-1031-aws \
             (31 of 200 others do); 11 in zone-b (67 of 200 others do)"
        );
        assert_eq!(c.others, 200);
        // The OS image, runtime, kubelet and the team label are everyone's: not named.
        assert!(
            c.shared
                .iter()
                .all(|s| s.attribute == "kernel" || s.attribute.ends_with("/zone"))
        );
    }

    #[test]
    fn the_fewest_zones_most_share_and_a_pool_few_others_have_are_counted_over_the_others() {
        let with = |name: String, zone: &str, pool: Option<&str>| {
            let mut v = node(&name, "5.15.0-1031-aws", zone);
            let mut labels: Vec<(&str, &str)> = v.labels.iter().collect();
            labels.extend(pool.map(|p| ("example.com/nodepool", p)));
            v.labels = labels.into_iter().collect();
            v
        };
        let mut fleet: Vec<NodeView> = ["zone-a", "zone-a", "zone-a", "zone-b", "zone-b"]
            .iter()
            .chain(&["zone-b", "zone-c", "zone-c"])
            .enumerate()
            .map(|(i, z)| with(format!("bad{i}"), z, Some("gpu")))
            .collect();
        fleet.extend((0..100).map(|i| {
            let zone = if i < 10 { "zone-a" } else { "zone-d" };
            with(format!("ok{i}"), zone, (i % 20 == 0).then_some("gpu"))
        }));
        let group: Vec<Gain> = (0..8)
            .map(|i| gain(&format!("bad{i}"), i, "DockerHung"))
            .collect();
        let views: Vec<&NodeView> = fleet.iter().collect();
        let c = cause_over(&group, &views);
        assert_eq!(
            c.to_string(),
            "8 nodes set KernelDeadlock/DockerHung within 7s; all 8 have example.com/nodepool=gpu \
             (5 of 100 others do); 6 in zone-a or zone-b (10 of 100 others do)"
        );
    }

    #[test]
    fn a_rules_rollout_is_named_by_the_revision_that_set_the_conditions() {
        let with_rules = |name: &str, rev: &str| {
            let mut v = node(name, "k1", "zone-a");
            v.annotations = [(nodemedic_common::keys::RULES_REVISION_ANNOTATION, rev)]
                .into_iter()
                .collect();
            v
        };
        let mut fleet: Vec<NodeView> = (0..5)
            .map(|i| with_rules(&format!("new{i}"), "bbbbbbbbbbbb"))
            .collect();
        fleet.extend((0..20).map(|i| with_rules(&format!("old{i}"), "aaaaaaaaaaaa")));
        let group: Vec<Gain> = (0..5)
            .map(|i| gain(&format!("new{i}"), 0, "DockerHung"))
            .collect();
        let views: Vec<&NodeView> = fleet.iter().collect();
        assert_eq!(
            cause_over(&group, &views).to_string(),
            "5 nodes set KernelDeadlock/DockerHung at once; all 5 were set by detector rules bbbbbbbbbbbb (0 of 20 others do)"
        );
    }

    #[test]
    fn a_group_that_shares_nothing_the_others_lack_says_so() {
        let fleet: Vec<NodeView> = (0..40)
            .map(|i| {
                node(
                    &format!("n{i}"),
                    ["k1", "k2"][i % 2],
                    ["zone-a", "zone-b", "zone-c", "zone-d"][i % 4],
                )
            })
            .collect();
        let group: Vec<Gain> = [0, 1, 2, 3, 5, 6, 7, 9]
            .iter()
            .map(|i| gain(&format!("n{i}"), 0, "DockerHung"))
            .collect();
        let views: Vec<&NodeView> = fleet.iter().collect();
        let c = cause_over(&group, &views);
        assert_eq!(c.shared, vec![]);
        assert_eq!(
            c.to_string(),
            "8 nodes set KernelDeadlock/DockerHung at once; nothing they share sets them apart from the other 32 selected nodes"
        );
    }

    #[test]
    fn gains_are_moves_into_the_problem_status_only() {
        let spec: Vec<crate::config::spec::ConditionSpec> =
            vec!["KernelDeadlock=True,10m".parse().unwrap()];
        let with = |status: Status| NodeView {
            name: "n".into(),
            conditions: Box::new([Condition {
                type_: "KernelDeadlock".into(),
                status,
                reason: Some("DockerHung".into()),
                since: t(5),
                heartbeat: 0,
            }]),
            ..Default::default()
        };
        let (ok, bad) = (with(Status::False), with(Status::True));
        let g = gains(&ok, &bad, &spec);
        assert_eq!(g.len(), 1);
        assert_eq!(
            (g[0].at, g[0].reason.as_deref()),
            (t(5), Some("DockerHung"))
        );
        assert!(gains(&bad, &bad, &spec).is_empty(), "still True: no gain");
        assert!(gains(&bad, &ok, &spec).is_empty(), "a recovery is no gain");
        assert_eq!(
            gains(&NodeView::default(), &bad, &spec).len(),
            1,
            "absent before"
        );
    }
}
