//! `drainer plan`: the decision, offline, over `kubectl get -o json` files. Pure but for reading
//! the files (`files`): the plan itself is `decide` run over them.

pub mod chain;
mod conditions;
pub mod files;
pub(crate) mod ladder;
#[cfg(test)]
mod said_tests;

pub use files::{Read, ReadError, Skipped, read_items, read_items_map};

use std::io::Write;

use crate::model::node::NodeView;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use crate::config::Config;
use crate::decide::{self, NodeDecision, PodAction};
use crate::model::pod::PodInfo;

/// Feasibility before acting: for each pod a cordon or drain would evict, the
/// PodDisruptionBudgets selecting it (`matchLabels` and `matchExpressions`, with kube's own
/// selector types) that allow no disruption now. Such a pod waits on the PDB: its eviction is
/// retried until the budget allows it, or the drain fails at its deadline.
pub(crate) fn annotate_pdbs(
    plans: &mut [NodeDecision],
    pods: &[PodInfo],
    pdbs: &[PodDisruptionBudget],
) {
    use kube::core::{Selector, SelectorExt};
    let budgets: Vec<(&PodDisruptionBudget, Option<Selector>)> = pdbs
        .iter()
        .map(|b| {
            let sel = b
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .and_then(|s| Selector::try_from(s).ok());
            (b, sel)
        })
        .collect();
    for plan in plans.iter_mut() {
        for p in plan
            .pods
            .iter_mut()
            .filter(|p| p.action == PodAction::Evict)
        {
            let Some(pod) = pods
                .iter()
                .find(|x| *x.name == *p.name && *x.namespace == *p.namespace)
            else {
                continue;
            };
            // Already deleted (evicted, or by someone): it is going, and no budget is asked again.
            if let Some(at) = pod.progress.as_ref().and_then(|p| p.deleting_after) {
                p.reason = format!(
                    "evicted or deleted: terminating (grace period ends {}); the drain waits for it to go",
                    nodemedic_common::time::rfc3339(at)
                );
                continue;
            }
            let blocking: Vec<String> = budgets
                .iter()
                .filter(|(b, _)| b.metadata.namespace.as_deref() == Some(&*pod.namespace))
                // A PDB with an empty or missing selector selects nothing (policy/v1).
                .filter(|(_, sel)| {
                    sel.as_ref()
                        .is_some_and(|s| !s.selects_all() && s.matches(pod.labels()))
                })
                .filter(|(b, _)| b.status.as_ref().map_or(0, |s| s.disruptions_allowed) <= 0)
                .map(|(b, _)| b.metadata.name.clone().unwrap_or_default())
                .collect();
            if !blocking.is_empty() {
                p.reason = format!(
                    "evictable; would wait on PDB {} (0 disruptions allowed now; eviction retried until it allows one)",
                    blocking.join(", ")
                );
            }
        }
    }
}

#[derive(serde::Serialize)]
struct JsonPlan<'a> {
    node: &'a str,
    action: decide::Action,
    /// Set under a dry run (`--dry-run`): the action is what the drainer would do, and does not.
    #[serde(rename = "dryRun", skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
    reason: &'a str,
    /// The node's detector has not been heard from since then (the watchdog: silent).
    #[serde(skip_serializing_if = "Option::is_none")]
    silent_since: Option<Timestamp>,
    pods: &'a [decide::PodPlan],
}

/// A decision's row of `drainer plan`'s table (`widths`: of the node and action columns).
pub(crate) fn table_row(d: &NodeDecision, dry_run: bool, (w, a): (usize, usize)) -> String {
    let said = d.said(dry_run);
    format!("{:<w$}  {:<a$}  {}", d.node, said.action, said.reason)
}

/// Run the decision over the objects and print it; `recorded` is what the cluster recorded besides
/// them (a pause on the drainer's Lease, nodes reported flapping).
#[allow(clippy::too_many_arguments)]
pub fn run(
    cfg: &Config,
    nodes: &[NodeView],
    pods: &[PodInfo],
    pdbs: &[PodDisruptionBudget],
    recorded: &crate::decide::gates::snapshot::Recorded,
    now: Timestamp,
    json: bool,
    out: &mut impl Write,
) -> std::io::Result<Vec<NodeDecision>> {
    let mut plans = decide::decide_views(nodes, pods, cfg, recorded, now);
    annotate_pdbs(&mut plans, pods, pdbs);
    // Whether each node's detector is silent, for the nodes the selector selects.
    let silent: std::collections::HashMap<&str, Timestamp> = nodes
        .iter()
        .filter(|v| cfg.selector.matches(v).unwrap_or(false))
        .filter_map(|v| {
            let s = decide::silence::silence(v, cfg, &recorded.placement, now)?;
            Some((v.name.as_str(), s.last_heard))
        })
        .collect();
    if json {
        for p in &plans {
            serde_json::to_writer(
                &mut *out,
                &JsonPlan {
                    node: &p.node,
                    action: p.action(),
                    dry_run: cfg.dry_run,
                    reason: &p.reason(),
                    silent_since: silent.get(p.node.as_str()).copied(),
                    pods: &p.pods,
                },
            )?;
            writeln!(out)?;
        }
    } else {
        let w = plans.iter().map(|p| p.node.len()).max().unwrap_or(4).max(4);
        let a = plans
            .iter()
            .map(|p| p.action().said(cfg.dry_run).len())
            .max()
            .unwrap_or(0)
            .max(8);
        writeln!(out, "{:<w$}  {:<a$}  REASON", "NODE", "ACTION")?;
        for p in &plans {
            writeln!(out, "{}", table_row(p, cfg.dry_run, (w, a)))?;
            if p.action() == decide::Action::Cordon && !cfg.remedy.taints.is_empty() {
                let taints: Vec<String> = cfg.remedy.taints.iter().map(|t| t.to_string()).collect();
                let how = if cfg.remedy.cordon {
                    "cordon and taint"
                } else {
                    "taint only (not cordoned)"
                };
                writeln!(out, "{:<w$}    held by {how}: {}", "", taints.join(", "))?;
            }
            if let Some(t) = silent.get(p.node.as_str()) {
                let after = cfg.watchdog.silent_after.unwrap_or_default();
                writeln!(
                    out,
                    "{:<w$}    detector silent since {} (no heartbeat of its conditions within {}): its conditions may be stale",
                    "",
                    nodemedic_common::time::rfc3339(*t),
                    humantime::format_duration(after)
                )?;
            }
            for pod in &p.pods {
                let a = serde_json::to_value(pod.action).unwrap();
                writeln!(
                    out,
                    "{:<w$}    {:<6} {}/{}: {}",
                    "",
                    a.as_str().unwrap_or(""),
                    pod.namespace,
                    pod.name,
                    pod.reason
                )?;
            }
        }
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};

    #[test]
    fn lists_and_single_objects_are_read_and_errors_say_where() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("nodes.json");
        std::fs::write(
            &list,
            r#"{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}"#,
        )
        .unwrap();
        let nodes: Vec<Node> = read_items(&list).unwrap().items;
        let names: Vec<_> = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let one = dir.path().join("node.json");
        std::fs::write(&one, r#"{"kind": "Node", "metadata": {"name": "c"}}"#).unwrap();
        let nodes: Vec<Node> = read_items(&one).unwrap().items;
        assert_eq!(nodes[0].metadata.name.as_deref(), Some("c"));
        let bad = dir.path().join("bad.json");
        std::fs::write(
            &bad,
            "{\"items\": [\n{\"metadata\": {\"name\": \"x\"}},\n{]}",
        )
        .unwrap();
        let e = read_items::<Node>(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("line 3"), "{e}");
        std::fs::write(&bad, "{\"items\": []} trailing").unwrap();
        assert!(
            read_items::<Node>(&bad).is_err(),
            "trailing garbage is an error"
        );
        let e = read_items::<Node>(&dir.path().join("missing.json")).unwrap_err();
        assert!(matches!(e, ReadError::Io { .. }), "{e}");
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn an_object_our_types_cannot_hold_is_skipped_and_named_the_rest_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let far = r#"{"metadata": {"name": "far", "creationTimestamp": "9999-12-31T23:59:59Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "9999-12-31T23:59:59Z"}]}}"#;
        let good = |n: &str| format!(r#"{{"metadata": {{"name": "{n}"}}}}"#);
        let list = dir.path().join("nodes.json");
        std::fs::write(
            &list,
            format!(
                r#"{{"kind": "List", "items": [{}, {far}, {}, {{"metadata": {{"name": 7}}}}]}}"#,
                good("a"),
                good("b")
            ),
        )
        .unwrap();
        let read = read_items::<Node>(&list).unwrap();
        let names: Vec<_> = read
            .items
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let said: Vec<(usize, &str)> = read
            .skipped
            .iter()
            .map(|s| (s.item, s.id.as_str()))
            .collect();
        assert_eq!(said, [(2, "far"), (4, "(unnamed)")]);
        let line = read.skipped[0].to_string();
        assert!(
            line.contains("nodes.json: skipped far (item 2): cannot decode it: "),
            "{line}"
        );
        // The same in a YAML dump, and as a single object.
        let yaml = dir.path().join("nodes.yaml");
        std::fs::write(
            &yaml,
            "kind: List\nitems:\n- metadata: {name: a}\n- metadata: {name: far, creationTimestamp: '9999-12-31T23:59:59Z'}\n",
        )
        .unwrap();
        let read = read_items::<Node>(&yaml).unwrap();
        assert_eq!(read.items.len(), 1);
        assert_eq!(read.skipped[0].id, "far");
        // A file with nothing readable (here its one object) is an error naming it, not an empty read.
        let one = dir.path().join("one.json");
        std::fs::write(&one, far).unwrap();
        let e = read_items::<Node>(&one).unwrap_err().to_string();
        assert!(
            e.contains(
                "one.json: nothing in it can be read as a Node (1 of 1 items skipped; item 1, far: "
            ),
            "{e}"
        );
    }
    use crate::decide::PodPlan;

    fn pdb(name: &str, selector: serde_json::Value, allowed: i32) -> PodDisruptionBudget {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }))
        .unwrap()
    }

    #[test]
    fn pods_a_pdb_selects_by_labels_or_expressions_would_wait_on_it() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "api-1", "namespace": "default", "labels": {"app": "api", "tier": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}
        }))
        .unwrap();
        let info = PodInfo::from_pod(&pod, None);
        let plan = |pdbs: &[PodDisruptionBudget]| {
            let mut d = vec![NodeDecision {
                node: "n1".into(),
                why: crate::decide::Why::Healthy,
                effect: crate::decide::Effect::Cordon(Default::default()),
                pods: vec![PodPlan {
                    namespace: "default".into(),
                    name: "api-1".into(),
                    action: PodAction::Evict,
                    reason: "evictable".into(),
                    policy: None,
                    policy_action: None,
                }],
                wake: None,
            }];
            annotate_pdbs(&mut d, std::slice::from_ref(&info), pdbs);
            d.remove(0).pods.remove(0).reason
        };
        let exprs = serde_json::json!({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "edge"]},
            {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(
            plan(&[pdb("api-pdb", exprs.clone(), 0)]),
            "evictable; would wait on PDB api-pdb (0 disruptions allowed now; eviction retried until it allows one)"
        );
        assert_eq!(
            plan(&[pdb("api-pdb", exprs, 1)]),
            "evictable",
            "it allows one"
        );
        let other = serde_json::json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]});
        assert_eq!(plan(&[pdb("other", other, 0)]), "evictable", "not selected");
        assert_eq!(
            plan(&[pdb("empty", serde_json::json!({}), 0)]),
            "evictable",
            "an empty selector selects nothing in policy/v1"
        );
        let labels = serde_json::json!({"matchLabels": {"app": "api"}});
        assert!(plan(&[pdb("a", labels.clone(), 0), pdb("b", labels, 0)]).contains("PDB a, b"));
    }
}
