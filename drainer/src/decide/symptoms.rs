//! Ready but broken, seen from the cluster: what the pods bound to a node say about it when no log
//! line on the node does. Pure: a function of the pods waiting or going, when a container last
//! started on each node, and the clock.
//!
//! - **PodsNotStarting**: pods bound to the node have waited to start longer than
//!   `--pods-not-starting-after` while no container started there in that time (a wedged runtime
//!   or CNI: every sandbox fails). A pod whose owner has pods waiting on two other nodes too is
//!   not counted: an owner's own fault fails everywhere, and no node is to blame for it.
//! - **PodsNotTerminating**: pods deleted on the node still have a container running
//!   `--pods-not-terminating-after` past the end of their grace period (the kubelet did not stop
//!   them).
//!
//! Only evidence a tenant cannot aim at a node it picks counts. Anyone who may create pods may bind
//! one to any node (`spec.nodeName`), with any image, volume or finalizer, and delete it: so
//! - a pod waiting for a reason its own spec causes never counts: only a pod the kubelet has said
//!   nothing about yet, or one waiting in `ContainerCreating` or `PodInitializing` (the sandbox,
//!   the network, the volumes) does ([`COUNTED_WAITS`]); an image that cannot be pulled, a bad
//!   config, a crash loop are the pod's own;
//! - a deleted pod counts only while a container of it still runs (the kubelet did not stop it); a
//!   finalizer holds a stopped pod anywhere, and that is its owner's doing;
//! - a deleted pod never counts when a volume of it is on a server its own spec names (an inline
//!   NFS, iSCSI, CephFS or CSI volume, ...): a tenant who stops that server leaves the pod's
//!   processes hung in the kernel (an NFS hard mount, D state), where no kubelet can kill them, on
//!   any node it bound the pod to (issue 76). Claims count: their volumes are the operators';
//! - a pod waiting to start counts against its node only when the cluster operators' own node
//!   agent there (a DaemonSet's pod in `kube-system`, which tenants cannot create) waits too: a
//!   pod whose Secret, ConfigMap or volume claim does not exist waits in `ContainerCreating` for
//!   good by its owner's doing, exactly as one on a wedged runtime does, and two tenants (or one
//!   with two namespaces) could aim such pods at any node (issue 76, point 4). A wedged runtime
//!   or CNI stalls the node's agents too whenever one starts;
//! - a deleted pod still running counts when it comes from pods of two namespaces or more, or from
//!   an operators' agent: one tenant's namespace alone never sets a symptom.
//!
//! Only pods bound to a node count against it, and pods elsewhere can only excuse it: what one
//! node's kubelet writes about its pods never sets a condition on another node.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::node::{NodeView, Status};
use crate::model::pod::{PodInfo, Uid};
use crate::model::progress::Progress;

pub(crate) use crate::config::SymptomSettings;
pub(crate) use crate::model::symptom::{CONDITIONS, PODS_NOT_STARTING, PODS_NOT_TERMINATING};

/// A symptom on one node: its condition (one of [`CONDITIONS`]) and what the message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Symptom {
    pub(crate) condition: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

/// The symptoms of each node that has one.
pub(crate) type Found = BTreeMap<ArcStr, Vec<Symptom>>;

/// What a pass writes to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SymptomWrite {
    /// Set the symptom's condition True.
    Set(Symptom),
    /// The symptom is gone: its condition False.
    Clear {
        condition: &'static str,
        reason: &'static str,
        message: &'static str,
    },
}

impl SymptomWrite {
    /// The condition it writes.
    pub(crate) fn condition(&self) -> &'static str {
        match self {
            SymptomWrite::Set(s) => s.condition,
            SymptomWrite::Clear { condition, .. } => condition,
        }
    }
}

/// Most condition writes one pass makes; the rest wait for the next pass (a burst never floods
/// the API server).
pub(crate) const MAX_WRITES: usize = 100;

/// Is `condition` True on `view` with the reason we set it with?
fn ours_true(view: &NodeView, condition: &str, set_reason: &str) -> bool {
    let now = view.conditions.iter().find(|c| &*c.type_ == condition);
    now.is_some_and(|c| c.status == Status::True && c.reason.as_deref() == Some(set_reason))
}

/// Does `view` carry a symptom condition we set (True with our reason)? Such a node may need it
/// cleared; one that does not needs a write only for a symptom found on it. The fleet keeps the
/// selected nodes that do, so the writes are looked for among them and the nodes with symptoms,
/// not among every node.
pub(crate) fn marked(view: &NodeView) -> bool {
    CONDITIONS
        .iter()
        .any(|(condition, set_reason, ..)| ours_true(view, condition, set_reason))
}

/// The writes that bring the nodes `views` (the selected ones) to the symptoms `found`: a symptom
/// whose condition is not True with its reason yet is set; a condition True with our reason and
/// no symptom any more is cleared. Nothing else is written: a node that never had a symptom gets
/// no condition at all, and a Kosmos leaf node (`kosmos`: its label) none either (its pods run in
/// a member cluster). At most [`MAX_WRITES`], by node name.
pub(crate) fn writes<'a>(
    found: &Found,
    views: impl IntoIterator<Item = &'a NodeView>,
    kosmos: &(String, String),
) -> Vec<(ArcStr, SymptomWrite)> {
    let mut out = Vec::new();
    let mut views: Vec<&NodeView> = views
        .into_iter()
        .filter(|v| v.label(&kosmos.0) != Some(kosmos.1.as_str()))
        .collect();
    views.sort_by(|a, b| a.name.cmp(&b.name));
    for view in views {
        for (condition, set_reason, clear_reason, clear_message) in CONDITIONS {
            let ours_true = ours_true(view, condition, set_reason);
            let want = found
                .get(&view.name)
                .and_then(|s| s.iter().find(|s| s.condition == condition));
            match want {
                Some(s) if !ours_true => {
                    out.push((view.name.clone(), SymptomWrite::Set(s.clone())))
                }
                None if ours_true => out.push((
                    view.name.clone(),
                    SymptomWrite::Clear {
                        condition,
                        reason: clear_reason,
                        message: clear_message,
                    },
                )),
                _ => {}
            }
            if out.len() >= MAX_WRITES {
                return out;
            }
        }
    }
    out
}

/// The waiting reasons that may say something about the node (besides no status at all): the
/// kubelet is still making the pod's sandbox, network or volumes. Every other reason the kubelet
/// gives (`ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`, `CreateContainerConfigError`,
/// `CrashLoopBackOff`, ...) comes from the pod's own spec.
pub(crate) const COUNTED_WAITS: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// The namespace whose DaemonSet pods count alone: the cluster operators' node agents.
pub(crate) const OPERATORS_NAMESPACE: &str = "kube-system";

/// Whether a pod's waiting reason may be the node's doing (none yet, or one of [`COUNTED_WAITS`]).
fn counted_wait(p: &PodInfo) -> bool {
    let reason = p
        .progress
        .as_ref()
        .and_then(|x| x.waiting_reason.as_deref());
    reason.is_none_or(|r| COUNTED_WAITS.contains(&r))
}

/// Whether one of the pods is the cluster operators' node agent: a DaemonSet's pod in
/// [`OPERATORS_NAMESPACE`].
fn operators_among<'a>(mut pods: impl Iterator<Item = &'a PodInfo>) -> bool {
    pods.any(|p| {
        &*p.namespace == OPERATORS_NAMESPACE && p.owner_kind.as_deref() == Some("DaemonSet")
    })
}

/// Whether the pods against one node are evidence no single tenant can aim: two namespaces or
/// more, or a DaemonSet's pod in [`OPERATORS_NAMESPACE`].
fn corroborated<'a>(pods: impl IntoIterator<Item = &'a PodInfo>) -> bool {
    let mut first: Option<&str> = None;
    for p in pods {
        let operators =
            &*p.namespace == OPERATORS_NAMESPACE && p.owner_kind.as_deref() == Some("DaemonSet");
        if operators {
            return true;
        }
        match first {
            None => first = Some(&p.namespace),
            Some(ns) if ns != &*p.namespace => return true,
            Some(_) => {}
        }
    }
    false
}

/// Examples named in a message.
const EXAMPLES: usize = 3;

/// On how many nodes an owner's pods wait before no node is blamed for them (the owner's own
/// problem). Three, not two: a node's kubelet may write its own pods' status, so one rogue kubelet
/// reporting its own DaemonSet pod waiting once excused that DaemonSet's pod stuck on every other
/// node, and so hid a wedged node from the symptom (issue 76, an attacker's review). Two
/// colluding nodes still can; the breaker and the outage rule stand over what they could hide.
const ELSEWHERE_NODES: usize = 3;

/// What the pods waiting or going say, and what else is known of their nodes.
pub(crate) struct Evidence<'a> {
    /// The pods waiting on their node to start, or deleted and not gone.
    pub(crate) pods: &'a [Arc<PodInfo>],
    /// When a container last started on each node.
    pub(crate) last_start: &'a HashMap<ArcStr, Timestamp>,
    /// Per node, how many sandbox failures its kubelet's Events counted within
    /// `not_starting_after`, and the last one's time: words for the message only (anyone who may
    /// write Events can write one naming any node).
    pub(crate) sandbox: &'a HashMap<ArcStr, (u64, Timestamp)>,
}

/// The symptoms of every node that has one, as of `now`.
pub(crate) fn assess(now: Timestamp, e: &Evidence, s: &SymptomSettings) -> Found {
    let mut out = Found::new();
    let pods = e.pods;
    if let Some(after) = s.not_starting_after {
        for (node, symptom) in not_starting(now, e, after) {
            out.entry(node).or_default().push(symptom);
        }
    }
    if let Some(after) = s.not_terminating_after {
        for (node, symptom) in not_terminating(now, pods, after) {
            out.entry(node).or_default().push(symptom);
        }
    }
    out
}

/// How long from `since` to `now`, floored at zero.
fn age(since: Timestamp, now: Timestamp) -> Duration {
    Duration::from_secs((now.as_second() - since.as_second()).max(0) as u64)
}

fn not_starting(now: Timestamp, e: &Evidence, after: Duration) -> Vec<(ArcStr, Symptom)> {
    let (pods, last_start) = (e.pods, e.last_start);
    // (node, pod, waited) of every pod waiting too long.
    let waiting: Vec<(&ArcStr, &PodInfo, Duration)> = pods
        .iter()
        .filter(|p| counted_wait(p))
        .filter_map(|p| {
            let since = p.progress.as_ref()?.waiting_since?;
            let waited = age(since, now);
            (waited >= after).then_some((p.node.as_ref()?, &**p, waited))
        })
        .collect();
    // Per owner, the first nodes its waiting pods are on, up to ELSEWHERE_NODES. (A list of all
    // its nodes searched for each pod was pods x nodes: 500,000 waiting pods of one ReplicaSet over
    // 50,000 nodes kept the drainer's one thread busy for good.)
    // By the pod's namespace and its owner's UID: a pod names its owner by UID alone, and a tenant's
    // pods naming a DaemonSet's UID from their own namespace once made it "wait on three nodes"
    // (an attacker's second review). An owner's pods are in its namespace.
    let mut owners: HashMap<(&str, &Uid), Vec<&ArcStr>> = HashMap::new();
    for (node, p, _) in &waiting {
        if let Some(o) = p.progress.as_ref().and_then(|x| x.owner.as_ref()) {
            let nodes = owners.entry((&p.namespace, o)).or_default();
            if nodes.len() < ELSEWHERE_NODES && !nodes.contains(node) {
                nodes.push(node);
            }
        }
    }
    let elsewhere = |p: &PodInfo| {
        let owner = p.progress.as_ref().and_then(|x| x.owner.as_ref());
        let key = |o| (&*p.namespace, o);
        owner.is_some_and(|o| (owners.get(&key(o))).is_some_and(|n| n.len() >= ELSEWHERE_NODES))
    };
    let mut by_node: BTreeMap<&ArcStr, Vec<(&PodInfo, Duration)>> = BTreeMap::new();
    for (node, p, waited) in &waiting {
        if !elsewhere(p) {
            by_node.entry(node).or_default().push((p, *waited));
        }
    }
    let window_start = now.as_second() - after.as_secs() as i64;
    by_node
        .into_iter()
        .filter(|(node, _)| last_start.get(*node).is_none_or(|t| t.as_second() < window_start))
        .filter(|(_, stuck)| operators_among(stuck.iter().map(|(p, _)| *p)))
        .map(|(node, mut stuck)| {
            stuck.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| key(a.0).cmp(&key(b.0))));
            let examples = stuck.iter().map(|(p, waited)| {
                let why = p.progress.as_ref().and_then(|x| x.waiting_reason.as_deref());
                format!("{} ({}, {})", key(p), why.unwrap_or("no status yet"), minutes(*waited))
            });
            let mut message = format!(
                "{} bound here {} waited over {} to start and no container started here in that time: {}",
                plural(stuck.len(), "pod"),
                if stuck.len() == 1 { "has" } else { "have" },
                minutes(after),
                list(examples, stuck.len()),
            );
            if let Some((n, last)) = e.sandbox.get(node) {
                let ago = minutes(age(*last, now));
                message.push_str(&format!(
                    "; its kubelet reported FailedCreatePodSandBox {n} {} in that time, last {ago} ago",
                    if *n == 1 { "time" } else { "times" },
                ));
            }
            (node.clone(), symptom(PODS_NOT_STARTING, message))
        })
        .collect()
}

fn not_terminating(
    now: Timestamp,
    pods: &[Arc<PodInfo>],
    after: Duration,
) -> Vec<(ArcStr, Symptom)> {
    let mut by_node: BTreeMap<&ArcStr, Vec<(&PodInfo, Duration)>> = BTreeMap::new();
    for p in pods {
        let counted = |x: &Progress| x.still_running && !x.own_server;
        let Some(progress) = p.progress.as_deref().filter(|x| counted(x)) else {
            continue;
        };
        let (Some(node), Some(end)) = (&p.node, progress.deleting_after) else {
            continue;
        };
        let over = age(end, now);
        if over >= after {
            by_node.entry(node).or_default().push((p, over));
        }
    }
    by_node
        .into_iter()
        .filter(|(_, stuck)| corroborated(stuck.iter().map(|(p, _)| *p)))
        .map(|(node, mut stuck)| {
            stuck.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| key(a.0).cmp(&key(b.0))));
            let examples = stuck
                .iter()
                .map(|(p, over)| format!("{} ({} past its grace period)", key(p), minutes(*over)));
            let message = format!(
                "{} deleted here {} still running over {} past {} grace period: {}",
                plural(stuck.len(), "pod"),
                if stuck.len() == 1 { "is" } else { "are" },
                minutes(after),
                if stuck.len() == 1 { "its" } else { "their" },
                list(examples, stuck.len()),
            );
            (node.clone(), symptom(PODS_NOT_TERMINATING, message))
        })
        .collect()
}

fn symptom(condition: &'static str, message: String) -> Symptom {
    let reason = CONDITIONS
        .iter()
        .find(|c| c.0 == condition)
        .map_or("", |c| c.1);
    Symptom {
        condition,
        reason,
        message,
    }
}

fn key(p: &PodInfo) -> String {
    format!("{}/{}", p.namespace, p.name)
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `12m`, `1h5m`: whole minutes, at least one.
fn minutes(d: Duration) -> String {
    // Under a minute, in seconds: a 30 s limit is not "over 1m".
    if d.as_secs() < 60 {
        return format!("{}s", d.as_secs());
    }
    let m = d.as_secs() / 60;
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

/// The first [`EXAMPLES`] of `total`, and how many more.
fn list(examples: impl Iterator<Item = String>, total: usize) -> String {
    let mut s: Vec<String> = examples.take(EXAMPLES).collect();
    if total > EXAMPLES {
        s.push(format!("and {} more", total - EXAMPLES));
    }
    s.join(", ")
}
