//! What kube-apiserver does to an object before it stores it, beyond storing it: decoding checks
//! that answer 400 (MicroTime fields need exactly six fractional digits, recordings 26 and 44) and
//! the defaults and admission plugins that fill a new Pod (recording 31: phase Pending, a QoS class,
//! any status sent dropped, the grace period, the priority of its class, the not-ready/unreachable tolerations, ...).

use serde_json::{Value, json};

use super::error;
use axum::response::Response;

/// The MicroTime fields of the kinds the tests write (Go layout `2006-01-02T15:04:05.000000Z07:00`).
fn micro_time_fields(resource: &str) -> &'static [&'static str] {
    match resource {
        "leases" => &["/spec/acquireTime", "/spec/renewTime"],
        "events" => &["/eventTime", "/series/lastObservedTime"],
        _ => &[],
    }
}

/// Exactly six fractional digits, then `Z` or a `±hh:mm` offset.
fn is_micro_time(s: &str) -> bool {
    let Some((date_time, rest)) = s.split_once('.') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let zone = &rest[digits..];
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':');
    digits == 6 && zone_ok && date_time.len() == 19 && date_time.as_bytes()[10] == b'T'
}

/// The 400 the real server answers when an object cannot be decoded (checked on every write).
// The refusal is the handler's answer as it is sent: boxing it would only move the size.
#[allow(clippy::result_large_err)]
pub(crate) fn decode(resource: &str, kind: &str, obj: &Value) -> Result<(), Response> {
    for field in micro_time_fields(resource) {
        if let Some(s) = obj.pointer(field).and_then(Value::as_str)
            && !is_micro_time(s)
        {
            return Err(error(
                400,
                Some("BadRequest"),
                &format!(
                    "{kind} in version \"v1\" cannot be handled as a {kind}: parsing time \"{s}\" as \"2006-01-02T15:04:05.000000Z07:00\""
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// kube-apiserver's size limits on what it stores, each counted as the lengths of keys and values:
/// all annotations of one object together at most 256 KiB (apimachinery's `ValidateAnnotationsSize`,
/// `TotalAnnotationSizeLimitB`), and a ConfigMap's `data` and `binaryData` together at most 1 MiB
/// (`ValidateConfigMap`, `MaxSecretSize`). Past either, 422 Invalid, worded as the real server words it
/// (`../shared/reference/limits-and-trust.md`).
// The refusal is the handler's answer as it is sent: boxing it would only move the size.
#[allow(clippy::result_large_err)]
pub(crate) fn validate(api: &str, resource: &str, obj: &Value) -> Result<(), Response> {
    const ANNOTATIONS: usize = 256 * 1024;
    const CONFIGMAP: usize = 1024 * 1024;
    fn size(m: Option<&Value>) -> usize {
        m.and_then(Value::as_object).map_or(0, |m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
    }
    let kind = super::store::kind_of(resource);
    // `v1` for the core group, `GROUP/VERSION` for the others: the kind is qualified by its group.
    let kind = match api.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let invalid = |field: &str, limit: usize| {
        error(
            422,
            Some("Invalid"),
            &format!(
                "{kind} \"{name}\" is invalid: {field}: Too long: must have at most {limit} bytes"
            ),
            Some(
                json!({"name": name, "kind": super::store::kind_of(resource),
                "causes": [{"reason": "FieldValueTooLong", "message": format!("Too long: must have at most {limit} bytes"), "field": field}]}),
            ),
        )
    };
    if size(obj.pointer("/metadata/annotations")) > ANNOTATIONS {
        return Err(invalid("metadata.annotations", ANNOTATIONS));
    }
    if resource == "configmaps" && size(obj.get("data")) + size(obj.get("binaryData")) > CONFIGMAP {
        return Err(invalid("[]", CONFIGMAP));
    }
    Ok(())
}

/// Priorities of the built-in classes (the Priority admission plugin); any other class is 0 here.
fn priority_of(class: &str) -> i64 {
    match class {
        "system-node-critical" => 2_000_001_000,
        "system-cluster-critical" => 2_000_000_000,
        _ => 0,
    }
}

/// The defaults and admission of a Pod create, as recording 31 shows them (the service account
/// token volume aside: this server has no service accounts). A `spec.priority` other than its
/// class's is refused as the Priority admission plugin refuses it (403).
// The refusal is the handler's answer as it is sent: boxing it would only move the size.
#[allow(clippy::result_large_err)]
pub(crate) fn default_pod(pod: &mut Value) -> Result<(), Response> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let priority = priority_of(
        spec.get("priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(error(
            403,
            Some("Forbidden"),
            &format!(
                "pods \"{name}\" is forbidden: the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
            Some(json!({"name": name, "kind": "pods"})),
        ));
    }
    let set = |spec: &mut serde_json::Map<String, Value>, k: &str, v: Value| {
        spec.entry(k.to_string()).or_insert(v);
    };
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "serviceAccountName", json!("default"));
    set(spec, "serviceAccount", json!("default"));
    set(spec, "securityContext", json!({}));
    set(spec, "schedulerName", json!("default-scheduler"));
    set(spec, "enableServiceLinks", json!(true));
    set(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set(spec, "priority", json!(priority));
    // DefaultTolerationSeconds: 300 s for not-ready and unreachable unless the pod says otherwise.
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    if let Some(tolerations) = tolerations {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let covered = tolerations
                .iter()
                .any(|t| t["key"] == key && (t["effect"] == "NoExecute" || t["effect"].is_null()));
            if !covered {
                tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
    let mut any_resources = false;
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(c) = c.as_object_mut() else { continue };
            let latest = c.get("image").and_then(Value::as_str).is_none_or(|i| {
                i.ends_with(":latest") || !i.rsplit('/').next().unwrap_or(i).contains(':')
            });
            c.entry("resources").or_insert_with(|| json!({}));
            any_resources |= c["resources"].as_object().is_some_and(|r| !r.is_empty());
            c.entry("terminationMessagePath")
                .or_insert_with(|| json!("/dev/termination-log"));
            c.entry("terminationMessagePolicy")
                .or_insert_with(|| json!("File"));
            c.entry("imagePullPolicy")
                .or_insert_with(|| json!(if latest { "Always" } else { "IfNotPresent" }));
        }
    }
    // The status a create sends is dropped (kube-apiserver's PrepareForCreate: a kubelet writes
    // it through `pods/status` afterwards): phase Pending and the QoS class only. Requests or
    // limits make a pod Burstable at least; this server does not tell Guaranteed.
    let qos = if any_resources {
        "Burstable"
    } else {
        "BestEffort"
    };
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_past_256_kib_and_configmaps_past_1_mib_are_invalid() {
        let lease = |bytes: usize| json!({"metadata": {"name": "l", "annotations": {"a": "x".repeat(bytes)}}});
        let api = "coordination.k8s.io/v1";
        assert!(
            validate(api, "leases", &lease(256 * 1024 - 1)).is_ok(),
            "the key counts too: at the limit"
        );
        let refused = validate(api, "leases", &lease(256 * 1024)).unwrap_err();
        assert_eq!(refused.status(), 422);
        let cm =
            |bytes: usize| json!({"metadata": {"name": "c"}, "data": {"k": "x".repeat(bytes)}});
        assert!(validate("v1", "configmaps", &cm(1024 * 1024 - 1)).is_ok());
        assert_eq!(
            validate("v1", "configmaps", &cm(1024 * 1024))
                .unwrap_err()
                .status(),
            422
        );
    }

    #[test]
    fn micro_time_needs_six_fractional_digits() {
        assert!(is_micro_time("2026-11-22T03:25:13.217633Z"));
        assert!(is_micro_time("2026-11-22T03:25:13.217633+01:00"));
        assert!(!is_micro_time("2026-11-22T03:25:13Z"));
        assert!(!is_micro_time("2026-01-02T03:04:05.123456789Z"));
        assert!(!is_micro_time("2026-01-02T03:04:05.123Z"));
    }

    #[test]
    fn a_pod_gets_the_defaults_and_priority_of_its_class() {
        let mut pod = json!({"spec": {"priorityClassName": "system-node-critical",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}});
        default_pod(&mut pod).unwrap();
        assert_eq!(pod["spec"]["priority"], 2_000_001_000);
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["qosClass"], "BestEffort");
        // A priority of its own, not its class's: refused as the Priority admission plugin does.
        let mut bare =
            json!({"metadata": {"name": "p"}, "spec": {"priority": 2000000000, "containers": []}});
        assert!(default_pod(&mut bare).is_err());
    }
}
