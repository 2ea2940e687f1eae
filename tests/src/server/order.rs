//! Objects written in kube-apiserver's field order. The real server encodes Go structs, so a field's
//! place is its place in the struct (`kind` and `apiVersion` first, `metadata` with `name` first, a
//! condition with `type` first); map keys (labels, annotations, capacity) come sorted. JSON readers
//! may not depend on it, but what a client costs does (one that reads a node's name before its labels
//! can compare them with what it already holds), so the test server writes the same order instead of
//! `serde_json::Value`'s alphabetical one. Fields the tables below do not name follow, sorted.

use serde_json::Value;

/// Field order of an object, by the key it is found under (`""` for a top-level object).
fn order(parent: &str) -> &'static [&'static str] {
    match parent {
        // TypeMeta inlined, then ObjectMeta/ListMeta, spec, status (Status objects: status, message).
        "" | "object" | "items" => &[
            "type",
            "kind",
            "apiVersion",
            "metadata",
            "spec",
            "status",
            "message",
            "reason",
            "details",
            "code",
            "object",
        ],
        // ObjectMeta, then ListMeta's own fields.
        "metadata" => &[
            "name",
            "generateName",
            "namespace",
            "selfLink",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
            "ownerReferences",
            "finalizers",
            "managedFields",
            "continue",
            "remainingItemCount",
        ],
        // NodeCondition, PodCondition and the conditions of other kinds.
        "conditions" => &[
            "type",
            "status",
            "observedGeneration",
            "lastHeartbeatTime",
            "lastProbeTime",
            "lastUpdateTime",
            "lastTransitionTime",
            "reason",
            "message",
        ],
        "taints" => &["key", "value", "effect", "timeAdded"],
        // NodeSpec (a PodSpec's fields are not named: they follow, sorted).
        "spec" => &[
            "podCIDR",
            "podCIDRs",
            "providerID",
            "unschedulable",
            "taints",
        ],
        // NodeStatus, and PodStatus's first fields.
        "status" => &[
            "capacity",
            "allocatable",
            "phase",
            "conditions",
            "addresses",
            "daemonEndpoints",
            "nodeInfo",
            "images",
        ],
        _ => &[],
    }
}

/// Maps, not structs: their keys are data, written sorted.
fn is_map(parent: &str) -> bool {
    matches!(
        parent,
        "labels"
            | "annotations"
            | "capacity"
            | "allocatable"
            | "data"
            | "matchLabels"
            | "nodeSelector"
    )
}

/// `v` as JSON text in kube-apiserver's field order.
pub fn to_string(v: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write(&mut out, v, "", &[]);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// `v` as a list item: as [`to_string`] without its top-level `kind` and `apiVersion`.
pub fn to_item_string(v: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write(&mut out, v, "", &["kind", "apiVersion"]);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Keys and scalars go through serde_json's writer straight into `out` (escaped as it escapes
/// them, no string made for each): every write and watch line of the test server passes here.
/// `skip`: keys of this object (not of those inside it) left out.
fn write(out: &mut Vec<u8>, v: &Value, parent: &str, skip: &[&str]) {
    match v {
        Value::Object(m) => {
            out.push(b'{');
            let named: &[&str] = if is_map(parent) { &[] } else { order(parent) };
            let first = named.iter().filter_map(|k| m.get_key_value(*k));
            let rest = m.iter().filter(|(k, _)| !named.contains(&k.as_str()));
            let kept = first
                .chain(rest)
                .filter(|(k, _)| !skip.contains(&k.as_str()));
            for (i, (k, v)) in kept.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                scalar(out, k);
                out.push(b':');
                write(out, v, k, &[]);
            }
            out.push(b'}');
        }
        // Elements of a list are found under the list's key.
        Value::Array(a) => {
            out.push(b'[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, e, parent, &[]);
            }
            out.push(b']');
        }
        other => scalar(out, other),
    }
}

fn scalar(out: &mut Vec<u8>, v: &(impl serde::Serialize + ?Sized)) {
    serde_json::to_writer(out, v).expect("a JSON key or scalar always serialises");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_come_in_the_api_servers_order_and_stay_the_same_json() {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"annotations": {"b": "2", "a": "1"}, "labels": {"z": "1", "a": "2"}, "name": "n1",
                "resourceVersion": "5", "uid": "u"},
            "spec": {"taints": [{"effect": "NoSchedule", "key": "k"}], "unschedulable": true},
            "status": {"conditions": [{"lastTransitionTime": "t", "message": "m", "reason": "r", "status": "True", "type": "Ready"}],
                "nodeInfo": {"kernelVersion": "6"}, "capacity": {"cpu": "4"}},
        });
        let text = to_string(&node);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), node);
        assert!(text.starts_with(r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","uid":"u","resourceVersion":"5","labels":{"a":"2","z":"1"},"annotations":{"a":"1","b":"2"}}"#), "{text}");
        assert!(
            text.contains(
                r#""spec":{"unschedulable":true,"taints":[{"key":"k","effect":"NoSchedule"}]}"#
            ),
            "{text}"
        );
        assert!(text.contains(r#""status":{"capacity":{"cpu":"4"},"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"t","reason":"r","message":"m"}],"nodeInfo":{"kernelVersion":"6"}}"#), "{text}");
        let event = json!({"object": node, "type": "MODIFIED"});
        assert!(to_string(&event).starts_with(r#"{"type":"MODIFIED","object":{"kind":"Node""#));
        // A list item: the same text without the top-level kind and apiVersion (an Event's
        // own `type` stays first, and nested `kind`s stay).
        let event = json!({"kind": "Event", "apiVersion": "v1", "type": "Normal",
            "metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "n1"}});
        assert_eq!(
            to_item_string(&event),
            r#"{"type":"Normal","metadata":{"name":"e"},"involvedObject":{"kind":"Node","name":"n1"}}"#
        );
        let escaped = json!({"metadata": {"labels": {"a\"b": "\n"}}});
        assert_eq!(
            serde_json::from_str::<Value>(&to_string(&escaped)).unwrap(),
            escaped
        );
    }
}
