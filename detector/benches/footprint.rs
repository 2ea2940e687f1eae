//! Memory footprint of the detector binary (release build):
//! - idle RSS of `detector run` with the default rules against the test API server on loopback, after
//!   it has started, read the Node, written its conditions and settled;
//! - peak RSS of `detector check` over the 1,000,000-line log the `matching` bench generates (run that
//!   bench first; it is generated here otherwise).
//!
//! `cargo bench -p nodemedic-detector --bench footprint`

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
}

fn main() {
    let exe = env!("CARGO_BIN_EXE_detector");
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let mut cluster = nodemedic_tests::cluster::Cluster::fake().await;
        cluster.create_node("bench-node").await;
        cluster.fake.take().expect("the test API server")
    });
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: bench\ncontexts:\n- name: c\n  context:\n    cluster: t\n    user: u\ncurrent-context: c\n",
            server.url()
        ),
    )
    .unwrap();
    let kmsg = tmp.path().join("kmsg");
    std::fs::File::create(&kmsg)
        .unwrap()
        .write_all(b"6,1,1,-;boot\n")
        .unwrap();
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/rules");
    let mut child = Command::new(exe)
        .args([
            "run",
            "--node-name",
            "bench-node",
            "--rules",
            rules,
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--kmsg-path")
        .arg(&kmsg)
        .arg("--state-file")
        .arg(tmp.path().join("state.json"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .env(
            "MALLOC_ARENA_MAX",
            std::env::var("MALLOC_ARENA_MAX").unwrap_or_default(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start detector");
    // Wait until it has written its conditions, then let it settle.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.count("PATCH", "/status") < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    let anon = rss_kib(child.id(), "RssAnon:");
    let file = rss_kib(child.id(), "RssFile:");
    let rss = rss_kib(child.id(), "VmRSS:");
    let hwm = rss_kib(child.id(), "VmHWM:");
    let threads = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().to_string()))
        });
    println!(
        "detector run (default rules, idle): RSS {} KiB ({:.1} MiB: anon {} KiB, file-backed {} KiB), peak {} KiB, threads {}",
        rss.unwrap_or(0),
        rss.unwrap_or(0) as f64 / 1024.0,
        anon.unwrap_or(0),
        file.unwrap_or(0),
        hwm.unwrap_or(0),
        threads.unwrap_or_default()
    );

    // Latency from a kernel line to its condition on the Node (the "within 1 s"), 5 samples.
    let mut samples = Vec::new();
    for i in 0..5 {
        let mono = {
            let t = std::fs::read_to_string("/proc/uptime").unwrap();
            (t.split_whitespace().next().unwrap().parse::<f64>().unwrap() * 1e6) as u64
        };
        let line = if i % 2 == 0 {
            format!(
                "3,{},{},-;INFO: task docker:{i} blocked for more than 120 seconds.\n",
                10 + i,
                nodemedic_detector::source::kmsg::monotonic_now_us().max(mono)
            )
        } else {
            // clear it again through a different reason so every sample is a change
            format!(
                "3,{},{},-;INFO: task umount.aufs:{i} blocked for more than 120 seconds.\n",
                10 + i,
                nodemedic_detector::source::kmsg::monotonic_now_us()
            )
        };
        let want = if i % 2 == 0 {
            "DockerHung"
        } else {
            "AUFSUmountHung"
        };
        let start = std::time::Instant::now();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&kmsg)
            .unwrap()
            .write_all(line.as_bytes())
            .unwrap();
        loop {
            let node = server.object("v1", "nodes", None, "bench-node").unwrap();
            let hit = node["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "KernelDeadlock" && c["reason"] == want)
            });
            if hit || start.elapsed() > Duration::from_secs(10) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        samples.push(start.elapsed());
    }
    samples.sort();
    println!(
        "kmsg line -> condition on the Node: median {:?}, max {:?} ({} samples)",
        samples[samples.len() / 2],
        samples[samples.len() - 1],
        samples.len()
    );
    let _ = child.kill();
    let _ = child.wait();

    let big = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-kern-1m.kmsg");
    if !big.exists() {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        nodemedic_detector::sample::write_kmsg(&mut f, 1_000_000, 10_000, 42).unwrap();
    }
    let mut child = Command::new(exe)
        .args(["check", "--output", "json", "--input"])
        .arg(&big)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peak = 0;
    loop {
        if let Some(h) = rss_kib(child.id(), "VmHWM:") {
            peak = peak.max(h);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    println!(
        "detector check over 1,000,000 lines: peak RSS {peak} KiB ({:.1} MiB)",
        peak as f64 / 1024.0
    );
}
