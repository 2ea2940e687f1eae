//! `kubectl nodemedic plan` / `conditions` and `drainer plan --live`, as an operator runs them: the
//! drainer binary linked as `kubectl-nodemedic` on the PATH, real kubectl finding it as a plugin, a
//! kubeconfig for the real control plane (KUBEBUILDER_ASSETS) or the test API server, which serves
//! kubectl's discovery (`kubectl get` reads it first).

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_tests::cluster::{Cluster, now_rfc3339};
use nodemedic_tests::envtest;
use serde_json::{Value, json};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The line of `text` (a `conditions` table) about node `n`.
fn row_of(text: &str, n: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(&format!("{n} ")))
        .unwrap_or_else(|| panic!("{n} in\n{text}"))
        .to_string()
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn set_condition(cluster: &Cluster, node: &str, type_: &str, status: &str, reason: &str) {
    let an_hour_ago = (k8s_openapi::jiff::Timestamp::now() - std::time::Duration::from_secs(3600))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = json!({"status": {"conditions": [{"type": type_, "status": status, "reason": reason,
        "message": "m", "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": an_hour_ago}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

/// A pod on `node` owned by a real (inert) ReplicaSet; its name.
async fn pod_on(cluster: &Cluster, node: &str, hint: &str) -> String {
    let owner = cluster.owner("default", "rs").await;
    let pod = cluster.name(hint);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod, "namespace": "default", "ownerReferences": owner,
            "labels": {"app": pod}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))
    .unwrap();
    Api::<Pod>::namespaced(cluster.client.clone(), "default")
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
    pod
}

// Two workers: kubectl and the plugin run blocking on one while the test API server answers on
// the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_nodemedic_plans_and_lists_conditions_from_the_live_cluster() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is missing in CI (.ci/run installs it)"
        );
        envtest::say("skipped kubectl nodemedic: kubectl is not installed");
        return;
    }
    let cluster = Cluster::new().await;
    let sick = cluster.create_node("sick").await;
    let well = cluster.create_node("well").await;
    // Written NPD's way: its condition, no annotation naming it. Outside the plans' selector (its
    // own run label), so their breaker sees only the two nodes above.
    let npd = cluster
        .create_node_with("npd", json!({"nodemedic.test/run": "npd-way"}))
        .await;
    set_condition(&cluster, &npd, "KernelDeadlock", "True", "DockerHung").await;
    for n in [&sick, &well] {
        Api::<Node>::all(cluster.client.clone())
            .patch(
                n,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    "nodemedic.io/detector-conditions": "KernelDeadlock,ReadonlyFilesystem"}}})),
            )
            .await
            .unwrap();
    }
    set_condition(&cluster, &sick, "KernelDeadlock", "True", "DockerHung").await;
    set_condition(
        &cluster,
        &well,
        "KernelDeadlock",
        "False",
        "KernelHasNoDeadlock",
    )
    .await;
    let pod = pod_on(&cluster, &sick, "web").await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    // The plugin: the drainer binary under kubectl's plugin name, on the PATH.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drainer"), bin.join("kubectl-nodemedic"))
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |args: &[&str]| {
        let mut c = Command::new("kubectl");
        c.args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", &kubeconfig);
        c
    };
    let selector = format!("nodemedic.test/run={}", cluster.id_label());
    let now = "2030-01-01T00:00:00Z";
    let policy = [
        "KernelDeadlock=True,10m",
        "--node-selector",
        &selector,
        "--now",
        now,
        "--output",
        "json",
    ];

    // kubectl nodemedic plan: reads the cluster (no files) and decides.
    let mut args = vec!["nodemedic", "plan"];
    args.extend(policy);
    let plugin = lines(&run(&mut kubectl(&args)));
    let action = |plans: &[Value], n: &str| {
        plans
            .iter()
            .find(|p| p["node"] == n)
            .unwrap_or_else(|| panic!("{n} in {plans:?}"))["action"]
            .clone()
    };
    assert_eq!(action(&plugin, &sick), "cordon");
    assert_eq!(action(&plugin, &well), "none");
    let sick_plan = plugin.iter().find(|p| p["node"] == sick.as_str()).unwrap();
    assert!(
        sick_plan["pods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == pod.as_str() && p["action"] == "evict"),
        "{sick_plan}"
    );

    // The same plan as `drainer plan --live`, and as from `kubectl get -o json` files.
    let mut live = Command::new(env!("CARGO_BIN_EXE_drainer"));
    live.args(["plan", "--live", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(policy);
    assert_eq!(lines(&run(&mut live)), plugin);
    let dump = |what: &str, file: &Path| {
        let out = run(&mut kubectl(&["get", what, "-A", "-o", "json"]));
        std::fs::write(file, out.stdout).unwrap();
    };
    let (nodes, pods, pdbs) = (
        dir.path().join("nodes.json"),
        dir.path().join("pods.json"),
        dir.path().join("pdbs.json"),
    );
    dump("nodes", &nodes);
    dump("pods", &pods);
    dump("pdb", &pdbs);
    let mut offline = Command::new(env!("CARGO_BIN_EXE_drainer"));
    offline
        .arg("plan")
        .arg("--nodes")
        .arg(&nodes)
        .arg("--pods")
        .arg(&pods)
        .arg("--pdbs")
        .arg(&pdbs)
        .args(policy);
    assert_eq!(
        lines(&run(&mut offline)),
        plugin,
        "live and file plans agree"
    );

    // kubectl nodemedic conditions: every node, its own conditions and drain record.
    let text = run(&mut kubectl(&["nodemedic", "conditions"]));
    let text = String::from_utf8_lossy(&text.stdout);
    let row = |n: &str| row_of(&text, n);
    assert!(
        row(&sick).contains("KernelDeadlock=True (DockerHung)"),
        "{text}"
    );
    assert!(row(&well).contains("KernelDeadlock=False"), "{text}");
    assert!(
        row(&npd).contains("KernelDeadlock=True (DockerHung)"),
        "a condition written NPD's way is shown: {text}"
    );
    // With the drainer's config file: what it watches is shown on every node.
    let config = dir.path().join("drainer.yaml");
    std::fs::write(
        &config,
        "conditions: [\"KernelDeadlock=True,10m\", \"GPUMissing=True\"]\n",
    )
    .unwrap();
    let text = run(&mut kubectl(&[
        "nodemedic",
        "conditions",
        "--config",
        config.to_str().unwrap(),
    ]));
    let text = String::from_utf8_lossy(&text.stdout);
    let row = |n: &str| row_of(&text, n);
    assert!(
        row(&npd).contains("KernelDeadlock=True (DockerHung)"),
        "{text}"
    );
    assert!(row(&npd).contains("GPUMissing=absent"), "{text}");
    let json = lines(&run(&mut kubectl(&[
        "nodemedic",
        "conditions",
        "--output",
        "json",
    ])));
    let sick_row = json.iter().find(|r| r["node"] == sick.as_str()).unwrap();
    assert_eq!(sick_row["conditions"][0]["type"], "KernelDeadlock");
    assert_eq!(sick_row["conditions"][1]["status"], "absent");
    assert_eq!(sick_row["schedulable"], true);

    // A kubeconfig that does not exist is one clear error.
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "plan",
            "--live",
            "KernelDeadlock",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{err}"
    );
    cluster.delete_node(&npd).await;
    cluster.cleanup(&["default"]).await;
}

/// `kubectl nodemedic explain NODE` reading the cluster (the test API server here, the real
/// control plane with KUBEBUILDER_ASSETS): the plugin binary under its plugin name, a kubeconfig,
/// no files.
#[tokio::test]
async fn kubectl_nodemedic_explain_reads_one_node_its_pods_and_its_history_from_the_cluster() {
    let cluster = Cluster::new().await;
    let sick = cluster.create_node("explained").await;
    set_condition(&cluster, &sick, "KernelDeadlock", "True", "DockerHung").await;
    let pod = pod_on(&cluster, &sick, "explained-web").await;
    // An Event the drainer wrote about the node earlier (its history).
    let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{sick}.explain-history"), "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": sick, "uid": sick},
        "reason": "UncordonSucceeded", "message": "Uncordoned node: conditions cleared",
        "type": "Normal", "source": {"component": "nodemedic-drainer"}, "count": 1,
        "firstTimestamp": now_rfc3339(), "lastTimestamp": now_rfc3339()}))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(cluster.client.clone(), "default")
        .create(&PostParams::default(), &ev)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let plugin = dir.path().join("kubectl-nodemedic");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drainer"), &plugin).unwrap();
    let selector = format!("nodemedic.test/run={}", cluster.id_label());
    let mut cmd = Command::new(&plugin);
    cmd.args([
        "explain",
        &sick,
        "KernelDeadlock=True,10m",
        "--node-selector",
        &selector,
    ])
    .args([
        "--max-unhealthy",
        "100%",
        "--breaker-new",
        "100%",
        "--output",
        "json",
    ])
    .env("KUBECONFIG", &kubeconfig);
    // Off the runtime's thread: the test API server answers on it meanwhile.
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["node"], sick.as_str());
    assert_eq!(e["decision"]["action"], "cordon", "{e}");
    assert_eq!(e["next"]["action"], "cordon");
    assert!(e["next"].get("at").is_none(), "now: {e}");
    assert_eq!(e["selection"]["selected"], true);
    let kd = e["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "KernelDeadlock")
        .unwrap();
    assert!(
        kd["watched"]
            .as_str()
            .unwrap()
            .contains("min duration reached"),
        "{kd}"
    );
    assert!(
        e["pods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == pod.as_str() && p["action"] == "evict"),
        "{e}"
    );
    assert!(
        e["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["reason"] == "UncordonSucceeded"),
        "{e}"
    );
    cluster.cleanup(&["default"]).await;
}

/// `kubectl nodemedic backtest --policy FILE`: the cluster's own history (its Events about Nodes)
/// and Nodes, read live, replayed under a policy.
#[tokio::test]
async fn kubectl_nodemedic_backtest_replays_the_clusters_own_events() {
    let cluster = Cluster::new().await;
    let node = cluster.create_node("backtested").await;
    let at = |ago: u64| {
        (k8s_openapi::jiff::Timestamp::now() - std::time::Duration::from_secs(ago))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    // What the detector (or NPD) wrote when the condition changed, two hours ago and one.
    for (i, (status, reason, ago)) in [
        ("True", "DockerHung", 7200),
        ("False", "KernelHasNoDeadlock", 3600),
    ]
    .into_iter()
    .enumerate()
    {
        let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
            "metadata": {"name": format!("{node}.history-{i}"), "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
            "reason": reason, "type": "Normal", "count": 1,
            "message": format!("Node condition KernelDeadlock is now: {status}, reason: {reason}, message: \"m\""),
            "source": {"component": "kernel-monitor", "host": node},
            "firstTimestamp": at(ago), "lastTimestamp": at(ago)}))
        .unwrap();
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(cluster.client.clone(), "default")
            .create(&PostParams::default(), &ev)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let policy = dir.path().join("policy.yaml");
    let selector = format!("nodemedic.test/run={}", cluster.id_label());
    std::fs::write(
        &policy,
        format!("conditions:\n  - KernelDeadlock=True,10m\ndrainBuffer: 5m\nnodeSelector: {selector}\nmaxCordoned: 5\n"),
    )
    .unwrap();
    let plugin = dir.path().join("kubectl-nodemedic");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drainer"), &plugin).unwrap();
    let mut cmd = Command::new(&plugin);
    cmd.args(["backtest", "--policy"])
        .arg(&policy)
        .args(["--output", "json"])
        .env("KUBECONFIG", &kubeconfig);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: Vec<(String, u64)> = s["report"]["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["node"] == node.as_str())
        .map(|h| {
            (
                h["what"].as_str().unwrap().to_string(),
                h["at_secs"].as_u64().unwrap(),
            )
        })
        .collect();
    // The replay starts a minute before the first transition: cordoned after the 10m min
    // duration, drained 5m later, uncordoned 10m after the recovery (an hour after the problem).
    let whats: Vec<&str> = ours.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        whats,
        ["cordon", "drain", "drained", "uncordon"],
        "{ours:?}"
    );
    assert_eq!(ours[0].1, 60 + 600);
    assert_eq!(ours[3].1, 60 + 3600 + 600);
    cluster.cleanup(&["default"]).await;
}
