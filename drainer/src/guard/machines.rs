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
use crate::model::record::{Checked, Phase};
use crate::model::{capi, medik8s, metal3};

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
    /// Nothing this check stands in the way of (the policies decide what else may change).
    Else(&'static str),
}

impl Ask {
    /// The ladder step the node must have under way.
    pub(crate) fn step(&self) -> Option<Step> {
        match self {
            Ask::Fence { .. } | Ask::RebootHost { .. } => Some(Step::PowerCycle),
            Ask::MarkMachine { .. } => Some(Step::Replace),
            Ask::Else(_) => None,
        }
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
        let named = annotation(Some(o), medik8s::NODE_NAME_ANNOTATION);
        let node = named.map(String::from).or_else(|| o.metadata.name.clone());
        return Ask::Fence {
            node: node.unwrap_or_default(),
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

/// Whether `node`'s record, as checked, has `step` under way at `now`: the drainer's own, for this
/// Node object, in that step (phase rebooting for a power-cycle, replacing for a replacement) and
/// before the step's deadline (an older record of the same node written back is past it). Else
/// why not, in an operator's words.
pub(crate) fn under_way(
    node: &str,
    checked: Checked,
    step: Step,
    now: Timestamp,
) -> Result<(), String> {
    let what = step.as_str();
    let r = match checked {
        Checked::Authentic(r) => r,
        Checked::Absent => {
            return Err(format!(
                "node {node} has no drain record: no {what} of it is under way"
            ));
        }
        Checked::Foreign(r) => {
            return Err(format!(
                "node {node}'s record is drainer {}'s, not this one's",
                r.owner
            ));
        }
        Checked::Rejected(why) => {
            return Err(format!(
                "node {node}'s record is not the drainer's own ({why}): no {what} of it is under way"
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
            "node {node}'s ladder is at its {at} step (phase {}), not a {what}",
            phase.as_str().unwrap_or_default()
        ));
    }
    match r.step_until {
        Some(until) if now < until => Ok(()),
        Some(until) => Err(format!(
            "node {node}'s {what} step ended at {}",
            nodemedic_common::time::rfc3339(until)
        )),
        None => Err(format!("node {node}'s {what} step has no deadline")),
    }
}

#[cfg(test)]
#[path = "machines_tests.rs"]
mod tests;
