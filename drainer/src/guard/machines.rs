//! The machines check: what the drainer's account asks of a machine (a remediation object made, a
//! BareMetalHost's reboot annotation, a Machine's remediation annotation) is admitted only for a
//! node whose ladder has that step under way now, as the drainer's own sealed record on the Node
//! says. The power-cycle and Cluster API components grant the account a whole kind in a namespace,
//! and their ValidatingAdmissionPolicies narrow that to what the drainer writes, but a policy cannot
//! read the Node: with this check a stolen token (which cannot read the record key, so cannot seal
//! a record) reaches no machine whose node the drainer is not remediating.
//!
//! [`read`] (which node or object a request is about) and [`under_way`] (whether a checked record
//! has the step on now) are pure; the lookups between them are `machine_tie`'s.

use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::Value;

use crate::model::cluster::REMEDIATE_MACHINE_ANNOTATION;
use crate::model::ladder::Step;
use crate::model::node::{NodeView, Uid};
use crate::model::record::{Checked, Phase};
use crate::model::{capi, medik8s, metal3};
use nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION;

/// What an admission request asks of a machine, as far as this check cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A remediation object (Fence Agents Remediation, or another medik8s remediator's) made for
    /// `node`: a power-cycle.
    Fence { node: String },
    /// A BareMetalHost's reboot annotation set: a power-cycle of the host whose Metal3Machine is
    /// `consumer` (its `spec.consumerRef`: namespace, name), if it has one.
    RebootHost {
        namespace: String,
        name: String,
        consumer: Option<(String, String)>,
    },
    /// A Machine's remediation annotation set: a replacement of the node it names
    /// (`status.nodeRef.name`), if it names one.
    MarkMachine {
        namespace: String,
        name: String,
        node: Option<String>,
    },
    /// Refused from the request alone: why.
    Refuse(String),
    /// Nothing this check stands in the way of (the policies decide what else may change).
    Else(&'static str),
}

impl Ask {
    /// The ladder step the node must have under way.
    pub(crate) fn step(&self) -> Option<Step> {
        match self {
            Ask::Fence { .. } | Ask::RebootHost { .. } => Some(Step::PowerCycle),
            Ask::MarkMachine { .. } => Some(Step::Replace),
            Ask::Refuse(_) | Ask::Else(_) => None,
        }
    }
}

/// The step `ask` needs under way, or its answer when none is to be looked up: admitted (why) or
/// refused (why).
pub(crate) fn without_lookup(ask: &Ask) -> Result<Step, Result<String, String>> {
    match ask {
        Ask::Refuse(why) => Err(Err(why.clone())),
        Ask::Else(why) => Err(Ok(format!("allowed: {why}"))),
        _ => ask.step().ok_or_else(|| Err("no step".to_string())),
    }
}

fn annotation<'a>(o: Option<&'a DynamicObject>, key: &str) -> Option<&'a str> {
    o.and_then(|o| o.metadata.annotations.as_ref())
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether `key` is set by this request: on the new object, and not with that value before.
fn sets(req: &AdmissionRequest<DynamicObject>, key: &str) -> bool {
    let new = annotation(req.object.as_ref(), key);
    new.is_some() && new != annotation(req.old_object.as_ref(), key)
}

/// What `req` asks, read from the request alone (its object as the API server would store it).
pub(crate) fn read(req: &AdmissionRequest<DynamicObject>) -> Ask {
    let (group, resource) = (req.resource.group.as_str(), req.resource.resource.as_str());
    let namespace = req.namespace.clone().unwrap_or_default();
    if group.ends_with("medik8s.io") && !resource.ends_with("templates") {
        if req.operation != Operation::Create {
            return Ask::Else("not a remediation made");
        }
        let Some(o) = &req.object else {
            return Ask::Else("no object");
        };
        let name = o.metadata.name.clone().unwrap_or_default();
        let Some(node) = annotation(Some(o), medik8s::NODE_NAME_ANNOTATION) else {
            return Ask::Fence { node: name };
        };
        // A remediator of another release may go by the name: it must name the same node, as the
        // drainer names its own (the node's name, or that and a suffix).
        if name != node && !name.starts_with(&format!("{node}-")) {
            return Ask::Refuse(format!(
                "{name} is named for another node than the one its {} annotation names ({node})",
                medik8s::NODE_NAME_ANNOTATION
            ));
        }
        return Ask::Fence {
            node: node.to_string(),
        };
    }
    if req.operation != Operation::Update {
        return Ask::Else("not an update");
    }
    let spec = |o: Option<&DynamicObject>| o.map(|o| o.data.clone()).unwrap_or(Value::Null);
    if group == metal3::GROUP && resource == metal3::PLURAL {
        if !sets(req, metal3::REBOOT_ANNOTATION) {
            return Ask::Else("no reboot asked of the host");
        }
        // As stored: a patch that also moved consumerRef must not choose the node.
        let consumer = &spec(req.old_object.as_ref())["spec"]["consumerRef"];
        let consumer = (consumer["kind"] == metal3::MACHINE_KIND)
            .then(|| consumer["name"].as_str())
            .flatten()
            .map(|n| {
                let ns = consumer["namespace"].as_str().unwrap_or(&namespace);
                (ns.to_string(), n.to_string())
            });
        return Ask::RebootHost {
            namespace,
            name: req.name.clone(),
            consumer,
        };
    }
    if group == capi::GROUP && resource == capi::MACHINE_PLURAL {
        if !sets(req, REMEDIATE_MACHINE_ANNOTATION) {
            return Ask::Else("no remediation asked of the Machine");
        }
        let node = spec(req.old_object.as_ref())["status"]["nodeRef"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(String::from);
        return Ask::MarkMachine {
            namespace,
            name: req.name.clone(),
            node,
        };
    }
    Ask::Else("not a machine this check guards")
}

/// Whether `node`'s record, as checked, has `step` under way at `now` for the node as it is now:
/// the drainer's own, for this Node object, in that step (phase rebooting for a power-cycle,
/// replacing for a replacement), before the step's deadline, no person's veto on the node, the
/// node still in the boot the power-cycle was asked for, and every condition of the record's
/// episode still as it was (so a record written back after the node recovered or rebooted, which
/// the token may read and write, asks nothing). Else why not, in an operator's words.
pub(crate) fn under_way(
    node: &NodeView,
    checked: Checked,
    step: Step,
    now: Timestamp,
) -> Result<(), String> {
    let (what, name) = (step.as_str(), node.name.as_str());
    if node.annotations.get(DO_NOT_REMEDIATE_ANNOTATION).is_some() {
        return Err(format!(
            "node {name} carries {DO_NOT_REMEDIATE_ANNOTATION} (a person's veto)"
        ));
    }
    let r = match checked {
        Checked::Authentic(r) => r,
        Checked::Absent => {
            return Err(format!(
                "node {name} has no drain record: no {what} of it is under way"
            ));
        }
        Checked::Foreign(r) => {
            return Err(format!(
                "node {name}'s record is drainer {}'s, not this one's",
                r.owner
            ));
        }
        Checked::Rejected(why) => {
            return Err(format!(
                "node {name}'s record is not the drainer's own ({why}): no {what} of it is under way"
            ));
        }
    };
    let phase = match step {
        Step::Replace => Phase::Replacing,
        _ => Phase::Rebooting,
    };
    if r.step != Some(step) || r.phase != phase {
        let at = r.step.map_or("drain", Step::as_str);
        let phase = serde_json::to_value(r.phase).unwrap_or_default();
        return Err(format!(
            "node {name}'s ladder is at its {at} step (phase {}), not a {what}",
            phase.as_str().unwrap_or_default()
        ));
    }
    match r.step_until {
        Some(until) if now < until => {}
        Some(until) => {
            let at = nodemedic_common::time::rfc3339(until);
            return Err(format!("node {name}'s {what} step ended at {at}"));
        }
        None => return Err(format!("node {name}'s {what} step has no deadline")),
    }
    if step == Step::PowerCycle && (r.boot_id.is_empty() || Uid::parse(&r.boot_id) != node.boot) {
        return Err(format!(
            "node {name} has booted since its power-cycle was asked for (bootID {})",
            r.boot_id
        ));
    }
    still_on(node, &r.episode)
}

/// Whether each condition of `episode` (`Type=Status[ (reason)]@seconds`, comma-separated, as
/// `decide::problem` writes it) still has that status on `node`, unchanged since then.
fn still_on(node: &NodeView, episode: &str) -> Result<(), String> {
    let name = node.name.as_str();
    let items = episode_items(episode);
    if items.is_empty() {
        return Err(format!("node {name}'s record names no problem condition"));
    }
    for (type_, status, at) in items {
        let on = node
            .condition(type_)
            .filter(|c| c.status.to_string() == status && c.since.as_second() <= at);
        if on.is_none() {
            return Err(format!(
                "node {name}'s {type_}={status} of its record is over (the problem cleared or changed)"
            ));
        }
    }
    Ok(())
}

/// The (type, status, seconds) of each condition of an episode; a reason may hold commas.
fn episode_items(episode: &str) -> Vec<(&str, &str, i64)> {
    let mut out = Vec::new();
    let mut start = 0;
    let ends = episode
        .match_indices(',')
        .map(|(i, _)| i)
        .chain([episode.len()]);
    for end in ends {
        let item = &episode[start..end];
        let Some((desc, secs)) = item.rsplit_once('@') else {
            continue;
        };
        let (Ok(secs), Some((type_, rest))) = (secs.parse::<i64>(), desc.split_once('=')) else {
            continue;
        };
        out.push((type_, rest.split(' ').next().unwrap_or_default(), secs));
        start = end + 1;
    }
    out
}

#[cfg(test)]
#[path = "machines_tests.rs"]
mod tests;
