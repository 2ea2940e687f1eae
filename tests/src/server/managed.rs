//! `metadata.managedFields`, as kube-apiserver keeps them on every write that is not a server-side
//! apply (recordings 08 and 11 show the shape): one entry per manager, operation and subresource,
//! `fieldsType: FieldsV1`, the fields that manager set in `fieldsV1` (`f:` for a field, `k:{...}`
//! for an element of a list keyed by `type` or `name`, `.` for a map or element the manager
//! created), and the `time` of its last write. A write takes the fields it changed from whoever
//! owned them; an entry left owning nothing is dropped. The manager is the request's
//! `fieldManager`, else its User-Agent up to the first `/`, as the real server derives it.
//!
//! This matters to clients' costs more than to their logic: every watch event of a real cluster
//! carries these entries (a kubelet-heartbeated Node a few KB of them), and a client decodes them.

use serde_json::{Map, Value, json};

/// Metadata fields the server sets: never owned by a manager.
const SERVER_SET: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
];

/// The manager a request writes as: `fieldManager`, else the User-Agent's prefix.
pub(crate) fn manager(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    match field_manager {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => user_agent
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("")
            .to_string(),
    }
}

/// The key of a list element: `k:{"type":"Ready"}` for conditions, by `name` for most other lists.
fn element_key(item: &Value) -> Option<String> {
    ["type", "name"].iter().find_map(|k| {
        item.get(*k)
            .and_then(Value::as_str)
            .map(|v| format!("k:{}", json!({ *k: v })))
    })
}

/// The fields `new` sets that `old` did not hold with the same value, as a FieldsV1 set (None:
/// nothing changed).
fn changed(old: Option<&Value>, new: &Value, top: bool) -> Option<Map<String, Value>> {
    changed_in(old, new, top, false)
}

/// Fields of Go map type (any key), as opposed to structs: a created map is owned as `.`; a struct
/// (`spec`, `status`, `nodeInfo`) is not.
const MAPS: &[&str] = &[
    "labels",
    "annotations",
    "capacity",
    "allocatable",
    "nodeSelector",
    "matchLabels",
    "data",
    "binaryData",
    "stringData",
    "limits",
    "requests",
];

/// [`changed`] of a field; `map`: the field is a map (or a list element), owned as `.` when new.
fn changed_in(
    old: Option<&Value>,
    new: &Value,
    top: bool,
    map: bool,
) -> Option<Map<String, Value>> {
    match new {
        Value::Object(fields) => {
            let mut set = Map::new();
            for (k, v) in fields {
                // A null is an unset field once the server decodes the object.
                if v.is_null() || (top && (k == "kind" || k == "apiVersion")) {
                    continue;
                }
                let before = old.and_then(|o| o.get(k));
                let inner = if k == "metadata" && top {
                    changed_metadata(before, v)
                } else {
                    changed_in(before, v, false, MAPS.contains(&k.as_str()))
                };
                if let Some(inner) = inner {
                    set.insert(format!("f:{k}"), Value::Object(inner));
                }
            }
            if old.is_none() && map {
                set.insert(".".into(), json!({}));
            }
            (!set.is_empty()).then_some(set)
        }
        Value::Array(items) if items.iter().all(|i| element_key(i).is_some()) => {
            let mut set = Map::new();
            for item in items {
                let key = element_key(item).unwrap();
                let before = old.and_then(Value::as_array).and_then(|o| {
                    o.iter()
                        .find(|x| element_key(x).as_deref() == Some(key.as_str()))
                });
                if let Some(inner) = changed_in(before, item, false, true) {
                    set.insert(key, Value::Object(inner));
                }
            }
            if old.is_none() {
                set.insert(".".into(), json!({}));
            }
            (!set.is_empty()).then_some(set)
        }
        // A scalar, or a list whose elements have no key (atomic: owned whole).
        leaf => (old != Some(leaf)).then(Map::new),
    }
}

/// [`changed`] of the metadata: the fields a manager can own (not those the server sets, nor the
/// name and namespace), compared in place: the managedFields are most of a Node's metadata, and
/// copying them on each write to leave them out cost more than the comparison. An object's
/// metadata exists whenever it does: no `.` for it.
fn changed_metadata(old: Option<&Value>, new: &Value) -> Option<Map<String, Value>> {
    let Value::Object(fields) = new else {
        return None;
    };
    let mut set = Map::new();
    for (k, v) in fields {
        let unowned = SERVER_SET.contains(&k.as_str()) || k == "name" || k == "namespace";
        if v.is_null() || unowned {
            continue;
        }
        let before = old.and_then(|o| o.get(k));
        if let Some(inner) = changed_in(before, v, false, MAPS.contains(&k.as_str())) {
            set.insert(format!("f:{k}"), Value::Object(inner));
        }
    }
    (!set.is_empty()).then_some(set)
}

/// Merge FieldsV1 set `b` into `a`.
fn union(a: &mut Map<String, Value>, b: &Map<String, Value>) {
    for (k, v) in b {
        match (a.get_mut(k), v) {
            (Some(Value::Object(x)), Value::Object(y)) => union(x, y),
            _ => {
                a.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Take the leaves of `taken` out of `a` (another manager now owns them); true when `a` is left
/// owning nothing.
fn subtract(a: &mut Map<String, Value>, taken: &Map<String, Value>) -> bool {
    for (k, v) in taken {
        let Value::Object(inner) = v else { continue };
        if inner.keys().all(|k| k == ".") {
            a.remove(k);
        } else if let Some(Value::Object(mine)) = a.get_mut(k)
            && subtract(mine, inner)
        {
            a.remove(k);
        }
    }
    a.keys().all(|k| k == ".")
}

/// Record the write of `new` over `old` (None: a create) by `manager` in `new`'s managedFields.
pub(crate) fn track(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let Some(set) = changed(old, new, true) else {
        return; // nothing written: the entries stay as they were
    };
    let mut entries: Vec<Value> = old
        .and_then(|o| o["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    let subresource = subresource.unwrap_or("");
    let mine = |e: &Value| {
        e["manager"] == manager
            && e["operation"] == "Update"
            && e["subresource"].as_str().unwrap_or("") == subresource
    };
    entries.retain_mut(|e| {
        if mine(e) {
            return true;
        }
        match e.get_mut("fieldsV1").and_then(Value::as_object_mut) {
            Some(fields) => !subtract(fields, &set),
            None => true,
        }
    });
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            if let Some(fields) = e.get_mut("fieldsV1").and_then(Value::as_object_mut) {
                union(fields, &set);
            }
            e["time"] = json!(now);
        }
        None => {
            let mut e = json!({
                "manager": manager,
                "operation": "Update",
                "apiVersion": api_version,
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": set,
            });
            if !subresource.is_empty() {
                e["subresource"] = json!(subresource);
            }
            entries.push(e);
        }
    }
    new["metadata"]["managedFields"] = Value::Array(entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape recording 08 shows for a status update by "recorder" of two conditions.
    #[test]
    fn a_status_update_owns_the_conditions_it_wrote_keyed_by_type() {
        let old = json!({"metadata": {"name": "n", "labels": {"a": "1"}}, "status": {}});
        let mut new = json!({"metadata": {"name": "n", "labels": {"a": "1"}}, "status": {"conditions": [
            {"type": "KernelDeadlock", "status": "False", "reason": "r"},
            {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
        track(
            Some(&old),
            &mut new,
            "recorder",
            "v1",
            Some("status"),
            "2026-11-22T03:23:53Z",
        );
        let e = &new["metadata"]["managedFields"][0];
        assert_eq!(e["manager"], "recorder");
        assert_eq!(e["subresource"], "status");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:status": {"f:conditions": {".": {},
                "k:{\"type\":\"KernelDeadlock\"}": {".": {}, "f:reason": {}, "f:status": {}, "f:type": {}},
                "k:{\"type\":\"Ready\"}": {".": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}})
        );
    }

    #[test]
    fn a_heartbeat_renews_the_time_and_another_manager_takes_what_it_changes() {
        let mut node = json!({"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastHeartbeatTime": "t0"}]}});
        track(None, &mut node, "kubelet", "v1", Some("status"), "t0");
        let mut beat = node.clone();
        beat["status"]["conditions"][0]["lastHeartbeatTime"] = json!("t1");
        track(
            Some(&node),
            &mut beat,
            "kubelet",
            "v1",
            Some("status"),
            "t1",
        );
        let entries = beat["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["time"], "t1");
        // Nothing changed: nothing recorded.
        let mut same = beat.clone();
        track(
            Some(&beat),
            &mut same,
            "kubelet",
            "v1",
            Some("status"),
            "t2",
        );
        assert_eq!(same["metadata"]["managedFields"][0]["time"], "t1");
        // Another manager writes the same condition's status: kubelet keeps only the rest.
        let mut other = beat.clone();
        other["status"]["conditions"][0]["status"] = json!("False");
        track(Some(&beat), &mut other, "npd", "v1", Some("status"), "t3");
        let entries = other["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        let ready = &entries[0]["fieldsV1"]["f:status"]["f:conditions"]["k:{\"type\":\"Ready\"}"];
        assert!(
            ready.get("f:status").is_none() && ready.get("f:lastHeartbeatTime").is_some(),
            "{ready}"
        );
        assert_eq!(entries[1]["manager"], "npd");
    }

    #[test]
    fn the_manager_is_the_field_manager_else_the_user_agents_prefix() {
        assert_eq!(manager(Some("x"), Some("kubectl/v1.30")), "x");
        assert_eq!(
            manager(None, Some("kubectl/v1.30.0 (linux/amd64)")),
            "kubectl"
        );
        assert_eq!(manager(Some(""), None), "");
    }
}
