//! A node outside a drainer's selection is invisible to it: with two drainers on disjoint pools
//! (the real control plane with KUBEBUILDER_ASSETS, else the test API server), drainer B logs
//! nothing, counts nothing and writes no Event about the nodes drainer A selects, while A cordons,
//! drains and sees one of them flap.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::cluster::{Cluster, eventually, now_rfc3339};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `drainer run` selecting `pool`, JSON logs on stderr (kept: a pipe the test reads at the end).
fn drainer(kubeconfig: &std::path::Path, run: &str, pool: &str, extra: &[&str]) -> Killed {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--listen=127.0.0.1:0",
            "--log-format=json",
            "--drain-buffer=0s",
        ])
        .arg(format!(
            "--node-selector=nodemedic.test/run={run},pool={pool}"
        ))
        .arg(format!(
            "--lease-name=nodemedic-drainer-{pool}-{}",
            std::process::id()
        ))
        .args([
            "--max-unhealthy=100%",
            "--breaker-new=100%",
            "--domain-outage=100%",
        ])
        .args(extra)
        .arg("KernelDeadlock=True")
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Killed(cmd.spawn().expect("start the drainer"))
}

async fn set_condition(cluster: &Cluster, node: &str, status: &str) {
    let body = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": status,
        "reason": "DockerHung", "message": "m", "lastHeartbeatTime": now_rfc3339(),
        "lastTransitionTime": now_rfc3339()}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn cordoned(cluster: &Cluster, node: &str) -> bool {
    cluster
        .node(node)
        .await
        .spec
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

#[tokio::test]
async fn a_drainer_says_nothing_about_nodes_it_does_not_select() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let run = cluster.id_label();
    let sick = cluster
        .create_node_with("a-sick", json!({"pool": "a"}))
        .await;
    let flappy = cluster
        .create_node_with("a-flappy", json!({"pool": "a"}))
        .await;
    let mine = cluster
        .create_node_with("b-own", json!({"pool": "b"}))
        .await;
    // A acts on pool a with flap damping off, so a NodeFlapping Event about pool a could come
    // only from B; B acts on pool b with it on.
    for pool in ["a", "b"] {
        let lease = format!("nodemedic-drainer-{pool}-{}", std::process::id());
        nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, Some(&run)).await;
    }
    let a = drainer(&kubeconfig, &run, "a", &["--flap-threshold=0"]);
    let mut b = drainer(&kubeconfig, &run, "b", &["--flap-threshold=2"]);
    set_condition(&cluster, &sick, "True").await;
    eventually("A cordons its sick node", WAIT, || async {
        cordoned(&cluster, &sick).await.then_some(())
    })
    .await;
    for status in ["True", "False", "True", "False", "True", "False"] {
        set_condition(&cluster, &flappy, status).await;
    }
    // B's own node last: once B has cordoned it, B has seen every earlier change (one watch, in
    // order), so its silence about pool a is a fact, not a race.
    set_condition(&cluster, &mine, "True").await;
    eventually("B cordons its own node", WAIT, || async {
        cordoned(&cluster, &mine).await.then_some(())
    })
    .await;
    let _ = b.0.kill();
    let _ = b.0.wait();
    let mut log = String::new();
    b.0.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    drop(a);
    assert!(log.contains(&mine), "B logs about its own node: {log}");
    for node in [&sick, &flappy] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(node.as_str())).collect();
        assert!(
            lines.is_empty(),
            "B said something about {node}: {lines:#?}"
        );
        let flapping = cluster
            .node_events(node)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("NodeFlapping"))
            .count();
        assert_eq!(flapping, 0, "no NodeFlapping Event about {node}");
    }
    for n in [sick, flappy, mine] {
        cluster.delete_node(&n).await;
    }
}
