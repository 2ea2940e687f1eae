//! A 60 s API server outage, as the detector and the drainer live through it: their release binaries
//! run as processes against a private real control plane (KUBEBUILDER_ASSETS), kube-apiserver is
//! killed for `NODEMEDIC_OUTAGE_SECS` (default 60), and the bench prints each process's CPU (share of
//! one core) and log lines per second during the outage, what `/healthz` said, and how long after the
//! API server came back a problem logged during the outage reached the Node.
//!
//! `KUBEBUILDER_ASSETS=$(../shared/envtest/setup.sh target/envtest) cargo bench -p nodemedic-tests --bench outage`
//! (it builds the two binaries with `cargo build --release` first).

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::bench::{env_or, free_port, release_bins};
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest::{self, ControlPlane};
use nodemedic_tests::process::cpu_seconds;

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: kernel has no deadlock
rules:
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\w+ blocked for more than \w+ seconds\.'
"#;

struct Proc {
    child: Child,
    lines: Arc<AtomicUsize>,
    port: u16,
}

fn spawn(bin: &Path, args: &[String], kubeconfig: &Path, port: u16) -> Proc {
    let mut child = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .env("POD_NAME", "outage-bench")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let lines = Arc::new(AtomicUsize::new(0));
    let counter = lines.clone();
    let name = bin.file_name().unwrap().to_string_lossy().into_owned();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let log = std::fs::File::create(std::env::temp_dir().join(format!("outage-{name}.log")));
        let mut log = log.ok();
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            counter.fetch_add(1, Ordering::Relaxed);
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "{l}");
            }
        }
    });
    Proc { child, lines, port }
}

fn healthz(port: u16) -> String {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return "unreachable".into();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = write!(s, "GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.lines().next().unwrap_or("").to_string();
    let body = out
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or("")
        .trim()
        .to_string();
    format!("{status} {body}")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "the API outage bench",
            "a kube-apiserver process to kill and start again",
        );
        return;
    };
    let outage = Duration::from_secs(env_or("NODEMEDIC_OUTAGE_SECS", 60));
    let bin = release_bins(&["nodemedic-detector", "nodemedic-drainer"]);
    let (detector, drainer) = (bin.join("detector"), bin.join("drainer"));
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(&assets, None)));
    let cluster = Cluster::on(plane);
    let node = cluster.create_node("outage").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/kernel.yaml"), RULES).unwrap();
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);

    let dport = free_port();
    let s = |p: &Path| p.display().to_string();
    let mut det = spawn(
        &detector,
        &[
            "run".into(),
            "--node-name".into(),
            node.clone(),
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
        dport,
    );
    let rport = free_port();
    let mut drn = spawn(
        &drainer,
        &[
            "run".into(),
            "KernelDeadlock=True".into(),
            "--node-selector".into(),
            format!("nodemedic.test/run={}", cluster.id_label()),
            "--namespace".into(),
            "default".into(),
            "--listen".into(),
            format!("127.0.0.1:{rport}"),
        ],
        &kubeconfig,
        rport,
    );
    eventually(
        "the detector's healthy condition on the node",
        Duration::from_secs(60),
        || async {
            cluster
                .condition(&node, "KernelDeadlock")
                .await
                .filter(|c| c.0 == "False")
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let before = |p: &Proc| (cpu_seconds(p.child.id()), p.lines.load(Ordering::Relaxed));
    let (d0, r0) = (before(&det), before(&drn));
    plane.stop_apiserver();
    let down = Instant::now();
    // A problem while the API server is away: it must land once it is back.
    std::thread::sleep(outage / 3);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&kmsg)
        .unwrap();
    writeln!(
        f,
        "3,1,{},-;INFO: task docker:9 blocked for more than 120 seconds.",
        monotonic_now_us()
    )
    .unwrap();
    std::thread::sleep(outage.saturating_sub(down.elapsed()));
    let secs = down.elapsed().as_secs_f64();
    let (d1, r1) = (before(&det), before(&drn));
    let (dh, rh) = (healthz(det.port), healthz(drn.port));
    let restart = Instant::now();
    plane.restart_apiserver();
    let ready = restart.elapsed();
    eventually(
        "the problem logged during the outage on the node",
        Duration::from_secs(120),
        || async {
            cluster
                .condition(&node, "KernelDeadlock")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    let landed = restart.elapsed();
    for (name, (c0, l0), (c1, l1), h) in [("detector", d0, d1, dh), ("drainer", r0, r1, rh)] {
        println!(
            "{name} during a {secs:.0} s API outage: CPU {:.2}% of a core, {:.2} log lines/s ({} lines); /healthz at its end: {h}",
            (c1 - c0) / secs * 100.0,
            (l1 - l0) as f64 / secs,
            l1 - l0
        );
    }
    println!(
        "kube-apiserver started again: ready after {:.1} s; the problem logged during the outage was on the Node {:.1} s after the start",
        ready.as_secs_f64(),
        landed.as_secs_f64()
    );
    let _ = det.child.kill();
    let _ = drn.child.kill();
    let _ = det.child.wait();
    let _ = drn.child.wait();
}
