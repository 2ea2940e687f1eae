//! Figures measured on a real control plane (etcd + kube-apiserver + kube-controller-manager from
//! `KUBEBUILDER_ASSETS`), counted and timed by the API server where it can:
//!
//! 1. kmsg line -> condition on the Node: latency of 21 condition changes (alternating problem and
//!    recovery lines), median and max, through `/dev/kmsg` (when writable here) and through a
//!    kmsg-format file, each read by its own detector;
//! 2. the guard's webhook latency as the API server times it
//!    (`apiserver_admission_webhook_admission_duration_seconds`), over dry-run pod deletions;
//! 3. status PATCHes of one detector at rest over `NODEMEDIC_REST_SECS` (default 600 s), counted in
//!    the audit log, with its rule files read, edited, swapped ConfigMap-style and removed meanwhile.
//!
//! `KUBEBUILDER_ASSETS=$(../shared/envtest/setup.sh target/envtest) cargo bench -p nodemedic-tests --bench realplane`

use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodemedic_detector::report::aggregate::Limits;
use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest::{self, ControlPlane, KcmOptions};
use serde_json::json;

const RULES: &str = r#"
source: bench-monitor
input: {kind: kmsg}
conditions:
  - type: BenchDisk
    reason: DiskIsFine
    message: disk is fine
    recovery:
      pattern: 'nodemedic-bench-RUN disk sdz recovered.*'
rules:
  - type: permanent
    condition: BenchDisk
    reason: DiskErrors
    pattern: 'nodemedic-bench-RUN disk sdz failing.*'
"#;

const EXTRA: &str = "source: extra-monitor\ninput: {kind: kmsg}\nrules:\n  - type: temporary\n    reason: ExtraThing\n    pattern: 'nodemedic-bench extra'\n";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "the realplane bench",
            "figures timed and counted by kube-apiserver itself",
        );
        return;
    };
    let rest = Duration::from_secs(
        std::env::var("NODEMEDIC_REST_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(600),
    );
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(
        &assets,
        Some(KcmOptions::default()),
    )));
    let cluster = Cluster::on(plane);
    // Lines of earlier runs stay in the kernel log: this run's rules match only its own.
    let run = std::process::id().to_string();

    // 1. kmsg line -> condition, through /dev/kmsg when it is writable here, and through a kmsg file.
    let dev_kmsg = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .is_ok()
        && std::fs::File::open("/dev/kmsg").is_ok();
    if dev_kmsg {
        let d = Detector::start(&cluster, &run, None).await;
        latency(&cluster, &d, &run, "/dev/kmsg").await;
        d.shutdown().await;
    } else {
        println!(
            "kmsg line -> condition (/dev/kmsg): not measured, /dev/kmsg is not writable here"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kmsg"), "").unwrap();
    let d = Detector::start(&cluster, &run, Some(dir.path().join("kmsg"))).await;
    latency(&cluster, &d, &run, "kmsg file").await;

    // 2. the guard's webhook latency, timed by the API server
    guard_latency(&cluster, plane).await;

    // 3. status PATCHes at rest
    let start_patches = cluster.requests_from("detector", "patch", "nodes", "status");
    let t0 = Instant::now();
    let rules = d.dir.path().join("rules");
    let mut step = 0;
    while t0.elapsed() < rest {
        tokio::time::sleep(Duration::from_secs(5)).await;
        step += 1;
        // Every minute something happens to the rule files that changes no condition.
        match step % 12 {
            1 => {
                for _ in 0..10 {
                    let _ = std::fs::read_to_string(rules.join("bench.yaml"));
                }
            }
            4 => {
                std::fs::write(rules.join("extra.yaml"), format!("# edit {step}\n{EXTRA}")).unwrap()
            }
            7 => {
                let _ = std::fs::remove_file(rules.join("extra.yaml"));
            }
            10 => std::fs::write(rules.join("extra.yaml"), EXTRA).unwrap(),
            _ => {}
        }
    }
    let patches = cluster.requests_from("detector", "patch", "nodes", "status") - start_patches;
    println!(
        "status PATCHes at rest (heartbeat 5m, rule files read/edited/removed/restored each minute): {patches} in {} s = {:.1} per node per 10 min",
        rest.as_secs(),
        patches as f64 * 600.0 / rest.as_secs_f64()
    );
    d.shutdown().await;
}

/// A detector on its own node, reading `/dev/kmsg` or a kmsg file, with this run's bench rules.
struct Detector {
    node: String,
    dir: tempfile::TempDir,
    kmsg: Option<std::path::PathBuf>,
    running: nodemedic_detector::run::Running,
    seq: std::cell::Cell<u64>,
}

impl Detector {
    async fn start(cluster: &Cluster, run: &str, kmsg: Option<std::path::PathBuf>) -> Detector {
        let node = cluster
            .create_node(if kmsg.is_some() {
                "bench-file"
            } else {
                "bench-dev"
            })
            .await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        std::fs::write(
            dir.path().join("rules/bench.yaml"),
            RULES.replace("RUN", run),
        )
        .unwrap();
        std::fs::write(dir.path().join("rules/extra.yaml"), EXTRA).unwrap();
        let opts = nodemedic_detector::run::Options {
            node_name: node.clone(),
            rules: vec![dir.path().join("rules")],
            kmsg_path: kmsg.clone().unwrap_or_else(|| "/dev/kmsg".into()),
            journalctl: "journalctl".into(),
            journal_dir: None,
            state_file: dir.path().join("state.json"),
            listen: "127.0.0.1:0".parse().unwrap(),
            extra_listen: None,
            heartbeat: Duration::from_secs(300),
            events: Limits::default(),
            report_tick: Duration::from_millis(50),
            check_dirs: Vec::new(),
            allow_root_checks: false,
            credential: nodemedic_common::client::Credential::Kubeconfig,
            api_server: "the real control plane".into(),
            reboot: None,
            stats: Vec::new(),
        };
        let running = nodemedic_detector::run::start(opts, cluster.client_for("detector"))
            .await
            .unwrap();
        eventually("healthy default", Duration::from_secs(30), || async {
            cluster
                .condition(&node, "BenchDisk")
                .await
                .filter(|c| c.0 == "False")
        })
        .await;
        Detector {
            node,
            dir,
            kmsg,
            running,
            seq: std::cell::Cell::new(1_000_000),
        }
    }

    fn write_line(&self, text: &str) {
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        match &self.kmsg {
            None => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/kmsg")
                    .unwrap();
                f.write_all(format!("{text}\n").as_bytes()).unwrap();
            }
            Some(path) => {
                let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                writeln!(f, "3,{seq},{},-;{text}", monotonic_now_us()).unwrap();
            }
        }
    }

    async fn shutdown(self) {
        self.running.shutdown().await;
    }
}

/// Latency of 21 condition changes (alternating problem and recovery lines), printed.
async fn latency(cluster: &Cluster, d: &Detector, run: &str, path: &str) {
    let mut latencies = Vec::new();
    for i in 0..21 {
        let (line, want) = if i % 2 == 0 {
            (
                format!("nodemedic-bench-{run} disk sdz failing (a harmless test line)"),
                "True",
            )
        } else {
            (
                format!("nodemedic-bench-{run} disk sdz recovered (a harmless test line)"),
                "False",
            )
        };
        let t0 = Instant::now();
        d.write_line(&line);
        loop {
            if cluster
                .condition(&d.node, "BenchDisk")
                .await
                .is_some_and(|c| c.0 == want)
            {
                break;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let metrics =
                    nodemedic_tests::http_get(&format!("http://{}/metrics", d.running.addr)).await;
                panic!(
                    "no change seen for line {i} ({line}): {:?}\n{metrics}",
                    cluster.condition(&d.node, "BenchDisk").await
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "kmsg line -> condition ({path}): {} samples, min {:.0} ms, median {:.0} ms, max {:.0} ms",
        latencies.len(),
        latencies[0],
        percentile(&latencies, 0.5),
        latencies.last().unwrap()
    );
}

async fn guard_latency(cluster: &Cluster, plane: &ControlPlane) {
    let dir = tempfile::tempdir().unwrap();
    let ca = nodemedic_tests::webhook::write_cert(dir.path(), "guard-bench");
    let leaf = cluster
        .create_node_with("leaf", json!({"kosmos.io/node": "true"}))
        .await;
    cluster.set_ready(&leaf, "False").await;
    let ns = cluster.name("guarded");
    cluster
        .ensure_namespace(&ns, json!({"nodemedic.test/guard": cluster.id}))
        .await;
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": ns},
        "spec": {"nodeName": leaf, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))
    .unwrap();
    Api::<Pod>::namespaced(cluster.client.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", "bench-guard", None).await;
    let drainer = nodemedic_drainer::run::start(
        nodemedic_drainer::run::Options {
            config: nodemedic_drainer::config::Config {
                selector: nodemedic_drainer::config::select::Selector::labels(
                    "nodemedic.test/none=x",
                )
                .unwrap(),
                conditions: vec!["KernelDeadlock".parse().unwrap()],
                ..Default::default()
            },
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: nodemedic_drainer::leader::LeaseConfig {
                namespace: "kube-system".into(),
                name: "bench-guard".into(),
                identity: "g".into(),
                duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            },
            tick: Duration::from_secs(5),
            reload: None,
            reboot_signing_key: None,
            record_key_file: None,
            record_key_previous_file: None,
            refuse_looser_start: false,
            settings: None,
            guard: Some(nodemedic_drainer::guard::server::GuardOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                cert: dir.path().join("tls.crt"),
                key: dir.path().join("tls.key"),
                config: Default::default(),
            }),
        },
        cluster.client.clone(),
    )
    .await
    .unwrap();
    let webhook =
        nodemedic_tests::webhook::register_guard(cluster, drainer.guard_addr.unwrap(), &ca).await;
    let webhooks: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(cluster.client.clone());
    let nc = Api::<Pod>::namespaced(
        plane.client_impersonating("system:serviceaccount:kube-system:node-controller"),
        &ns,
    );
    let dry = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    eventually("the guard denies", Duration::from_secs(30), || async {
        nc.delete("web", &dry)
            .await
            .is_err_and(|e| e.to_string().contains("kosmos-leaf-not-ready"))
            .then_some(())
    })
    .await;
    const N: usize = 200;
    let t0 = Instant::now();
    for _ in 0..N {
        let _ = nc.delete("web", &dry).await;
    }
    let client_ms = t0.elapsed().as_secs_f64() * 1000.0 / N as f64;
    let metrics = plane.metrics().await;
    // One histogram per label set (operation, rejected, type): add them up.
    let prefix = "apiserver_admission_webhook_admission_duration_seconds";
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    let (mut sum, mut count) = (0.0, 0.0);
    for l in metrics
        .lines()
        .filter(|l| l.contains(&format!("name=\"{webhook}\"")))
    {
        let value: f64 = l
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if l.starts_with(&format!("{prefix}_sum{{")) {
            sum += value;
        } else if l.starts_with(&format!("{prefix}_count{{")) {
            count += value;
        } else if l.starts_with(&format!("{prefix}_bucket{{")) {
            let le = l
                .split("le=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(|v| {
                    if v == "+Inf" {
                        f64::INFINITY
                    } else {
                        v.parse().unwrap_or(f64::INFINITY)
                    }
                })
                .unwrap_or(f64::INFINITY);
            match buckets.iter_mut().find(|(b, _)| *b == le) {
                Some(b) => b.1 += value,
                None => buckets.push((le, value)),
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let under = |q: f64| {
        buckets
            .iter()
            .find(|(_, c)| *c >= q * count)
            .map(|(le, _)| *le * 1000.0)
            .unwrap_or(f64::NAN)
    };
    println!(
        "guard webhook, timed by the API server: {count} calls, mean {:.2} ms, p50 <= {} ms, p99 <= {} ms (bucket bounds); whole dry-run DELETE seen by the client: {client_ms:.2} ms",
        sum / count * 1000.0,
        under(0.5),
        under(0.99)
    );
    let _ = webhooks.delete(&webhook, &DeleteParams::default()).await;
    drainer.shutdown().await;
}
