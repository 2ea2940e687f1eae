//! The drainer at scale on a real control plane (etcd + kube-apiserver from `KUBEBUILDER_ASSETS`),
//! or on the test API server when there is none (it says which: the CPU and memory figures are the
//! drainer's own, so both give them), with kubelet-shaped Nodes and ReplicaSet-owned Pods (`../shared/reference/fixtures/`), run the
//! way an operator runs draino: `--node-label-expr "metadata.labels['draino'] == 'node' && ..."`
//! (`fleet::SELECTOR`: it also names the label a label change flips, so that change is one the
//! selector reads).
//!
//! Prints, beside draino's figures measured on this kind of machine (issue 13):
//! - RSS of `drainer run` as its image ships it (`build/pgo-drainer.sh`: the `drainer` profile with
//!   profile-guided optimisation, built first if need be, `NODEMEDIC_PGO=off` without;
//!   `MALLOC_ARENA_MAX=1`) after it synced, its peak while listing, and its peak;
//! - CPU per node update at a steady rate (one update every 50 ms, each alone, as kubelets send
//!   them, for 60 s; an idle baseline measured as long right before and subtracted; 3 times,
//!   min/median/max; CPU read to the nanosecond from each thread's run time), for each kind of
//!   update a cluster sends ([`Update`]): heartbeats, and state changes (a condition's reason, which
//!   no decision reads; a label the selector reads, its answer the same; Ready's reason, which
//!   decisions read, so the node is decided again), every write answered and watched with a
//!   new resourceVersion and `managedFields` on either API server; and as fast as 4
//!   writers go (where many updates share a round); the share of a core at 17 updates/s (what
//!   5,000 kubelets send);
//! - condition set -> cordon latency under 20 heartbeats/s (min, median, P99, max;
//!   `NODEMEDIC_SCALE_SAMPLES` nodes one after another, default 21), and the five slowest with their node
//!   and when their condition was sent (UTC), to line them up with the drainer's log;
//! - cordon -> drain done for a 10-pod node under the same (min, median, max);
//! - API requests the drainer made per cordon + drain (from the API server's audit log);
//! - a burst of 50 nodes turning bad at once (`NODEMEDIC_SCALE_BURST`): time until all are cordoned.
//!
//! No kube-controller-manager runs (nothing would heartbeat the fake nodes, and its node lifecycle
//! controller would evict everything); the bench plays the kubelets: it sends their status updates,
//! and the pods of the nodes it drains have a zero grace period, so an eviction deletes them at once.
//!
//! `KUBEBUILDER_ASSETS=$(../shared/envtest/setup.sh target/envtest) cargo bench -p nodemedic-drainer --bench scale`
//! (`NODEMEDIC_SCALE_NODES=15000` for the large fixture; 10 pods per node, Running, or all waiting to
//! start with `NODEMEDIC_BENCH_PODS=waiting`: a bad image on a Deployment as big as the fleet, every
//! pod one the symptoms pass weighs.)

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::watcher;
use nodemedic_tests::bench::{Backend, Drainer};
use nodemedic_tests::fleet::{self, PODS_PER_NODE, Update};
/// Nodes turned bad one at a time for the condition -> cordon and cordon -> drained figures:
/// `NODEMEDIC_SCALE_SAMPLES` (default 21; 200 or more for a P99, at most a tenth of the fleet).
fn samples_n(count: usize) -> usize {
    std::env::var("NODEMEDIC_SCALE_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(21usize)
        .clamp(1, (count / 10).max(1))
}
/// Nodes turning bad at once in the burst: `NODEMEDIC_SCALE_BURST` (default 50, at most the fleet;
/// the drainer's cordon budget is 1,000). Hundreds at once on a small fleet open the breaker (more
/// than 20% new within 5 minutes), which is what it is for: give a fleet they are a small share of.
fn burst_size(count: usize) -> usize {
    std::env::var("NODEMEDIC_SCALE_BURST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50usize)
        .clamp(1, count)
}
const KUBELET_RATE: f64 = 17.0;
/// One update every 50 ms: the steady rate the per-update figure is taken at.
const STEADY_RATE: f64 = 20.0;
/// How long the idle baseline and the steady rate are measured: one resync period each (the
/// controller's 60 s safety net walks every node), so each window holds one resync and the
/// subtraction leaves the updates alone; with 20 s windows a resync falling in one window and not
/// the other moved the figure by up to 40 us at 15,000 nodes.
const MEASURE: Duration = nodemedic_drainer::controller::RESYNC;

/// What the steady rate is measured with, each kind in its own window: heartbeats, and three kinds
/// of state change (a condition no decision reads; a label the selector reads, its answer the
/// same; Ready's reason, which every decision reads: the one that wakes a round).
const KINDS: [Update; 4] = [
    Update::Heartbeat,
    Update::ConditionChange,
    Update::LabelChange,
    Update::ReadyChange,
];

/// Idle + steady measurements in turn: `NODEMEDIC_SCALE_REPEATS` (default 3, at least 1).
fn repeats() -> usize {
    std::env::var("NODEMEDIC_SCALE_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3usize)
        .max(1)
}

/// The 99th percentile, nearest rank (over fewer than 100 samples: the largest).
fn p99(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (v.len() * 99).div_ceil(100).max(1);
    v.get(rank - 1).copied().unwrap_or(f64::NAN)
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

#[tokio::main]
async fn main() {
    let backend = Backend::start("scale").await;
    let count: usize = std::env::var("NODEMEDIC_SCALE_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    let client = backend.client();
    let nodes: Api<Node> = Api::all(client.clone());

    // Which nodes are sampled (their pods go at once when evicted) and which burst.
    let samples_n = samples_n(count);
    let samples: Vec<usize> = (0..samples_n)
        .map(|k| 7 + k * (count / samples_n))
        .collect();
    let burst_n = burst_size(count);
    let instant: HashSet<usize> = samples.iter().copied().collect();
    // Not a sampled node (already bad by then): the next one along.
    let burst: Vec<usize> = (0..burst_n)
        .map(|k| (13 + k * (count / burst_n)) % count)
        .map(|i| {
            if instant.contains(&i) {
                (i + 1) % count
            } else {
                i
            }
        })
        .collect();

    let t0 = Instant::now();
    fleet::create(&client, count, &instant, fleet::PodState::from_env()).await;
    println!(
        "fixture: {count} kubelet-shaped nodes and {} ReplicaSet pods ({:?}) created on {} in {:.0?}",
        count * PODS_PER_NODE,
        fleet::PodState::from_env(),
        backend.describe(),
        t0.elapsed()
    );

    let drainer = Drainer::start(&backend);
    let (listen, pid, started) = (drainer.listen.clone(), drainer.pid, drainer.started);
    assert!(
        fleet::wait_ready(&client, &listen, Duration::from_secs(600)).await,
        "the drainer was not ready in 10 minutes"
    );
    println!(
        "drainer ready (caches synced, lease held) after {:.1?} (pid {pid})",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_synced = nodemedic_tests::process::status_mib(pid, "VmRSS:");
    // The peak so far is the initial list's (goal: at most 1.5x the synced figure).
    let hwm_synced = nodemedic_tests::process::status_mib(pid, "VmHWM:");

    // The idle baseline, then CPU per node update at a steady rate: each update alone. Measured
    // REPEATS times in turn (each idle window right before its steady one).
    let meter = nodemedic_tests::process::CpuMeter::start(pid);
    let steady = fleet::steady_cpu(
        &nodes,
        count,
        STEADY_RATE,
        &KINDS,
        &meter,
        MEASURE,
        repeats(),
    )
    .await;

    // CPU per node update: as fast as 4 writers go, for 20 s.
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = meter.seconds();
    let fast = tokio::spawn(fleet::churn(
        nodes.clone(),
        count,
        0.0,
        4,
        stop.clone(),
        Update::Heartbeat,
    ));
    tokio::time::sleep(Duration::from_secs(20)).await;
    stop.store(true, Ordering::Relaxed);
    let updates = fast.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu_fast = meter.seconds() - cpu0;
    let per_update_us = cpu_fast / updates as f64 * 1e6;

    // Kubelet-like churn (17/s) from here on.
    let stop = Arc::new(AtomicBool::new(false));
    let cpu1 = meter.seconds();
    let t1 = Instant::now();
    let kubelets = tokio::spawn(fleet::churn(
        nodes.clone(),
        count,
        KUBELET_RATE,
        2,
        stop.clone(),
        Update::Heartbeat,
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    let core_share = (meter.seconds() - cpu1) / t1.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = kubelets.await;

    // Condition -> cordon, cordon -> drained, under 20 heartbeats/s (the latency target's churn);
    // API requests per cordon + drain.
    let stop = Arc::new(AtomicBool::new(false));
    let kubelets = tokio::spawn(fleet::churn(
        nodes.clone(),
        count,
        STEADY_RATE,
        2,
        stop.clone(),
        Update::Heartbeat,
    ));
    let audit_before = backend.drainer_requests();
    let (mut to_cordon, mut to_drained, mut missed) = (Vec::new(), Vec::new(), 0);
    // Each sample's latency with its node and when its condition was sent (UTC), to line the
    // slowest up with the drainer's log.
    let mut timed: Vec<(f64, String, k8s_openapi::jiff::Timestamp)> = Vec::new();
    for &i in &samples {
        let n = fleet::name(i);
        let cordoned = {
            let (nodes, n) = (nodes.clone(), n.clone());
            tokio::spawn(async move {
                fleet::watch_until(&nodes, &n, Duration::from_secs(30), fleet::cordoned).await
            })
        };
        let drained = {
            let (nodes, n) = (nodes.clone(), n.clone());
            tokio::spawn(async move {
                fleet::watch_until(&nodes, &n, Duration::from_secs(60), |x| {
                    fleet::record_phase(x).as_deref() == Some("drained")
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await; // both watches established
        let (sent, sent_utc) = (Instant::now(), k8s_openapi::jiff::Timestamp::now());
        fleet::mark_bad(&nodes, &n).await;
        let c = cordoned.await.unwrap();
        let d = drained.await.unwrap();
        match (c, d) {
            (Some(c), Some(d)) => {
                to_cordon.push(c.duration_since(sent).as_secs_f64() * 1e3);
                timed.push((
                    c.duration_since(sent).as_secs_f64() * 1e3,
                    n.clone(),
                    sent_utc,
                ));
                to_drained.push(d.duration_since(c).as_secs_f64() * 1e3);
            }
            _ => {
                missed += 1;
                println!("{n}: not cordoned and drained in time");
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let per_drain = (backend.drainer_requests() - audit_before) as f64 / samples_n as f64;

    // A burst: that many nodes bad at once; one watch over all nodes sees them cordoned.
    let burst_names: HashSet<String> = burst.iter().map(|&i| fleet::name(i)).collect();
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let seen = {
        let (nodes, mut left) = (nodes.clone(), burst_names.clone());
        tokio::spawn(async move {
            let stream = watcher::watcher(nodes, watcher::Config::default());
            futures::pin_mut!(stream);
            let mut synced = Some(synced_tx);
            while let Ok(Some(ev)) = stream.try_next().await {
                match ev {
                    watcher::Event::InitDone => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::Apply(n) | watcher::Event::InitApply(n) => {
                        if fleet::cordoned(&n) {
                            left.remove(n.metadata.name.as_deref().unwrap_or(""));
                        }
                        if left.is_empty() && synced.is_none() {
                            return Some(Instant::now());
                        }
                    }
                    _ => {}
                }
            }
            None
        })
    };
    let _ = synced_rx.await;
    // Said as it starts, so a profiler can be attached for the burst alone.
    println!("burst: {burst_n} nodes turning bad at once");
    let sent = Instant::now();
    futures::stream::iter(burst_names.iter().cloned())
        .map(|n| {
            let nodes = nodes.clone();
            async move { fleet::mark_bad(&nodes, &n).await }
        })
        .buffer_unordered(burst_n)
        .for_each(|_| async {})
        .await;
    let burst_done = tokio::time::timeout(Duration::from_secs(60), seen)
        .await
        .ok()
        .and_then(|r| r.ok().flatten())
        .map(|t| t.duration_since(sent));
    stop.store(true, Ordering::Relaxed);
    let _ = kubelets.await;
    let (rss, hwm) = (
        nodemedic_tests::process::status_mib(pid, "VmRSS:"),
        nodemedic_tests::process::status_mib(pid, "VmHWM:"),
    );
    drop(drainer);

    let cp99 = p99(&to_cordon);
    let (cmin, cmed, cmax) = stats(to_cordon);
    let (dmin, dmed, dmax) = stats(to_drained);
    println!(
        "\n{count} nodes / {} pods, {}, this machine, drainer with MALLOC_ARENA_MAX={}",
        count * PODS_PER_NODE,
        backend.describe(),
        std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "1".into())
    );
    println!("| | draino (issue 13) | nodemedic drainer |");
    println!("|---|---|---|");
    println!(
        "| RSS after sync | 125-160 MB | {rss_synced:.1} MiB (peak while listing {hwm_synced:.1} MiB, {:.2}x; end {rss:.1} MiB, peak {hwm:.1} MiB) |",
        hwm_synced / rss_synced.max(0.1)
    );
    for kind in KINDS {
        let runs: Vec<&fleet::Steady> = steady.iter().filter(|s| s.kind == kind).collect();
        let (smin, smed, smax) = stats(runs.iter().map(|s| s.per_update_us).collect());
        let each: Vec<String> = runs
            .iter()
            .map(|s| {
                format!(
                    "{:.0} us: {} updates in {:.0} s, idle {:.2} ms CPU/s",
                    s.per_update_us, s.updates, s.secs, s.idle_ms_per_s
                )
            })
            .collect();
        println!(
            "| CPU per node update, steady {STEADY_RATE}/s, {} (each alone; idle subtracted) | 574-960 us | min {smin:.0} / median {smed:.0} / max {smax:.0} us ({} runs: {}) |",
            kind.describe(),
            runs.len(),
            each.join("; ")
        );
    }
    println!(
        "| CPU per node update, 4 writers as fast as they go (updates share rounds) | - | {per_update_us:.0} us ({updates} updates in 20 s) |"
    );
    println!(
        "| at {KUBELET_RATE} node updates/s | - | {:.1}% of a core |",
        core_share * 100.0
    );
    println!(
        "| condition set -> cordon, under {STEADY_RATE} heartbeats/s | 23 ms median | min {cmin:.0} / median {cmed:.0} / P99 {cp99:.0} / max {cmax:.0} ms ({samples_n} samples, {} cordoned) |",
        samples_n - missed
    );
    println!(
        "| cordon -> drain done, 10 pods, under {STEADY_RATE} heartbeats/s | 15.4 s | min {dmin:.0} / median {dmed:.0} / max {dmax:.0} ms |"
    );
    timed.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest: Vec<String> = (timed.iter().take(5))
        .map(|(ms, n, at)| format!("{ms:.0} ms {n} sent {}", at.strftime("%H:%M:%S%.3fZ")))
        .collect();
    println!(
        "| the slowest condition -> cordon samples | - | {} |",
        slowest.join("; ")
    );
    println!(
        "| {burst_n} nodes bad at once | all 50, last after 84 s | {} |",
        burst_done
            .map(|d| format!("all {burst_n} cordoned in {d:.2?}"))
            .unwrap_or_else(|| "not all within 60 s".into())
    );
    println!("| API requests per cordon+drain | 32-34 | {per_drain:.1} |");
}
