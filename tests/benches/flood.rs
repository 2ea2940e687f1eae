//! A log flood against the detector: its release binary follows a kmsg file that a writer fills at
//! `NODEMEDIC_FLOOD_RATE` lines/s (default 100,000) for `NODEMEDIC_FLOOD_SECS` (default 60), every
//! line a permanent-condition problem with a new message and every tenth an OOM kill (a temporary
//! problem). The real API server's audit log counts the detector's status PATCHes and Event writes;
//! the bench prints them per second, with the detector's CPU and peak RSS and the lines it read.
//!
//! `KUBEBUILDER_ASSETS=$(../shared/envtest/setup.sh target/envtest) cargo bench -p nodemedic-tests --bench flood`
//! (it builds the detector with `cargo build --release` first).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::bench::{env_or, free_port, metric_sum, release_bins};
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest::{self, ControlPlane};
use nodemedic_tests::process::{cpu_seconds, status_mib};

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
conditions:
  - type: FloodDisk
    reason: DiskIsFine
    message: disk is fine
rules:
  - type: permanent
    condition: FloodDisk
    reason: DiskErrors
    pattern: 'disk sdz failing at sector \d+'
  - type: temporary
    reason: OOMKilling
    pattern: 'Out of memory: Killed process \d+ \((.+)\).*'
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "the log flood bench",
            "kube-apiserver's audit log to count the writes",
        );
        return;
    };
    let rate = env_or("NODEMEDIC_FLOOD_RATE", 100_000);
    let secs = env_or("NODEMEDIC_FLOOD_SECS", 60);
    let detector = release_bins(&["nodemedic-detector"]).join("detector");
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(&assets, None)));
    let cluster = Cluster::on(plane);
    let node = cluster.create_node("flood").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/kernel.yaml"), RULES).unwrap();
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let port = free_port();
    let mut child = Command::new(&detector)
        .args([
            "run",
            "--node-name",
            &node,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--rules")
        .arg(dir.path().join("rules"))
        .arg("--kmsg-path")
        .arg(&kmsg)
        .arg("--state-file")
        .arg(dir.path().join("state.json"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the detector");
    eventually(
        "the detector's healthy condition",
        Duration::from_secs(60),
        || async {
            cluster
                .condition(&node, "FloodDisk")
                .await
                .filter(|c| c.0 == "False")
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = |verb: &str, resource: &str, sub: &str| {
        plane
            .audit()
            .iter()
            .filter(|e| {
                e.verb == verb
                    && e.resource == resource
                    && e.subresource == sub
                    && e.user_agent.contains("detector")
                    && (resource != "nodes" || e.name == node)
            })
            .count()
    };
    let (p0, c0, m0) = (
        writes("patch", "nodes", "status"),
        writes("create", "events", "") + writes("patch", "events", ""),
        cpu_seconds(child.id()),
    );
    // The flood: batches every 10 ms.
    let started = Instant::now();
    let mut f = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(&kmsg)
            .unwrap(),
    );
    let per_batch = (rate / 100).max(1);
    let mut seq = 0u64;
    let mut tick = Instant::now();
    while started.elapsed() < Duration::from_secs(secs) {
        let ts = monotonic_now_us();
        for _ in 0..per_batch {
            seq += 1;
            if seq.is_multiple_of(10) {
                writeln!(
                    f,
                    "3,{seq},{ts},-;Out of memory: Killed process {seq} (app)"
                )
                .unwrap();
            } else {
                writeln!(f, "3,{seq},{ts},-;disk sdz failing at sector {seq}").unwrap();
            }
        }
        f.flush().unwrap();
        tick += Duration::from_millis(10);
        if let Some(wait) = tick.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Let the detector catch up before counting what it read.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (p1, c1, m1) = (
        writes("patch", "nodes", "status"),
        writes("create", "events", "") + writes("patch", "events", ""),
        cpu_seconds(child.id()),
    );
    let peak = status_mib(child.id(), "VmHWM:");
    let metrics = nodemedic_tests::http_get(&format!("http://127.0.0.1:{port}/metrics")).await;
    let read = metric_sum(&metrics, "nodemedic_detector_lines_read_total");
    println!(
        "flood of {seq} lines in {elapsed:.0} s ({:.0} lines/s; the detector read {read:.0}): status PATCHes {} ({:.2}/s), Event writes {} ({:.2}/s), \
         detector CPU {:.0}% of a core, peak RSS {peak:.1} MiB",
        seq as f64 / elapsed,
        p1 - p0,
        (p1 - p0) as f64 / elapsed,
        c1 - c0,
        (c1 - c0) as f64 / elapsed,
        (m1 - m0) / elapsed * 100.0,
    );
    let _ = child.kill();
    let _ = child.wait();
}
