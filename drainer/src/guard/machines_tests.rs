//! Tests of the machines check's pure half: what a request asks, and whether a record has the step on.

use serde_json::{Value, json};

use super::*;
use crate::model::record::{Record, Rejection};

const SA: &str = "system:serviceaccount:kube-system:nodemedic-drainer";

/// An admission request for `resource` of `group`, with its new and stored object.
fn request(
    group: &str,
    resource: &str,
    operation: &str,
    object: Value,
    old: Value,
) -> AdmissionRequest<DynamicObject> {
    let name = if object.is_null() { &old } else { &object }["metadata"]["name"].clone();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": group, "version": "v1", "kind": "K"},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": operation,
        "userInfo": {"username": SA}, "object": object,
        "oldObject": if old.is_null() { Value::Null } else { old }}});
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_value(review).unwrap();
    review.try_into().unwrap()
}

fn object(name: &str, annotations: Value, spec: Value, status: Value) -> Value {
    json!({"apiVersion": "x/v1", "kind": "K",
        "metadata": {"name": name, "annotations": annotations}, "spec": spec, "status": status})
}

#[test]
fn a_remediation_made_names_its_node_by_annotation_else_by_name() {
    let far = "fence-agents-remediation.medik8s.io";
    let by_name = object("w1", json!({}), json!({}), json!({}));
    let r = request(
        far,
        "fenceagentsremediations",
        "CREATE",
        by_name,
        Value::Null,
    );
    assert_eq!(read(&r), Ask::Fence { node: "w1".into() });
    let by_annotation = object(
        "w1-abc",
        json!({"remediation.medik8s.io/node-name": "w2"}),
        json!({}),
        json!({}),
    );
    let r = request(
        "self-node-remediation.medik8s.io",
        "selfnoderemediations",
        "CREATE",
        by_annotation,
        Value::Null,
    );
    assert_eq!(read(&r), Ask::Fence { node: "w2".into() });
    assert_eq!(read(&r).step(), Some(Step::PowerCycle));
    // Deleting one (the policy keeps that to its own) and templates are not asks.
    let o = object("w1", json!({}), json!({}), json!({}));
    let r = request(
        far,
        "fenceagentsremediations",
        "DELETE",
        Value::Null,
        o.clone(),
    );
    assert!(matches!(read(&r), Ask::Else(_)));
    let r = request(
        far,
        "fenceagentsremediationtemplates",
        "CREATE",
        o,
        Value::Null,
    );
    assert!(matches!(read(&r), Ask::Else(_)));
}

#[test]
fn a_hosts_reboot_is_asked_only_when_the_annotation_is_set_and_its_consumer_is_the_stored_one() {
    let stored =
        json!({"consumerRef": {"kind": "Metal3Machine", "name": "m3m-1", "namespace": "capi"}});
    let old = object("host-1", json!({}), stored.clone(), json!({}));
    let reboot = json!({"reboot.metal3.io": "{\"mode\":\"hard\"}"});
    // The patch also points the host at another Metal3Machine: the stored one counts.
    let moved = json!({"consumerRef": {"kind": "Metal3Machine", "name": "elsewhere"}});
    let new = object("host-1", reboot.clone(), moved, json!({}));
    let r = request("metal3.io", "baremetalhosts", "UPDATE", new, old.clone());
    assert_eq!(
        read(&r),
        Ask::RebootHost {
            namespace: "ns".into(),
            name: "host-1".into(),
            consumer: Some(("capi".into(), "m3m-1".into())),
        }
    );
    // Its removal, or the same value again, asks nothing.
    let was = object("host-1", reboot.clone(), stored.clone(), json!({}));
    let r = request(
        "metal3.io",
        "baremetalhosts",
        "UPDATE",
        old.clone(),
        was.clone(),
    );
    assert!(matches!(read(&r), Ask::Else(_)));
    let r = request("metal3.io", "baremetalhosts", "UPDATE", was.clone(), was);
    assert!(matches!(read(&r), Ask::Else(_)));
    // No consumer, or one of another kind: asked, with none to follow.
    let bare = object(
        "host-1",
        json!({}),
        json!({"consumerRef": {"kind": "Other", "name": "x"}}),
        json!({}),
    );
    let new = object("host-1", reboot, json!({}), json!({}));
    let r = request("metal3.io", "baremetalhosts", "UPDATE", new, bare);
    assert!(matches!(read(&r), Ask::RebootHost { consumer: None, .. }));
}

#[test]
fn a_machines_remediation_names_the_node_its_stored_status_names() {
    let status = json!({"nodeRef": {"name": "w3"}});
    let old = object("m-1", json!({}), json!({}), status.clone());
    let marked = json!({"cluster.x-k8s.io/remediate-machine": ""});
    let new = object(
        "m-1",
        marked.clone(),
        json!({}),
        json!({"nodeRef": {"name": "w9"}}),
    );
    let r = request("cluster.x-k8s.io", "machines", "UPDATE", new, old);
    let ask = read(&r);
    assert_eq!(
        ask,
        Ask::MarkMachine {
            namespace: "ns".into(),
            name: "m-1".into(),
            node: Some("w3".into()),
        }
    );
    assert_eq!(ask.step(), Some(Step::Replace));
    let unmatched = object("m-1", json!({}), json!({}), json!({}));
    let new = object("m-1", marked, json!({}), json!({}));
    let r = request("cluster.x-k8s.io", "machines", "UPDATE", new, unmatched);
    assert!(matches!(read(&r), Ask::MarkMachine { node: None, .. }));
    let other = object("m-1", json!({"a": "b"}), json!({}), status);
    let r = request(
        "cluster.x-k8s.io",
        "machines",
        "UPDATE",
        other.clone(),
        other,
    );
    assert!(matches!(read(&r), Ask::Else(_)));
}

fn record(phase: &str, step: Option<&str>, until: &str) -> Record {
    let mut r = json!({"episode": "e", "reason": "KernelDeadlock=True", "phase": phase,
        "cordonedAt": "2026-12-07T10:00:00Z", "drainAt": "2026-12-07T10:00:00Z",
        "stepUntil": until, "node": "w1", "uid": "u"});
    if let Some(s) = step {
        r["step"] = json!(s);
    }
    serde_json::from_value(r).unwrap()
}

#[test]
fn only_the_drainers_own_record_in_that_step_before_its_deadline_admits() {
    let now: Timestamp = "2026-12-07T10:10:00Z".parse().unwrap();
    let on = record("rebooting", Some("power-cycle"), "2026-12-07T10:20:00Z");
    assert_eq!(
        under_way("w1", Checked::Authentic(on.clone()), Step::PowerCycle, now),
        Ok(())
    );
    let replacing = record("replacing", Some("replace"), "2026-12-07T10:20:00Z");
    assert_eq!(
        under_way(
            "w1",
            Checked::Authentic(replacing.clone()),
            Step::Replace,
            now
        ),
        Ok(())
    );

    let refused = |c: Checked, step: Step| under_way("w1", c, step, now).unwrap_err();
    let says = |c: Checked, step: Step, words: &str| {
        let e = refused(c, step);
        assert!(e.contains(words), "{e:?} should say {words:?}");
    };
    says(
        Checked::Absent,
        Step::PowerCycle,
        "node w1 has no drain record: no power-cycle",
    );
    says(
        Checked::Rejected(Rejection::BadSeal),
        Step::PowerCycle,
        "node w1's record is not the drainer's own",
    );
    let mut theirs = on.clone();
    theirs.owner = "other".into();
    says(
        Checked::Foreign(theirs),
        Step::PowerCycle,
        "drainer other's",
    );
    // Another step, or the same step's phase over.
    says(
        Checked::Authentic(record("rebooting", Some("reboot"), "2026-12-07T10:20:00Z")),
        Step::PowerCycle,
        "at its reboot step (phase rebooting), not a power-cycle",
    );
    says(
        Checked::Authentic(replacing),
        Step::PowerCycle,
        "not a power-cycle",
    );
    says(
        Checked::Authentic(on.clone()),
        Step::Replace,
        "not a replace",
    );
    says(
        Checked::Authentic(record(
            "needsperson",
            Some("power-cycle"),
            "2026-12-07T10:20:00Z",
        )),
        Step::PowerCycle,
        "phase needsperson",
    );
    says(
        Checked::Authentic(record("drained", None, "2026-12-07T10:20:00Z")),
        Step::PowerCycle,
        "at its drain step",
    );
    // An older record of that node written back: its step is over.
    let old = record("rebooting", Some("power-cycle"), "2026-12-07T10:05:00Z");
    says(
        Checked::Authentic(old),
        Step::PowerCycle,
        "step ended at 2026-12-07T10:05:00Z",
    );
    let mut open = on;
    open.step_until = None;
    says(
        Checked::Authentic(open),
        Step::PowerCycle,
        "has no deadline",
    );
}
