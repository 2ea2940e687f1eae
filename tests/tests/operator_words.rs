//! The scenarios' own guard against Rust `Debug` dumps in what operators read (issue 42, point
//! 7) works: an Event written with one fails the scenario when its cluster is dropped, and a
//! process's INFO line with one fails it when the process is dropped.

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::PostParams;
use nodemedic_tests::cluster::Cluster;
use serde_json::json;

#[tokio::test]
#[should_panic(expected = "Events with Rust Debug dumps")]
async fn an_event_with_a_debug_dump_fails_the_scenario() {
    let cluster = Cluster::new().await;
    if cluster.fake.is_none() {
        // Only the test API server keeps every Event for the check; say so by the expected panic.
        panic!("Events with Rust Debug dumps: (not checked on a real control plane)");
    }
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": "dump-1"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "DrainFailed",
        "message": "NotFound (Status { status: Some(Failure) })",
        "type": "Warning"
    }))
    .unwrap();
    events.create(&PostParams::default(), &ev).await.unwrap();
    drop(cluster);
}

#[tokio::test]
#[should_panic(expected = "Rust Debug dumps where operators read")]
async fn a_process_logging_a_debug_dump_fails_the_scenario() {
    // A stand-in process that logs as the binaries do: its address line, then an INFO line with a
    // dump.
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c").arg(
        "echo '2026-11-27T00:00:00Z  INFO drainer: serving /metrics addr=127.0.0.1:1' >&2; \
         echo '2026-11-27T00:00:00Z  INFO drainer: read DaemonSet { metadata: ObjectMeta { name: Some(\"d\") } }' >&2; \
         exec sleep 30",
    );
    let logged =
        nodemedic_tests::process::Logged::spawn(cmd, std::time::Duration::from_secs(30)).await;
    // The second line is scanned as it is read; wait for it before dropping.
    let mut logged = logged;
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            match logged.lines.recv().await {
                Some(l) if l.contains("DaemonSet") => break l,
                Some(_) => continue,
                None => panic!("no line"),
            }
        }
    })
    .await
    .unwrap();
    assert!(line.contains("DaemonSet"));
    drop(logged);
}

#[tokio::test]
#[should_panic(expected = "logged at INFO or above with Rust Debug dumps")]
async fn code_in_this_process_logging_a_debug_dump_fails_the_scenario() {
    let cluster = Cluster::new().await;
    // As nodemedic's code would, at INFO, with a field formatted by Debug.
    let error: Result<(), &str> = Err("refused");
    tracing::info!(target: "nodemedic_drainer::controller", ?error, "a write failed");
    drop(cluster);
}
