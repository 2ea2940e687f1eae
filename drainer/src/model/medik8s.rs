//! medik8s' external remediation protocol, as NodeHealthCheck speaks it to Fence Agents
//! Remediation, Self Node Remediation and Machine Deletion Remediation. Pure.
//!
//! An operator-given template (`spec.template.spec`, in the remediator's namespace) is copied into
//! a remediation object of the template's kind less `Template`, named after the node (or
//! `<node>-xxxxx` where the template carries the multiple-templates annotation, as SNR's and
//! FAR's webhooks add it), annotated with the node's name and the template's as NodeHealthCheck
//! annotates it; the remediator reboots (or fences) the node it names and says so in
//! `status.conditions` (`Succeeded` True or False). The drainer's own marks: the label
//! [`MANAGED_BY`] (what it lists, and only those it ever deletes) and the attempt's operation ID
//! (the node's UID and the boot it must leave), so a request asked again is not asked twice and an
//! earlier attempt's object is told from the current one.

use std::fmt;

/// NodeHealthCheck's annotations on a remediation object.
pub(crate) const NODE_NAME_ANNOTATION: &str = "remediation.medik8s.io/node-name";
pub(crate) const TEMPLATE_NAME_ANNOTATION: &str = "remediation.medik8s.io/template-name";
/// On a template: the object is named `<node>-xxxxx` (several templates may remediate one node).
pub(crate) const MULTIPLE_TEMPLATES_ANNOTATION: &str =
    "remediation.medik8s.io/multiple-templates-support";
/// Ours: the attempt an object stands for.
pub(crate) const OPERATION_ANNOTATION: &str = "nodemedic.io/operation-id";
/// Ours: the label on every remediation object the drainer creates.
pub(crate) const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "nodemedic-drainer");

/// The remediators whose templates may be named by kind alone: (group, version, template kind).
const KNOWN: [(&str, &str, &str); 3] = [
    (
        "fence-agents-remediation.medik8s.io",
        "v1alpha1",
        "FenceAgentsRemediationTemplate",
    ),
    (
        "self-node-remediation.medik8s.io",
        "v1alpha1",
        "SelfNodeRemediationTemplate",
    ),
    (
        "machine-deletion-remediation.medik8s.io",
        "v1alpha1",
        "MachineDeletionRemediationTemplate",
    ),
];

/// A remediation template, as `--remediation-template` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub(crate) group: String,
    pub(crate) version: String,
    /// The template's kind (ends in `Template`).
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl Template {
    /// `KIND/NAMESPACE/NAME` for the three medik8s remediators, or
    /// `GROUP/VERSION/KIND/NAMESPACE/NAME` for any other that follows the protocol.
    pub(crate) fn parse(s: &str) -> Result<Template, String> {
        let parts: Vec<&str> = s.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("{s:?} has an empty part"));
        }
        let (group, version, kind, namespace, name) = match parts[..] {
            [kind, namespace, name] => {
                let Some((g, v, _)) = KNOWN.iter().find(|k| k.2 == kind) else {
                    let known: Vec<&str> = KNOWN.iter().map(|k| k.2).collect();
                    return Err(format!(
                        "{kind:?} is not one of {} (another remediator's template is named GROUP/VERSION/KIND/NAMESPACE/NAME)",
                        known.join(", ")
                    ));
                };
                (*g, *v, kind, namespace, name)
            }
            [group, version, kind, namespace, name] => (group, version, kind, namespace, name),
            _ => {
                return Err(format!(
                    "{s:?} is neither KIND/NAMESPACE/NAME nor GROUP/VERSION/KIND/NAMESPACE/NAME"
                ));
            }
        };
        if kind.strip_suffix("Template").is_none_or(str::is_empty) {
            return Err(format!(
                "{kind:?} is not a template kind (a remediation template's kind ends in Template)"
            ));
        }
        Ok(Template {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// The kind of the objects made from it.
    pub(crate) fn remediation_kind(&self) -> &str {
        self.kind.strip_suffix("Template").unwrap_or(&self.kind)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The remediation object for `node`, made from the template object `template` (as read): its
/// `metadata` and `spec`. Err when the template has no `spec.template.spec`.
pub(crate) fn object(
    t: &Template,
    template: &serde_json::Value,
    node: &str,
    operation: &str,
) -> Result<serde_json::Value, String> {
    let spec = &template["spec"]["template"]["spec"];
    if !spec.is_object() {
        return Err(format!("the template {t} has no spec.template.spec"));
    }
    let several = template["metadata"]["annotations"][MULTIPLE_TEMPLATES_ANNOTATION] == "true";
    let mut metadata = serde_json::json!({
        "namespace": t.namespace,
        "labels": {MANAGED_BY.0: MANAGED_BY.1},
        "annotations": {
            NODE_NAME_ANNOTATION: node,
            TEMPLATE_NAME_ANNOTATION: t.name,
            OPERATION_ANNOTATION: operation,
        },
    });
    if several {
        metadata["generateName"] = format!("{node}-").into();
    } else {
        metadata["name"] = node.into();
    }
    Ok(serde_json::json!({
        "apiVersion": format!("{}/{}", t.group, t.version),
        "kind": t.remediation_kind(),
        "metadata": metadata,
        "spec": spec,
    }))
}

/// What a remediator says of its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing final yet.
    Pending,
    Succeeded,
    /// `Succeeded=False`: the remediator gave up (its reason and message).
    Failed(String),
    /// The node is to be deleted for good (Machine Deletion Remediation): kept until it succeeds.
    NodeDeletionExpected,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pending => f.write_str("no outcome said"),
            Outcome::Succeeded => f.write_str("it succeeded"),
            Outcome::Failed(why) => write!(f, "it gave up: {why}"),
            Outcome::NodeDeletionExpected => f.write_str("the node's deletion expected"),
        }
    }
}

/// A remediation object of ours, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remediation {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) node: String,
    pub(crate) operation: String,
    pub(crate) outcome: Outcome,
    /// `metadata.creationTimestamp`.
    pub(crate) created: Option<k8s_openapi::jiff::Timestamp>,
}

/// `o` as a remediation object of ours: None when it lacks our label or the node's annotation.
pub(crate) fn read(o: &serde_json::Value) -> Option<Remediation> {
    let meta = &o["metadata"];
    if meta["labels"][MANAGED_BY.0] != MANAGED_BY.1 {
        return None;
    }
    let annotation = |k: &str| meta["annotations"][k].as_str().map(str::to_string);
    Some(Remediation {
        name: meta["name"].as_str()?.to_string(),
        uid: meta["uid"].as_str().unwrap_or_default().to_string(),
        node: annotation(NODE_NAME_ANNOTATION)?,
        operation: annotation(OPERATION_ANNOTATION).unwrap_or_default(),
        outcome: outcome(&o["status"]),
        created: meta["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse().ok()),
    })
}

/// Whether the remediation object `o` (anyone's) is for `node`: its node-name annotation, else its
/// name, as the remediators resolve it.
pub(crate) fn names_node(o: &serde_json::Value, node: &str) -> bool {
    let meta = &o["metadata"];
    match meta["annotations"][NODE_NAME_ANNOTATION].as_str() {
        Some(n) => n == node,
        None => meta["name"] == node,
    }
}

/// What `status.conditions` says, as NodeHealthCheck reads them (`Processing` is not read).
pub(crate) fn outcome(status: &serde_json::Value) -> Outcome {
    let empty = Vec::new();
    let conditions = status["conditions"].as_array().unwrap_or(&empty);
    let find = |t: &str| conditions.iter().find(|c| c["type"] == t);
    if let Some(c) = find("Succeeded") {
        match c["status"].as_str() {
            Some("True") => return Outcome::Succeeded,
            Some("False") => {
                let (reason, message) = (
                    c["reason"].as_str().unwrap_or("no reason given"),
                    c["message"].as_str().unwrap_or_default(),
                );
                let said = if message.is_empty() {
                    reason.to_string()
                } else {
                    format!("{reason}: {message}")
                };
                return Outcome::Failed(said);
            }
            _ => {}
        }
    }
    match find("PermanentNodeDeletionExpected") {
        Some(c) if c["status"] == "True" => Outcome::NodeDeletionExpected,
        _ => Outcome::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn far() -> Template {
        Template::parse("FenceAgentsRemediationTemplate/medik8s/far-ipmi").unwrap()
    }

    #[test]
    fn a_template_named_by_kind_or_in_full() {
        let t = far();
        assert_eq!(t.group, "fence-agents-remediation.medik8s.io");
        assert_eq!(t.version, "v1alpha1");
        assert_eq!(t.remediation_kind(), "FenceAgentsRemediation");
        assert_eq!(
            t.to_string(),
            "FenceAgentsRemediationTemplate medik8s/far-ipmi"
        );
        let other = Template::parse("example.com/v1/RebootTemplate/ops/bmc").unwrap();
        assert_eq!(
            (other.group.as_str(), other.remediation_kind()),
            ("example.com", "Reboot")
        );
        for (bad, says) in [
            ("FenceAgentsRemediation/medik8s/x", "not one of"),
            ("example.com/v1/Reboot/ops/bmc", "not a template kind"),
            ("example.com/v1/Template/ops/bmc", "not a template kind"),
            ("medik8s/x", "neither"),
            ("FenceAgentsRemediationTemplate//x", "empty part"),
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_object_copies_the_templates_spec_and_names_the_node() {
        let template = json!({"metadata": {"name": "far-ipmi"},
            "spec": {"template": {"spec": {"agent": "fence_ipmilan",
                "sharedparameters": {"--action": "reboot"}}}}});
        let o = object(&far(), &template, "worker-3", "uid-boot").unwrap();
        assert_eq!(
            o["apiVersion"],
            "fence-agents-remediation.medik8s.io/v1alpha1"
        );
        assert_eq!(o["kind"], "FenceAgentsRemediation");
        assert_eq!(o["metadata"]["name"], "worker-3");
        assert_eq!(o["metadata"]["namespace"], "medik8s");
        assert_eq!(o["spec"]["agent"], "fence_ipmilan");
        assert_eq!(
            o["metadata"]["annotations"][NODE_NAME_ANNOTATION],
            "worker-3"
        );
        assert_eq!(
            o["metadata"]["annotations"][TEMPLATE_NAME_ANNOTATION],
            "far-ipmi"
        );
        let back = read(&json!({"metadata": {"name": "worker-3", "uid": "u",
            "labels": o["metadata"]["labels"], "annotations": o["metadata"]["annotations"]}}))
        .unwrap();
        assert_eq!(
            (back.node.as_str(), back.operation.as_str()),
            ("worker-3", "uid-boot")
        );
        // As SNR's and FAR's webhooks mark theirs: a generated name.
        let mut several = template.clone();
        several["metadata"]["annotations"] = json!({MULTIPLE_TEMPLATES_ANNOTATION: "true"});
        let o = object(&far(), &several, "worker-3", "uid-boot").unwrap();
        assert_eq!(o["metadata"]["generateName"], "worker-3-");
        assert!(o["metadata"]["name"].is_null());
        let e = object(&far(), &json!({"spec": {}}), "worker-3", "x").unwrap_err();
        assert!(e.contains("no spec.template.spec"), "{e}");
    }

    #[test]
    fn only_objects_with_our_label_and_a_node_are_ours() {
        let theirs = json!({"metadata": {"name": "worker-3",
            "annotations": {NODE_NAME_ANNOTATION: "worker-3"}}});
        assert_eq!(read(&theirs), None, "NodeHealthCheck's own");
        let nameless = json!({"metadata": {"name": "x", "labels": {MANAGED_BY.0: MANAGED_BY.1}}});
        assert_eq!(read(&nameless), None);
        assert!(names_node(&theirs, "worker-3"));
        let generated = json!({"metadata": {"name": "worker-3-x7k2p",
            "annotations": {NODE_NAME_ANNOTATION: "worker-3"}}});
        assert!(names_node(&generated, "worker-3") && !names_node(&generated, "worker-4"));
        assert!(names_node(
            &json!({"metadata": {"name": "worker-4"}}),
            "worker-4"
        ));
    }

    #[test]
    fn the_outcome_as_node_health_check_reads_it() {
        let c = |t: &str, s: &str, reason: &str| json!({"type": t, "status": s, "reason": reason, "message": "m"});
        let of = |cs: Vec<serde_json::Value>| outcome(&json!({"conditions": cs}));
        assert_eq!(outcome(&json!({})), Outcome::Pending);
        assert_eq!(of(vec![c("Processing", "True", "x")]), Outcome::Pending);
        assert_eq!(
            of(vec![c(
                "Succeeded",
                "True",
                "RemediationFinishedSuccessfully"
            )]),
            Outcome::Succeeded
        );
        assert_eq!(
            of(vec![
                c("Processing", "False", "x"),
                c("Succeeded", "False", "FenceAgentFailed")
            ]),
            Outcome::Failed("FenceAgentFailed: m".into())
        );
        assert_eq!(
            of(vec![
                c("PermanentNodeDeletionExpected", "True", "x"),
                c("Succeeded", "Unknown", "y")
            ]),
            Outcome::NodeDeletionExpected
        );
    }
}
