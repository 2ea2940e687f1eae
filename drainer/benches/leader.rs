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
//! The drainer is started `NODEMEDIC_LEADER_REPEATS` times (default 3) on the same fleet, each time
//! with no Lease held and 20 other nodes newly bad; the table gives min / median / max, and a goal
//! is met only if every start met it.
//!
//! `cargo bench -p nodemedic-drainer --bench leader` (about 27 minutes to create the fixture on this
//! 2-core machine's test API server, half that with waiting pods, which then holds some GiB).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
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
    /// Its peak RSS when it was ready (the lists').
    hwm_at_ready: Option<f64>,
    /// RSS, peak RSS and CPU seconds 2 s after the watch ended.
    rss: f64,
    hwm: f64,
    cpu_after: f64,
    /// Bad nodes it had not cordoned when the watch ended.
    not_cordoned: usize,
}

impl Seen {
    fn done(&self) -> bool {
        self.ready.is_some() && self.all_decided.is_some() && self.last_cordon.is_some()
    }

    /// One start's figures, as it ends.
    fn line(&self) -> String {
        format!(
            "ready {}, first decision {}, every node decided {}, cordoned {} to {} ({} not), RSS {:.1} MiB (peak {:.1})",
            secs(self.ready),
            secs(self.first_decision),
            secs(self.all_decided),
            secs(self.first_cordon),
            secs(self.last_cordon),
            self.not_cordoned,
            self.rss,
            self.hwm
        )
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
    let repeats = match std::env::var("NODEMEDIC_LEADER_REPEATS")
        .ok()
        .map(|s| s.parse::<usize>())
    {
        None => 3,
        Some(Ok(n)) if (1..=10).contains(&n) => n,
        Some(_) => {
            eprintln!("NODEMEDIC_LEADER_REPEATS must be a number from 1 to 10");
            std::process::exit(2);
        }
    };
    let client = backend.client();
    let nodes: Api<Node> = Api::all(client.clone());
    // Each start its own bad nodes (spread over the fleet), so every start has BAD to cordon.
    let bad = |run: usize| -> Vec<String> {
        (0..BAD)
            .map(|k| fleet::name((11 + run + k * (count / BAD)) % count))
            .collect()
    };

    let t0 = Instant::now();
    fleet::create(&client, count, &HashSet::new(), fleet::PodState::from_env()).await;
    println!(
        "fixture: {count} kubelet-shaped nodes and {} ReplicaSet pods ({:?}) created on {} in {:.0?}",
        count * PODS_PER_NODE,
        fleet::PodState::from_env(),
        backend.describe(),
        t0.elapsed()
    );

    let mut runs = Vec::new();
    for run in 0..repeats {
        let bad = bad(run);
        for n in &bad {
            fleet::mark_bad(&nodes, n).await;
        }
        // The last leader's Lease ran out (it was killed): deleted, as its expiry would leave it
        // to be taken.
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        let _ = leases
            .delete("nodemedic-drainer", &DeleteParams::default())
            .await;
        let seen = start_once(&backend, &nodes, count, bad).await;
        println!("start {}: {}", run + 1, seen.line());
        runs.push(seen);
    }

    println!(
        "\n{count} nodes / {} pods, {}, this machine, drainer with MALLOC_ARENA_MAX={}; {repeats} starts on the same fleet (min / median / max)",
        count * PODS_PER_NODE,
        backend.describe(),
        std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "1".into())
    );
    println!("| from the drainer's start | goal | nodemedic drainer |");
    println!("|---|---|---|");
    let spread = |f: &dyn Fn(&Seen) -> Option<f64>, unit: &str| -> String {
        let mut v: Vec<f64> = runs.iter().filter_map(f).collect();
        if v.len() < runs.len() {
            return format!(
                "not seen in {} of {} starts",
                runs.len() - v.len(),
                runs.len()
            );
        }
        v.sort_by(f64::total_cmp);
        format!(
            "{:.1} / {:.1} / {:.1}{unit}",
            v[0],
            v[v.len() / 2],
            v[v.len() - 1]
        )
    };
    let worst = |f: &dyn Fn(&Seen) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = runs.iter().filter_map(f).collect();
        (v.len() == runs.len()).then(|| v.into_iter().fold(0.0, f64::max))
    };
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    println!(
        "| ready (caches synced, Lease held) | - | {} (the drainer's CPU by then: {}) |",
        spread(&|s| secs(s.ready), " s"),
        spread(&|s| s.cpu_at_ready, " s")
    );
    let first = worst(&|s| secs(s.first_decision));
    println!(
        "| first decision (the first round's decisions counted) | <= {} s ({}) | {} |",
        GOAL_FIRST_DECISION.as_secs(),
        met(first.is_some_and(|f| f <= GOAL_FIRST_DECISION.as_secs_f64())),
        spread(&|s| secs(s.first_decision), " s")
    );
    println!(
        "| every node decided | - | {} (the drainer's CPU 2 s later: {}) |",
        spread(&|s| secs(s.all_decided), " s"),
        spread(&|s| Some(s.cpu_after), " s")
    );
    println!(
        "| {BAD} nodes bad before the start: first / last cordoned | - | {}; {} |",
        spread(&|s| secs(s.first_cordon), " s"),
        spread(&|s| secs(s.last_cordon), " s"),
    );
    let rss = worst(&|s| Some(s.rss));
    println!(
        "| RSS 2 s after ready (peak when ready; peak) | <= {GOAL_RSS_MIB:.0} MiB ({}) | {} ({}; {}) |",
        met(rss.is_some_and(|r| r <= GOAL_RSS_MIB)),
        spread(&|s| Some(s.rss), " MiB"),
        spread(&|s| s.hwm_at_ready, " MiB"),
        spread(&|s| Some(s.hwm), " MiB")
    );
}

fn met(ok: bool) -> &'static str {
    if ok { "met in every start" } else { "NOT met" }
}

/// Start the drainer with no Lease held and watch it until it is ready, has decided every node
/// and cordoned the `bad` ones (or [`GIVE_UP`]); then stop it.
async fn start_once(backend: &Backend, nodes: &Api<Node>, count: usize, bad: Vec<String>) -> Seen {
    let drainer = Drainer::start(backend);
    let (listen, pid, started) = (&drainer.listen, drainer.pid, drainer.started);
    // Each 50 ms: readiness, the decisions counted, and which bad nodes are cordoned.
    let mut seen = Seen::default();
    let mut uncordoned: Vec<String> = bad;
    while !seen.done() && started.elapsed() < GIVE_UP {
        let at = started.elapsed();
        if seen.ready.is_none() && fleet::readyz(listen) {
            seen.ready = Some(at);
            seen.cpu_at_ready = Some(nodemedic_tests::process::cpu_seconds(pid));
            seen.hwm_at_ready = Some(nodemedic_tests::process::status_mib(pid, "VmHWM:"));
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
    seen.rss = nodemedic_tests::process::status_mib(pid, "VmRSS:");
    seen.hwm = nodemedic_tests::process::status_mib(pid, "VmHWM:");
    seen.cpu_after = nodemedic_tests::process::cpu_seconds(pid);
    seen.not_cordoned = uncordoned.len();
    seen
}
