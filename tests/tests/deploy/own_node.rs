//! The opt-in policy that lets each detector patch only its own Node's status (deploy/own-node-only,
//! Helm `detector.ownNodeOnly`): rendered the same by both, and enforced by a real kube-apiserver.
//!
//! The harness's kube-apiserver is v1.26: ValidatingAdmissionPolicy is alpha there (the harness turns
//! its feature gate on) and service account tokens carry no node-name claim yet (1.30+). So the
//! scenario serves the shipped policy as `v1alpha1` (without `validationActions`, which v1alpha1 does
//! not have: its bindings always deny) and gives the detector's user the claim by impersonation
//! (`Impersonate-Extra-authentication.kubernetes.io%2fnode-name`), as a 1.30+ token would carry it.

use std::time::Duration;

use http::Request;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::envtest;
use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

#[test]
fn helm_own_node_policy_matches_deploy_own_node_only() {
    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert!(
        !plain
            .iter()
            .any(|o| o["kind"] == "ValidatingAdmissionPolicy"),
        "opt-in: no policy by default"
    );
    v["detector"]["ownNodeOnly"] = json!(true);
    let helm = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    check_types(&helm);
    let (Some(mut base), Some(policy)) = (
        kustomize(&repo().join("deploy")),
        kustomize(&repo().join("deploy/own-node-only")),
    ) else {
        return;
    };
    check_types(&policy);
    base.extend(policy);
    crate::assert_same_as_kustomize(
        &helm,
        &base,
        "ownNodeOnly vs deploy/ + deploy/own-node-only",
    );
    // The user the policy names is the detector's ServiceAccount of that release and namespace.
    let other = helm_template(&chart, "edge", "monitoring", Some(&v)).unwrap();
    let p = find(
        &other,
        "ValidatingAdmissionPolicy",
        "edge-nodemedic-detector-own-node",
    );
    let expr = p["spec"]["validations"][0]["expression"].as_str().unwrap();
    assert!(
        expr.contains("'system:serviceaccount:monitoring:edge-nodemedic-detector'"),
        "{expr}"
    );
    find(&other, "ServiceAccount", "edge-nodemedic-detector");
}

/// PATCH a node's status as `user`, with the node-name claim `claim` if any.
async fn patch_status_as(
    cluster: &Cluster,
    user: &str,
    claim: Option<&str>,
    node: &str,
) -> Result<(), kube::Error> {
    let body = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": "False",
        "reason": "KernelHasNoDeadlock", "message": "m",
        "lastHeartbeatTime": nodemedic_tests::cluster::now_rfc3339(),
        "lastTransitionTime": nodemedic_tests::cluster::now_rfc3339()}]}});
    let mut req = Request::patch(format!("/api/v1/nodes/{node}/status"))
        .header("Content-Type", "application/strategic-merge-patch+json")
        .header("Impersonate-User", user)
        .header("Impersonate-Group", "system:serviceaccounts")
        .header("Impersonate-Group", "system:authenticated");
    if let Some(c) = claim {
        req = req.header(
            "Impersonate-Extra-authentication.kubernetes.io%2fnode-name",
            c,
        );
    }
    cluster
        .client
        .request_text(req.body(serde_json::to_vec(&body).unwrap()).unwrap())
        .await
        .map(drop)
}

fn denied_by_policy(r: &Result<(), kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("only the status of the node it runs on"))
}

#[tokio::test]
async fn a_detector_may_patch_only_its_own_nodes_status_on_a_real_api_server() {
    let Some(plane) = envtest::shared() else {
        envtest::say_skipped("the own-node policy on the real control plane");
        return;
    };
    let cluster = Cluster::on(plane);
    let own = cluster.create_node("own").await;
    let other = cluster.create_node("other").await;
    let id = cluster.name("vap");
    let user = format!("system:serviceaccount:kube-system:{id}");

    // The shipped policy, for this scenario's user and under unique names, as v1alpha1.
    let shipped = docs(&repo().join("deploy/own-node-only/policy.yaml"));
    let mut policy = shipped[0].clone();
    let mut binding = shipped[1].clone();
    let expr = policy["spec"]["validations"][0]["expression"]
        .as_str()
        .unwrap()
        .replace(
            "system:serviceaccount:kube-system:nodemedic-detector",
            &user,
        );
    assert_ne!(expr, shipped[0]["spec"]["validations"][0]["expression"]);
    policy["spec"]["validations"][0]["expression"] = json!(expr);
    policy["apiVersion"] = json!("admissionregistration.k8s.io/v1alpha1");
    policy["metadata"]["name"] = json!(id);
    binding["apiVersion"] = json!("admissionregistration.k8s.io/v1alpha1");
    binding["metadata"]["name"] = json!(id);
    binding["spec"]["policyName"] = json!(id);
    binding["spec"]
        .as_object_mut()
        .unwrap()
        .remove("validationActions");
    let kind = |k: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1alpha1", k),
            plural,
        )
    };
    let policies: Api<DynamicObject> = Api::all_with(
        cluster.client.clone(),
        &kind("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let bindings: Api<DynamicObject> = Api::all_with(
        cluster.client.clone(),
        &kind(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    );
    policies
        .create(
            &PostParams::default(),
            &serde_json::from_value(policy).unwrap(),
        )
        .await
        .expect("the API server takes the shipped policy");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();

    // The detector's rights, from the shipped RBAC, for this user.
    let rbac = docs(&repo().join("deploy/base/detector-rbac.yaml"));
    let mut role = rbac
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .unwrap()
        .clone();
    role["metadata"] = json!({"name": id});
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": id},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crb).unwrap(),
        )
        .await
        .unwrap();

    // The policy takes effect once the API server has compiled it.
    eventually(
        "the policy to deny another node's status",
        Duration::from_secs(60),
        || async {
            denied_by_policy(&patch_status_as(&cluster, &user, Some(&own), &other).await)
                .then_some(())
        },
    )
    .await;
    patch_status_as(&cluster, &user, Some(&own), &own)
        .await
        .expect("its own node's status is allowed");
    let no_claim = patch_status_as(&cluster, &user, None, &own).await;
    assert!(
        denied_by_policy(&no_claim),
        "no claim, no write: {no_claim:?}"
    );
    // Other users (the kubelet, other controllers) are not the policy's business.
    let other_user = format!("system:serviceaccount:kube-system:{id}-else");
    let crb2 = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{id}-else")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": other_user}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crb2).unwrap(),
        )
        .await
        .unwrap();
    eventually(
        "RBAC for the other user",
        Duration::from_secs(60),
        || async {
            patch_status_as(&cluster, &other_user, None, &other)
                .await
                .ok()
        },
    )
    .await;

    let dp = kube::api::DeleteParams::default();
    let _ = bindings.delete(&id, &dp).await;
    let _ = policies.delete(&id, &dp).await;
    for n in [id.clone(), format!("{id}-else")] {
        let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(cluster.client.clone())
            .delete(&n, &dp)
            .await;
    }
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster.client.clone())
        .delete(&id, &dp)
        .await;
    cluster.delete_node(&own).await;
    cluster.delete_node(&other).await;
}
