//! The floor under the scale bench's steady figure, measured the way that figure is: CPU per node
//! update of a process that watches every Node as the drainer does and does nothing with an event
//! but read its name and resourceVersion (`examples/watch_floor.rs`: the drainer's client, kube's
//! `watcher`, a current-thread runtime, built with the drainer's own cargo profile, no PGO). Each
//! update alone, one every 50 ms, on the same fleet and API server as the scale bench; an idle
//! baseline right before each window subtracted; 3 runs, min/median/max.
//!
//! What the drainer costs per update above this figure is its own work (decoding into its view,
//! the cache, the round); the figure itself is what the machine, HTTP and kube's watch stream take.
//! The `wakeup` bench is the floor under this one: being woken and reading the bytes, nothing more.
//!
//! `cargo bench -p nodemedic-drainer --bench watch_floor` (`NODEMEDIC_SCALE_NODES`, default 2,000;
//! `NODEMEDIC_SCALE_REPEATS`, default 3; `KUBEBUILDER_ASSETS` for a real control plane).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodemedic_tests::bench::{count_from_env, node_fleet, start_watch_floor};
use nodemedic_tests::fleet::{self, Update};

/// One update every 50 ms, as the scale bench's steady phase.
const STEADY_RATE: f64 = 20.0;
/// Each idle and steady window (the watcher has no periodic work to average out).
const MEASURE: Duration = Duration::from_secs(30);
/// The kinds measured: to a process that decodes nothing, a state change is a heartbeat.
const KINDS: [Update; 2] = [Update::Heartbeat, Update::ReadyChange];

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

#[tokio::main]
async fn main() {
    let count = count_from_env("NODEMEDIC_SCALE_NODES", 2_000, 100_000);
    let repeats = count_from_env("NODEMEDIC_SCALE_REPEATS", 3, 20);
    let exe = match std::env::var_os("NODEMEDIC_FLOOR_BIN") {
        Some(p) => p.into(),
        None => nodemedic_tests::bins::drainer_example("watch_floor"),
    };
    let (backend, _dir, kubeconfig) = node_fleet("watch_floor", count).await;
    let client = backend.client();
    let (child, synced) = start_watch_floor(&exe, &kubeconfig).await;
    let pid = child.0.id();
    println!("watcher {} (pid {pid}): {synced}", exe.display());
    tokio::time::sleep(Duration::from_secs(2)).await;

    let nodes: Api<Node> = Api::all(client.clone());
    let meter = nodemedic_tests::process::CpuMeter::start(pid);
    let runs =
        fleet::steady_cpu(&nodes, count, STEADY_RATE, &KINDS, &meter, MEASURE, repeats).await;
    drop(child);

    println!(
        "\n{count} nodes, {}, this machine; a Node watch that reads each event's name and resourceVersion only ({}, MALLOC_ARENA_MAX=1)",
        backend.describe(),
        exe.display()
    );
    println!(
        "| CPU per node update, steady {STEADY_RATE}/s, each alone, idle subtracted | the floor |"
    );
    println!("|---|---|");
    for kind in KINDS {
        let mine: Vec<_> = runs.iter().filter(|r| r.kind == kind).collect();
        let (min, med, max) = stats(mine.iter().map(|r| r.per_update_us).collect());
        let each: Vec<String> = (mine.iter())
            .map(|r| {
                format!(
                    "{:.0} us: {} updates, idle {:.2} ms CPU/s",
                    r.per_update_us, r.updates, r.idle_ms_per_s
                )
            })
            .collect();
        println!(
            "| {} | min {min:.0} / median {med:.0} / max {max:.0} us ({} runs: {}) |",
            kind.describe(),
            mine.len(),
            each.join("; ")
        );
    }
}
