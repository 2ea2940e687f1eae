//! Memory of the drainer's caches alone, without a process around them: 5,000 kubelet-shaped Node
//! views and 50,000 ReplicaSet pods (the fixtures of the scale bench), projected and indexed as the
//! watchers do. The scale bench gives the whole process's RSS; this splits it.
//!
//! `cargo bench -p nodemedic-drainer --bench caches` (`NODES=15000` for the larger fixture)

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use nodemedic_drainer::model::node::NodeView;
use nodemedic_drainer::model::pod::PodInfo;
use nodemedic_drainer::observe::Observed;
use serde_json::{Value, json};

/// Nodes in the fixture unless `NODES` says otherwise.
const DEFAULT_NODES: usize = 5_000;
const PODS_PER_NODE: usize = 10;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn main() {
    let nodes_env = std::env::var("NODES").ok();
    #[allow(non_snake_case)]
    let NODES: usize = match nodes_env.as_deref().map(str::parse) {
        None => DEFAULT_NODES,
        Some(Ok(n)) if n > 0 && n < 100_000 => n,
        Some(_) => {
            eprintln!("NODES must be a number from 1 to 99999");
            std::process::exit(2);
        }
    };
    let node: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/kubelet-like-node.json"
    ))
    .unwrap();
    let pod: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/replicaset-pod.json"
    ))
    .unwrap();
    let observed = Observed::default();
    let start = rss_mib();
    let mut views = HashMap::new();
    for i in 0..NODES {
        let mut n = node.clone();
        let name = format!("scale-{i:05}");
        n["metadata"]["name"] = json!(name);
        n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        let n: Node = serde_json::from_value(n).unwrap();
        let v = NodeView::of(&n);
        views.insert(v.name.clone(), Arc::new(v));
    }
    observed.replace_nodes(views);
    let after_nodes = rss_mib();
    // The annotation keys the controller keeps (none of the fixture's).
    let keep = vec!["cluster-autoscaler.kubernetes.io/safe-to-evict".to_string()];
    let mut infos = Vec::with_capacity(NODES * PODS_PER_NODE);
    for i in 0..NODES {
        for j in 0..PODS_PER_NODE {
            let mut p = pod.clone();
            p["metadata"]["name"] = json!(format!("app-{i:05}-{j}"));
            p["metadata"]["uid"] = json!(format!("0f1e2d3c-4b5a-6978-8796-{:012x}", i * 10 + j));
            p["spec"]["nodeName"] = json!(format!("scale-{i:05}"));
            let p: Pod = serde_json::from_value(p).unwrap();
            infos.push(PodInfo::from_pod(&p, Some(&keep)));
        }
    }
    let after_infos = rss_mib();
    observed.replace_pods(infos);
    let after_index = rss_mib();
    println!(
        "{NODES} node views: {:.1} MiB; {} pod infos: {:.1} MiB, indexed by key and node: {:.1} MiB more; total {:.1} MiB",
        after_nodes - start,
        NODES * PODS_PER_NODE,
        after_infos - after_nodes,
        after_index - after_infos,
        after_index - start
    );
}
