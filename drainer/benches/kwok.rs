//! The drainer on a KWOK fleet on a real kube-apiserver, measured as NVSentinel published its figures
//! at 50,000 KWOK nodes (cordon P50 26 ms, P99 165 ms; a 500-node burst 3.5 s to quarantine, 52 s to
//! drained: `../shared/reference/anchors.md`):
//!
//! - KWOK (`sigs.k8s.io/kwok`, `build/kubernetes.sh` builds it; `nodemedic_tests::kwok`) plays every
//!   kubelet: it makes the nodes Ready, renews their Leases and writes their status, and finishes
//!   the pods the drainer evicts. The nodes are the other benches' kubelet-shaped fixture;
//! - the drainer as `scale` runs it (`drainer run KernelDeadlock=True`, the shipped build,
//!   `NODEMEDIC_DRAINER_BIN` for another; no drain buffer, 1,000 cordons and 100 drains in flight);
//! - condition -> cordon: `NODEMEDIC_KWOK_SAMPLES` nodes (default 101) turned bad one after another,
//!   each timed from the condition's PATCH to the cordon seen by a watch: P50 and P99;
//! - a burst of `NODEMEDIC_KWOK_BURST` (default 500) nodes turned bad at once: time until all are
//!   cordoned, and until all are drained (10 pods each, which KWOK finishes);
//! - a new leader: the drainer killed, its Lease gone (as when it runs out), 20 more nodes bad, a
//!   new drainer started: time to ready, and to its first cordon;
//! - the drainer's RSS after sync and at the end, and its peak.
//!
//! `NODEMEDIC_KWOK_NODES` (default 5,000; 50,000 on demand) nodes; each has 10 ReplicaSet pods up
//! to 5,000 nodes, beyond that only the nodes that are drained do (50,000 nodes with 500,000 pods do
//! not fit this machine). KWOK's Leases last `NODEMEDIC_KWOK_LEASE` seconds (default 40, as
//! kubelets': renewed every 10 s).
//!
//! `build/kubernetes.sh && cargo bench -p nodemedic-drainer --bench kwok`

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::watcher;
use nodemedic_tests::bench::{Backend, Drainer, count_from_env};
use nodemedic_tests::envtest::{self, ControlPlane};
use nodemedic_tests::fleet::{self, PODS_PER_NODE};
use nodemedic_tests::kwok::{self, Heartbeat, Kwok};
use tokio::sync::Notify;

/// Above this many nodes only the drained nodes have pods.
const PODS_UP_TO: usize = 5_000;
/// Nodes turned bad before the new leader starts.
const LEADER_BAD: usize = 20;

/// When a watch over every node first saw each node cordoned, and its record say drained.
#[derive(Default)]
struct Seen {
    cordoned: HashMap<String, Instant>,
    drained: HashMap<String, Instant>,
}

/// One watch over all nodes for the whole bench, recording first sightings.
fn watch_all(nodes: Api<Node>) -> (Arc<Mutex<Seen>>, Arc<Notify>) {
    let (seen, notify) = (
        Arc::new(Mutex::new(Seen::default())),
        Arc::new(Notify::new()),
    );
    let (s, n) = (seen.clone(), notify.clone());
    tokio::spawn(async move {
        let stream = watcher::watcher(nodes, watcher::Config::default());
        futures::pin_mut!(stream);
        while let Ok(Some(ev)) = stream.try_next().await {
            if let watcher::Event::Apply(node) | watcher::Event::InitApply(node) = ev {
                let name = node.metadata.name.clone().unwrap_or_default();
                let now = Instant::now();
                let mut seen = s.lock().unwrap();
                if fleet::cordoned(&node) {
                    seen.cordoned.entry(name.clone()).or_insert(now);
                }
                if fleet::record_phase(&node).as_deref() == Some("drained") {
                    seen.drained.entry(name).or_insert(now);
                }
                drop(seen);
                n.notify_waiters();
            }
        }
    });
    (seen, notify)
}

/// Wait until `done` holds of what the watch saw (None after `timeout`).
async fn until<T>(
    seen: &Mutex<Seen>,
    notify: &Notify,
    timeout: Duration,
    done: impl Fn(&Seen) -> Option<T>,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let woken = notify.notified();
        if let Some(v) = done(&seen.lock().unwrap()) {
            return Some(v);
        }
        tokio::time::timeout_at(deadline, woken).await.ok()?;
    }
}

/// Nearest rank.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 * p).ceil() as usize).max(1);
    sorted.get(rank - 1).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let (Some(assets), Some(binary)) = (envtest::assets(), kwok::binary()) else {
        envtest::say_skipped(
            "the kwok bench",
            "KWOK and a real kube-apiserver (build/kubernetes.sh)",
        );
        return;
    };
    let count = count_from_env("NODEMEDIC_KWOK_NODES", 5_000, 100_000);
    // At most a quarter of the fleet each (the breaker opens at a fifth newly bad within 5 minutes).
    let quarter = (count / 4).max(1);
    let samples_n = count_from_env("NODEMEDIC_KWOK_SAMPLES", 101, quarter).min(quarter);
    let burst_n = count_from_env("NODEMEDIC_KWOK_BURST", 500, quarter).min(quarter);
    let lease = count_from_env("NODEMEDIC_KWOK_LEASE", 40, 3_600) as u32;

    // The shipped build first (about 12 minutes the first time), before the fleet loads the machine.
    if std::env::var_os("NODEMEDIC_DRAINER_BIN").is_none() {
        nodemedic_tests::bins::shipped_drainer();
    }
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(&assets, None)));
    let backend = Backend::Real(plane);
    let client = backend.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let kwok = Kwok::start(&binary, plane, Heartbeat::Lease(lease));

    // Which nodes are sampled, which burst, which go bad before the new leader: apart, spread over
    // the fleet.
    let spread = |k: usize, of: usize, offset: usize| (offset + k * (count / of)) % count;
    let samples: Vec<usize> = (0..samples_n).map(|k| spread(k, samples_n, 7)).collect();
    let mut taken: HashSet<usize> = samples.iter().copied().collect();
    let mut pick = |of: usize, offset: usize| -> Vec<usize> {
        (0..of)
            .map(|k| {
                let mut i = spread(k, of, offset);
                while !taken.insert(i) {
                    i = (i + 1) % count;
                }
                i
            })
            .collect()
    };
    let burst = pick(burst_n, 13);
    let leader_bad = pick(LEADER_BAD, 17);
    let with_pods: HashSet<usize> = if count <= PODS_UP_TO {
        (0..count).collect()
    } else {
        samples
            .iter()
            .chain(&burst)
            .chain(&leader_bad)
            .copied()
            .collect()
    };

    let t0 = Instant::now();
    fleet::create_for_kwok(&client, count, &with_pods).await;
    let created = t0.elapsed();
    // KWOK makes them Ready.
    loop {
        kwok.assert_alive();
        let list = nodes
            .list_metadata(&ListParams::default())
            .await
            .map(|l| l.items.len());
        let ready = nodes
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|n| {
                        nodemedic_common::conditions::find(n, "Ready")
                            .is_some_and(|c| c.status == "True")
                    })
                    .count()
            })
            .unwrap_or(0);
        if list.is_ok_and(|n| n == count) && ready == count {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3_600),
            "KWOK did not make {count} nodes Ready in an hour ({ready} Ready): {}",
            kwok.log()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!(
        "fixture: {count} kubelet-shaped nodes (KWOK's, Leases of {lease} s) and {} ReplicaSet pods on {}: created in {:.0?}, all Ready after {:.0?}",
        with_pods.len() * PODS_PER_NODE,
        backend.describe(),
        created,
        t0.elapsed()
    );

    let (seen, notify) = watch_all(nodes.clone());
    let drainer = Drainer::start(&backend);
    let (listen, pid) = (drainer.listen.clone(), drainer.pid);
    assert!(
        fleet::wait_ready(&client, &listen, Duration::from_secs(600)).await,
        "the drainer was not ready in 10 minutes"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_synced = nodemedic_tests::process::status_mib(pid, "VmRSS:");
    let hwm_synced = nodemedic_tests::process::status_mib(pid, "VmHWM:");

    // Condition -> cordon, one node after another.
    let mut to_cordon = Vec::new();
    for &i in &samples {
        let n = fleet::name(i);
        let sent = Instant::now();
        fleet::mark_bad(&nodes, &n).await;
        let at = until(&seen, &notify, Duration::from_secs(30), |s| {
            s.cordoned.get(&n).copied()
        })
        .await;
        match at {
            Some(at) => to_cordon.push(ms(at.duration_since(sent))),
            None => println!("{n}: not cordoned within 30 s"),
        }
    }
    to_cordon.sort_by(f64::total_cmp);

    // The burst.
    let names: Vec<String> = burst.iter().map(|&i| fleet::name(i)).collect();
    println!("burst: {burst_n} nodes turning bad at once");
    let sent = Instant::now();
    futures::stream::iter(names.iter().cloned())
        .map(|n| {
            let nodes = nodes.clone();
            async move { fleet::mark_bad(&nodes, &n).await }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    let last = |of: fn(&Seen) -> &HashMap<String, Instant>| {
        let names = names.clone();
        move |s: &Seen| {
            let map = of(s);
            names
                .iter()
                .map(|n| map.get(n).copied())
                .collect::<Option<Vec<Instant>>>()
                .and_then(|v| v.into_iter().max())
        }
    };
    let burst_cordoned = until(
        &seen,
        &notify,
        Duration::from_secs(120),
        last(|s| &s.cordoned),
    )
    .await
    .map(|t| t.duration_since(sent));
    let burst_drained = until(
        &seen,
        &notify,
        Duration::from_secs(600),
        last(|s| &s.drained),
    )
    .await
    .map(|t| t.duration_since(sent));
    let (rss, hwm) = (
        nodemedic_tests::process::status_mib(pid, "VmRSS:"),
        nodemedic_tests::process::status_mib(pid, "VmHWM:"),
    );

    // A new leader: the old one gone and its Lease with it, nodes gone bad meanwhile.
    drop(drainer);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let _ = leases
        .delete("nodemedic-drainer", &DeleteParams::default())
        .await;
    let bad: Vec<String> = leader_bad.iter().map(|&i| fleet::name(i)).collect();
    for n in &bad {
        fleet::mark_bad(&nodes, n).await;
    }
    let drainer = Drainer::start(&backend);
    let started = drainer.started;
    let ready = fleet::wait_ready(&client, &drainer.listen, Duration::from_secs(600))
        .await
        .then(|| started.elapsed());
    let first_cordon = until(&seen, &notify, Duration::from_secs(600), |s| {
        bad.iter().filter_map(|n| s.cordoned.get(n)).min().copied()
    })
    .await
    .map(|t| t.duration_since(started));
    drop(drainer);
    drop(kwok);

    let fmt = |d: Option<Duration>| {
        d.map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "not seen".into())
    };
    println!(
        "\n{count} KWOK nodes, {} pods, {}, this machine (2 cores)",
        with_pods.len() * PODS_PER_NODE,
        backend.describe()
    );
    println!("| | NVSentinel (50,000 KWOK nodes, published) | nodemedic drainer |");
    println!("|---|---|---|");
    println!(
        "| condition -> cordon | P50 26 ms, P99 165 ms | P50 {:.0} ms, P99 {:.0} ms (min {:.0}, max {:.0}; {} of {samples_n} cordoned) |",
        percentile(&to_cordon, 0.5),
        percentile(&to_cordon, 0.99),
        to_cordon.first().copied().unwrap_or(f64::NAN),
        to_cordon.last().copied().unwrap_or(f64::NAN),
        to_cordon.len()
    );
    println!(
        "| {burst_n} nodes bad at once: all cordoned | 3.5 s | {} |",
        fmt(burst_cordoned)
    );
    println!(
        "| {burst_n} nodes bad at once: all drained ({PODS_PER_NODE} pods each, 100 drains in flight) | 52 s | {} |",
        fmt(burst_drained)
    );
    println!(
        "| a new leader: ready, first cordon ({LEADER_BAD} nodes bad) | - | {}, {} |",
        fmt(ready),
        fmt(first_cordon)
    );
    println!(
        "| RSS after sync (peak while listing), at the end (peak) | - | {rss_synced:.1} MiB ({hwm_synced:.1}), {rss:.1} MiB ({hwm:.1}) |"
    );
}
