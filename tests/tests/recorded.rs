//! The test API server against exchanges recorded from a real kube-apiserver
//! (`shared/reference/apiserver/`): the same requests, in order, must get the same status codes, the
//! same Status reasons, and the same condition lists. Skipped (with the reason printed) when the
//! recordings are not beside the repository.

use std::path::PathBuf;

use nodemedic_tests::server::TestApiServer;
use serde_json::Value;

/// Recordings replayed, in order (they build on each other: 01 creates tn-1, ...).
const REPLAYED: &[&str] = &[
    "01-node-create",
    "03-node-status-smp-ready",
    "04-node-status-smp-add-condition",
    "05-node-status-smp-status-only",
    "07-node-status-merge-patch-replaces-list",
    "13-node-cordon-smp",
    "14-node-put-stale-resourceversion",
    "18-pods-list-bad-field-selector",
    "52-node-get-missing",
    "55-patch-unsupported-media-type",
    "56-node-status-smp-condition-without-type",
];

fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/reference/apiserver"
    ))
}

/// Whether the recordings are beside the repository; when not, says the test is skipped.
fn recordings_here() -> bool {
    let here = dir().exists();
    if !here {
        eprintln!("skipped: {} not found", dir().display());
    }
    here
}

/// The recording `name` (its file name without `.json`).
fn recording(name: &str) -> Value {
    let path = dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn condition_types(body: &Value) -> Vec<String> {
    body.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| c["type"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn answers_like_the_recorded_kube_apiserver() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    let client = server.client();
    for name in REPLAYED {
        let (status, got, rec) = replay(&client, name, None).await;
        let want = &rec["response"]["body"];
        assert_eq!(
            status,
            rec["response"]["status"].as_u64().unwrap() as u16,
            "{name}: status; body {got}"
        );
        if want["kind"] == "Status" {
            assert_eq!(got["kind"], "Status", "{name}");
            assert_eq!(got["status"], "Failure", "{name}");
            assert_eq!(got["code"], want["code"], "{name}: code");
            assert_eq!(got.get("reason"), want.get("reason"), "{name}: reason");
        } else {
            assert_eq!(got["kind"], want["kind"], "{name}: kind");
            assert_eq!(
                condition_types(&got),
                condition_types(want),
                "{name}: conditions"
            );
            assert_eq!(
                got.pointer("/spec/unschedulable"),
                want.pointer("/spec/unschedulable"),
                "{name}: spec.unschedulable"
            );
        }
        if *name == "07-node-status-merge-patch-replaces-list" {
            // Recording 07's note: the recorder then restored Ready=True and KernelDeadlock=False with a
            // strategic-merge patch that was not recorded. Do the same so 13 starts from the same state.
            let restore = serde_json::json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
                {"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock", "message": "kernel has no deadlock"}
            ]}});
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
            nodes
                .patch_status(
                    "tn-1",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(restore),
                )
                .await
                .unwrap();
        }
    }
}

/// One recorded exchange, sent again to `server` as recorded but for `rv`: a resourceVersion in the
/// body is replaced with the one the test server gave the object (its counter is not the real
/// server's). Returns the status and body the test server answered, and the recording.
async fn replay(client: &kube::Client, name: &str, rv: Option<&str>) -> (u16, Value, Value) {
    replay_with(client, name, |body| {
        if let Some(rv) = rv {
            body["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        }
    })
    .await
}

/// One recorded exchange, sent again with its body as `edit` leaves it.
async fn replay_with(
    client: &kube::Client,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> (u16, Value, Value) {
    let rec = recording(name);
    let req = &rec["request"];
    let mut body = req["body"].clone();
    edit(&mut body);
    let (status, got) = send(
        client,
        req["method"].as_str().unwrap(),
        req["url"].as_str().unwrap(),
        req["headers"]["Content-Type"].as_str(),
        &body,
    )
    .await;
    (status, got, rec)
}

async fn send(
    client: &kube::Client,
    method: &str,
    url: &str,
    content_type: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut builder = axum::http::Request::builder().method(method).uri(url);
    if let Some(ct) = content_type {
        builder = builder.header("Content-Type", ct);
    }
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    let resp = client
        .send(builder.body(bytes).unwrap().map(Into::into))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(axum::body::Body::new(resp.into_body()), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Status code, and for a Status body its status, code, reason and causes' reasons, as recorded.
fn assert_answer(name: &str, status: u16, got: &Value, rec: &Value) {
    let want = &rec["response"]["body"];
    assert_eq!(
        status,
        rec["response"]["status"].as_u64().unwrap() as u16,
        "{name}: status; body {got}"
    );
    if want["kind"] == "Status" {
        for f in ["kind", "status", "code", "reason"] {
            assert_eq!(got.get(f), want.get(f), "{name}: {f} of {got}");
        }
        let causes = |v: &Value| -> Vec<Value> {
            v.pointer("/details/causes")
                .and_then(Value::as_array)
                .map(|c| c.iter().map(|c| c["reason"].clone()).collect())
                .unwrap_or_default()
        };
        assert_eq!(causes(got), causes(want), "{name}: causes of {got}");
    } else {
        assert_eq!(got["kind"], want["kind"], "{name}: kind of {got}");
    }
}

fn rv_of(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The writes the drainer makes to its after-drain taint (a strategic-merge PATCH of `spec.taints`
/// with the resourceVersion): taints have no patch merge key, so the list sent replaces the stored
/// one, and an empty one is not printed at all (57, 58).
#[tokio::test]
async fn taint_lists_are_replaced_whole_as_recorded() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    let client = server.client();
    for name in [
        "57-node-smp-taints-empty-list",
        "58-node-smp-taints-shorter-list",
    ] {
        let rec = recording(name);
        // The node as it was before (two taints, put there by a PUT).
        let _ = server.put_object(
            "v1",
            "nodes",
            None,
            serde_json::json!({"metadata": {"name": "tn-t", "labels": {"kubernetes.io/hostname": "tn-t"}},
                "spec": rec["before"]["spec"]}),
        );
        let rv = rv_of(&server.object("v1", "nodes", None, "tn-t").unwrap());
        let (status, got, rec) = replay(&client, name, Some(&rv)).await;
        assert_answer(name, status, &got, &rec);
        assert_eq!(got["spec"], rec["response"]["body"]["spec"], "{name}: spec");
        // The same write with a resourceVersion since superseded is a conflict, as for a PUT.
        let (status, got, _) = replay(&client, name, Some(&rv)).await;
        assert_eq!(
            status, 409,
            "{name} again with a stale resourceVersion: {got}"
        );
        assert_eq!(got["reason"], "Conflict");
    }
}

/// Eviction as recorded (31-39): a PDB's 429 with its cause, a name mismatch, a 201 Status, the pod
/// left terminating with the DisruptionTarget condition (no kubelet finishes it: the recorder had
/// stopped its stand-in), a second eviction of the terminating pod, a missing pod. Then the graceful
/// deletion a kubelet finishes, as the scenarios see it.
#[tokio::test]
async fn evictions_answer_and_leave_pods_as_recorded() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    server.stop_kubelets();
    let client = server.client();
    let (status, pod, rec) = replay(&client, "31-pod-create-bound", None).await;
    assert_answer("31", status, &pod, &rec);
    // What defaulting and admission add (the service account token volume aside: no service
    // accounts here).
    let mut want_spec = rec["response"]["body"]["spec"].clone();
    want_spec.as_object_mut().unwrap().remove("volumes");
    want_spec["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("volumeMounts");
    assert_eq!(pod["spec"], want_spec, "31: the defaulted spec");
    assert_eq!(
        pod["status"], rec["response"]["body"]["status"],
        "31: status"
    );
    let (status, got, rec) = replay(&client, "32-pdb-create", None).await;
    assert_answer("32", status, &got, &rec);
    // The disruption controller's part (33), which this server leaves to the tests.
    let rec33 = recording("33-pdb-get-after-controller");
    let mut pdb = got.clone();
    pdb["status"] = rec33["response"]["body"]["status"].clone();
    server.put_object("policy/v1", "poddisruptionbudgets", Some("ev"), pdb);
    let (status, got, rec) = replay(&client, "34-eviction-blocked-by-pdb", None).await;
    assert_answer("34", status, &got, &rec);
    assert_eq!(
        got["details"]["causes"][0]["message"],
        rec["response"]["body"]["details"]["causes"][0]["message"]
    );
    // "The PDB was deleted 1 s earlier" (36's note).
    let _ = send(
        &client,
        "DELETE",
        "/apis/policy/v1/namespaces/ev/poddisruptionbudgets/ev-pdb",
        None,
        &Value::Null,
    )
    .await;
    for name in [
        "35-eviction-name-mismatch",
        "36-eviction-allowed",
        "37-pod-get-after-eviction",
        "38-eviction-of-terminating-pod",
        "39-eviction-missing-pod",
    ] {
        let (status, got, rec) = replay(&client, name, None).await;
        assert_answer(name, status, &got, &rec);
        if name.starts_with("36") || name.starts_with("38") {
            assert_eq!(got, rec["response"]["body"], "{name}: a bare Status");
        }
        if name.starts_with("37") {
            let want = &rec["response"]["body"];
            assert_eq!(
                got["metadata"]["deletionGracePeriodSeconds"],
                want["metadata"]["deletionGracePeriodSeconds"]
            );
            assert!(got["metadata"]["deletionTimestamp"].is_string(), "{got}");
            let disruption = |p: &Value| {
                p["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "DisruptionTarget"))
                    .map(|c| {
                        (
                            c["status"].clone(),
                            c["reason"].clone(),
                            c["message"].clone(),
                        )
                    })
            };
            assert_eq!(disruption(&got), disruption(want), "37: {got}");
        }
    }
    // With kubelets (the scenarios' default), a graceful delete goes MODIFIED (terminating), then
    // DELETED once the stand-in finishes it; grace 0 goes at once.
    let server = TestApiServer::start().await;
    let client = server.client();
    let (status, _, _) = replay(&client, "31-pod-create-bound", None).await;
    assert_eq!(status, 201);
    let (status, pod) = send(
        &client,
        "DELETE",
        "/api/v1/namespaces/ev/pods/ev-1",
        Some("application/json"),
        &serde_json::json!({"gracePeriodSeconds": 10}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 10, "{pod}");
    nodemedic_tests::cluster::eventually(
        "the stand-in kubelet finishing the deletion",
        std::time::Duration::from_secs(60),
        || async {
            server
                .object("v1", "pods", Some("ev"), "ev-1")
                .is_none()
                .then_some(())
        },
    )
    .await;
}

/// Lease writes as the leader election makes them (41-45): create, renew with the current
/// resourceVersion, a stale one is 409, nine fractional digits are a 400 decoding error, a missing
/// Lease is 404. And the core/v1 Event the binaries write (27).
#[tokio::test]
async fn leases_and_core_events_answer_as_recorded() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    let client = server.client();
    let (status, lease, rec) = replay(&client, "41-lease-create", None).await;
    assert_answer("41", status, &lease, &rec);
    assert_eq!(lease["spec"], rec["response"]["body"]["spec"]);
    let (status, renewed, rec) = replay(&client, "42-lease-put-renew", Some(&rv_of(&lease))).await;
    assert_answer("42", status, &renewed, &rec);
    assert_eq!(renewed["spec"], rec["response"]["body"]["spec"]);
    let (status, got, rec) = replay(
        &client,
        "43-lease-put-stale-resourceversion",
        Some(&rv_of(&lease)),
    )
    .await;
    assert_answer("43", status, &got, &rec);
    assert_eq!(got["message"], rec["response"]["body"]["message"]);
    assert_eq!(got["details"], rec["response"]["body"]["details"]);
    for name in [
        "44-lease-create-nanosecond-time",
        "45-lease-get-missing",
        "26-event-events-v1-eventtime-seconds",
    ] {
        let (status, got, rec) = replay(&client, name, None).await;
        assert_answer(name, status, &got, &rec);
    }
    let (status, got, rec) = replay(&client, "27-event-core-v1-create", None).await;
    assert_answer("27", status, &got, &rec);
    for f in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "count",
        "type",
    ] {
        assert_eq!(got[f], rec["response"]["body"][f], "27: {f}");
    }
}

/// Who may write a Node's metadata (59-62): a PATCH of `nodes/NAME/status` keeps metadata changes
/// and drops `spec`; a node identity may not write another node (60) nor a restricted label on its
/// own (61), but may annotate its own Node (62). The drainer's record seals rest on these.
#[tokio::test]
async fn status_patches_keep_metadata_and_node_identities_reach_only_their_own_node() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    let admin = server.client();
    // The two nodes as 59 shows them before (labels, the admission taint).
    let rec59 = recording("59-node-status-smp-metadata-kept-spec-dropped");
    let before = &rec59["before"];
    for n in ["tn-a", "tn-b"] {
        let mut node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}, "spec": before["spec"]});
        node["metadata"]["labels"]["kubernetes.io/hostname"] = Value::String(n.into());
        let (status, got) = send(
            &admin,
            "POST",
            "/api/v1/nodes",
            Some("application/json"),
            &node,
        )
        .await;
        assert_eq!(status, 201, "create {n}: {got}");
    }
    // 59: metadata kept, spec ignored, the condition added.
    let (status, got, rec) = replay(
        &admin,
        "59-node-status-smp-metadata-kept-spec-dropped",
        None,
    )
    .await;
    assert_answer("59", status, &got, &rec);
    let want = &rec["response"]["body"];
    for field in ["/metadata/labels", "/metadata/annotations", "/spec"] {
        assert_eq!(
            got.pointer(field),
            want.pointer(field),
            "59: {field} of {got}"
        );
    }
    assert!(condition_types(&got).contains(&"KernelDeadlock".to_string()));
    // 60-62 as the node identity system:node:tn-a.
    let node_a = server.client_as_node("tn-a");
    for name in [
        "60-node-status-patch-other-node-as-node-identity",
        "61-node-status-own-node-restricted-label",
        "62-node-status-own-node-annotation",
    ] {
        let (status, got, rec) = replay(&node_a, name, None).await;
        assert_answer(name, status, &got, &rec);
        let want = &rec["response"]["body"];
        if want["kind"] == "Status" {
            assert_eq!(got["message"], want["message"], "{name}");
            assert_eq!(got["details"], want["details"], "{name}");
        } else {
            assert_eq!(
                got.pointer("/metadata/annotations"),
                want.pointer("/metadata/annotations"),
                "{name}"
            );
        }
    }
    // Nothing of 60's or 61's reached the nodes.
    let b = server.object("v1", "nodes", None, "tn-b").unwrap();
    assert_eq!(
        b["status"]["conditions"]
            .as_array()
            .map(|c| c.iter().any(|c| c["reason"] == "Forged")),
        Some(false)
    );
    let a = server.object("v1", "nodes", None, "tn-a").unwrap();
    assert!(
        a["metadata"]["labels"]
            .get("node-restriction.kubernetes.io/x")
            .is_none()
    );
}

/// `?dryRun=All` (no recording; kube-apiserver's API concepts, "Dry-run": "the request is still
/// processed as typical request: the fields are defaulted, the object is validated, it goes
/// through the validation admission chain ... but the final storage is skipped"): the answer is the
/// object as it would be stored, and nothing is stored or seen by a watch. The detector relies on
/// it to learn what its credential may write without writing (detector/src/report/confinement.rs).
#[tokio::test]
async fn a_dry_run_answers_the_would_be_object_and_stores_nothing() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;
    let server = TestApiServer::start().await;
    let nodes: kube::Api<Node> = kube::Api::all(server.client());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "dry"}})).unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let rv = created.metadata.resource_version.clone();
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let answered = nodes
        .patch_status(
            "dry",
            &dry,
            &Patch::Strategic(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        answered.metadata.labels.unwrap()["a"],
        "b",
        "the would-be object"
    );
    let stored = nodes.get("dry").await.unwrap();
    assert_eq!(stored.metadata.labels, None, "nothing stored");
    assert_eq!(stored.metadata.resource_version, rv);
    let dry_create = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let other: Node = serde_json::from_value(json!({"metadata": {"name": "dry-new"}})).unwrap();
    nodes.create(&dry_create, &other).await.unwrap();
    assert!(
        nodes.get_opt("dry-new").await.unwrap().is_none(),
        "no object created"
    );
}

/// `metadata.managedFields` as recording 08 shows them after the recorder (User-Agent `recorder`)
/// created the node with labels (01) and patched two conditions into its status (03, 04): an
/// Update entry per subresource, the labels owned by the create, each condition keyed by its type
/// with every field it set. What a watch client decodes with every event of a real cluster.
#[tokio::test]
async fn writes_record_their_fields_in_managed_fields_as_recorded() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    let client = server.client_with_agent("recorder");
    for name in [
        "01-node-create",
        "03-node-status-smp-ready",
        "04-node-status-smp-add-condition",
    ] {
        let (status, got, rec) = replay(&client, name, None).await;
        assert_answer(name, status, &got, &rec);
    }
    let (_, got) = send(&client, "GET", "/api/v1/nodes/tn-1", None, &Value::Null).await;
    let rec = recording("08-node-status-apply-condition");
    let entries = |v: &Value, manager: &str| -> Vec<(Value, Value, Value)> {
        v.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .unwrap_or(&Vec::new())
            .iter()
            .filter(|e| e["manager"] == manager)
            .map(|e| {
                (
                    e["operation"].clone(),
                    e.get("subresource").cloned().unwrap_or(Value::Null),
                    e["fieldsV1"].clone(),
                )
            })
            .collect()
    };
    let want = entries(&rec["response"]["body"], "recorder");
    assert_eq!(want.len(), 2, "the recording's two recorder entries");
    assert_eq!(entries(&got, "recorder"), want);
    // A heartbeat by the same manager renews its entry's time and owns nothing new.
    let before = got["metadata"]["managedFields"].as_array().unwrap().len();
    let beat = serde_json::json!({"status": {"conditions": [
        {"type": "Ready", "lastHeartbeatTime": "2027-01-01T00:00:00Z"}]}});
    let (status, after) = send(
        &client,
        "PATCH",
        "/api/v1/nodes/tn-1/status",
        Some("application/strategic-merge-patch+json"),
        &beat,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        after["metadata"]["managedFields"].as_array().unwrap().len(),
        before
    );
    assert_eq!(entries(&after, "recorder"), want);
}

/// A create's status is dropped (kube-apiserver's PrepareForCreate): recording 31's request with a
/// kubelet's status added gets 31's answer, Pending and the QoS class only. The status a kubelet
/// then writes through `pods/status` stays, beside what the server set, and leaves the spec as
/// created. The benches' fixture and the scenarios' pods rely on both.
#[tokio::test]
async fn a_pod_create_drops_its_status_and_pods_status_sets_it() {
    if !recordings_here() {
        return;
    }
    let server = TestApiServer::start().await;
    server.stop_kubelets();
    let client = server.client();
    let (status, created, rec) = replay_with(&client, "31-pod-create-bound", |body| {
        body["status"] = serde_json::json!({"phase": "Running", "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}]});
    })
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["status"], rec["response"]["body"]["status"]);

    let kubelet = serde_json::json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    let url = rec["request"]["url"].as_str().unwrap();
    let status_url = format!("{url}/ev-1/status");
    let merge = Some("application/merge-patch+json");
    let (status, patched) = send(&client, "PATCH", &status_url, merge, &kubelet).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["status"]["phase"], "Running");
    assert_eq!(patched["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(patched["status"]["qosClass"], "BestEffort", "kept beside");
    assert_eq!(patched["spec"], created["spec"], "the spec as created");
    let (_, read) = send(&client, "GET", &format!("{url}/ev-1"), None, &Value::Null).await;
    assert_eq!(read["status"], patched["status"], "stored");
}
