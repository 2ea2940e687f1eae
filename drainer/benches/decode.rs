//! The drainer's own CPU per node heartbeat, in process: a kubelet status update's watch event (the
//! kubelet-shaped node of the scale bench, shaped as kube-apiserver sends it: its conditions'
//! heartbeats, its resourceVersion and its managedFields entry's time new) taken from the bytes of
//! its line exactly as the Node watch takes it (the line made a `String`, then
//! `WatchEvent<NodeLite>` decoded with the node's cached view at hand, made a view and applied to
//! the cache), cycling over the cluster's nodes; and, one every 50 ms, the same for a change of a
//! condition's reason. What the scale bench's steady figure adds to this is the socket, the
//! runtime's wake-up, HTTP chunking and kube's watch stream.
//!
//! `cargo bench -p nodemedic-drainer --bench decode` (`NODES=15000`; default 5,000)

use nodemedic_tests::bench::thread_cpu;
use std::hint::black_box;
use std::time::Instant;

use kube::core::WatchEvent;
use nodemedic_drainer::model::lite::{NodeLite, reusing};
use nodemedic_drainer::model::node::NodeView;
use nodemedic_drainer::observe::{NodeMap, Observed};
use serde_json::{Value, json};

/// Counts allocations: what one event allocates is printed (none of it may grow with the cluster).
struct Counting;

static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const DEFAULT_NODES: usize = 5_000;
/// Heartbeats decoded per measurement, and measurements (min/median/max printed).
const EVENTS: usize = 50_000;
const RUNS: usize = 5;
const ALONE: usize = 200;

/// The watch line of node `i` with its conditions' heartbeats at `beat` (and the kubelet's
/// managedFields entry written then); with `reason`, MemoryPressure's reason that.
fn line(template: &Value, i: usize, beat: usize, reason: Option<&str>) -> Vec<u8> {
    let mut n = template.clone();
    let name = format!("scale-{i:05}");
    n["metadata"]["name"] = json!(name);
    n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
    n["metadata"]["resourceVersion"] = json!((1_000_000 + beat * 100_000 + i).to_string());
    let at = format!("2026-11-25T10:{:02}:{:02}Z", (beat / 60) % 60, beat % 60);
    n["metadata"]["managedFields"] = json!([{"manager": "kubelet", "operation": "Update",
        "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
            "f:lastHeartbeatTime": {}, "f:reason": {}}}}}}]);
    for c in n["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
    {
        c["lastHeartbeatTime"] = json!(at);
        if let (Some(r), Some("MemoryPressure")) = (reason, c["type"].as_str()) {
            c["reason"] = json!(r);
        }
    }
    // In kube-apiserver's order: the type first, the name before the labels (serde_json's sorted
    // maps would put "object" first and make serde buffer the whole object to find the type).
    let kind = if beat == 0 { "ADDED" } else { "MODIFIED" };
    let ev = json!({"type": kind, "object": n});
    nodemedic_tests::server::order::to_string(&ev).into_bytes()
}

/// Take one event's line as the watch does (a line that is not a node's event is a broken bench).
fn take(observed: &Observed, earlier: &nodemedic_drainer::model::lite::Earlier, raw: &[u8]) {
    // kube's LinesCodec hands each line over as a String.
    let text = String::from_utf8(raw.to_vec()).expect("utf-8");
    let ev = reusing(earlier, || {
        serde_json::from_str::<WatchEvent<NodeLite>>(&text)
    });
    match ev {
        Ok(WatchEvent::Added(n) | WatchEvent::Modified(n)) => {
            observed.apply_view(NodeView::from_lite(n))
        }
        other => panic!("not a node event: {:?}", other.err()),
    }
}

fn main() {
    let nodes = nodemedic_tests::bench::nodes_from_env(DEFAULT_NODES);
    let template: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/kubelet-like-node.json"
    ))
    .expect("the fixture");
    let observed = Observed::default();
    let mut views = NodeMap::with_capacity_and_hasher(nodes, Default::default());
    for i in 0..nodes {
        let text = line(&template, i, 0, None);
        let ev: WatchEvent<NodeLite> = serde_json::from_slice(&text).expect("a node");
        let WatchEvent::Added(n) = ev else {
            unreachable!()
        };
        let v = NodeView::from_lite(n);
        views.insert(v.name.clone(), std::sync::Arc::new(v));
    }
    observed.replace_nodes(views);
    let earlier = observed.earlier();
    // Two heartbeats a node, taken in turn: each event differs from the node's cached view.
    let beats: Vec<[Vec<u8>; 2]> = (0..nodes)
        .map(|i| [line(&template, i, 1, None), line(&template, i, 2, None)])
        .collect();
    let bytes = beats[0][0].len();
    let a0 = ALLOCS.load(std::sync::atomic::Ordering::Relaxed);
    take(&observed, &earlier, &beats[0][1]);
    let allocs = ALLOCS.load(std::sync::atomic::Ordering::Relaxed) - a0;
    println!("allocations per event: {allocs}");
    let mut per_event = Vec::new();
    let mut k = 0usize;
    for _ in 0..RUNS {
        let start = Instant::now();
        for _ in 0..EVENTS {
            let (i, b) = (k % nodes, (k / nodes) % 2);
            take(&observed, &earlier, black_box(&beats[i][b]));
            k += 1;
        }
        per_event.push(start.elapsed().as_secs_f64() * 1e6 / EVENTS as f64);
    }
    per_event.sort_by(f64::total_cmp);
    // One event every 50 ms, as the steady rate sends them: each runs with cold caches.
    let mut alone = Vec::new();
    for _ in 0..ALONE {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (i, b) = (k % nodes, (k / nodes) % 2);
        let t0 = thread_cpu().as_secs_f64();
        take(&observed, &earlier, black_box(&beats[i][b]));
        alone.push((thread_cpu().as_secs_f64() - t0) * 1e6);
        k += 1;
    }
    alone.sort_by(f64::total_cmp);
    // A change, one every 50 ms: MemoryPressure's reason flips (read, compared, shared anew).
    let mut changed = Vec::new();
    for n in 0..ALONE {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let text = line(&template, k % nodes, 3 + n, Some(["A", "B"][n % 2]));
        let t0 = thread_cpu().as_secs_f64();
        take(&observed, &earlier, black_box(&text));
        changed.push((thread_cpu().as_secs_f64() - t0) * 1e6);
        k += 1;
    }
    changed.sort_by(f64::total_cmp);

    println!(
        "alone (one every 50 ms): min {:.1} / median {:.1} / max {:.1} us",
        alone[0],
        alone[ALONE / 2],
        alone[ALONE - 1]
    );
    println!(
        "a condition's reason changed, alone: min {:.1} / median {:.1} / max {:.1} us",
        changed[0],
        changed[ALONE / 2],
        changed[ALONE - 1]
    );
    println!(
        "{nodes} nodes: a heartbeat's watch event ({bytes} bytes) taken into the cache: min {:.1} / median {:.1} / max {:.1} us \
         ({RUNS} runs of {EVENTS} events)",
        per_event[0],
        per_event[RUNS / 2],
        per_event[RUNS - 1]
    );
}
