//! The test API server writes nothing for an update that changes nothing, as kube-apiserver does:
//! etcd3 storage's `GuaranteedUpdate` compares the encoded object with the stored one and returns
//! the stored one unchanged (after the field manager put back the managedFields times of a write
//! that changed nothing, `IgnoreManagedFieldsTimestampsTransformer`). The answer keeps the
//! resourceVersion and no watch hears of it. The benches count on it: a label "changed" to the value
//! it has costs the drainer nothing, and must not be counted as an update it paid for.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use nodemedic_tests::server::TestApiServer;
use serde_json::json;

fn rv(n: &Node) -> String {
    n.metadata.resource_version.clone().unwrap()
}

/// Set the node's `pool` label (a strategic merge patch).
async fn set_pool(api: &Api<Node>, pool: &str) -> Node {
    let patch = json!({"metadata": {"labels": {"pool": pool}}});
    api.patch("noop-1", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap()
}

#[tokio::test]
async fn an_update_that_changes_nothing_keeps_the_version_and_reaches_no_watch() {
    let server = TestApiServer::start().await;
    let api: Api<Node> = Api::all(server.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "noop-1", "labels": {"pool": "a"}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-11-28T08:00:00Z", "lastTransitionTime": "2026-11-28T08:00:00Z"}]}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &node).await.unwrap();
    let before = rv(&created);

    let mut watch = api
        .watch(
            &WatchParams::default().fields("metadata.name=noop-1"),
            &before,
        )
        .await
        .unwrap()
        .boxed();

    let pp = PatchParams::default();
    // A label set to the value it has; the same status again (same heartbeat second); a PUT of the
    // object as read.
    let a = set_pool(&api, "a").await;
    assert_eq!(rv(&a), before, "a label set to its value is not a write");
    let status = json!({"status": {"conditions": [{"type": "Ready",
        "lastHeartbeatTime": "2026-11-28T08:00:00Z"}]}});
    let b = api
        .patch_status("noop-1", &pp, &Patch::Strategic(&status))
        .await
        .unwrap();
    assert_eq!(rv(&b), before, "the same heartbeat again is not a write");
    let c = api
        .replace("noop-1", &PostParams::default(), &b)
        .await
        .unwrap();
    assert_eq!(rv(&c), before, "a PUT of the object as read is not a write");
    assert_eq!(c.metadata.managed_fields, created.metadata.managed_fields);

    // A real change is written, and it is the first thing the watch hears.
    let d = set_pool(&api, "b").await;
    assert_ne!(rv(&d), before, "a change is written");
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), watch.next())
        .await
        .expect("the watch hears of the change")
        .expect("the watch is open")
        .unwrap();
    match first {
        WatchEvent::Modified(n) => {
            assert_eq!(rv(&n), rv(&d), "the no-op writes sent nothing before it");
            assert_eq!(n.metadata.labels.unwrap()["pool"], "b");
        }
        other => panic!("expected the label change first, got {other:?}"),
    }
}
