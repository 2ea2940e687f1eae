//! The Cluster API Machine behind a Node, as every served version of Cluster API shapes it. Pure.
//!
//! A Node names its Machine in an annotation (`cluster.x-k8s.io/machine`) that a node can write on
//! itself, so the Machine must name the Node back, by what the node cannot choose:
//! - `status.nodeRef.name`, which Cluster API writes once it has matched the Machine to a Node;
//! - `status.nodeRef.uid` where the Machine keeps one (v1beta1: a Node that registered again under
//!   the same name is another node);
//! - `spec.providerID`, equal to the Node's `spec.providerID`. Cluster API matches Machines to
//!   Nodes by it; a Node's provider ID is set once, at registration, and never changed. v1beta2
//!   (Cluster API v1.11 and later) keeps only the nodeRef's name, so the provider ID is what tells
//!   a Node of the same name on other hardware from this one.
//!
//! So a node pointing the drainer at another node's Machine is refused (that Machine names the other
//! node), and so is a Node that took over a name whose old Machine still names it (another provider
//! ID), unless it chose that ID: a kubelet may delete its own Node and register it again with any
//! provider ID. So with v1beta2 (no UID) root on a node can still reach a Machine whose nodeRef
//! names its node's name and whose provider ID it learns: a stale Machine of an earlier node of the
//! same name, or another cluster's Machine in the same namespace whose node has the same name. The
//! refusal never says a provider ID. (Machines of another cluster could be told apart by
//! `spec.clusterName`; not checked yet.)

use serde_json::Value;

pub(crate) const GROUP: &str = "cluster.x-k8s.io";
/// The group of Cluster API's infrastructure kinds (a Metal3Machine's).
pub(crate) const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
pub(crate) const MACHINE_KIND: &str = "Machine";
pub(crate) const MACHINE_PLURAL: &str = "machines";
/// The versions read, newest first: v1beta2 is the storage version since Cluster API v1.11; v1beta1
/// while it is served.
pub(crate) const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// What the drainer knows of the Node a Machine must name: as decided on (name, UID) and as read
/// now (its provider ID).
pub(crate) struct NodeIdentity<'a> {
    pub(crate) name: &'a str,
    pub(crate) uid: &'a str,
    pub(crate) provider_id: Option<&'a str>,
}

/// Whether `machine` (its JSON, any version) names `node` back; else why not, in an operator's words.
pub(crate) fn names_node(machine: &Value, node: &NodeIdentity<'_>) -> Result<(), String> {
    let node_ref = &machine["status"]["nodeRef"];
    let named = node_ref["name"].as_str().unwrap_or_default();
    if named.is_empty() {
        return Err("names no node yet (no status.nodeRef)".into());
    }
    if named != node.name {
        return Err(format!("names node {named}, not this one"));
    }
    if let Some(uid) = node_ref["uid"].as_str()
        && uid != node.uid
    {
        return Err(format!(
            "names an earlier node {named} (UID {uid}), not this one"
        ));
    }
    let theirs = machine["spec"]["providerID"].as_str().unwrap_or_default();
    let ours = node.provider_id.unwrap_or_default();
    if ours.is_empty() {
        return Err("cannot be matched: the Node has no spec.providerID".into());
    }
    if theirs != ours {
        // Neither ID in the words: an Event is read more widely than the Machine, and the
        // Machine's would tell a node what to register with.
        return Err("has another provider ID than the Node".into());
    }
    Ok(())
}

/// A Machine's infrastructure object: its group, its version when the reference says it (v1beta1's
/// `apiVersion`; v1beta2 names the group only), its kind, namespace (the Machine's) and name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InfraRef {
    pub(crate) group: String,
    pub(crate) version: Option<String>,
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// The infrastructure reference of `machine` in `namespace`, either version's shape.
pub(crate) fn infrastructure(machine: &Value, namespace: &str) -> InfraRef {
    let r = &machine["spec"]["infrastructureRef"];
    let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
    let (group, version) = match r["apiVersion"].as_str().and_then(|a| a.split_once('/')) {
        Some((g, v)) => (g.to_string(), Some(v.to_string())),
        None => (s("apiGroup"), None),
    };
    InfraRef {
        group,
        version,
        kind: s("kind"),
        namespace: r["namespace"].as_str().unwrap_or(namespace).to_string(),
        name: s("name"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node<'a>(provider: Option<&'a str>) -> NodeIdentity<'a> {
        NodeIdentity {
            name: "bm",
            uid: "u-1",
            provider_id: provider,
        }
    }

    #[test]
    fn a_v1beta2_machine_names_its_node_by_name_and_provider_id() {
        let m = json!({"spec": {"providerID": "metal3://ns/host-1/m"}, "status": {"nodeRef": {"name": "bm"}}});
        assert_eq!(names_node(&m, &node(Some("metal3://ns/host-1/m"))), Ok(()));
    }

    #[test]
    fn a_machine_naming_another_node_or_another_provider_id_is_refused() {
        let other = json!({"spec": {"providerID": "p"}, "status": {"nodeRef": {"name": "other"}}});
        let e = names_node(&other, &node(Some("p"))).unwrap_err();
        assert!(e.contains("names node other"), "{e}");
        // The same name on other hardware: a node that took over the name of a gone one.
        let stale = json!({"spec": {"providerID": "old"}, "status": {"nodeRef": {"name": "bm"}}});
        let e = names_node(&stale, &node(Some("new"))).unwrap_err();
        assert!(e.contains("another provider ID"), "{e}");
        assert!(
            !e.contains("old") && !e.contains("new"),
            "no provider ID said: {e}"
        );
        // v1beta1's UID, where kept, must be this node's.
        let earlier = json!({"spec": {"providerID": "p"}, "status": {"nodeRef": {"name": "bm", "uid": "u-0"}}});
        assert!(names_node(&earlier, &node(Some("p"))).is_err());
        let same = json!({"spec": {"providerID": "p"}, "status": {"nodeRef": {"name": "bm", "uid": "u-1"}}});
        assert_eq!(names_node(&same, &node(Some("p"))), Ok(()));
    }

    #[test]
    fn without_a_node_ref_or_a_provider_id_nothing_is_matched() {
        let unmatched = json!({"spec": {"providerID": "p"}, "status": {}});
        assert!(names_node(&unmatched, &node(Some("p"))).is_err());
        let m = json!({"spec": {"providerID": ""}, "status": {"nodeRef": {"name": "bm"}}});
        assert!(
            names_node(&m, &node(None)).is_err(),
            "two empty IDs are no match"
        );
        assert!(names_node(&m, &node(Some("p"))).is_err());
    }

    #[test]
    fn the_infrastructure_reference_is_read_in_either_versions_shape() {
        let v1beta1 = json!({"spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "Metal3Machine", "name": "m3", "namespace": "infra"}}});
        assert_eq!(
            infrastructure(&v1beta1, "ns"),
            InfraRef {
                group: "infrastructure.cluster.x-k8s.io".into(),
                version: Some("v1beta1".into()),
                kind: "Metal3Machine".into(),
                namespace: "infra".into(),
                name: "m3".into()
            }
        );
        let v1beta2 = json!({"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": "Metal3Machine", "name": "m3"}}});
        let r = infrastructure(&v1beta2, "ns");
        assert_eq!((r.version, r.namespace.as_str()), (None, "ns"));
    }
}
