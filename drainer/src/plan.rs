//! `drainer plan`: the decision, offline, over `kubectl get -o json` files.

use std::io::Write;
use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::decide::{self, NodeDecision, PodAction, PodInfo};

/// Read the `items` of a List file (`kubectl get nodes -o json`), or a single object.
pub fn read_items<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let items = match v.get("items") {
        Some(serde_json::Value::Array(items)) => items.clone(),
        _ => vec![v],
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::from_value(item).map_err(|e| format!("{}: item {i}: {e}", path.display()))
        })
        .collect()
}

/// Note PodDisruptionBudgets that currently allow no disruption on the pods a plan would evict.
pub fn annotate_pdbs(plans: &mut [NodeDecision], pods: &[PodInfo], pdbs: &[PodDisruptionBudget]) {
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
            for pdb in pdbs
                .iter()
                .filter(|b| b.metadata.namespace.as_deref() == Some(&*pod.namespace))
            {
                let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
                    continue;
                };
                let matches = sel
                    .match_labels
                    .as_ref()
                    .is_some_and(|m| m.iter().all(|(k, v)| pod.labels().get(k) == Some(v)));
                let allowed = pdb
                    .status
                    .as_ref()
                    .map(|s| s.disruptions_allowed)
                    .unwrap_or(0);
                if matches && allowed == 0 {
                    p.reason = format!(
                        "evictable; PodDisruptionBudget {} allows 0 disruptions now (eviction retried until it does)",
                        pdb.metadata.name.as_deref().unwrap_or("")
                    );
                }
            }
        }
    }
}

#[derive(serde::Serialize)]
struct JsonPlan<'a> {
    node: &'a str,
    action: decide::Action,
    reason: &'a str,
    pods: &'a [decide::PodPlan],
}

/// Run the decision over the files and print it.
pub fn run(
    cfg: &Config,
    nodes: &[Node],
    pods: &[Pod],
    pdbs: &[PodDisruptionBudget],
    now: Timestamp,
    json: bool,
    out: &mut impl Write,
) -> std::io::Result<Vec<NodeDecision>> {
    let pods: Vec<PodInfo> = pods.iter().map(|p| PodInfo::from_pod(p, None)).collect();
    let mut plans = decide::decide_nodes(nodes, &pods, cfg, now);
    annotate_pdbs(&mut plans, &pods, pdbs);
    if json {
        for p in &plans {
            serde_json::to_writer(
                &mut *out,
                &JsonPlan {
                    node: &p.node,
                    action: p.action,
                    reason: &p.reason,
                    pods: &p.pods,
                },
            )?;
            writeln!(out)?;
        }
    } else {
        let w = plans.iter().map(|p| p.node.len()).max().unwrap_or(4).max(4);
        writeln!(out, "{:<w$}  {:<8}  REASON", "NODE", "ACTION")?;
        for p in &plans {
            let action = serde_json::to_value(p.action).unwrap();
            writeln!(
                out,
                "{:<w$}  {:<8}  {}",
                p.node,
                action.as_str().unwrap_or(""),
                p.reason
            )?;
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
