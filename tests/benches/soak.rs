//! Soak: the detector and the drainer (release binaries) against a real control plane for
//! `NODEMEDIC_SOAK_MINS` minutes (default 30) with churn: 50 nodes heartbeating, one node in ten
//! flipping a condition the drainer acts on every minute, pods created and deleted, and a steady
//! kernel-log flood of `NODEMEDIC_SOAK_RATE` lines/s (default 2,000) into the detector. Every minute
//! it samples both processes' RSS and CPU and the detector's lines read; at the end it prints the
//! series and the growth of RSS from the second minute to the last (flat is the goal).
//!
//! `KUBEBUILDER_ASSETS=$(../shared/envtest/setup.sh target/envtest) cargo bench -p nodemedic-tests --bench soak`

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::bench::{env_or, free_port, metric_sum, release_bins};
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest::{self, ControlPlane};
use nodemedic_tests::process::{cpu_seconds, status_mib};
use serde_json::json;

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
conditions:
  - type: SoakDisk
    reason: DiskIsFine
    message: disk is fine
    recovery:
      pattern: 'disk sdz recovered'
rules:
  - type: permanent
    condition: SoakDisk
    reason: DiskErrors
    pattern: 'disk sdz failing at sector \d+'
  - type: temporary
    reason: OOMKilling
    pattern: 'Out of memory: Killed process \d+ \((.+)\).*'
"#;

fn spawn(bin: &Path, args: &[String], kubeconfig: &Path) -> Child {
    Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .env("POD_NAME", "soak")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()))
}

#[tokio::main]
async fn main() {
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "the soak bench",
            "a real control plane's memory and timing over half an hour",
        );
        return;
    };
    let mins = env_or("NODEMEDIC_SOAK_MINS", 30);
    let rate = env_or("NODEMEDIC_SOAK_RATE", 2_000);
    let bin = release_bins(&["nodemedic-detector", "nodemedic-drainer"]);
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(&assets, None)));
    let cluster = Cluster::on(plane);
    let mut nodes = Vec::new();
    for i in 0..50 {
        nodes.push(cluster.create_node(&format!("soak{i}")).await);
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/kernel.yaml"), RULES).unwrap();
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let s = |p: &Path| p.display().to_string();
    let dport = free_port();
    let mut det = spawn(
        &bin.join("detector"),
        &[
            "run".into(),
            "--node-name".into(),
            nodes[0].clone(),
            "--rules".into(),
            s(&dir.path().join("rules")),
            "--kmsg-path".into(),
            s(&kmsg),
            "--state-file".into(),
            s(&dir.path().join("state.json")),
            "--listen".into(),
            format!("127.0.0.1:{dport}"),
        ],
        &kubeconfig,
    );
    let mut drn = spawn(
        &bin.join("drainer"),
        &[
            "run".into(),
            "KernelDeadlock=True".into(),
            "--node-selector".into(),
            format!("nodemedic.test/run={}", cluster.id_label()),
            "--namespace".into(),
            "default".into(),
            "--max-unhealthy".into(),
            "100%".into(),
            "--breaker-new".into(),
            "100%".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", free_port()),
        ],
        &kubeconfig,
    );
    eventually(
        "the detector's condition",
        Duration::from_secs(60),
        || async {
            cluster
                .condition(&nodes[0], "SoakDisk")
                .await
                .filter(|c| c.0 == "False")
        },
    )
    .await;

    // The log flood on its own thread.
    let flood_path = kmsg.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood_stop = stop.clone();
    let flood = std::thread::spawn(move || {
        let mut f = std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .append(true)
                .open(&flood_path)
                .unwrap(),
        );
        let per_tick = (rate / 10).max(1);
        let mut seq = 0u64;
        let mut tick = Instant::now();
        while !flood_stop.load(std::sync::atomic::Ordering::Relaxed) {
            let ts = monotonic_now_us();
            for _ in 0..per_tick {
                seq += 1;
                let line = match seq % 100 {
                    0 => format!("Out of memory: Killed process {seq} (app)"),
                    1 => "disk sdz recovered".to_string(),
                    50 => format!("disk sdz failing at sector {seq}"),
                    _ => format!("eth0: link up {seq}"),
                };
                let _ = writeln!(f, "3,{seq},{ts},-;{line}");
            }
            let _ = f.flush();
            tick += Duration::from_millis(100);
            if let Some(w) = tick.checked_duration_since(Instant::now()) {
                std::thread::sleep(w);
            }
        }
        seq
    });

    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let owner = cluster.owner("default", "soak").await;
    let started = Instant::now();
    let mut samples: Vec<(u64, f64, f64, f64, f64)> = Vec::new();
    let (mut dc, mut rc) = (cpu_seconds(det.id()), cpu_seconds(drn.id()));
    let mut minute = 0u64;
    let mut created = 0u64;
    while minute < mins {
        // Churn for one minute: pods created and deleted, a tenth of the nodes flipping a condition.
        let until = started + Duration::from_secs(60 * (minute + 1));
        let mut step = 0u64;
        while Instant::now() < until {
            let name = format!("soak-{}", created);
            created += 1;
            let node = &nodes[(created as usize) % nodes.len()];
            let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "labels": {"nodemedic.test/run": cluster.id_label()}, "ownerReferences": owner},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))
            .unwrap();
            let _ = pods.create(&PostParams::default(), &p).await;
            if created > 20 {
                let _ = pods
                    .delete(
                        &format!("soak-{}", created - 20),
                        &DeleteParams::default().grace_period(0),
                    )
                    .await;
            }
            if step.is_multiple_of(30) {
                let bad = &nodes[1 + (step as usize / 30 + minute as usize) % 5];
                let status = if (step / 30 + minute).is_multiple_of(2) {
                    "True"
                } else {
                    "False"
                };
                let body = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": status,
                    "reason": "Soak", "message": "m", "lastHeartbeatTime": nodemedic_tests::cluster::now_rfc3339(),
                    "lastTransitionTime": nodemedic_tests::cluster::now_rfc3339()}]}});
                let _ = Api::<k8s_openapi::api::core::v1::Node>::all(cluster.client.clone())
                    .patch_status(
                        bad,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Strategic(body),
                    )
                    .await;
            }
            step += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        minute += 1;
        let (d, r) = (cpu_seconds(det.id()), cpu_seconds(drn.id()));
        let sample = (
            minute,
            status_mib(det.id(), "VmRSS:"),
            status_mib(drn.id(), "VmRSS:"),
            (d - dc) / 60.0 * 100.0,
            (r - rc) / 60.0 * 100.0,
        );
        (dc, rc) = (d, r);
        eprintln!(
            "minute {:>3}: detector RSS {:.1} MiB, CPU {:.1}%; drainer RSS {:.1} MiB, CPU {:.1}%",
            sample.0, sample.1, sample.3, sample.2, sample.4
        );
        samples.push(sample);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let lines = flood.join().unwrap_or(0);
    let metrics = nodemedic_tests::http_get(&format!("http://127.0.0.1:{dport}/metrics")).await;
    let read = metric_sum(&metrics, "nodemedic_detector_lines_read_total");
    let growth = |f: fn(&(u64, f64, f64, f64, f64)) -> f64| {
        let first = samples.get(1).or(samples.first()).map(f).unwrap_or(0.0);
        let last = samples.last().map(f).unwrap_or(0.0);
        last - first
    };
    println!(
        "soak {mins} min: {lines} log lines written ({read:.0} read), {created} pods created, 50 nodes; \
         detector RSS {:.1} -> {:.1} MiB ({:+.1} from minute 2), drainer RSS {:.1} -> {:.1} MiB ({:+.1}); \
         mean CPU detector {:.1}%, drainer {:.1}%",
        samples.first().map(|s| s.1).unwrap_or(0.0),
        samples.last().map(|s| s.1).unwrap_or(0.0),
        growth(|s| s.1),
        samples.first().map(|s| s.2).unwrap_or(0.0),
        samples.last().map(|s| s.2).unwrap_or(0.0),
        growth(|s| s.2),
        samples.iter().map(|s| s.3).sum::<f64>() / samples.len().max(1) as f64,
        samples.iter().map(|s| s.4).sum::<f64>() / samples.len().max(1) as f64,
    );
    let _ = det.kill();
    let _ = drn.kill();
    let _ = det.wait();
    let _ = drn.wait();
}
