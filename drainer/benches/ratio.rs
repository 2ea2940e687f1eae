//! What the drainer costs per node update beside a bare Node watch, measured in one run: the
//! drainer (`drainer run` as the benches run it: CEL selection, KernelDeadlock) and the floor
//! (`examples/watch_floor.rs`: the drainer's client and kube's watcher reading each event's name and
//! resourceVersion, nothing more), both built with the drainer's cargo profile without PGO, both
//! watching one API server at once and so receiving the same updates, one every 50 ms, each kind
//! in 30 s windows with an idle baseline before them subtracted; CPU from each thread's schedstat.
//! The figure is the ratio of the two in the same window (this machine moves an absolute figure by
//! 2x between runs, a ratio of one run much less): heartbeats, a label the selector does not read,
//! Ready's reason. Targets (issue 65): at most 1.3x, 1.3x and 1.6x, medians of 3 windows.
//!
//! `cargo bench -p nodemedic-drainer --bench ratio` (`NODEMEDIC_SCALE_NODES`, default 2,000;
//! `NODEMEDIC_SCALE_REPEATS`, default 3; `NODEMEDIC_DRAINER_BIN` for another drainer build;
//! `KUBEBUILDER_ASSETS` for a real control plane).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodemedic_tests::bench::{
    Backend, KillOnDrop, count_from_env, die_with_parent, free_port, node_fleet, start_watch_floor,
};
use nodemedic_tests::fleet::{self, Steady, Update};

/// One update every 50 ms, as the scale bench's steady phase.
const RATE: f64 = 20.0;
const WINDOW: Duration = Duration::from_secs(30);
/// Each kind measured, with its target ratio.
const KINDS: [(Update, f64); 3] = [
    (Update::Heartbeat, 1.3),
    (Update::UnreadLabelChange, 1.3),
    (Update::ReadyChange, 1.6),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let count = count_from_env("NODEMEDIC_SCALE_NODES", 2_000, 100_000);
    let repeats = count_from_env("NODEMEDIC_SCALE_REPEATS", 3, 20);
    let floor_exe = nodemedic_tests::bins::drainer_example("watch_floor");
    let drainer_exe = std::env::var_os("NODEMEDIC_DRAINER_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(nodemedic_tests::bins::drainer_unprofiled);
    let (backend, _dir, kubeconfig) = node_fleet("ratio", count).await;
    let client = backend.client();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut cmd = fleet::drainer_command(&drainer_exe, &kubeconfig, &listen);
    die_with_parent(&mut cmd);
    let drainer = KillOnDrop(cmd.spawn().expect("the drainer starts"));
    assert!(
        fleet::wait_ready(&client, &listen, Duration::from_secs(600)).await,
        "the drainer was not ready in 10 minutes"
    );
    let (floor, _) = start_watch_floor(&floor_exe, &kubeconfig).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let meters = [
        nodemedic_tests::process::CpuMeter::start(drainer.0.id()),
        nodemedic_tests::process::CpuMeter::start(floor.0.id()),
    ];
    let nodes: Api<Node> = Api::all(client.clone());
    let kinds: Vec<Update> = KINDS.iter().map(|(k, _)| *k).collect();
    let runs = fleet::side_by_side(
        &nodes,
        count,
        RATE,
        &kinds,
        &[&meters[0], &meters[1]],
        WINDOW,
        repeats,
    )
    .await;
    drop((drainer, floor));
    report(
        count,
        &backend,
        (&drainer_exe, &floor_exe),
        &runs[0],
        &runs[1],
    );
}

fn report(
    count: usize,
    backend: &Backend,
    (drainer, floor): (&std::path::Path, &std::path::Path),
    mine: &[Steady],
    bare: &[Steady],
) {
    println!(
        "\n{count} nodes, {}, this machine; drainer {} beside the bare watch {} (both the `drainer` profile, no PGO, MALLOC_ARENA_MAX=1), receiving the same updates at {RATE}/s",
        backend.describe(),
        drainer.display(),
        floor.display()
    );
    println!(
        "| kind | drainer / bare watch, each window | median (target) | drainer; bare watch, medians |"
    );
    println!("|---|---|---|---|");
    for (kind, target) in KINDS {
        let pairs: Vec<(f64, f64)> = (mine.iter().zip(bare))
            .filter(|(m, _)| m.kind == kind)
            .map(|(m, b)| (m.per_update_us, b.per_update_us))
            .collect();
        let ratios: Vec<f64> = pairs.iter().map(|(m, b)| m / b.max(1e-9)).collect();
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}x")).collect();
        let r = median(ratios.clone());
        let met = if r <= target { "met" } else { "NOT met" };
        println!(
            "| {} | {} | **{r:.2}x** ({target}x: {met}) | {:.0} us; {:.0} us |",
            kind.describe(),
            each.join(" / "),
            median(pairs.iter().map(|p| p.0).collect()),
            median(pairs.iter().map(|p| p.1).collect()),
        );
    }
}
