//! Peak RSS of `drainer plan` against the size of its input: kubelet-shaped Nodes and ReplicaSet pods
//! (the scale fixtures) as `kubectl get -o json` Lists. `drainer plan` parses each file once as it
//! streams in and keeps only node views and pod infos, so its memory should stay near the input's
//! size, not a multiple of it.
//!
//! `cargo bench -p nodemedic-drainer --bench plan_memory` (`NODES=10000` for a bigger input)

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn write_list(path: &std::path::Path, items: impl Iterator<Item = Value>) -> u64 {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        f,
        r#"{{"apiVersion":"v1","kind":"List","metadata":{{}},"items":["#
    )
    .unwrap();
    for (i, item) in items.enumerate() {
        if i > 0 {
            f.write_all(b",").unwrap();
        }
        serde_json::to_writer(&mut f, &item).unwrap();
    }
    f.write_all(b"]}").unwrap();
    f.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

fn main() {
    let nodes: usize = std::env::var("NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(5_000);
    let node: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/kubelet-like-node.json"
    ))
    .unwrap();
    let pod: Value = serde_json::from_str(include_str!(
        "../../tests/fixtures/scale/replicaset-pod.json"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let nodes_file = dir.path().join("nodes.json");
    let pods_file = dir.path().join("pods.json");
    let node_bytes = write_list(
        &nodes_file,
        (0..nodes).map(|i| {
            let mut n = node.clone();
            n["metadata"]["name"] = json!(format!("scale-{i:05}"));
            n
        }),
    );
    let pod_bytes = write_list(
        &pods_file,
        (0..nodes * 10).map(|k| {
            let mut p = pod.clone();
            p["metadata"]["name"] = json!(format!("app-{k}"));
            p["metadata"]["uid"] = json!(format!("0f1e2d3c-4b5a-6978-8796-{k:012x}"));
            p["spec"]["nodeName"] = json!(format!("scale-{:05}", k / 10));
            p
        }),
    );
    let status = Command::new(nodemedic_tests::bins::shipped_drainer())
        .args([
            "plan",
            "KernelDeadlock=True",
            "--max-unhealthy",
            "100%",
            "--breaker-new",
            "100%",
        ])
        .arg("--nodes")
        .arg(&nodes_file)
        .arg("--pods")
        .arg(&pods_file)
        .stdout(Stdio::null())
        .status()
        .expect("run drainer plan");
    assert!(status.success(), "drainer plan failed: {status}");
    // SAFETY: getrusage writes into the struct we pass; RUSAGE_CHILDREN covers the child just waited for.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    let peak_kib = usage.ru_maxrss as f64;
    let input_mib = (node_bytes + pod_bytes) as f64 / 1048576.0;
    println!(
        "drainer plan over {nodes} nodes ({:.1} MiB) and {} pods ({:.1} MiB): peak RSS {:.1} MiB, {:.2}x the input",
        node_bytes as f64 / 1048576.0,
        nodes * 10,
        pod_bytes as f64 / 1048576.0,
        peak_kib / 1024.0,
        peak_kib / 1024.0 / input_mib
    );
}
