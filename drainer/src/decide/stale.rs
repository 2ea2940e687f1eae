//! Stale pod readiness after a node flap, pure.
//!
//! After a node recovers from NotReady, the node lifecycle controller has marked its pods Ready=False
//! and the kubelet's status cache may never correct it: the pods run, their containers are ready
//! (ContainersReady=True), but Services keep them out of their endpoints. A pod is *stale* when it is
//! Running, ContainersReady=True, Ready=False, every readiness gate is met, and its node has been
//! Ready=True for at least the threshold. Mirror pods are reported, never evicted; not-evicted and
//! critical pods are never evicted either (`nodemedic_common::exempt`).
//!
//! It lives in the drainer, not in the detector on every node: the drainer already holds every node
//! and a compact cache of every pod (one watch for the cluster instead of one per node), it is the one
//! component with pod eviction rights, and it sees Kosmos leaf nodes, where no detector runs and
//! where flaps are most common.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::model::node::NodeView;
use crate::model::pod::PodInfo;

/// One stale pod and whether it may be evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: Option<String>,
    pub(crate) node: String,
    /// `None`: may be evicted; `Some(why)`: never.
    pub(crate) exempt: Option<String>,
}

/// The stale pods at `now`: pods whose readiness is stale on nodes Ready for at least `threshold`.
pub fn stale_pods<N: Borrow<NodeView>, P: Borrow<PodInfo>>(
    nodes: &[N],
    pods: &[P],
    threshold: Duration,
    now: Timestamp,
) -> Vec<Stale> {
    let ready: HashMap<&str, Option<Timestamp>> = nodes
        .iter()
        .map(Borrow::borrow)
        .map(|n| (n.name.as_str(), n.ready_since()))
        .collect();
    stale_among(
        pods.iter().map(Borrow::borrow),
        |n| ready.get(n).copied().flatten(),
        threshold,
        now,
    )
}

/// [`stale_pods`] over candidate `pods` (those whose own readiness is stale: the controller keeps
/// them apart, so this is proportional to them, not to the cluster), `ready_since` telling since
/// when a node is Ready=True.
pub(crate) fn stale_among<'a>(
    pods: impl IntoIterator<Item = &'a PodInfo>,
    ready_since: impl Fn(&str) -> Option<Timestamp>,
    threshold: Duration,
    now: Timestamp,
) -> Vec<Stale> {
    pods.into_iter()
        .filter(|p| p.readiness_stale)
        .filter_map(|p| {
            let node = p.node.as_deref().filter(|n| {
                ready_since(n)
                    .is_some_and(|since| nodemedic_common::time::add(since, threshold) <= now)
            })?;
            Some(Stale {
                exempt: nodemedic_common::exempt::never_evicted(
                    &p.namespace,
                    p.annotations(),
                    p.priority,
                ),
                namespace: p.namespace.to_string(),
                name: p.name.to_string(),
                uid: p.uid.as_ref().map(ToString::to_string),
                node: node.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn node(ready: &str, since: i64) -> NodeView {
        let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": nodemedic_common::time::rfc3339(t(since))}]}}))
        .unwrap();
        NodeView::of(&n)
    }

    fn pod(
        name: &str,
        phase: &str,
        ready: &str,
        containers_ready: &str,
        extra: serde_json::Value,
    ) -> PodInfo {
        let mut v = json!({"metadata": {"name": name, "namespace": "app"}, "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": containers_ready}]}});
        if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in b {
                if k == "status_conditions" {
                    a["status"]["conditions"]
                        .as_array_mut()
                        .unwrap()
                        .extend(x.as_array().unwrap().clone());
                } else {
                    for (k2, y) in x.as_object().unwrap() {
                        a[k.as_str()][k2.as_str()] = y.clone();
                    }
                }
            }
        }
        PodInfo::from_pod(&serde_json::from_value(v).unwrap(), None)
    }

    const TH: Duration = Duration::from_secs(120);

    #[test]
    fn stale_is_running_with_ready_containers_and_gates_met_but_marked_unready() {
        let n = [node("True", 0)];
        let cases: Vec<(PodInfo, bool)> = vec![
            (pod("stale", "Running", "False", "True", json!({})), true),
            (pod("ready", "Running", "True", "True", json!({})), false),
            (
                pod(
                    "containers-not-ready",
                    "Running",
                    "False",
                    "False",
                    json!({}),
                ),
                false,
            ),
            (pod("pending", "Pending", "False", "True", json!({})), false),
            (
                pod(
                    "gate-unmet",
                    "Running",
                    "False",
                    "True",
                    json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}}),
                ),
                false,
            ),
            (
                pod(
                    "gate-met",
                    "Running",
                    "False",
                    "True",
                    json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}, "status_conditions": [{"type": "example.com/lb", "status": "True"}]}),
                ),
                true,
            ),
        ];
        for (p, want) in &cases {
            let got = !stale_pods(&n, &[p], TH, t(200)).is_empty();
            assert_eq!(got, *want, "{}", p.name);
        }
    }

    #[test]
    fn only_after_the_node_has_been_ready_for_the_threshold() {
        let p = pod("stale", "Running", "False", "True", json!({}));
        assert!(
            stale_pods(&[node("True", 100)], &[&p], TH, t(200)).is_empty(),
            "ready for 100s only"
        );
        let s = stale_pods(&[node("True", 80)], &[&p], TH, t(200));
        assert_eq!((s.len(), s[0].node.as_str()), (1, "n"));
        assert!(stale_pods(&[node("Unknown", 0)], &[&p], TH, t(200)).is_empty());
        let mut late = node("True", 0);
        late.conditions[0].since = "9999-12-30T21:59:00Z".parse().unwrap();
        assert!(
            stale_pods(&[late], &[&p], TH, t(200)).is_empty(),
            "Ready since the end of time: not yet, and no panic"
        );
        assert!(
            stale_pods(&[] as &[NodeView], &[&p], TH, t(200)).is_empty(),
            "an unknown node is not Ready"
        );
    }

    #[test]
    fn mirror_not_evicted_and_critical_pods_are_reported_but_exempt() {
        let n = [node("True", 0)];
        let mirror = pod(
            "m",
            "Running",
            "False",
            "True",
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
        );
        let crit = pod(
            "c",
            "Running",
            "False",
            "True",
            json!({"spec": {"priority": 2000000000}}),
        );
        let plain = pod("p", "Running", "False", "True", json!({}));
        let s = stale_pods(&n, &[&mirror, &crit, &plain], TH, t(500));
        assert_eq!(s.len(), 3);
        assert!(s[0].exempt.as_deref().unwrap().starts_with("mirror"));
        assert!(s[1].exempt.as_deref().unwrap().starts_with("critical"));
        assert_eq!(s[2].exempt, None);
    }
}
