//! The per-event path allocates a fixed, small number of times, whatever the cluster's size: a
//! kubelet heartbeat (a watch event whose view is unchanged, the steady traffic at every scale) is
//! decoded straight into the view's shapes, reusing the cached view's unchanged parts as the watch
//! does, and replaces the cached view in place. Counted with a counting allocator, on this thread
//! only (the test harness allocates on its own threads).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use nodemedic_drainer::model::lite::{self, NodeLite};
use nodemedic_drainer::model::node::NodeView;
use nodemedic_drainer::observe::Observed;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const NODE: &str = include_str!("../../tests/fixtures/scale/kubelet-like-node.json");

/// A watch event line as kube-apiserver writes it (`type` first, the object's fields in its order),
/// for node `i` heartbeating at second `beat` (only `lastHeartbeatTime` differs between beats).
fn event(i: usize, beat: u32) -> Vec<u8> {
    let mut node: serde_json::Value = serde_json::from_str(NODE).unwrap();
    let name = format!("scale-{i:05}");
    node["metadata"]["name"] = name.clone().into();
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name.into();
    node["metadata"]["resourceVersion"] = format!("{}", 1000 + beat).into();
    for c in node["status"]["conditions"].as_array_mut().unwrap() {
        c["lastHeartbeatTime"] = format!("2026-11-24T10:00:{:02}Z", beat % 60).into();
    }
    let event = serde_json::json!({"type": "MODIFIED", "object": node});
    nodemedic_tests::server::order::to_string(&event).into_bytes()
}

fn apply(cache: &Observed, earlier: &lite::Earlier, line: &[u8]) {
    let ev: kube::api::WatchEvent<NodeLite> =
        lite::reusing(earlier, || serde_json::from_slice(line)).unwrap();
    let kube::api::WatchEvent::Modified(node) = ev else {
        panic!("a MODIFIED event");
    };
    cache.apply_view(NodeView::from_lite(node));
}

/// Allocations of one heartbeat for one node of a cache of `size` nodes.
fn per_heartbeat(size: usize) -> u64 {
    let cache = Observed::default();
    // Made once, as the Node watch makes it.
    let earlier = cache.earlier();
    for i in 0..size {
        apply(&cache, &earlier, &event(i, 0));
    }
    let _ = cache.take_changes();
    let line = event(size / 2, 1);
    let before = allocations();
    apply(&cache, &earlier, &line);
    let n = allocations() - before;
    assert_eq!(
        cache.take_changes(),
        Default::default(),
        "a heartbeat is no news"
    );
    assert!(cache.node(&format!("scale-{:05}", size / 2)).is_some());
    n
}

#[test]
fn a_heartbeat_allocates_the_same_few_times_at_any_cluster_size() {
    let small = per_heartbeat(10);
    let large = per_heartbeat(5_000);
    assert_eq!(
        small, large,
        "allocations per event do not grow with the cluster"
    );
    // The resourceVersion, the label and annotation lists (their entries reused), the conditions,
    // the view (kube's watcher adds its own copy of the resourceVersion, outside this count).
    assert!(small <= 6, "{small} allocations for one heartbeat");
    println!("{small} allocations per heartbeat event");
}
