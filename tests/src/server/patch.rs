//! PATCH: strategic merge (lists with a merge key are merged by it, `$patch: delete` removes an entry,
//! patch entries come first), JSON merge (RFC 7386: lists replaced), and the recorded refusals (415
//! for plain JSON, 500 for a condition without its merge key `type`).

use std::sync::Mutex;

use axum::response::Response;
use serde_json::{Map, Value};

use super::store::{Key, conflict, keep_other_half, not_found};
use super::watch::Hub;
use super::{Caller, Inner, Target, bad_body, error};

/// How a strategic-merge patch treats a list, by the field's name, as the `patchStrategy` and
/// `patchMergeKey` tags of k8s.io/api declare it for the objects the tests write (Node, Pod, Lease,
/// Event, PodDisruptionBudget). Lists not named here have no patch strategy: the patch's list
/// replaces the stored one whole. Node `spec.taints` is one of them (recordings 57, 58): a patch
/// with a shorter or empty list removes the taints it leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Entries are merged by this key; `$patch: delete` removes one.
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`metadata.finalizers`, `spec.podCIDRs`).
    MergeSet,
    /// Replaced whole.
    Replace,
}

fn list_strategy(field: &str) -> ListStrategy {
    use ListStrategy::*;
    match field {
        // NodeStatus.conditions, PodStatus.conditions, NodeStatus.addresses.
        "conditions" | "addresses" => MergeByKey("type"),
        // PodSpec.containers, initContainers, ephemeralContainers, volumes, imagePullSecrets;
        // Container.env.
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "env" => MergeByKey("name"),
        "volumeMounts" => MergeByKey("mountPath"),
        "ports" => MergeByKey("containerPort"),
        "ownerReferences" => MergeByKey("uid"),
        "finalizers" | "podCIDRs" => MergeSet,
        // NodeSpec.taints, PodSpec.tolerations, status lists (images, containerStatuses, ...).
        _ => Replace,
    }
}

pub(crate) fn handle(
    inner: &Mutex<Inner>,
    hub: &Hub,
    t: &Target,
    content_type: Option<&str>,
    body: &[u8],
    caller: &Caller,
) -> Response {
    if !matches!(
        content_type,
        Some("application/strategic-merge-patch+json" | "application/merge-patch+json")
    ) {
        // The real server refuses the media type before it looks at the object (recording 55).
        return error(
            415,
            Some("UnsupportedMediaType"),
            "415: Unsupported Media Type",
            None,
        );
    }
    let patch: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_body(&e),
    };
    let key = Key::of(t);
    let mut guard = inner.lock().unwrap();
    let Some(old) = guard.store.get(&key) else {
        return not_found(t);
    };
    // A resourceVersion in the patch is a precondition (used to avoid acting on stale state).
    if let Some(rv) = patch
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && Some(rv)
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return conflict(t);
    }
    let mut merged = old.clone();
    match content_type {
        Some("application/strategic-merge-patch+json") => {
            if let Err(msg) = strategic(&mut merged, &patch, "") {
                return error(500, None, &msg, None);
            }
        }
        Some("application/merge-patch+json") => json_merge(&mut merged, &patch),
        _ => unreachable!("media type checked above"),
    }
    if let Err(r) = super::admit::decode(&t.resource, &super::store::kind_of(&t.resource), &merged)
    {
        return r;
    }
    keep_other_half(t, &old, &mut merged);
    merged["metadata"]["uid"] = old["metadata"]["uid"].clone();
    caller.commit(&mut guard.store, hub, t, &key, Some(&old), merged)
}

/// metav1.Time drops fractions and rewrites offsets to Z (recording 06), and a time the object's
/// type has but the write left out is written as `null` (Go's encoding of a zero metav1.Time):
/// a node's conditions have a heartbeat time and no `lastProbeTime` (recording 03), a pod's a
/// probe time (recording 37), and every kind of condition a transition time. On every write, as kube-apiserver decodes each into its
/// Go type: a create and a later write of the same object then store the same text.
pub(crate) fn normalise_condition_times(obj: &mut Value, resource: &str) {
    let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let fields: &[&str] = match resource {
        "nodes" => &["lastHeartbeatTime", "lastTransitionTime"],
        "pods" => &["lastProbeTime", "lastTransitionTime"],
        _ => &["lastTransitionTime"],
    };
    for c in conds {
        for f in ["lastHeartbeatTime", "lastTransitionTime", "lastProbeTime"] {
            if let Some(s) = c.get(f).and_then(Value::as_str) {
                if let Ok(ts) = s.parse::<k8s_openapi::jiff::Timestamp>() {
                    c[f] = Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                }
            } else if c.get(f).is_none() && c.is_object() && fields.contains(&f) {
                c[f] = Value::Null;
            }
        }
    }
}

fn json_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn strategic(target: &mut Value, patch: &Value, field: &str) -> Result<(), String> {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if k.starts_with('$') {
                    continue;
                }
                if v.is_null() {
                    t.remove(k);
                    continue;
                }
                let entry = t.entry(k.clone()).or_insert(Value::Null);
                if entry.is_null() {
                    *entry = strip_directives(v);
                    if let (ListStrategy::MergeByKey(key), Value::Array(items)) =
                        (list_strategy(k), &*entry)
                        && items.iter().any(|i| i.get(key).is_none())
                    {
                        return Err(missing_key(key));
                    }
                } else {
                    strategic(entry, v, k)?;
                }
            }
            Ok(())
        }
        (Value::Array(t), Value::Array(p)) => match list_strategy(field) {
            ListStrategy::Replace => {
                *t = p.iter().map(strip_directives).collect();
                Ok(())
            }
            ListStrategy::MergeSet => {
                for item in p {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
                Ok(())
            }
            ListStrategy::MergeByKey(key) => {
                let mut out: Vec<Value> = Vec::new();
                let mut deleted: Vec<Value> = Vec::new();
                for item in p {
                    let Some(id) = item.get(key) else {
                        return Err(missing_key(key));
                    };
                    if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                        deleted.push(id.clone());
                        continue;
                    }
                    let mut merged = t
                        .iter()
                        .find(|o| o.get(key) == Some(id))
                        .cloned()
                        .unwrap_or(Value::Object(Map::new()));
                    strategic(&mut merged, item, "")?;
                    out.push(merged);
                }
                for old in t.iter() {
                    let id = old.get(key);
                    if !out.iter().any(|o| o.get(key) == id)
                        && !deleted.iter().any(|d| Some(d) == id)
                    {
                        out.push(old.clone());
                    }
                }
                *t = out;
                Ok(())
            }
        },
        (t, p) => {
            *t = strip_directives(p);
            Ok(())
        }
    }
}

fn missing_key(key: &str) -> String {
    format!("map: map[] does not contain declared merge key: {key}")
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_merge_by_type_patch_entries_first_and_delete_directive() {
        let mut node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Old", "status": "True"},
        ]}});
        let patch = json!({"status": {"conditions": [
            {"type": "KernelDeadlock", "status": "True"},
            {"type": "Old", "$patch": "delete"},
        ]}});
        strategic(&mut node, &patch, "").unwrap();
        let types: Vec<&str> = node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["KernelDeadlock", "Ready"]);
    }

    #[test]
    fn a_condition_without_type_is_an_error_and_merge_patch_replaces_lists() {
        let mut node = json!({"status": {"conditions": [{"type": "Ready"}]}});
        assert!(
            strategic(
                &mut node,
                &json!({"status": {"conditions": [{"status": "True"}]}}),
                ""
            )
            .is_err()
        );
        json_merge(
            &mut node,
            &json!({"status": {"conditions": [{"type": "X"}]}}),
        );
        assert_eq!(node["status"]["conditions"], json!([{"type": "X"}]));
    }
}
