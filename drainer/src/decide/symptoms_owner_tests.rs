//! Whose pods excuse a node (issue 76, two attacker reviews): an owner is to blame for its pods
//! waiting only on three nodes, counted in its own namespace, so neither one rogue kubelet nor a
//! tenant's pods naming a DaemonSet's UID hide a wedged node. Pure.

use std::sync::Arc;

use super::symptoms_tests::{run, waiting_in};
use crate::model::pod::PodInfo;

/// The node agents' DaemonSet's pod on `node`, waiting for its sandbox half an hour.
fn agent_on(node: &str) -> Arc<PodInfo> {
    waiting_in(
        "kube-system",
        &format!("agent-{node}"),
        node,
        30,
        ("DaemonSet", "agent"),
        Some("ContainerCreating"),
    )
}

/// Issue 76 (an attacker's review): one rogue kubelet reports its own pod of the node agents'
/// DaemonSet waiting; the same DaemonSet's pod really stuck on a wedged node is still that node's
/// symptom (it once excused it: the DaemonSet "waited on several nodes", and every wedged node was
/// hidden). Waiting on three nodes, the owner is to blame and no node is.
#[test]
fn one_rogue_kubelet_cannot_excuse_another_nodes_stuck_agent() {
    let got = run(&[agent_on("wedged"), agent_on("rogue")], &[]);
    let nodes: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(nodes, ["rogue", "wedged"], "each its own symptom");
    let got = run(
        &[agent_on("wedged"), agent_on("rogue"), agent_on("rogue2")],
        &[],
    );
    assert!(
        got.is_empty(),
        "three nodes: the DaemonSet's fault: {got:?}"
    );
}

/// An attacker's second review: a tenant's pods in its own namespace name the agents' DaemonSet's
/// UID as their owner and wait on two other nodes; the DaemonSet's pod stuck on a wedged node is
/// still that node's symptom. An owner's pods are in its own namespace.
#[test]
fn a_tenants_pods_naming_a_daemonsets_uid_excuse_no_node() {
    // The same owner reference (its UID the DaemonSet's), from the tenant's namespace.
    let decoy = |node: &str| {
        let mut p = (*agent_on(node)).clone();
        p.namespace = "tenant".into();
        p.name = format!("decoy-{node}").as_str().into();
        Arc::new(p)
    };
    let same = |p: &PodInfo| p.progress.as_ref().unwrap().owner.clone();
    assert_eq!(
        same(&decoy("a")),
        same(&agent_on("wedged")),
        "the DaemonSet's UID"
    );
    let got = run(&[agent_on("wedged"), decoy("a"), decoy("b")], &[]);
    let nodes: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(nodes, ["wedged"], "{got:?}");
}
