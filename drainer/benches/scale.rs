//! The drainer at scale: 5,000 Nodes and 50,000 Pods in the test API server on loopback.
//!
//! - peak RSS of the release `drainer run` after it listed and watched everything;
//! - time from a problem condition appearing on one node to that node being cordoned (5 samples);
//! - wall time of `drainer plan` over the same snapshot as `kubectl get -o json` files.
//!
//! `cargo bench -p nodemedic-drainer --bench scale`

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodemedic_tests::server::TestApiServer;
use serde_json::json;

const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 10;

fn node(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node",
    "metadata": {"name": format!("node-{i:05}"), "labels": {"kubernetes.io/hostname": format!("node-{i:05}"), "pool": format!("p{}", i % 7)}},
    "spec": {},
    "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"},
        {"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock", "message": "kernel has no deadlock", "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"}
    ]}})
}

fn pod(i: usize, j: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("app-{i:05}-{j}"), "namespace": format!("ns-{}", j % 20), "labels": {"app": format!("app-{j}")},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{j}"), "uid": format!("uid-{j}"), "controller": true}]},
        "spec": {"nodeName": format!("node-{i:05}"), "containers": [{"name": "app", "image": "registry.example/app:1.2.3", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}})
}

fn vm(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)
                    .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

fn readyz(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(
        format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(TestApiServer::start());
    let start = Instant::now();
    for i in 0..NODES {
        server.put_object("v1", "nodes", None, node(i));
        for j in 0..PODS_PER_NODE {
            let p = pod(i, j);
            let ns = p["metadata"]["namespace"].as_str().unwrap().to_string();
            server.put_object("v1", "pods", Some(&ns), p);
        }
    }
    println!(
        "loaded {NODES} nodes and {} pods into the test API server in {:?}",
        NODES * PODS_PER_NODE,
        start.elapsed()
    );

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(&kubeconfig, format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: bench\ncontexts:\n- name: c\n  context:\n    cluster: t\n    user: u\ncurrent-context: c\n",
        server.url()
    )).unwrap();
    let exe = env!("CARGO_BIN_EXE_drainer");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args([
            "run",
            "KernelDeadlock=True",
            "--listen",
            &listen,
            "--max-cordoned",
            "100",
            "--drain-buffer",
            "1h",
        ])
        .args(["--leader-election-retry-period", "200ms"])
        .env("KUBECONFIG", &kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("NODEMEDIC_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Ready: /readyz answers 200 once both caches are synced; it must also hold the lease.
    while !readyz(&listen)
        || server
            .object(
                "coordination.k8s.io/v1",
                "leases",
                Some("kube-system"),
                "nodemedic-drainer",
            )
            .is_none()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "drainer ready (caches synced, lease held) after {:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(1));

    let mut samples = Vec::new();
    for k in 0..5 {
        let name = format!("node-{:05}", 100 + k * 997);
        let mut n = server.object("v1", "nodes", None, &name).unwrap();
        n["status"]["conditions"][1] = json!({"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "task docker:1 blocked",
            "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"});
        let t0 = Instant::now();
        server.put_object("v1", "nodes", None, n);
        loop {
            if server.object("v1", "nodes", None, &name).unwrap()["spec"]["unschedulable"]
                == json!(true)
            {
                break;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                println!("{name}: not cordoned within 30s");
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        samples.push(t0.elapsed());
    }
    let (rss, hwm) = (vm(child.id(), "VmRSS:"), vm(child.id(), "VmHWM:"));
    let _ = child.kill();
    let _ = child.wait();
    samples.sort();
    println!(
        "condition -> cordon: median {:?}, max {:?} (5 samples)",
        samples[2], samples[4]
    );
    println!(
        "drainer run with {NODES} nodes / {} pods: RSS {:.1} MiB, peak {:.1} MiB",
        NODES * PODS_PER_NODE,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );

    // drainer plan over the same snapshot as files
    let nodes: Vec<_> = server.objects("v1", "nodes");
    let pods: Vec<_> = server.objects("v1", "pods");
    let nf = tmp.path().join("nodes.json");
    let pf = tmp.path().join("pods.json");
    std::fs::write(
        &nf,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": nodes})).unwrap(),
    )
    .unwrap();
    std::fs::write(
        &pf,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": pods})).unwrap(),
    )
    .unwrap();
    let mut times = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let out = Command::new(exe)
            .args([
                "plan",
                "KernelDeadlock=True",
                "--max-cordoned",
                "100",
                "--output",
                "json",
                "--now",
                "2026-11-22T10:00:00Z",
            ])
            .arg("--nodes")
            .arg(&nf)
            .arg("--pods")
            .arg(&pf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(out.success());
        times.push(t0.elapsed());
    }
    times.sort();
    println!(
        "drainer plan over {NODES} nodes / {} pods ({:.0} MB of JSON): best {:?}, median {:?}",
        pods.len(),
        (std::fs::metadata(&nf).unwrap().len() + std::fs::metadata(&pf).unwrap().len()) as f64
            / 1e6,
        times[0],
        times[1]
    );
}
