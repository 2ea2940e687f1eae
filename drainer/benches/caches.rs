//! Memory of the drainer's caches and its controller's per-node state, without a process around
//! them: kubelet-shaped Nodes and ReplicaSet pods (the fixtures of the scale bench, 10 pods a node)
//! decoded from their JSON exactly as the watches decode them (Nodes as `NodeLite`, Pods as
//! `Lenient<PodLite>` projected to `PodInfo`) and indexed as the watches index them, then the
//! controller's fleet built from them and every node decided once (as at the first resync, with the
//! scale bench's draino selector). The scale bench gives the whole process's RSS; this splits it into
//! bytes per node and per pod, and checks the largest cluster Kubernetes supports (65,000 nodes,
//! 650,000 pods) by building it.
//!
//! `cargo bench -p nodemedic-drainer --bench caches` (`NODES=65000` for the largest; default 5,000)

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use nodemedic_common::lenient::Lenient;
use nodemedic_drainer::model::lite::NodeLite;
use nodemedic_drainer::model::node::NodeView;
use nodemedic_drainer::model::pod::PodInfo;
use nodemedic_drainer::model::pod_lite::PodLite;
use nodemedic_drainer::observe::{NodeMap, Observed};
use serde_json::{Value, json};

mod common;

/// Nodes in the fixture unless `NODES` says otherwise.
const DEFAULT_NODES: usize = 5_000;
const PODS_PER_NODE: usize = 10;
/// The goal at 65,000 nodes / 650,000 pods (issue 23), for the caches and the process around them.
const GOAL_65K_MIB: f64 = 256.0;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes the allocator holds for live allocations (glibc's `mallinfo2()`: in its arenas, and mapped
/// on their own); unlike the RSS, not raised by memory freed but kept.
fn heap_bytes() -> u64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as u64
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The fixture's JSON with `@NAME@`-style marks where each copy differs, so each object is made by
/// replacing text and decoded from bytes like a watch event's object.
fn template(path: &str, text: &str, marks: &[(&[&str], &str)]) -> String {
    let mut v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    for (at, mark) in marks {
        let mut slot = &mut v;
        for k in *at {
            slot = &mut slot[*k];
        }
        *slot = json!(mark);
    }
    serde_json::to_string(&v).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn main() {
    let nodes_env = std::env::var("NODES").ok();
    let nodes: usize = match nodes_env.as_deref().map(str::parse) {
        None => DEFAULT_NODES,
        Some(Ok(n)) if n > 0 && n <= 100_000 => n,
        Some(_) => {
            eprintln!("NODES must be a number from 1 to 100000");
            std::process::exit(2);
        }
    };
    let pods = nodes * PODS_PER_NODE;
    let node_json = template(
        "kubelet-like-node.json",
        include_str!("../../tests/fixtures/scale/kubelet-like-node.json"),
        &[
            (&["metadata", "name"], "@NAME@"),
            (&["metadata", "uid"], "@UID@"),
            (&["metadata", "resourceVersion"], "@RV@"),
            (&["metadata", "labels", "kubernetes.io/hostname"], "@NAME@"),
        ],
    );
    let pod_json = template(
        "replicaset-pod.json",
        include_str!("../../tests/fixtures/scale/replicaset-pod.json"),
        &[
            (&["metadata", "name"], "@NAME@"),
            (&["metadata", "uid"], "@UID@"),
            (&["metadata", "resourceVersion"], "@RV@"),
            (&["spec", "nodeName"], "@NODE@"),
        ],
    );
    let observed = Observed::default();
    let start = rss_kib();
    let heap_start = heap_bytes();

    let mut views = NodeMap::with_capacity_and_hasher(nodes, Default::default());
    for i in 0..nodes {
        let name = format!("scale-{i:05}");
        let text = node_json
            .replace("@NAME@", &name)
            .replace("@UID@", &format!("6a1e2d3c-4b5a-6978-8796-{i:012x}"))
            .replace("@RV@", &(1_000_000 + i).to_string());
        let lite: NodeLite = serde_json::from_str(&text).unwrap_or_else(|e| panic!("node: {e}"));
        let v = NodeView::from_lite(lite);
        views.insert(v.name.clone(), Arc::new(v));
    }
    observed.replace_nodes(views);
    let after_nodes = rss_kib();
    let heap_nodes = heap_bytes();

    // The annotation keys the controller keeps (none of the fixture's).
    let keep = vec!["cluster-autoscaler.kubernetes.io/safe-to-evict".to_string()];
    let pod_infos = (0..pods).map(|k| {
        let (i, j) = (k / PODS_PER_NODE, k % PODS_PER_NODE);
        let text = pod_json
            .replace("@NAME@", &format!("app-{i:05}-{j}"))
            .replace("@UID@", &format!("0f1e2d3c-4b5a-6978-8796-{k:012x}"))
            .replace("@RV@", &(2_000_000 + k).to_string())
            .replace("@NODE@", &format!("scale-{i:05}"));
        match serde_json::from_str::<Lenient<PodLite>>(&text) {
            Ok(Lenient::Ok(p)) => PodInfo::from_lite(&p, Some(&keep)),
            Ok(Lenient::Malformed { error, .. }) => panic!("pod: {error}"),
            Err(e) => panic!("pod: {e}"),
        }
    });
    observed.replace_pods(pod_infos);
    let after_pods = rss_kib();
    let heap_pods = heap_bytes();
    assert_eq!(observed.pod_count(), pods, "every pod is cached");
    assert_eq!(observed.nodes().len(), nodes, "every node is cached");

    // The controller's fleet, as its first resync builds it, and a round deciding every node.
    let _fleet = common::decided_fleet(
        &observed,
        "metadata.labels['draino'] == 'node'",
        Timestamp::now(),
    );
    let after_fleet = rss_kib();
    let heap_fleet = heap_bytes();

    let per_view = (after_nodes - start) as f64 * 1024.0 / nodes as f64;
    let per_pod = (after_pods - after_nodes) as f64 * 1024.0 / pods as f64;
    let per_entry = (after_fleet - after_pods) as f64 * 1024.0 / nodes as f64;
    let per_node = per_view + per_entry;
    println!(
        "{nodes} nodes / {pods} pods, decoded as the watches decode them: node views {:.1} MiB ({per_view:.0} bytes a node); \
         pods with their index {:.1} MiB ({per_pod:.0} bytes a pod); the controller's fleet {:.1} MiB ({per_entry:.0} bytes a node); \
         in all {:.1} MiB ({per_node:.0} bytes a node, {per_pod:.0} a pod); this process's RSS {:.1} MiB",
        mib(after_nodes - start),
        mib(after_pods - after_nodes),
        mib(after_fleet - after_pods),
        mib(after_fleet - start),
        mib(after_fleet),
    );
    let live = |from: u64, to: u64, per: usize| to.saturating_sub(from) as f64 / per as f64;
    println!(
        "live heap (allocations not freed): {:.0} bytes a node view, {:.0} a pod, {:.0} a fleet entry; {:.1} MiB in all \
         (the RSS above also holds what the allocator keeps of memory freed while building them)",
        live(heap_start, heap_nodes, nodes),
        live(heap_nodes, heap_pods, pods),
        live(heap_pods, heap_fleet, nodes),
        heap_fleet.saturating_sub(heap_start) as f64 / (1024.0 * 1024.0),
    );
    if nodes == 65_000 {
        let verdict = if mib(after_fleet) <= GOAL_65K_MIB {
            "within"
        } else {
            "OVER"
        };
        println!(
            "65,000 nodes / 650,000 pods: {:.1} MiB, {verdict} the {GOAL_65K_MIB} MiB goal for the caches and the fleet with this process around them \
             (the drainer adds its fixed part: its RSS after sync less these, from the scale bench)",
            mib(after_fleet)
        );
    } else {
        let projected = (per_node * 65_000.0 + per_pod * 650_000.0) / (1024.0 * 1024.0);
        println!(
            "projected caches and fleet at 65,000 nodes / 650,000 pods from these sizes: {projected:.1} MiB (NODES=65000 builds them)"
        );
    }
}
