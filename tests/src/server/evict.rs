//! `POST pods/{name}/eviction` (policy/v1 Eviction), as recorded: 404 for a missing pod, 400 for a
//! name mismatch, 429 with a DisruptionBudget cause while a matching PodDisruptionBudget allows no
//! disruption (its `status.disruptionsAllowed`, which tests set as the disruption controller would),
//! 201 with a bare Success Status otherwise. An allowed eviction decrements the budget, adds the
//! `DisruptionTarget` condition and starts a graceful deletion (`terminate`); a pod already
//! terminating is evicted again without a budget check (recording 38).

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::store::{Key, not_found};
use super::watch::Hub;
use super::{Inner, Target, error, json_response};

pub(crate) fn evict(inner: &Arc<Mutex<Inner>>, hub: &Hub, t: &Target, body: &Value) -> Response {
    let name = t.name.clone().unwrap_or_default();
    if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
        return error(
            400,
            Some("BadRequest"),
            "name in URL does not match name in Eviction object",
            None,
        );
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let pod_key = Key::new(&t.api, "pods", Some(&ns), &name);
    let mut guard = inner.lock().unwrap();
    let Some(pod) = guard.store.get(&pod_key) else {
        return not_found(&Target {
            resource: "pods".into(),
            sub: None,
            ..t.clone()
        });
    };
    // A pod already terminating is not checked against budgets again (recording 38).
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return success();
    }
    let labels = pod["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let pdbs = guard
        .store
        .list("policy/v1", "poddisruptionbudgets", Some(&ns));
    for pdb in pdbs {
        let sel = pdb["spec"]["selector"]["matchLabels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if sel.is_empty() || !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            continue;
        }
        let allowed = pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
        let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or("").to_string();
        if allowed <= 0 {
            let healthy = pdb["status"]["currentHealthy"].as_i64().unwrap_or(0);
            let desired = pdb["status"]["desiredHealthy"].as_i64().unwrap_or(0);
            let mut s = super::status_body(
                429,
                Some("TooManyRequests"),
                "Cannot evict pod as it would violate the pod's disruption budget.",
                None,
            );
            s["details"] = json!({"causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently")}]});
            return json_response(StatusCode::TOO_MANY_REQUESTS, &s);
        }
        let mut pdb = pdb.clone();
        pdb["status"]["disruptionsAllowed"] = json!(allowed - 1);
        let k = Key::new("policy/v1", "poddisruptionbudgets", Some(&ns), &pdb_name);
        let stored = guard.store.put(&k, pdb);
        hub.publish(&k, "MODIFIED", stored);
    }
    super::terminate::mark_disruption_target(&mut guard, hub, &pod_key);
    drop(guard);
    let grace =
        super::terminate::grace_for(&pod, body["deleteOptions"]["gracePeriodSeconds"].as_i64());
    super::terminate::delete_pod(inner, hub, &pod_key, grace);
    success()
}

/// 201 with a bare Success Status, not the pod (recording 36).
fn success() -> Response {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}
