//! `pgo-train DRAINER PROFILE_DIR`: runs an instrumented drainer (built with `-Cprofile-generate`)
//! through the work it does in a cluster, so that `build/pgo-drainer.sh` can build the shipped one
//! with that profile: on the test API server (in this process, on 127.0.0.1), a fleet of
//! kubelet-shaped nodes (`nodemedic_tests::fleet`) sends status updates one at a time and in bursts,
//! nodes turn bad one at a time and many at once and are cordoned and drained, and the metrics are
//! scraped. Then the drainer gets SIGTERM (a killed process writes no profile) and must exit cleanly
//! and leave its profile in PROFILE_DIR (`LLVM_PROFILE_FILE`). It runs 70 s after the drainer is ready,
//! so that its periodic resync of the whole fleet is in the profile too; about 80 s in all.
//!
//! The work is the drainer's usual one, not the `scale` bench's measurement: another fleet size, and
//! every phase shorter.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodemedic_tests::fleet;

/// Nodes in the fleet (`PGO_TRAIN_NODES` overrides).
const NODES: usize = 400;
/// Drained one at a time, then at once (their pods have no grace period).
const ONE_BY_ONE: usize = 8;
const AT_ONCE: usize = 20;
/// How long the drainer runs after it is ready: past its first resync (60 s).
const RESYNC_SEEN: Duration = Duration::from_secs(70);

/// The drainer process, killed if training fails half-way (it would outlive its API server).
struct Drainer(Option<std::process::Child>);

impl Drop for Drainer {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn say(what: &str, since: Instant) {
    eprintln!("pgo-train: {what} ({:.1?})", since.elapsed());
}

/// Heartbeats from every node at `rate` per second (0: 4 writers as fast as they go) for `for_`.
async fn heartbeats(nodes: &Api<Node>, count: usize, rate: f64, for_: Duration) -> usize {
    let stop = Arc::new(AtomicBool::new(false));
    let workers = if rate > 0.0 { 1 } else { 4 };
    let task = tokio::spawn(fleet::churn(
        nodes.clone(),
        count,
        rate,
        workers,
        stop.clone(),
        fleet::Update::Heartbeat,
    ));
    tokio::time::sleep(for_).await;
    stop.store(true, Ordering::Relaxed);
    task.await.unwrap_or(0)
}

async fn train(exe: &Path, profiles: &Path) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let count = std::env::var("PGO_TRAIN_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(NODES)
        .max(ONE_BY_ONE + AT_ONCE + 1);
    let server = nodemedic_tests::server::TestApiServer::start().await;
    let client = server.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let drained: Vec<usize> = (0..ONE_BY_ONE + AT_ONCE).map(|k| 1 + k * 3).collect();
    let instant: HashSet<usize> = drained.iter().copied().collect();
    fleet::create(&client, count, &instant, fleet::PodState::Running).await;
    say(
        &format!(
            "{count} nodes and {} pods on the test API server",
            count * fleet::PODS_PER_NODE
        ),
        t0,
    );

    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let listen = format!("127.0.0.1:{}", nodemedic_tests::bench::free_port());
    let mut cmd = fleet::drainer_command(exe, &kubeconfig, &listen);
    cmd.env("LLVM_PROFILE_FILE", profiles.join("drainer-%p.profraw"));
    let drainer = Drainer(Some(
        cmd.spawn()
            .with_context(|| format!("starting {}", exe.display()))?,
    ));
    ensure!(
        fleet::wait_ready(&client, &listen, Duration::from_secs(300)).await,
        "the drainer was not ready (caches synced, lease held) within 5 minutes"
    );
    say("drainer ready", t0);
    let ready = Instant::now();

    let sent = heartbeats(&nodes, count, 20.0, Duration::from_secs(15)).await;
    say(&format!("{sent} status updates one at a time"), t0);
    let sent = heartbeats(&nodes, count, 0.0, Duration::from_secs(5)).await;
    say(&format!("{sent} status updates in bursts"), t0);

    bad_nodes(&nodes, count, &drained).await?;
    for _ in 0..5 {
        nodemedic_tests::try_http_get(&format!("http://{listen}/metrics"))
            .await
            .map_err(anyhow::Error::msg)
            .context("scraping the drainer's metrics")?;
    }
    // Until the controller's periodic resync (every 60 s, `controller::RESYNC`) has walked the
    // fleet at least once: at scale it is most of the drainer's work between events.
    let left = RESYNC_SEEN.saturating_sub(ready.elapsed());
    let sent = heartbeats(&nodes, count, 20.0, left).await;
    say(&format!("{sent} more status updates, past a resync"), t0);
    stop(drainer).await?;
    let written = std::fs::read_dir(profiles)?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".profraw"));
    ensure!(
        written,
        "the drainer wrote no profile in {} (was it built with -Cprofile-generate?)",
        profiles.display()
    );
    say("drainer stopped; profile written", t0);
    Ok(())
}

/// Nodes turn bad under kubelet churn and are drained: the first [`ONE_BY_ONE`] of `drained` one at
/// a time, the rest at once.
async fn bad_nodes(nodes: &Api<Node>, count: usize, drained: &[usize]) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let kubelets = tokio::spawn(fleet::churn(
        nodes.clone(),
        count,
        17.0,
        1,
        stop.clone(),
        fleet::Update::Heartbeat,
    ));
    for &i in &drained[..ONE_BY_ONE] {
        let name = fleet::name(i);
        let done = {
            let (nodes, name) = (nodes.clone(), name.clone());
            tokio::spawn(async move { drained_within(&nodes, &name).await })
        };
        fleet::mark_bad(nodes, &name).await;
        ensure!(done.await?, "{name} was not drained within 2 minutes");
    }
    say(&format!("{ONE_BY_ONE} nodes drained one at a time"), t0);
    for &i in &drained[ONE_BY_ONE..] {
        fleet::mark_bad(nodes, &fleet::name(i)).await;
    }
    for &i in &drained[ONE_BY_ONE..] {
        let name = fleet::name(i);
        ensure!(
            drained_within(nodes, &name).await,
            "{name} was not drained within 2 minutes"
        );
    }
    say(
        &format!("{} nodes drained at once", drained.len() - ONE_BY_ONE),
        t0,
    );
    stop.store(true, Ordering::Relaxed);
    let _ = kubelets.await;
    Ok(())
}

async fn drained_within(nodes: &Api<Node>, name: &str) -> bool {
    fleet::watch_until(nodes, name, Duration::from_secs(120), |n| {
        fleet::record_phase(n).as_deref() == Some("drained")
    })
    .await
    .is_some()
}

/// SIGTERM: the drainer stops in order and exits, which writes the profile.
async fn stop(mut drainer: Drainer) -> anyhow::Result<()> {
    let mut child = drainer.0.take().context("the drainer is running")?;
    let pid = rustix::process::Pid::from_raw(child.id() as i32).context("a pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            drainer.0 = Some(child);
            bail!("the drainer did not exit within 60 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ensure!(status.success(), "the drainer exited with {status}");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [exe, profiles] = args.as_slice() else {
        bail!("usage: pgo-train DRAINER PROFILE_DIR");
    };
    std::fs::create_dir_all(profiles)
        .with_context(|| format!("creating {}", profiles.display()))?;
    train(exe, profiles).await
}
