//! `drainer simulate`: replay a fleet scenario through the real controller, over a cluster in
//! memory ([`MemoryCluster`]) on paused tokio time, and say what the drainer did at each step. The
//! controller, the executor and the decisions are the ones `drainer run` uses; only the API server
//! is stood in for (each node has one pod, which goes `drainTakes` after its eviction, and the
//! pods its group names: owned by a kind, protected by a PDB, finishing at a time), so a
//! scenario and the running drainer cannot diverge. Hours of a fleet of thousands run in seconds.
//! I/O-free (the report is printed by the caller).
//!
//! A scenario is YAML:
//!
//! ```yaml
//! description: a zone goes dark
//! args: ["Ready=Unknown,5m", "--max-cordoned=10%"]     # drainer flags, as for `drainer run`
//! nodes:
//!   - {count: 5000, name: "node-{i}", labels: {topology.kubernetes.io/zone: "zone-{i%10}"}}
//! tick: 10s                  # the controller's tick (default 10s)
//! drainTakes: 1m             # how long a node's pod takes to go once evicted (default 1m)
//! duration: 40m
//! steps:
//!   - at: 1m
//!     nodes: {label: "outage=yes"}   # a label selector (as --node-selector), and/or names, count
//!     set: Ready=Unknown     # or a list, alternated `times` times every `every`
//! expect:
//!   breakerOpenWithin: 10s   # of the first step
//!   drainsAtMost: 0
//! ```
//!
//! ```text
//!  scenario  the YAML, and the plan it makes (settings, nodes, changes in time order)
//!  report    the controller's taps tallied, the expectations checked, the text printed
//! ```

#[cfg(test)]
mod format;
pub mod history;
pub(crate) mod reboots;
pub mod report;
pub mod scenario;
pub(crate) mod timeline;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use tokio::sync::{mpsc, watch};

use crate::act::Executor;
use crate::act::memory::MemoryCluster;
use crate::controller::{Controller, DEBOUNCE};
use crate::model::cluster::Gated;
use crate::observe::Observed;
use crate::record::Recorder;
pub use report::{Report, print, print_from};
pub use scenario::{Plan, Scenario, SimError, parse};

/// Run `scenario` starting at `start`, and check its expectations.
pub(crate) fn run(file: &str, scenario: &Scenario, start: Timestamp) -> Result<Report, SimError> {
    let mut plan = Plan::of(file, scenario, start)?;
    let mut report = run_plan(&mut plan)?;
    report::check(file, scenario, &plan, &mut report)?;
    Ok(report)
}

/// Run `plan` (a scenario's, or a recorded history's) through the controller.
pub(crate) fn run_plan(plan: &mut Plan) -> Result<Report, SimError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(SimError::Runtime)?;
    Ok(runtime.block_on(drive(plan)))
}

/// The one pod of a simulated node (owned by a ReplicaSet, so a drain evicts it).
fn pod_of(node: &Node) -> Pod {
    let node = node.metadata.name.as_deref().unwrap_or_default();
    let pod = serde_json::json!({
        "metadata": {"name": format!("{node}-app"), "namespace": "default", "uid": format!("uid-{node}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app",
                "uid": "uid-app", "controller": true}]},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Running"},
    });
    serde_json::from_value(pod).unwrap_or_default()
}

/// What happens to the simulated fleet at a time.
enum Happens {
    /// The plan's change with this index.
    Set(usize),
    /// A node's detector stops (false) or starts (true).
    Detector(usize, bool),
    /// Every running detector refreshes its heartbeats.
    Beat,
    /// The pod `plan.finishing[i]` finishes.
    Finish(usize),
}

/// The changes, the detectors stopping and starting, and their heartbeats (only when some node
/// has a detector), in time order (at one time in that order).
fn timeline(plan: &Plan) -> Vec<(Timestamp, Happens)> {
    let mut out: Vec<(Timestamp, Happens)> = plan
        .changes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.at, Happens::Set(i)))
        .collect();
    out.extend(
        plan.detector_changes
            .iter()
            .map(|&(t, node, on)| (t, Happens::Detector(node, on))),
    );
    out.extend(
        plan.finishing
            .iter()
            .enumerate()
            .map(|(i, f)| (f.0, Happens::Finish(i))),
    );
    if plan.detectors.iter().any(|d| *d) || plan.detector_changes.iter().any(|c| c.2) {
        let mut t = nodemedic_common::time::add(plan.start, plan.heartbeat);
        while t <= plan.end {
            out.push((t, Happens::Beat));
            t = nodemedic_common::time::add(t, plan.heartbeat);
        }
    }
    // Stable: at one time, changes first, then detectors, then beats, as pushed.
    out.sort_by_key(|(t, _)| *t);
    out
}

/// The plan's fleet in memory, each node with its app pod and first bootID, the caches synced.
fn cluster_of(plan: &Plan) -> (Observed, MemoryCluster) {
    let observed = Observed::default();
    let cluster = MemoryCluster::new(observed.clone());
    for (node, machine) in plan.nodes.iter().zip(&plan.reboots) {
        cluster.put_pod(pod_of(node));
        cluster.put_node(node.clone());
        let name = node.metadata.name.as_deref().unwrap_or_default();
        cluster.set_boot_id(name, &reboots::first_boot(name));
        if machine.power_cycle == reboots::Outside::Fails {
            cluster.power_cycle_fails(name);
        }
    }
    for pod in &plan.pods {
        cluster.put_pod(pod.clone());
    }
    for (ns, name) in &plan.protected {
        cluster.protect(ns, name);
    }
    cluster.set_termination(plan.drain_takes);
    cluster.sync();
    (observed, cluster)
}

/// `what` happens at `t` (`running`: whose detector runs).
fn happen(what: Happens, t: Timestamp, plan: &Plan, cluster: &MemoryCluster, running: &mut [bool]) {
    let name = |i: usize| plan.nodes[i].metadata.name.clone().unwrap_or_default();
    match what {
        Happens::Set(i) => {
            let c = &plan.changes[i];
            cluster.set_condition_for(&name(c.node), &c.type_, c.status, c.reason.as_deref(), c.at);
        }
        Happens::Detector(node, on) => running[node] = on,
        Happens::Finish(i) => {
            let (_, ns, pod) = &plan.finishing[i];
            cluster.set_pod_phase(ns, pod, "Succeeded");
        }
        Happens::Beat => {
            for (i, _) in running.iter().enumerate().filter(|(_, on)| **on) {
                cluster.heartbeat(&name(i), t);
            }
        }
    }
}

/// The Lease name a simulated drainer's own ConfigMaps are named after.
const LEASE: &str = "nodemedic-drainer";

/// Whose a simulated drainer's own ConfigMaps are.
fn owner() -> crate::act::publisher::Owner {
    crate::act::publisher::Owner {
        namespace: "kube-system".into(),
        lease: LEASE.into(),
        identity: "simulate".into(),
        key: crate::model::seal::RecordTrust::process().key(),
    }
}

impl scenario::NodeGroup {
    /// What the remediations do to each of its nodes.
    pub(crate) fn machine(&self) -> reboots::Machine {
        reboots::Machine {
            reboot: self.reboot,
            power_cycle: self.power_cycle,
            restart: self.restart,
        }
    }
}

/// The controller over the plan's fleet, its changes applied at their times; what it did.
async fn drive(plan: &mut Plan) -> Report {
    let clock = Clock::tokio_at(plan.start);
    let began = tokio::time::Instant::now();
    let at = |t: Timestamp| began + t.duration_since(plan.start).unsigned_abs();
    let (observed, cluster) = cluster_of(plan);
    let (_leader, leading) = watch::channel(true);
    let gated = Gated::new(cluster.clone(), leading.clone());
    let metrics = crate::metrics::Metrics::register(&mut Default::default());
    let record = Recorder::new(gated.clone(), metrics, observed.clone(), clock);
    let cfg = std::mem::take(&mut plan.cfg);
    let exec = Executor::new(gated.clone(), record, cfg.dry_run, clock);
    let (tap, mut taps) = mpsc::unbounded_channel();
    let health = Health::default();
    let outcomes = (plan.nodes.iter().zip(&plan.reboots))
        .map(|(n, m)| (n.metadata.name.clone().unwrap_or_default(), *m))
        .collect();
    let mut reboots = reboots::Reboots::new(&cluster, LEASE, outcomes, &cfg);
    // The drainer's own publisher keeps the requests' ConfigMap and the record memory's, as in
    // `drainer run`.
    let (outbox, publisher) = crate::act::publisher::spawn(gated, owner(), None, None);
    let (lease_out, _) = watch::channel(None);
    let controller = Controller::new(cfg, observed.clone(), exec, health, leading, clock)
        .with_tap(tap)
        .with_reboot_requests(outbox.reboots)
        .with_record_memory(outbox.memory, lease_out);
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(controller.run(observed.changed.clone(), plan.tick, stopped));
    let mut running = plan.detectors.clone();
    let mut items = timeline(plan).into_iter().peekable();
    let mut machines = Vec::new();
    loop {
        let next = [items.peek().map(|(t, _)| *t), reboots.next()]
            .into_iter()
            .flatten()
            .min()
            .filter(|t| *t <= plan.end);
        // The round at the end itself is part of the run.
        let until = next.map_or(at(plan.end) + DEBOUNCE * 2, at);
        tokio::select! {
            () = tokio::time::sleep_until(until) => {
                let Some(t) = next else { break };
                while let Some((_, what)) = items.next_if(|(at, _)| *at <= t) {
                    happen(what, t, plan, &cluster, &mut running);
                }
                for (node, detail) in reboots.come_back(t, &cluster) {
                    machines.push((t, node, "back", detail));
                }
            }
            () = reboots.changed() => {
                let now = clock.now();
                for (node, what, detail) in reboots.take(&cluster, now, plan.reboot_takes) {
                    machines.push((now, node, what, detail));
                }
            }
        }
    }
    let _ = stop.send(true);
    let _ = task.await;
    publisher.abort();
    let mut report = Report {
        nodes: plan.nodes.len(),
        ..Default::default()
    };
    while let Ok(t) = taps.try_recv() {
        report.tally(t, plan);
    }
    for (at, node, what, detail) in machines {
        report.happened(plan.secs(at), what, Some(node), detail);
    }
    from_events(&mut report, &cluster, plan);
    report.happenings.sort_by_key(|h| h.at_secs);
    report
}

/// What pod policies did, the proofs, and which pods a drain left running, from the drainer's
/// Events (the taps are per node).
fn from_events(report: &mut Report, cluster: &MemoryCluster, plan: &Plan) {
    use crate::model::occurrence::reason;
    for w in cluster.take_writes() {
        let crate::act::memory::Write::Event { about, event, .. } = w else {
            continue;
        };
        if event.last_seen > plan.end {
            continue;
        }
        if event.reason == reason::POD_DELETED_BY_POLICY {
            let secs = plan.secs(event.last_seen);
            report.happened(secs, "pod deleted", Some(about), event.message);
        } else if event.reason == reason::REBOOT_PROVEN {
            let secs = plan.secs(event.last_seen);
            report.happened(secs, "reboot proven", Some(about), String::new());
        } else if event.reason == reason::RESTART_PROVEN {
            let secs = plan.secs(event.last_seen);
            report.happened(secs, "restart proven", Some(about), String::new());
        } else if event.reason == reason::DRAIN_SUCCEEDED
            && let Some(kept) = event.message.strip_prefix("Drained node; ")
            && let Some(h) = report.happenings.iter_mut().rev().find(|h| {
                h.what == "drained" && h.node.as_deref() == Some(&about) && h.detail.is_empty()
            })
        {
            h.detail = kept.to_string();
        }
    }
}

#[cfg(test)]
mod explain_tests;
#[cfg(test)]
mod tests;
