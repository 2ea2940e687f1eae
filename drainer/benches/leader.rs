//! A new leader on the largest cluster Kubernetes supports: 65,000 kubelet-shaped Nodes and 650,000
//! ReplicaSet Pods (`NODEMEDIC_LEADER_NODES` for another size), some nodes already bad (KernelDeadlock
//! set before the drainer starts), on a real control plane when `KUBEBUILDER_ASSETS` names one, else
//! on the test API server (it says which). The drainer starts with no Lease held (a restart or a
//! failover after the old Lease ran out: it lists everything, takes the Lease, and decides every
//! node), the way `scale` starts it (`NODEMEDIC_DRAINER_BIN` for another build).
//!
//! Prints, from the drainer's start: ready (caches synced, Lease held); its first round done (the
//! first decisions counted in `nodemedic_drainer_node_decisions`) and every node decided (rounds
//! start once the nodes are listed: these may come before the pods are); the bad nodes' first and
//! last cordon; RSS 2 s after ready, both lists in (and its peak while listing). Goals (issue 39):
//! the first decision within 15 s, RSS after sync at most 256 MiB.
//!
//! The pods run (`NODEMEDIC_BENCH_PODS=waiting`: all waiting to start, as in `scale`).
//!
//! `cargo bench -p nodemedic-drainer --bench leader` (about 27 minutes to create the fixture on this
//! 2-core machine's test API server, half that with waiting pods, which then holds some GiB).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodemedic_tests::bench::{Backend, Drainer};
use nodemedic_tests::fleet::{self, PODS_PER_NODE};

/// Nodes already bad when the drainer starts (spread over the fleet).
const BAD: usize = 20;
const GOAL_FIRST_DECISION: Duration = Duration::from_secs(15);
const GOAL_RSS_MIB: f64 = 256.0;
/// How long the drainer is given before the bench gives up on it.
const GIVE_UP: Duration = Duration::from_secs(600);

/// What was seen since the drainer started, and when.
#[derive(Default)]
struct Seen {
    ready: Option<Duration>,
    /// The drainer's own CPU time (user + system) when it was ready: what listing cost it, apart
    /// from what the API server took to answer.
    cpu_at_ready: Option<f64>,
    first_decision: Option<Duration>,
    all_decided: Option<Duration>,
    first_cordon: Option<Duration>,
    last_cordon: Option<Duration>,
}

impl Seen {
    fn done(&self) -> bool {
        self.ready.is_some() && self.all_decided.is_some() && self.last_cordon.is_some()
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.1} s", d.as_secs_f64()))
        .unwrap_or_else(|| "not seen".into())
}

#[tokio::main]
async fn main() {
    let backend = Backend::start("leader").await;
    let count = match std::env::var("NODEMEDIC_LEADER_NODES")
        .ok()
        .map(|s| s.parse::<usize>())
    {
        None => 65_000,
        Some(Ok(n)) if (BAD..=100_000).contains(&n) => n,
        Some(_) => {
            eprintln!("NODEMEDIC_LEADER_NODES must be a number from {BAD} to 100000");
            std::process::exit(2);
        }
    };
    let client = backend.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let bad: Vec<String> = (0..BAD)
        .map(|k| fleet::name(11 + k * (count / BAD)))
        .collect();

    let t0 = Instant::now();
    fleet::create(&client, count, &HashSet::new(), fleet::PodState::from_env()).await;
    for n in &bad {
        fleet::mark_bad(&nodes, n).await;
    }
    println!(
        "fixture: {count} kubelet-shaped nodes ({BAD} of them bad) and {} ReplicaSet pods ({:?}) created on {} in {:.0?}",
        count * PODS_PER_NODE,
        fleet::PodState::from_env(),
        backend.describe(),
        t0.elapsed()
    );

    let drainer = Drainer::start(&backend);
    let (listen, pid, started) = (&drainer.listen, drainer.pid, drainer.started);

    // Each 50 ms: readiness, the decisions counted, and which bad nodes are cordoned.
    let mut seen = Seen::default();
    let mut uncordoned: Vec<String> = bad.clone();
    let mut hwm_at_ready = None;
    while !seen.done() && started.elapsed() < GIVE_UP {
        let at = started.elapsed();
        if seen.ready.is_none() && fleet::readyz(listen) {
            seen.ready = Some(at);
            seen.cpu_at_ready = Some(nodemedic_tests::process::cpu_seconds(pid));
            hwm_at_ready = Some(nodemedic_tests::process::status_mib(pid, "VmHWM:"));
        }
        let metrics = nodemedic_tests::try_http_get(&format!("http://{listen}/metrics"))
            .await
            .unwrap_or_default();
        let decided =
            nodemedic_tests::bench::metric_sum(&metrics, "nodemedic_drainer_node_decisions");
        if decided > 0.0 && seen.first_decision.is_none() {
            seen.first_decision = Some(at);
        }
        if decided >= count as f64 && seen.all_decided.is_none() {
            seen.all_decided = Some(at);
        }
        let mut still = Vec::new();
        for n in uncordoned {
            match nodes.get_opt(&n).await {
                Ok(Some(node)) if fleet::cordoned(&node) => {
                    seen.first_cordon.get_or_insert(at);
                }
                _ => still.push(n),
            }
        }
        uncordoned = still;
        if uncordoned.is_empty() && seen.last_cordon.is_none() {
            seen.last_cordon = Some(at);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss = nodemedic_tests::process::status_mib(pid, "VmRSS:");
    let hwm = nodemedic_tests::process::status_mib(pid, "VmHWM:");
    let cpu = nodemedic_tests::process::cpu_seconds(pid);

    let goal = |d: Option<Duration>| match d {
        Some(d) if d <= GOAL_FIRST_DECISION => "met",
        _ => "NOT met",
    };
    println!(
        "\n{count} nodes / {} pods, {}, this machine, drainer with MALLOC_ARENA_MAX={}",
        count * PODS_PER_NODE,
        backend.describe(),
        std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "1".into())
    );
    println!("| from the drainer's start | goal | nodemedic drainer |");
    println!("|---|---|---|");
    println!(
        "| ready (caches synced, Lease held) | - | {} (the drainer's CPU by then: {}) |",
        secs(seen.ready),
        seen.cpu_at_ready
            .map(|c| format!("{c:.1} s"))
            .unwrap_or_else(|| "-".into())
    );
    println!(
        "| first decision (the first round's decisions counted) | <= {} s ({}) | {} |",
        GOAL_FIRST_DECISION.as_secs(),
        goal(seen.first_decision),
        secs(seen.first_decision)
    );
    println!(
        "| every node decided | - | {} (the drainer's CPU 2 s later: {cpu:.1} s) |",
        secs(seen.all_decided)
    );
    println!(
        "| {BAD} nodes bad before the start: first / last cordoned | - | {} / {} ({} not cordoned) |",
        secs(seen.first_cordon),
        secs(seen.last_cordon),
        uncordoned.len()
    );
    println!(
        "| RSS 2 s after ready (peak when ready; peak) | <= {GOAL_RSS_MIB:.0} MiB ({}) | {rss:.1} MiB ({}; {hwm:.1} MiB) |",
        if rss <= GOAL_RSS_MIB {
            "met"
        } else {
            "NOT met"
        },
        hwm_at_ready
            .map(|m| format!("{m:.1} MiB"))
            .unwrap_or_else(|| "not ready".into())
    );
}
