use super::*;
use k8s_openapi::api::core::v1::Node;

const KUBELET_NODE: &str = include_str!("../../../../tests/fixtures/scale/kubelet-like-node.json");

fn decode(text: &str) -> NodeView {
    NodeView::from_lite(serde_json::from_str(text).unwrap())
}

/// Decode `text` as the watch does, with `earlier` as the cache.
fn decode_after(text: &str, earlier: &[Arc<NodeView>]) -> NodeView {
    let cache: Vec<Arc<NodeView>> = earlier.to_vec();
    let find: Earlier = Arc::new(move |name: &str| cache.iter().find(|v| v.name == name).cloned());
    reusing(&find, || decode(text))
}

#[test]
fn the_lite_decoding_gives_the_same_view_and_takes_year_9999() {
    let full: Node = serde_json::from_str(KUBELET_NODE).unwrap();
    assert_eq!(NodeView::of(&full), decode(KUBELET_NODE));
    let odd = r#"{"metadata": {"name": "odd", "creationTimestamp": "9999-12-31T23:00:00Z", "resourceVersion": "5"},
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "9999-12-31T23:59:59Z"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "9999-12-31T23:59:59Z"}]}}"#;
    assert!(
        serde_json::from_str::<Node>(odd).is_err(),
        "the full type cannot hold it"
    );
    let v = decode(odd);
    assert_eq!(v.name, "odd");
    assert_eq!(v.resource_version, "5");
    assert_eq!(v.ready_since(), Some(Timestamp::MAX));
    assert_eq!(
        v.flap_taint().map(|k| k.as_str()),
        Some("node.kubernetes.io/unreachable")
    );
}

#[test]
fn escaped_null_and_odd_fields_decode_as_the_full_type_reads_them() {
    let text = r#"{"metadata": {"name": "n\u0031", "labels": {"a\/b": "x\"y", "empty": ""}, "annotations": null},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, {"key": "other", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Maybe", "reason": null}, {"type": "Disk", "status": ""}]}}"#;
    let full: Node = serde_json::from_str(text).unwrap();
    let lite = decode(text);
    assert_eq!(NodeView::of(&full), lite);
    assert_eq!(lite.name, "n1");
    assert_eq!(lite.label("a/b"), Some("x\"y"));
    assert_eq!(lite.conditions[0].status, Status::Unknown);
    assert_eq!(lite.conditions[1].status, Status::Unknown);
    assert_eq!(
        lite.flap_taint(),
        None,
        "not NoExecute, or not a flap taint"
    );
    assert_eq!(lite.taints.len(), 2, "every taint is kept");
}

#[test]
fn a_label_that_is_not_text_fails_the_node_with_its_position() {
    let err =
        serde_json::from_str::<NodeLite>(r#"{"metadata": {"labels": {"a": 1}}}"#).unwrap_err();
    assert!(err.to_string().contains("column"), "{err}");
}

/// `text` with its first `from` replaced by `to`.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from}");
    text.replacen(from, to, 1)
}

#[test]
fn a_status_update_reuses_what_did_not_change_and_reads_what_did() {
    let first = Arc::new(decode(KUBELET_NODE));
    // A kubelet's status update: new heartbeat times and resourceVersion, nothing else.
    let beat = KUBELET_NODE.replace("lastHeartbeatTime\": \"2", "lastHeartbeatTime\": \"3");
    assert_ne!(beat, KUBELET_NODE);
    let again = decode_after(&beat, std::slice::from_ref(&first));
    assert!(again.same_state(&first));
    assert_ne!(again, *first, "the heartbeats are read");
    assert!(
        again.conditions[0].heartbeat > first.conditions[0].heartbeat,
        "a later year"
    );
    assert!(ArcStr::ptr_eq(&again.name, &first.name));
    assert!(again.labels.shares(&first.labels));
    assert!(again.annotations.shares(&first.annotations));
    for (a, b) in again.conditions.iter().zip(&*first.conditions) {
        assert!(ArcStr::ptr_eq(&a.type_, &b.type_));
        assert_eq!(a.reason.is_some(), b.reason.is_some());
        if let (Some(x), Some(y)) = (&a.reason, &b.reason) {
            assert!(ArcStr::ptr_eq(x, y));
        }
    }
    // Whatever changed is read, and the view is the one a fresh decode gives.
    let ready = r#""type": "Ready""#;
    for changed in [
        edit(
            &beat,
            "\"kubernetes.io/os\": \"linux\"",
            "\"kubernetes.io/os\": \"windows\"",
        ),
        edit(
            &beat,
            "\"beta.kubernetes.io/arch\"",
            "\"beta.kubernetes.io/arch-x\"",
        ),
        edit(&beat, "\"status\": \"False\"", "\"status\": \"True\""),
        edit(&beat, "KubeletReady", "KubeletNotReady"),
        edit(&beat, ready, r#""type": "Ready2""#),
        edit(
            &beat,
            "\"spec\": {",
            "\"spec\": {\"unschedulable\": true, \"taints\": [{\"key\": \"node.kubernetes.io/unreachable\", \"effect\": \"NoExecute\"}],",
        ),
    ] {
        let fresh = decode(&changed);
        let reused = decode_after(&changed, std::slice::from_ref(&first));
        assert_eq!(reused, fresh);
        assert!(!reused.same_state(&first), "the change is seen");
    }
    // Another node's earlier view is not taken for this one's.
    let other = edit(&beat, "\"name\": \"", "\"name\": \"x");
    let v = decode_after(&other, std::slice::from_ref(&first));
    assert_eq!(v, decode(&other));
    assert_ne!(v.name, first.name);
}

#[test]
fn a_node_whose_name_comes_after_its_labels_decodes_the_same() {
    let first = Arc::new(decode(
        r#"{"metadata": {"name": "n", "labels": {"a": "1"}}}"#,
    ));
    let later = r#"{"metadata": {"labels": {"a": "2"}, "name": "n"}}"#;
    assert_eq!(decode_after(later, &[first]), decode(later));
}

#[test]
fn api_server_times_read_by_position_equal_jiffs_reading() {
    // Every day of four years (a leap year among them) at a few times of day, and the edges.
    let start = Timestamp::from_second(1_704_067_200).unwrap(); // 2024-01-01
    for day in 0..(4 * 366) {
        for secs in [0, 1, 59, 3_599, 43_200, 86_399] {
            let t = Timestamp::from_second(start.as_second() + day * 86_400 + secs).unwrap();
            let text = t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            assert_eq!(utc_seconds(&text), Some(t), "{text}");
            assert_eq!(lite_time(&text), text.parse::<Timestamp>().unwrap());
        }
    }
    for text in [
        "0001-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
        "9999-12-30T00:00:00Z",
    ] {
        assert_eq!(utc_seconds(text), Some(text.parse().unwrap()), "{text}");
    }
    // Out of range or another form: the general reading decides, as before.
    for text in [
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:60Z",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00:00+01:00",
        "2026-01-01T00:00:00.5Z",
        "+026-01-01T00:00:00Z",
        "2026-01-01T00:00:0xZ",
        "9999-12-31T23:59:59Z",
        "",
    ] {
        assert_eq!(utc_seconds(text), None, "{text}");
        let general = text.parse::<Timestamp>().ok();
        let want = general.unwrap_or(if text.starts_with("9999-") {
            Timestamp::MAX
        } else {
            Timestamp::UNIX_EPOCH
        });
        assert_eq!(lite_time(text), want, "{text}");
    }
}

#[test]
fn the_nodes_software_is_kept_shared_and_reused_on_a_heartbeat() {
    let v = decode(KUBELET_NODE);
    let software: Vec<(&str, &str)> = v.software().collect();
    let full: Node = serde_json::from_str(KUBELET_NODE).unwrap();
    let info = full.status.unwrap().node_info.unwrap();
    assert_eq!(
        software,
        vec![
            ("kernel", info.kernel_version.as_str()),
            ("OS image", info.os_image.as_str()),
            ("container runtime", info.container_runtime_version.as_str()),
            ("kubelet", info.kubelet_version.as_str()),
        ]
    );
    // A heartbeat: the same string, not a new one; another kernel: a new one.
    let first = Arc::new(v);
    let again = decode_after(KUBELET_NODE, std::slice::from_ref(&first));
    let (a, b) = (first.info.as_ref().unwrap(), again.info.as_ref().unwrap());
    assert!(ArcStr::ptr_eq(a, b));
    let patched = edit(KUBELET_NODE, &info.kernel_version, "6.1.0-99-cloud");
    let other = decode_after(&patched, std::slice::from_ref(&first));
    assert_eq!(other.software().next(), Some(("kernel", "6.1.0-99-cloud")));
    assert!(!first.same_state(&other), "another kernel is news");
}
