//! The watch's Pod decode against k8s-openapi's: every pod here projects to the same
//! [`PodInfo`] decoded either way, so a field the lite decode misses or misnames fails here.

use k8s_openapi::api::core::v1::Pod;
use nodemedic_common::lenient::Lenient;
use serde_json::{Value, json};

use super::PodLite;
use crate::model::pod::PodInfo;

/// A kubelet's Pod as kube-apiserver sends it: managedFields, containers, volumes, statuses.
fn kubelet_pod() -> Value {
    json!({
        "metadata": {
            "name": "web-5d4f8c7b9-x2x9q", "namespace": "shop", "uid": "0b5e0f65-3c8e-4c0e-9a52-3f1a2d4c5e6f",
            "resourceVersion": "81234", "creationTimestamp": "2026-11-27T09:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d4f8c7b9"},
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "team": "shop"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "11111111-2222-4333-8444-555555555555"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8c7b9",
                 "uid": "66666666-7777-4888-8999-aaaaaaaaaaaa", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-27T09:01:00Z", "fieldsType": "FieldsV1", "subresource": "status",
                "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}}}]
        },
        "spec": {
            "nodeName": "node-7", "priority": 1000, "priorityClassName": "shop-high",
            "terminationGracePeriodSeconds": 45,
            "readinessGates": [{"conditionType": "shop.example/lb-ready"}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "team", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}],
            "volumes": [{"name": "cfg", "configMap": {"name": "web"}}, {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "web", "image": "shop/web:1", "ports": [{"containerPort": 8080}],
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}}}]
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-27T09:00:01Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-27T09:00:30Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-27T09:05:00Z"},
                {"type": "shop.example/lb-ready", "status": "True", "lastTransitionTime": "2026-11-27T09:00:40Z"}],
            "hostIP": "10.0.0.7", "podIP": "10.1.7.9", "qosClass": "Burstable",
            "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "x", "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [{"name": "web", "image": "shop/web:1", "imageID": "y", "ready": true, "restartCount": 2,
                "started": true, "state": {"running": {"startedAt": "2026-11-27T09:00:20Z"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
        }
    })
}

/// Pods in the states the projection tells apart.
fn pods() -> Vec<(&'static str, Value)> {
    let running = kubelet_pod();
    let mut waiting = kubelet_pod();
    waiting["status"]["phase"] = json!("Pending");
    waiting["status"]["containerStatuses"][0]["state"] =
        json!({"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}});
    waiting["status"]["initContainerStatuses"][0]["state"] =
        json!({"waiting": {"reason": "PodInitializing"}});
    let mut deleting = kubelet_pod();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:00:00Z");
    let mut bare = json!({"metadata": {"name": "bare", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let mut finished = kubelet_pod();
    finished["status"]["phase"] = json!("Succeeded");
    let no_gate = {
        let mut p = kubelet_pod();
        p["status"]["conditions"].as_array_mut().unwrap().pop();
        p
    };
    bare["metadata"]["labels"] = Value::Null;
    let mut on_its_server = deleting.clone();
    on_its_server["spec"]["volumes"] = json!([
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "share", "nfs": {"server": "10.1.2.3", "path": "/export"}},
        {"name": "inline", "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "10.1.2.3"}}}]);
    let mut on_claims = deleting.clone();
    on_claims["spec"]["volumes"] = json!([
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "p", "projected": {"sources": []}}, {"name": "h", "hostPath": {"path": "/x"}},
        {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
    vec![
        ("running, its readiness stale", running),
        ("waiting to start", waiting),
        ("deleted, not gone", deleting),
        ("bare", bare),
        ("finished", finished),
        ("a readiness gate unmet", no_gate),
        ("no metadata at all", json!({"spec": {"nodeName": "n"}})),
        ("deleted, a volume on a server it names", on_its_server),
        ("deleted, its volumes the node's and claims", on_claims),
    ]
}

#[test]
fn every_pod_projects_the_same_decoded_lite_as_decoded_in_full() {
    let keep = ["cluster-autoscaler.kubernetes.io/safe-to-evict".to_string()];
    for (what, v) in pods() {
        let text = v.to_string();
        let full: Pod = serde_json::from_str(&text).unwrap();
        let lite: PodLite = serde_json::from_str(&text).unwrap();
        for keep in [None, Some(&keep[..]), Some(&[][..])] {
            assert_eq!(
                PodInfo::from_lite(&lite, keep),
                PodInfo::from_pod(&full, keep),
                "{what}, keeping {keep:?}"
            );
        }
        // What kube's watcher and the delete event read.
        assert_eq!(lite.metadata.name, full.metadata.name, "{what}");
        assert_eq!(lite.metadata.namespace, full.metadata.namespace, "{what}");
        assert_eq!(
            lite.metadata.resource_version, full.metadata.resource_version,
            "{what}"
        );
    }
}

#[test]
fn the_projection_reads_the_fields_that_set_it_apart() {
    // Guards the test above: were these all the same, equal projections would prove little.
    let infos: Vec<PodInfo> = pods()
        .into_iter()
        .map(|(_, v)| PodInfo::from_lite(&serde_json::from_value(v).unwrap(), None))
        .collect();
    let running = &infos[0];
    assert!(running.readiness_stale && running.uses_empty_dir);
    assert_eq!(running.grace(), Some(45));
    assert_eq!(running.priority, Some(1000));
    assert_eq!(running.owner_kind.as_deref(), Some("ReplicaSet"));
    assert_eq!(running.labels()["app"], "web");
    assert_eq!(running.annotations()["team"], "shop");
    let m = running.meta.as_ref().unwrap();
    assert_eq!(m.priority_class.as_deref(), Some("shop-high"));
    assert_eq!(m.tolerations.as_ref().unwrap().len(), 2);
    let waiting = infos[1].progress.as_ref().unwrap();
    assert_eq!(waiting.waiting_reason.as_deref(), Some("PodInitializing"));
    assert_eq!(
        waiting.waiting_since,
        Some("2026-11-27T09:00:01Z".parse().unwrap())
    );
    assert!(infos[2].progress.as_ref().unwrap().deleting_after.is_some());
    assert!(!infos[5].readiness_stale, "the gate is not met");
    // An inline NFS or CSI volume is on a server the pod names; a claim, a projection, a host path
    // or a claim template is not.
    assert!(infos[7].progress.as_ref().unwrap().own_server);
    assert!(!infos[8].progress.as_ref().unwrap().own_server);
    assert!(!infos[2].progress.as_ref().unwrap().own_server);
}

#[test]
fn what_the_drainer_does_not_read_cannot_make_a_pod_unreadable() {
    // A field of a newer Kubernetes, or one shaped unlike k8s-openapi's, where the drainer does not
    // look: the full decode refuses the pod, the watch's keeps it.
    let mut v = kubelet_pod();
    v["spec"]["containers"][0]["ports"] = json!("8080");
    v["metadata"]["managedFields"] = json!({"not": "a list"});
    let text = v.to_string();
    assert!(serde_json::from_str::<Pod>(&text).is_err());
    let lite: PodLite = serde_json::from_str(&text).unwrap();
    assert_eq!(
        PodInfo::from_lite(&lite, None),
        PodInfo::from_pod(&serde_json::from_value(kubelet_pod()).unwrap(), None)
    );
}

#[test]
fn a_pod_whose_read_fields_are_broken_is_malformed_with_its_name() {
    let mut v = kubelet_pod();
    v["metadata"]["creationTimestamp"] = json!("yesterday");
    match serde_json::from_value::<Lenient<PodLite>>(v.clone()).unwrap() {
        Lenient::Malformed { meta, error } => {
            assert_eq!(meta.name.as_deref(), Some("web-5d4f8c7b9-x2x9q"));
            assert!(!error.is_empty());
        }
        Lenient::Ok(_) => panic!("a creation time that is no time"),
    }
    assert!(serde_json::from_value::<Pod>(v).is_err(), "refused alike");
    let mut v = kubelet_pod();
    v["spec"]["priority"] = json!("high");
    assert!(matches!(
        serde_json::from_value::<Lenient<PodLite>>(v).unwrap(),
        Lenient::Malformed { .. }
    ));
}
