//! The record memory at the largest cluster Kubernetes supports (issue 64, point 2): 65,000
//! kubelet-shaped Nodes (`NODES` for another size), every one of them KernelDeadlock=True, and a
//! drainer whose budgets let it cordon them all, so each node carries one of its drain records and
//! has an entry in its memory. Kept on the Lease's annotations, 3,300 such entries passed the API
//! server's 256 KiB limit and the Lease was never renewed again. On a real control plane when
//! `KUBEBUILDER_ASSETS` names one, else on the test API server (it says which).
//!
//! Prints: when every node was cordoned and when the memory held every node; the memory's shards
//! (largest, total bytes); the Lease's annotations (bytes); and, sampled every second over the
//! whole run, the longest time between two renewals of the Lease and whether its holder ever
//! changed. Goals: every node remembered, the memory within its ConfigMaps (each under 1 MiB), and
//! the Lease renewed all along (no gap as long as its 15 s duration, one holder).
//!
//! `cargo bench -p nodemedic-drainer --bench memory` (`NODES=5000` for a quick look).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use nodemedic_tests::bench::{Backend, Drainer};
use nodemedic_tests::fleet;

/// How long the drainer is given before the bench gives up on it.
const GIVE_UP: Duration = Duration::from_secs(1800);
/// The drainer's Lease duration (`drainer run`'s default): a gap this long would lose it.
const LEASE_DURATION: Duration = Duration::from_secs(15);
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

#[tokio::main]
async fn main() {
    let n = nodemedic_tests::bench::nodes_from_env(65_000);
    let backend = Backend::start("memory").await;
    let client = backend.client();
    println!(
        "record memory bench: {n} nodes, all with a record, on {}",
        backend.describe()
    );
    let t = Instant::now();
    nodemedic_tests::drainer_objects(&client, "kube-system", "nodemedic-drainer", None).await;
    fleet::create_nodes(&client, n).await;
    let nodes: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..n)
        .map(|i| {
            let nodes = nodes.clone();
            async move { fleet::mark_bad(&nodes, &fleet::name(i)).await }
        })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
    println!("fixture: {:.0} s", t.elapsed().as_secs_f64());

    let all = n.to_string();
    let args = [
        "--drain-buffer=1h",
        "--max-cordoned",
        all.as_str(),
        "--max-unhealthy=100%",
        "--breaker-new=100%",
        "--domain-outage=100%",
        "--flap-threshold=0",
    ];
    let drainer = Drainer::start_with(&backend, Some(&args));
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let mut last_renew: Option<(Instant, String)> = None;
    let (mut longest_gap, mut holders) = (Duration::ZERO, std::collections::BTreeSet::new());
    let (mut all_cordoned, mut all_remembered) = (None, None);
    let mut shards = (0usize, 0usize);
    let mut lease_bytes = 0;
    let mut after_full = 0;
    while drainer.started.elapsed() < GIVE_UP {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(Some(l)) = leases.get_opt("nodemedic-drainer").await {
            let spec = l.spec.clone().unwrap_or_default();
            let renewed = spec.renew_time.map(|t| t.0.to_string()).unwrap_or_default();
            if let Some(h) = spec.holder_identity.filter(|h| !h.is_empty()) {
                holders.insert(h);
            }
            match &last_renew {
                Some((_, r)) if *r == renewed => {}
                _ => last_renew = Some((Instant::now(), renewed)),
            }
            if let Some((at, _)) = &last_renew {
                longest_gap = longest_gap.max(at.elapsed());
            }
            lease_bytes = l
                .metadata
                .annotations
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum();
        }
        if all_cordoned.is_none() {
            let list = nodes
                .list(&Default::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            if list.iter().filter(|x| fleet::cordoned(x)).count() >= n {
                all_cordoned = Some(drainer.started.elapsed());
            }
        }
        let (remembered, largest, total) = memory(&configmaps).await;
        shards = (largest, total);
        if all_remembered.is_none() && remembered >= n {
            all_remembered = Some(drainer.started.elapsed());
        }
        // Keep watching the Lease for a while once the memory is full.
        if all_remembered.is_some() {
            after_full += 1;
            if after_full >= 30 {
                break;
            }
        }
    }
    let secs =
        |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()));
    println!("every node cordoned: {}", secs(all_cordoned));
    println!("every node remembered: {}", secs(all_remembered));
    println!(
        "memory: largest shard {} bytes ({:.0}% of a ConfigMap), {} bytes in all",
        shards.0,
        100.0 * shards.0 as f64 / CONFIGMAP_LIMIT as f64,
        shards.1
    );
    println!("Lease annotations: {lease_bytes} bytes");
    println!(
        "Lease: longest time between renewals {:.1} s (duration {} s); holders {}",
        longest_gap.as_secs_f64(),
        LEASE_DURATION.as_secs(),
        holders.len()
    );
    let rss = nodemedic_tests::process::status_mib(drainer.pid, "VmRSS:");
    println!("drainer RSS: {rss:.1} MiB");
    let met = all_remembered.is_some()
        && shards.0 < CONFIGMAP_LIMIT
        && longest_gap < LEASE_DURATION
        && holders.len() == 1;
    println!(
        "goals (every node remembered, shards under 1 MiB, the Lease renewed by one holder): {}",
        if met { "met" } else { "NOT met" }
    );
}

/// How many nodes the memory's ConfigMaps hold, the largest shard's bytes and all shards' bytes.
async fn memory(configmaps: &Api<ConfigMap>) -> (usize, usize, usize) {
    let (mut nodes, mut largest, mut total) = (0, 0, 0);
    for i in 0..nodemedic_drainer::decide::fleet::seen::SHARDS {
        let name = nodemedic_drainer::act::recall::configmap_name("nodemedic-drainer", i);
        let Ok(Some(cm)) = configmaps.get_opt(&name).await else {
            continue;
        };
        let Some(text) = cm.data.and_then(|mut d| d.remove("memory")) else {
            continue;
        };
        largest = largest.max(text.len());
        total += text.len();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        nodes += v["nodes"].as_object().map_or(0, |m| m.len());
    }
    (nodes, largest, total)
}
