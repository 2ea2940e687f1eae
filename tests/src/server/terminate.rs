//! Graceful pod deletion, as kube-apiserver's pod registry does it, and the kubelet's part of it.
//!
//! A DELETE or an eviction of a pod bound to a node does not remove it: the server sets
//! `deletionTimestamp` (now + grace) and `deletionGracePeriodSeconds` and the pod stays, terminating,
//! until its kubelet confirms the containers stopped by deleting it again with grace 0 (recording 37:
//! a pod right after its eviction). An eviction first adds the `DisruptionTarget` condition (reason
//! `EvictionByEvictionAPI`). A pod no node runs, one already Succeeded or Failed, or a grace period of
//! 0 is removed at once.
//!
//! A pod with `metadata.finalizers` is not removed when its deletion ends: it stays, with its
//! `deletionTimestamp` and a grace of 0, until a write empties the list (kube-apiserver's graceful
//! deletion keeps any object whose finalizers are not done; a tenant can so hold a pod on any node).
//!
//! This server has no kubelets, so it stands in for them as the scenarios' stand-in kubelet does on a
//! real control plane (`crate::cluster::Kubelet`): a terminating pod is removed [`FINISH_AFTER`] after
//! its deletion began. [`super::TestApiServer::stop_kubelets`] turns that off (the recordings were
//! made with the stand-in stopped).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::Inner;
use super::store::{Key, now_rfc3339};
use super::watch::Hub;

/// How long a stand-in kubelet takes to stop a terminating pod's containers: about what the real
/// control plane's stand-in takes (it looks every 250 ms), so the drainer sees the same sequence
/// (MODIFIED with a deletionTimestamp, then DELETED) on both.
const FINISH_AFTER: Duration = Duration::from_millis(150);

/// The grace period a deletion gets: the request's, else the pod's
/// `terminationGracePeriodSeconds` (default 30); 0 for a pod no node runs or that has finished.
pub(crate) fn grace_for(pod: &Value, requested: Option<i64>) -> i64 {
    let unbound = pod["spec"]["nodeName"].as_str().unwrap_or("").is_empty();
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if unbound || finished {
        return 0;
    }
    requested
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0)
}

/// Add the `DisruptionTarget` condition an eviction writes before it deletes (its own write, its
/// own resourceVersion, as the real server does it).
pub(crate) fn mark_disruption_target(inner: &mut Inner, hub: &Hub, key: &Key) {
    let Some(mut pod) = inner.store.get(key) else {
        return;
    };
    let cond = json!({
        "type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    });
    let conds = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conds: Vec<Value> = conds
        .into_iter()
        .filter(|c| c["type"] != "DisruptionTarget")
        .collect();
    conds.push(cond);
    pod["status"]["conditions"] = Value::Array(conds);
    let stored = inner.store.put(key, pod);
    hub.publish(key, "MODIFIED", stored);
}

/// Begin deleting the pod under `key` with `grace` seconds: removed at once for 0, else marked
/// terminating (a shorter grace than a running deletion's shortens it). Returns the pod as the
/// response shows it, or None when there is no such pod.
pub(crate) fn delete_pod(
    shared: &Arc<Mutex<Inner>>,
    hub: &Hub,
    key: &Key,
    grace: i64,
) -> Option<Value> {
    let mut inner = shared.lock().unwrap();
    let mut pod = inner.store.get(key)?;
    if grace == 0 {
        return remove_unless_held(&mut inner, hub, key);
    }
    let running = pod["metadata"]["deletionGracePeriodSeconds"].as_i64();
    if running.is_some_and(|r| r <= grace) {
        return Some(pod);
    }
    let at = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(grace))
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
    pod["metadata"]["deletionTimestamp"] = json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    pod["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    let stored = inner.store.put(key, pod);
    hub.publish(key, "MODIFIED", stored.clone());
    if !inner.no_kubelets {
        finish_later(
            shared.clone(),
            hub.clone(),
            key.clone(),
            stored["metadata"]["uid"].clone(),
        );
    }
    Some(stored)
}

/// The stand-in kubelet: remove the pod once its containers would have stopped, if it is still the
/// same terminating pod.
fn finish_later(shared: Arc<Mutex<Inner>>, hub: Hub, key: Key, uid: Value) {
    tokio::spawn(async move {
        tokio::time::sleep(FINISH_AFTER).await;
        let mut inner = shared.lock().unwrap();
        let same = inner.store.get(&key).is_some_and(|p| {
            p["metadata"]["uid"] == uid && !p["metadata"]["deletionTimestamp"].is_null()
        });
        if same {
            remove_unless_held(&mut inner, &hub, &key);
        }
    });
}

/// The end of a pod's deletion: removed, unless finalizers hold it (then it stays, terminating,
/// with a grace of 0). The pod as it is after.
fn remove_unless_held(inner: &mut Inner, hub: &Hub, key: &Key) -> Option<Value> {
    let mut pod = inner.store.get(key)?;
    let held = pod["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if !held {
        let old = inner.store.remove(key)?;
        hub.publish(key, "DELETED", old.clone());
        return Some(old);
    }
    if pod["metadata"]["deletionTimestamp"].is_null() {
        pod["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
    }
    if pod["metadata"]["deletionGracePeriodSeconds"] == json!(0) {
        return Some(pod);
    }
    pod["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    let stored = inner.store.put(key, pod);
    hub.publish(key, "MODIFIED", stored.clone());
    Some(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_comes_from_the_request_then_the_pod_and_is_zero_for_unbound_or_finished_pods() {
        let bound = json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 7}});
        assert_eq!(grace_for(&bound, None), 7);
        assert_eq!(grace_for(&bound, Some(2)), 2);
        assert_eq!(grace_for(&json!({"spec": {"nodeName": "n"}}), None), 30);
        assert_eq!(grace_for(&json!({"spec": {}}), Some(5)), 0);
        let done = json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}});
        assert_eq!(grace_for(&done, Some(5)), 0);
    }
}
