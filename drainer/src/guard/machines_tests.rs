//! Tests of the machines check's pure half: what a request asks, and whether a record has the step on.

use serde_json::{Value, json};

use super::*;
use crate::model::node::NodeView;
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
        "w2-abc",
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

const BOOT: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
/// KernelDeadlock=True since 2026-12-07T09:50:00Z, in the record's episode.
const EPISODE: &str = "KernelDeadlock=True (DockerHung, at once)@1796637000";

/// Node w1 in boot `boot`, KernelDeadlock `status` since `since`, with a person's veto if `veto`.
fn node(boot: &str, status: &str, since: &str, veto: bool) -> NodeView {
    let annotations = if veto {
        json!({"nodemedic.io/do-not-remediate": "disk swap"})
    } else {
        json!({})
    };
    let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "w1", "uid": "u", "annotations": annotations},
        "status": {"nodeInfo": {"bootID": boot, "machineID": "", "systemUUID": "", "kernelVersion": "",
            "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64"},
            "conditions": [{"type": "KernelDeadlock", "status": status, "reason": "DockerHung",
                "lastTransitionTime": since}]}}))
    .unwrap();
    NodeView::of(&n)
}

fn record(phase: &str, step: Option<&str>, until: &str) -> Record {
    let mut r = json!({"episode": EPISODE, "reason": "KernelDeadlock=True", "phase": phase,
        "cordonedAt": "2026-12-07T10:00:00Z", "drainAt": "2026-12-07T10:00:00Z",
        "stepUntil": until, "node": "w1", "uid": "u", "bootId": BOOT});
    if let Some(s) = step {
        r["step"] = json!(s);
    }
    serde_json::from_value(r).unwrap()
}

#[test]
fn only_the_drainers_own_record_in_that_step_before_its_deadline_admits() {
    let now: Timestamp = "2026-12-07T10:10:00Z".parse().unwrap();
    let w1 = node(BOOT, "True", "2026-12-07T09:50:00Z", false);
    let on = record("rebooting", Some("power-cycle"), "2026-12-07T10:20:00Z");
    assert_eq!(
        under_way(&w1, Checked::Authentic(on.clone()), Step::PowerCycle, now),
        Ok(())
    );
    let replacing = record("replacing", Some("replace"), "2026-12-07T10:20:00Z");
    assert_eq!(
        under_way(
            &w1,
            Checked::Authentic(replacing.clone()),
            Step::Replace,
            now
        ),
        Ok(())
    );

    let refused = |c: Checked, step: Step| under_way(&w1, c, step, now).unwrap_err();
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

/// The attacker's review: a record the token read and wrote back once the node had rebooted or
/// recovered, or onto a node a person vetoed, asks nothing.
#[test]
fn a_record_written_back_after_a_new_boot_or_the_problems_end_or_under_a_veto_admits_nothing() {
    let now: Timestamp = "2026-12-07T10:10:00Z".parse().unwrap();
    let on = record("rebooting", Some("power-cycle"), "2026-12-07T10:20:00Z");
    let check = |n: &NodeView, step: Step| under_way(n, Checked::Authentic(on.clone()), step, now);
    let rebooted = node(
        "9f0c3a52-2fa1-11d2-883f-0016d3cca427",
        "True",
        "2026-12-07T09:50:00Z",
        false,
    );
    let e = check(&rebooted, Step::PowerCycle).unwrap_err();
    assert!(
        e.contains("has booted since its power-cycle was asked for"),
        "{e}"
    );
    let recovered = node(BOOT, "False", "2026-12-07T10:05:00Z", false);
    let e = check(&recovered, Step::PowerCycle).unwrap_err();
    assert!(
        e.contains("KernelDeadlock=True of its record is over"),
        "{e}"
    );
    // The problem came back since: another episode, which the drainer records anew.
    let again = node(BOOT, "True", "2026-12-07T10:08:00Z", false);
    assert!(check(&again, Step::PowerCycle).is_err());
    let vetoed = node(BOOT, "True", "2026-12-07T09:50:00Z", true);
    let e = check(&vetoed, Step::PowerCycle).unwrap_err();
    assert!(e.contains("a person's veto"), "{e}");
    // A replacement is not tied to a boot (the node it replaces may have rebooted in between).
    let replacing = record("replacing", Some("replace"), "2026-12-07T10:20:00Z");
    assert_eq!(
        under_way(&rebooted, Checked::Authentic(replacing), Step::Replace, now),
        Ok(())
    );
}

#[test]
fn an_episodes_conditions_are_read_whatever_their_reasons_hold() {
    assert_eq!(
        episode_items("KernelDeadlock=True@10,Ready=False (Kubelet, stopped)@20,junk"),
        vec![("KernelDeadlock", "True", 10), ("Ready", "False", 20)]
    );
    assert_eq!(episode_items(""), vec![]);
    assert_eq!(episode_items("e"), vec![]);
}

#[test]
fn a_remediation_named_for_another_node_than_its_annotation_says_is_refused() {
    let far = "fence-agents-remediation.medik8s.io";
    for (name, ok) in [
        ("w1", true),
        ("w1-x7k2p", true),
        ("w2", false),
        ("w2-w1", false),
        ("w1x", false),
    ] {
        let o = object(
            name,
            json!({"remediation.medik8s.io/node-name": "w1"}),
            json!({}),
            json!({}),
        );
        let r = request(far, "fenceagentsremediations", "CREATE", o, Value::Null);
        match read(&r) {
            Ask::Fence { node } => assert!(ok && node == "w1", "{name}"),
            Ask::Refuse(why) => assert!(
                !ok && why.contains("named for another node"),
                "{name}: {why}"
            ),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn only_a_request_this_check_does_not_guard_is_admitted_without_a_lookup() {
    assert_eq!(
        without_lookup(&Ask::Else("not an update")),
        Err(Ok("allowed: not an update".into()))
    );
    assert_eq!(
        without_lookup(&Ask::Refuse("x".into())),
        Err(Err("x".into()))
    );
    assert_eq!(
        without_lookup(&Ask::Fence { node: "w1".into() }),
        Ok(Step::PowerCycle)
    );
    let mark = Ask::MarkMachine {
        namespace: "d".into(),
        name: "m".into(),
        node: None,
    };
    assert_eq!(without_lookup(&mark), Ok(Step::Replace));
}
