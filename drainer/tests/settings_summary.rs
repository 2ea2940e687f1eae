//! `drainer run` says what its settings come to once its caches have synced: the conditions it
//! watches, its selector and "selected N of M nodes", with a warning for each silent mistake of
//! issue 42: `kerneldeadlock` (a case typo) where nodes report `KernelDeadlock`, and a selector with
//! a misspelled label that selects nothing.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::cluster::Cluster;

#[tokio::test]
async fn a_typo_in_a_condition_and_a_selector_that_selects_nothing_are_said_at_start() {
    let cluster = Cluster::new().await;
    let node = cluster
        .create_node_with("summary", serde_json::json!({"pool": "blue"}))
        .await;
    let deadlock = serde_json::json!({"status": {"conditions": [{
        "type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock",
        "lastHeartbeatTime": nodemedic_tests::cluster::now_rfc3339(),
        "lastTransitionTime": nodemedic_tests::cluster::now_rfc3339()}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(&node, &PatchParams::default(), &Patch::Strategic(deadlock))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let lease = format!("nodemedic-summary-{}", std::process::id());
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, None).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--lease-name={lease}"))
        // A misspelled label: `pol` for `pool`.
        .arg(format!(
            "--node-selector=pol=blue,nodemedic.test/run={}",
            cluster.id_label()
        ))
        .args(["--dry-run=true", "kerneldeadlock=True"])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null());
    let mut drainer = nodemedic_tests::process::Logged::spawn(cmd, Duration::from_secs(60)).await;
    let addr = drainer.addr.clone();
    let wanted = [
        "selected 0 of",
        "no node reports a condition of type \"kerneldeadlock\", but nodes report \"KernelDeadlock\"",
        "selects none of the",
    ];
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !wanted
        .iter()
        .all(|w| seen.iter().any(|l: &String| l.contains(w)))
    {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, drainer.lines.recv()).await {
            Ok(Some(line)) => seen.push(line),
            _ => {
                let health = nodemedic_tests::try_http_get(&format!("http://{addr}/healthz"))
                    .await
                    .unwrap_or_default();
                panic!(
                    "the drainer did not say {wanted:?} within 60 s; /healthz: {health}; it logged:\n{}",
                    seen.join("\n")
                )
            }
        }
    }
    let summary = seen.iter().find(|l| l.contains("selected 0 of")).unwrap();
    assert!(
        summary.contains("kerneldeadlock=True") && summary.contains("pol=blue"),
        "the summary names the conditions and the selector: {summary}"
    );
    eprintln!("{}", seen.join("\n"));
    cluster.delete_node(&node).await;
}
