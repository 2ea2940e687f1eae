//! A fleet of kubelet-shaped Nodes and ReplicaSet-owned Pods (`tests/fixtures/scale/`), the kubelets'
//! status updates, CPU per update measured in steady windows, and the drainer run on it the way an
//! operator runs draino. Shared by the benches that measure the drainer there (`scale`, `leader`), the
//! one that measures a bare watch the same way (`watch_floor`), and `pgo-train` (which runs the drainer
//! there so that its image is built with the profile of that work: `build/pgo-drainer.sh`).

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

/// Pods on each node.
pub const PODS_PER_NODE: usize = 10;
/// The namespace of the fleet's pods.
pub const NAMESPACE: &str = "bench";

const NODE_FIXTURE: &str = include_str!("../fixtures/scale/kubelet-like-node.json");
const POD_FIXTURE: &str = include_str!("../fixtures/scale/replicaset-pod.json");

/// The name of node `i`.
pub fn name(i: usize) -> String {
    format!("scale-{i:05}")
}

fn node(template: &Value, i: usize) -> Node {
    let mut n = template.clone();
    let name = name(i);
    n["metadata"]["name"] = json!(name);
    n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
    n["metadata"]["labels"]["topology.kubernetes.io/zone"] =
        json!(format!("region-1{}", ["a", "b", "c"][i % 3]));
    n["metadata"]["labels"][FLIP_LABEL] = json!("a");
    n["spec"]["providerID"] = json!(format!("fake:///region-1/{name}"));
    n["spec"]["podCIDR"] = json!(format!("{}/27", pod_subnet(i, 0)));
    n["spec"]["podCIDRs"] = json!([format!("{}/27", pod_subnet(i, 0))]);
    let now = crate::cluster::now_rfc3339();
    if let Some(conditions) = n["status"]["conditions"].as_array_mut() {
        for c in conditions {
            c["lastHeartbeatTime"] = json!(now);
            c["lastTransitionTime"] = json!("2026-11-01T00:00:00Z");
        }
    }
    serde_json::from_value(n).expect("the node fixture is a Node")
}

fn pod(template: &Value, rs_uid: &str, i: usize, j: usize, instant: bool) -> Pod {
    let mut p = template.clone();
    p["metadata"]["name"] = json!(format!("app-{i:05}-{j}"));
    p["metadata"]["ownerReferences"][0]["uid"] = json!(rs_uid);
    p["spec"]["nodeName"] = json!(name(i));
    if instant {
        p["spec"]["terminationGracePeriodSeconds"] = json!(0);
    }
    serde_json::from_value(p).expect("the pod fixture is a Pod")
}

/// A running pod's status as its kubelet writes it (kube-apiserver drops the status a create
/// sends): the pods of a cluster run, and a fixture of pods that never start measured the drainer's
/// pass over stuck pods (500,000 of them) instead of what clusters send.
/// Node `i`'s pod range, a /27 from 10.64.0.0 (room for 393,216 nodes; a /24 each ran out at 49,408),
/// and its address `at` within it.
fn pod_subnet(i: usize, at: usize) -> std::net::Ipv4Addr {
    let base = u32::from(std::net::Ipv4Addr::new(10, 64, 0, 0));
    std::net::Ipv4Addr::from(base + (i as u32) * 32 + at as u32)
}

fn running(i: usize, j: usize) -> Value {
    let at = "2026-11-01T00:00:00Z";
    let condition = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": at});
    json!({"status": {
        "phase": "Running",
        "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"),
            condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
        // From 172.16.0.0/12: room for a million nodes (10.0.x.y ran out at 65,536).
        "hostIP": std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(172, 16, 0, 0)) + i as u32).to_string(),
        "podIP": pod_subnet(i, 10 + j).to_string(),
        "startTime": at,
        "qosClass": "Burstable",
        "containerStatuses": [{
            "name": "app", "ready": true, "restartCount": 0, "started": true,
            "image": "gcr.io/example/app-backend:2023.01.15",
            "imageID": "gcr.io/example/app-backend@sha256:9f2c4b1e8d7a6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b",
            "containerID": format!("containerd://{:064x}", i * 16 + j),
            "state": {"running": {"startedAt": at}}
        }]
    }})
}

/// What the fixture's pods are doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Running and Ready, as their kubelets write it.
    Running,
    /// Bound and never started (no status: a bad image on a big Deployment, every pod a
    /// symptom candidate).
    Waiting,
}

impl PodState {
    /// `NODEMEDIC_BENCH_PODS=waiting` for [`PodState::Waiting`]; running otherwise.
    pub fn from_env() -> PodState {
        match std::env::var("NODEMEDIC_BENCH_PODS").as_deref() {
            Ok("waiting") => PodState::Waiting,
            _ => PodState::Running,
        }
    }
}

/// Create `count` nodes and [`PODS_PER_NODE`] pods on each (owned by one ReplicaSet in
/// [`NAMESPACE`]), in `state`; the pods of the nodes in `instant` have a zero grace period, so an
/// eviction deletes them at once.
pub async fn create(
    client: &kube::Client,
    count: usize,
    instant: &HashSet<usize>,
    state: PodState,
) {
    create_inner(client, count, instant, state, None).await
}

/// [`create`] for a fleet whose kubelets KWOK plays (`crate::kwok`): the nodes annotated for it and
/// without their Ready condition (KWOK initializes them, then heartbeats them), pods (Running) only
/// on the nodes in `with_pods`, none with a zero grace period (KWOK finishes an evicted pod as its
/// kubelet would).
pub async fn create_for_kwok(client: &kube::Client, count: usize, with_pods: &HashSet<usize>) {
    create_inner(
        client,
        count,
        &HashSet::new(),
        PodState::Running,
        Some(with_pods),
    )
    .await
}

async fn create_inner(
    client: &kube::Client,
    count: usize,
    instant: &HashSet<usize>,
    state: PodState,
    kwok: Option<&HashSet<usize>>,
) {
    // The default drainer's record key Secret, as the manifests ship it.
    crate::drainer_objects(client, "kube-system", "nodemedic-drainer", None).await;
    create_nodes_inner(client, count, kwok.is_some()).await;
    let ns: Api<Namespace> = Api::all(client.clone());
    let namespace = json!({"metadata": {"name": NAMESPACE}});
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(namespace).expect("a Namespace"),
    )
    .await
    .expect("create namespace");
    let rs: Api<ReplicaSet> = Api::namespaced(client.clone(), NAMESPACE);
    let owner = json!({"metadata": {"name": "bench-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "bench"}},
            "template": {"metadata": {"labels": {"app": "bench"}}, "spec": {"containers": [{"name": "app", "image": "x"}]}}}});
    let rs = rs
        .create(
            &PostParams::default(),
            &serde_json::from_value(owner).expect("a ReplicaSet"),
        )
        .await
        .expect("create replicaset");
    let rs_uid = rs.metadata.uid.expect("the server gives a uid");
    let pod_template: Value = serde_json::from_str(POD_FIXTURE).expect("pod fixture");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let with_pods = |i: &usize| kwok.is_none_or(|on| on.contains(i));
    futures::stream::iter(
        (0..count)
            .filter(with_pods)
            .flat_map(|i| (0..PODS_PER_NODE).map(move |j| (i, j))),
    )
    .map(|(i, j)| {
        let (pods, p) = (
            pods.clone(),
            pod(&pod_template, &rs_uid, i, j, instant.contains(&i)),
        );
        async move {
            let name = p.metadata.name.clone().unwrap_or_default();
            pods.create(&PostParams::default(), &p)
                .await
                .expect("create pod");
            if state == PodState::Running {
                let status = Patch::Merge(running(i, j));
                pods.patch_status(&name, &PatchParams::default(), &status)
                    .await
                    .expect("the pod's status, as its kubelet writes it");
            }
        }
    })
    .buffer_unordered(32)
    .for_each(|_| async {})
    .await;
}

/// Create nodes `0..count` only ([`create`] without the pods).
pub async fn create_nodes(client: &kube::Client, count: usize) {
    create_nodes_inner(client, count, false).await
}

async fn create_nodes_inner(client: &kube::Client, count: usize, kwok: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node_template: Value = serde_json::from_str(NODE_FIXTURE).expect("node fixture");
    if kwok {
        node_template["metadata"]["annotations"][crate::kwok::ANNOTATION] = json!("fake");
        if let Some(c) = node_template["status"]["conditions"].as_array_mut() {
            c.retain(|c| c["type"] != "Ready");
        }
    }
    futures::stream::iter(0..count)
        .map(|i| {
            let (nodes, n) = (nodes.clone(), node(&node_template, i));
            async move {
                nodes
                    .create(&PostParams::default(), &n)
                    .await
                    .expect("create node")
            }
        })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
}

/// A kubelet's status heartbeat: new lastHeartbeatTime on its conditions.
pub fn heartbeat() -> Value {
    let now = crate::cluster::now_rfc3339();
    let conds: Vec<Value> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| json!({"type": t, "lastHeartbeatTime": now}))
        .collect();
    json!({"status": {"conditions": conds}})
}

/// What an update sends, as clusters send them: a drainer's view of the node changes with a state
/// change and not with a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Update {
    /// A kubelet's status heartbeat: new `lastHeartbeatTime`s only.
    Heartbeat,
    /// A heartbeat that also changes a condition's reason (`MemoryPressure`, still False): a
    /// state change that no label selector reads.
    ConditionChange,
    /// A label's value changes ([`FLIP_LABEL`]): a state change the drainer's selector reads
    /// ([`SELECTOR`] names that label), its answer the same (the node stays selected).
    LabelChange,
    /// A heartbeat that also changes Ready's reason (still True): a state change of a condition
    /// every decision reads, so the drainer decides the node again (it stays healthy).
    ReadyChange,
    /// A label's value changes ([`OTHER_LABEL`]) that the selector does not name: a state change
    /// nothing the drainer decides with reads.
    UnreadLabelChange,
}

impl Update {
    /// Its name in a bench's table.
    pub fn describe(self) -> &'static str {
        match self {
            Update::Heartbeat => "heartbeats",
            Update::ConditionChange => "state changes: a condition's reason",
            Update::LabelChange => "state changes: a label the selector reads",
            Update::ReadyChange => "state changes: Ready's reason",
            Update::UnreadLabelChange => "state changes: a label the selector does not read",
        }
    }

    /// One update of `node`; whether the API server wrote it (a write that changes nothing keeps
    /// the resourceVersion and reaches no watch, as on kube-apiserver: a second heartbeat within
    /// the same second is one). A state change sets the changed value the other way from the last
    /// one this process sent that node ([`flip`]), so every state change changes something, in
    /// every window a bench measures (counting within one `churn` call gave every window the same
    /// value, and from the second window on "state changes" were heartbeats).
    async fn send(self, nodes: &Api<Node>, node: &str) -> bool {
        let flip = match self {
            Update::Heartbeat => "",
            state_change => flip(state_change, node),
        };
        let written = match self {
            Update::Heartbeat => {
                nodes
                    .patch_status(
                        node,
                        &PatchParams::default(),
                        &Patch::Strategic(heartbeat()),
                    )
                    .await
            }
            Update::ConditionChange | Update::ReadyChange => {
                // A reason the condition's kubelet could write (MemoryPressure is first, Ready last).
                let (at, reason) = match self {
                    Update::ConditionChange => (0, "KubeletHasSufficientMemory"),
                    _ => (3, "KubeletReady"),
                };
                let mut patch = heartbeat();
                patch["status"]["conditions"][at]["reason"] =
                    json!(format!("{reason}{}", flip.to_uppercase()));
                nodes
                    .patch_status(node, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
            }
            Update::LabelChange | Update::UnreadLabelChange => {
                let label = match self {
                    Update::LabelChange => FLIP_LABEL,
                    _ => OTHER_LABEL,
                };
                let patch = json!({"metadata": {"labels": {label: flip}}});
                nodes
                    .patch(node, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
            }
        };
        written.is_ok_and(|n| new_version(node, n.metadata.resource_version))
    }
}

/// Whether `rv` is a resourceVersion of `node` this process has not seen answered before.
fn new_version(node: &str, rv: Option<String>) -> bool {
    static SEEN: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, String>>> =
        std::sync::LazyLock::new(Default::default);
    let Some(rv) = rv else { return false };
    let mut seen = SEEN.lock().unwrap();
    seen.insert(node.to_string(), rv.clone()).as_ref() != Some(&rv)
}

/// The value a state change of `kind` sets on `node` next: "b" and "a" in turn, per node and kind,
/// for the whole process (a bench's windows follow one another).
fn flip(kind: Update, node: &str) -> &'static str {
    static SENT: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<(Update, String), usize>>,
    > = std::sync::LazyLock::new(Default::default);
    let mut sent = SENT.lock().unwrap();
    let n = sent.entry((kind, node.to_string())).or_default();
    *n += 1;
    // The fixture's nodes start at "a" (and the reason without a suffix): the first change sets "b".
    if n.is_multiple_of(2) { "a" } else { "b" }
}

/// Send `kind` updates to nodes `0..count` round-robin at `rate` per second (0: as fast as
/// `workers` concurrent writers go) until `stop`; returns the number the API server wrote (those
/// that changed nothing are left out: no watch hears of them).
pub async fn churn(
    nodes: Api<Node>,
    count: usize,
    rate: f64,
    workers: usize,
    stop: Arc<AtomicBool>,
    kind: Update,
) -> usize {
    let sent = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (nodes, sent, stop) = (nodes.clone(), sent.clone(), stop.clone());
            tokio::spawn(async move {
                let mut k = w;
                while !stop.load(Ordering::Relaxed) {
                    if rate > 0.0 {
                        let due = start
                            + Duration::from_secs_f64(sent.load(Ordering::Relaxed) as f64 / rate);
                        tokio::time::sleep_until(due.into()).await;
                    }
                    let n = name(k % count);
                    k += workers;
                    if kind.send(&nodes, &n).await {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    sent.load(Ordering::Relaxed)
}

/// One steady-rate measurement ([`steady_cpu`]).
pub struct Steady {
    pub kind: Update,
    /// CPU per update, idle subtracted.
    pub per_update_us: f64,
    /// Updates written in the window.
    pub updates: usize,
    /// The window's length.
    pub secs: f64,
    /// The idle baseline subtracted: CPU milliseconds a second at rest, measured right before.
    pub idle_ms_per_s: f64,
}

/// CPU per update of the process `meter` measures: `repeats` times, an idle baseline of `window`,
/// then for each of `kinds` a window of updates going out at `rate` from one writer (each alone),
/// the baseline subtracted. Exact to the nanosecond (a few milliseconds a second in whole 10 ms
/// ticks would be mostly rounding).
pub async fn steady_cpu(
    nodes: &Api<Node>,
    count: usize,
    rate: f64,
    kinds: &[Update],
    meter: &crate::process::CpuMeter,
    window: Duration,
    repeats: usize,
) -> Vec<Steady> {
    let mut each = side_by_side(nodes, count, rate, kinds, &[meter], window, repeats).await;
    each.pop().unwrap_or_default()
}

/// [`steady_cpu`] of several processes at once, in the same windows, receiving the same updates
/// (each meter's runs, in the order of `meters`): what one costs beside another is then a ratio
/// of one run, which this machine's drift between runs does not move.
pub async fn side_by_side(
    nodes: &Api<Node>,
    count: usize,
    rate: f64,
    kinds: &[Update],
    meters: &[&crate::process::CpuMeter],
    window: Duration,
    repeats: usize,
) -> Vec<Vec<Steady>> {
    let mut runs: Vec<Vec<Steady>> = meters.iter().map(|_| Vec::new()).collect();
    let cpu = || meters.iter().map(|m| m.seconds()).collect::<Vec<f64>>();
    for _ in 0..repeats {
        let (cpu0, t) = (cpu(), Instant::now());
        tokio::time::sleep(window).await;
        let idle: Vec<f64> = (cpu().iter().zip(&cpu0))
            .map(|(c, c0)| (c - c0) / t.elapsed().as_secs_f64())
            .collect();
        for &kind in kinds {
            let stop = Arc::new(AtomicBool::new(false));
            let (cpu0, t) = (cpu(), Instant::now());
            let task = tokio::spawn(churn(nodes.clone(), count, rate, 1, stop.clone(), kind));
            tokio::time::sleep(window).await;
            stop.store(true, Ordering::Relaxed);
            let updates = task.await.expect("the churn");
            // The last update's event reaches the processes.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let secs = t.elapsed().as_secs_f64();
            for (i, c) in cpu().iter().enumerate() {
                let used = c - cpu0[i] - idle[i] * secs;
                runs[i].push(Steady {
                    kind,
                    per_update_us: used.max(0.0) / updates.max(1) as f64 * 1e6,
                    updates,
                    secs,
                    idle_ms_per_s: idle[i] * 1e3,
                });
            }
        }
    }
    runs
}

/// Wait until `node` satisfies `check`, watching it; returns when it did (None: not in time).
pub async fn watch_until(
    nodes: &Api<Node>,
    node: &str,
    timeout: Duration,
    check: impl Fn(&Node) -> bool,
) -> Option<Instant> {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let stream = watcher::watcher(nodes.clone(), cfg);
    futures::pin_mut!(stream);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .ok()?
            .ok()??;
        let hit = match &ev {
            watcher::Event::Apply(n) | watcher::Event::InitApply(n) => check(n),
            _ => false,
        };
        if hit {
            return Some(Instant::now());
        }
    }
}

/// Whether the node is cordoned.
pub fn cordoned(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// The phase of the drainer's record on the node (`drained`, ...).
pub fn record_phase(n: &Node) -> Option<String> {
    let raw = n
        .metadata
        .annotations
        .as_ref()?
        .get(nodemedic_common::keys::DRAIN_RECORD_ANNOTATION)?;
    let v: Value = serde_json::from_str(raw).ok()?;
    v["phase"].as_str().map(String::from)
}

/// The node's KernelDeadlock condition turns True now (as NPD or our detector would set it).
pub async fn mark_bad(nodes: &Api<Node>, name: &str) {
    let now = crate::cluster::now_rfc3339();
    let bad = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": "True", "reason": "DockerHung",
        "message": "task docker:1234 blocked for more than 120 seconds", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(bad))
        .await
        .expect("set the KernelDeadlock condition");
}

/// The label a [`Update::LabelChange`] flips between `a` and `b`.
pub const FLIP_LABEL: &str = "bench.nodemedic.io/flip";
/// The label an [`Update::UnreadLabelChange`] flips: the drainer's selector does not name it.
pub const OTHER_LABEL: &str = "bench.nodemedic.io/other";

/// The drainer's selector: draino's (`draino=node`), and the label the benches flip, so that a
/// label change is one the selector reads (a label it does not name leaves its answer as it was
/// and is not evaluated again: that costs what a condition's reason does).
pub const SELECTOR: &str =
    "metadata.labels['draino'] == 'node' && metadata.labels['bench.nodemedic.io/flip'] != 'off'";

/// `drainer run` as an operator runs draino on this fleet: nodes labelled `draino=node` (CEL),
/// KernelDeadlock=True, no drain buffer, budgets wide enough for the benches' bursts; its metrics
/// and health on `listen`, the cluster in `kubeconfig`, one malloc arena as the image sets
/// (`MALLOC_ARENA_MAX` overrides), warnings on stderr (`NODEMEDIC_BENCH_LOG` overrides).
pub fn drainer_command(exe: &Path, kubeconfig: &Path, listen: &str) -> Command {
    let budgets = ["--drain-buffer", "0s", "--max-cordoned", "1000"];
    let mut cmd = drainer_command_with(exe, kubeconfig, listen, &budgets);
    cmd.args(["--max-drains-in-flight", "100"]);
    cmd
}

/// [`drainer_command`] with `args` in place of its budgets.
pub fn drainer_command_with(exe: &Path, kubeconfig: &Path, listen: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["run", "KernelDeadlock=True", "--listen", listen])
        .args(["--node-label-expr", SELECTOR])
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env(
            "MALLOC_ARENA_MAX",
            std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "1".into()),
        )
        .env(
            "RUST_LOG",
            std::env::var("NODEMEDIC_BENCH_LOG")
                .unwrap_or_else(|_| "warn,kube_client::client::tls=error".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

/// Whether `GET /readyz` on `addr` answers 200.
pub fn readyz(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(
        format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

/// Wait until the drainer on `listen` is ready (caches synced) and holds its Lease; false if it
/// did not within `timeout`.
pub async fn wait_ready(client: &kube::Client, listen: &str, timeout: Duration) -> bool {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let deadline = Instant::now() + timeout;
    while !readyz(listen)
        || leases
            .get_opt("nodemedic-drainer")
            .await
            .ok()
            .flatten()
            .is_none()
    {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_change_of_a_node_sets_the_other_value_whichever_call_sends_it() {
        // The first change of a fixture node moves its label off the value it was created with
        // (setting "a" again was no change at all: the first window measured nothing).
        let template: Value = serde_json::from_str(NODE_FIXTURE).unwrap();
        let created = node(&template, 0).metadata.labels.unwrap()[FLIP_LABEL].clone();
        let sent: Vec<&str> = (0..4)
            .map(|_| flip(Update::LabelChange, "flip-test-node"))
            .collect();
        assert_ne!(sent[0], created);
        assert_eq!(sent, ["b", "a", "b", "a"]);
        assert_eq!(
            flip(Update::ConditionChange, "flip-test-node"),
            "b",
            "per kind"
        );
        assert_eq!(
            flip(Update::LabelChange, "flip-test-other"),
            "b",
            "per node"
        );
    }
}
