//! The drainer's own CPU to decide one node's state change, in process: the kubelet-shaped nodes
//! and ReplicaSet pods of the scale bench in the caches, the controller's fleet over them, and for
//! each change the view taken by the fleet (`Fleet::observe`: the selection kept or evaluated
//! again, the running totals) and the round that decides it (`Fleet::round`: the gates, and the
//! decision over the pods the fleet holds). The views are decoded before the clock starts: the socket, the decode and the
//! runtime's wake-up are the scale bench's (and the `decode` bench's) to measure.
//!
//! Each kind of state change the scale bench sends, cycling over the nodes: a condition's reason
//! (the selector does not read it), a label the selector names, a label it does not. Printed:
//! back to back (warm caches; min/median/max of 5 runs of 20,000), and alone, one every 20 ms
//! (cold caches, as at 20 updates/s; thread CPU time, median of 500).
//!
//! `cargo bench -p nodemedic-drainer --bench round` (`NODES=15000`; default 2,000)

use nodemedic_tests::bench::thread_cpu;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::lenient::Lenient;
use nodemedic_drainer::decide::fleet::Fleet;
use nodemedic_drainer::model::lite::NodeLite;
use nodemedic_drainer::model::node::NodeView;
use nodemedic_drainer::model::pod::PodInfo;
use nodemedic_drainer::model::pod_lite::PodLite;
use nodemedic_drainer::observe::{NodeMap, Observed};
use serde_json::{Value, json};

mod common;

const DEFAULT_NODES: usize = 2_000;
const PODS_PER_NODE: usize = 10;
const WARM: usize = 20_000;
const RUNS: usize = 5;
const ALONE: usize = 500;
/// The scale bench's selector (`nodemedic_tests::fleet::SELECTOR`).
const SELECTOR: &str =
    "metadata.labels['draino'] == 'node' && metadata.labels['bench.nodemedic.io/flip'] != 'off'";

#[derive(Clone, Copy, Debug)]
enum Kind {
    Reason,
    LabelRead,
    LabelNotRead,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Reason => "a condition's reason (not read by the selector)",
            Kind::LabelRead => "a label the selector names",
            Kind::LabelNotRead => "a label the selector does not name",
        }
    }
}

/// Node `i`'s JSON with `flip` ("a" or "b") in the place `kind` changes.
fn node_json(template: &Value, i: usize, kind: Kind, flip: &str) -> String {
    let mut n = template.clone();
    let name = format!("scale-{i:05}");
    n["metadata"]["name"] = json!(name);
    n["metadata"]["uid"] = json!(format!("6a1e2d3c-4b5a-6978-8796-{i:012x}"));
    n["metadata"]["resourceVersion"] = json!((1_000_000 + i).to_string());
    n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
    n["metadata"]["labels"]["bench.nodemedic.io/flip"] = json!("a");
    n["metadata"]["labels"]["bench.nodemedic.io/other"] = json!("a");
    match kind {
        Kind::Reason => {
            n["status"]["conditions"][0]["reason"] =
                json!(format!("KubeletHasSufficientMemory{}", flip.to_uppercase()))
        }
        Kind::LabelRead => n["metadata"]["labels"]["bench.nodemedic.io/flip"] = json!(flip),
        Kind::LabelNotRead => n["metadata"]["labels"]["bench.nodemedic.io/other"] = json!(flip),
    }
    serde_json::to_string(&n).expect("a node")
}

fn view(text: &str) -> Arc<NodeView> {
    let lite: NodeLite = serde_json::from_str(text).unwrap_or_else(|e| panic!("node: {e}"));
    Arc::new(NodeView::from_lite(lite))
}

struct Bench {
    observed: Observed,
    fleet: Fleet,
    /// Per node, its two versions ("a", "b") for the kind measured.
    versions: Vec<[Arc<NodeView>; 2]>,
    next: usize,
    now: Timestamp,
}

impl Bench {
    /// One state change, taken and decided as the controller does.
    fn change(&mut self) {
        let (i, side) = (
            self.next % self.versions.len(),
            self.next / self.versions.len(),
        );
        self.next += 1;
        let v = self.versions[i][(side + 1) % 2].clone();
        self.now = nodemedic_common::time::add(self.now, Duration::from_millis(50));
        self.observed.apply_view(NodeView::clone(&v));
        let latest = self.observed.node(&v.name).expect("just applied");
        self.fleet.observe(latest, self.now);
        let decided = self.fleet.round(self.now);
        assert_eq!(decided.len(), 1, "the changed node alone is decided");
        std::hint::black_box(decided);
    }
}

fn setup(nodes: usize, template: &Value, kind: Kind) -> Bench {
    let pod_template = include_str!("../../tests/fixtures/scale/replicaset-pod.json");
    let observed = Observed::default();
    let versions: Vec<[Arc<NodeView>; 2]> = (0..nodes)
        .map(|i| {
            [
                view(&node_json(template, i, kind, "a")),
                view(&node_json(template, i, kind, "b")),
            ]
        })
        .collect();
    let mut map = NodeMap::with_capacity_and_hasher(nodes, Default::default());
    for v in &versions {
        map.insert(v[0].name.clone(), Arc::new(NodeView::clone(&v[0])));
    }
    observed.replace_nodes(map);
    let keep = vec!["cluster-autoscaler.kubernetes.io/safe-to-evict".to_string()];
    let mut pod: Value = serde_json::from_str(pod_template).expect("the pod fixture");
    let pods = (0..nodes * PODS_PER_NODE).map(|k| {
        let (i, j) = (k / PODS_PER_NODE, k % PODS_PER_NODE);
        pod["metadata"]["name"] = json!(format!("app-{i:05}-{j}"));
        pod["metadata"]["uid"] = json!(format!("0f1e2d3c-4b5a-6978-8796-{k:012x}"));
        pod["spec"]["nodeName"] = json!(format!("scale-{i:05}"));
        match serde_json::from_value::<Lenient<PodLite>>(pod.clone()) {
            Ok(Lenient::Ok(p)) => PodInfo::from_lite(&p, Some(&keep)),
            _ => panic!("the pod fixture is a Pod"),
        }
    });
    observed.replace_pods(pods);
    let now = Timestamp::now();
    let fleet = common::decided_fleet(&observed, SELECTOR, now);
    Bench {
        observed,
        fleet,
        versions,
        next: 0,
        now,
    }
}

fn print_header(nodes: usize) {
    println!(
        "{nodes} kubelet-shaped nodes / {} pods in the caches; selector {SELECTOR:?}; one state change taken by the fleet and decided by a round",
        nodes * PODS_PER_NODE
    );
    println!(
        "| state change | back to back (min / median / max of {RUNS} x {WARM}) | alone, one every 20 ms (thread CPU, median / p90 of {ALONE}) |"
    );
    println!("|---|---|---|");
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn main() {
    let nodes = nodemedic_tests::bench::nodes_from_env(DEFAULT_NODES);
    if std::env::var_os("NODEMEDIC_ROUND_KIND").is_none() {
        print_header(nodes);
    }
    let template: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/kubelet-like-node.json"
    ))
    .expect("the node fixture");
    let kinds = [Kind::Reason, Kind::LabelRead, Kind::LabelNotRead];
    let Some(kind) = std::env::var("NODEMEDIC_ROUND_KIND")
        .ok()
        .and_then(|k| kinds.get(k.parse::<usize>().ok()?).copied())
    else {
        // Each kind in a process of its own: what one kind's caches freed would lie in the
        // allocator's lists for the next (they are the next kind's to search).
        for (k, kind) in kinds.iter().enumerate() {
            let me = std::env::current_exe().expect("this bench's path");
            let status = std::process::Command::new(me)
                .env("NODEMEDIC_ROUND_KIND", k.to_string())
                .status()
                .expect("run this bench for one kind");
            assert!(status.success(), "the bench for {kind:?} failed");
        }
        return;
    };
    {
        let mut b = setup(nodes, &template, kind);
        let warm: Vec<f64> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..WARM {
                    b.change();
                }
                t.elapsed().as_secs_f64() * 1e6 / WARM as f64
            })
            .collect();
        let mut alone: Vec<f64> = (0..ALONE)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(20));
                let t = thread_cpu();
                b.change();
                (thread_cpu() - t).as_secs_f64() * 1e6
            })
            .collect();
        alone.sort_by(f64::total_cmp);
        let (min, med, max) = stats(warm);
        println!(
            "| {} | {min:.1} / {med:.1} / {max:.1} us | {:.1} / {:.1} us |",
            kind.describe(),
            alone[ALONE / 2],
            alone[ALONE * 9 / 10]
        );
    }
}
