//! A ladder's power-cycle through medik8s (issue 67), the drainer speaking NodeHealthCheck's
//! external remediation protocol to Fence Agents Remediation, whose CRDs (from its repository,
//! `tests/fixtures/medik8s/`) are installed on a real control plane. The test stands for FAR (it
//! writes the remediation object's status) and for the machine (a new bootID):
//! - a node's remediation object made from the template (its spec, NodeHealthCheck's
//!   annotations), followed to the node's new boot, then deleted;
//! - FAR giving up (`Succeeded=False`): the ladder goes on to the replacement at once, not at the
//!   reboot deadline, and says why;
//! - a node another already remediates (NodeHealthCheck's object, no label of ours): nothing made,
//!   that object left untouched, the refusal said.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use crate::ladder::{
    BOOT_B, broken_node_with, forget_requests, has_event, install_fixture_crds, said,
};
use crate::remedies::Scenario;

const GROUP: &str = "fence-agents-remediation.medik8s.io";

fn api(s: &Scenario, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", kind);
    Api::namespaced_with(
        s.env.cluster.client.clone(),
        "default",
        &ApiResource::from_gvk(&gvk),
    )
}

/// FAR's CRDs as its repository publishes them (on the test API server they are stored and every
/// kind is served anyway).
async fn install_far(s: &Scenario) {
    let files = [
        "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediations.yaml",
        "medik8s/fence-agents-remediation.medik8s.io_fenceagentsremediationtemplates.yaml",
    ];
    install_fixture_crds(&s.env.cluster.client, s.env.cluster.real(), &files).await;
}

/// The node's FenceAgentsRemediation objects (anyone's).
async fn remediations(s: &Scenario, node: &str) -> Vec<DynamicObject> {
    let list = api(s, "FenceAgentsRemediation")
        .list(&Default::default())
        .await
        .unwrap();
    (list.items.into_iter())
        .filter(|o| {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("remediation.medik8s.io/node-name"))
                == Some(&node.to_string())
        })
        .collect()
}

/// FAR's verdict on `o`, as FAR writes it.
async fn verdict(s: &Scenario, o: &DynamicObject, status: &str, reason: &str) {
    let name = o.metadata.name.as_deref().unwrap();
    let now = nodemedic_common::time::rfc3339(k8s_openapi::jiff::Timestamp::now());
    let c = json!({"status": {"conditions": [
        {"type": "Processing", "status": "False", "reason": reason, "message": "", "lastTransitionTime": now},
        {"type": "Succeeded", "status": status, "reason": reason, "message": "fence_ipmilan said so", "lastTransitionTime": now}]}});
    api(s, "FenceAgentsRemediation")
        .patch_status(name, &PatchParams::default(), &Patch::Merge(c))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_agents_remediation_is_asked_followed_to_the_new_boot_and_cleaned_up() {
    let s = Scenario::new().await;
    install_far(&s).await;
    let template = s.env.name("far-reboot");
    // As FAR's webhook leaves a template: the multiple-templates annotation (generated names).
    let t: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "FenceAgentsRemediationTemplate",
        "metadata": {"name": template, "namespace": "default",
            "annotations": {"remediation.medik8s.io/multiple-templates-support": "true"}},
        "spec": {"template": {"spec": {"agent": "fence_ipmilan", "remediationStrategy": "ResourceDeletion",
            "sharedparameters": {"--action": "reboot", "--username": "admin"}}}}}))
    .unwrap();
    api(&s, "FenceAgentsRemediationTemplate")
        .create(&PostParams::default(), &t)
        .await
        .unwrap();
    // Each in its own zone: each has its own slow start.
    let zone = |z: &str| json!({"topology.kubernetes.io/zone": z});
    let node = broken_node_with(&s, "fenced", zone("a")).await;
    let fails = broken_node_with(&s, "unfenced", zone("b")).await;
    let taken = broken_node_with(&s, "taken", zone("c")).await;
    // NodeHealthCheck already remediates this one.
    let theirs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "FenceAgentsRemediation",
        "metadata": {"name": taken, "namespace": "default",
            "annotations": {"remediation.medik8s.io/node-name": taken}},
        "spec": {"agent": "fence_ipmilan"}}))
    .unwrap();
    api(&s, "FenceAgentsRemediation")
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let named = format!(
        "--remediation-template={GROUP}/v1alpha1/FenceAgentsRemediationTemplate/default/{template}"
    );
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, power-cycle, replace",
            "--drain-buffer=1s",
            // Only FAR's verdict can end a step before this.
            "--reboot-deadline=30m",
            "--max-drains-in-flight=3",
            "--power-cycle-provider=medik8s",
            &named,
        ])
        .await;
    // Made from the template, as NodeHealthCheck makes it.
    let made = s
        .until("the node's FenceAgentsRemediation", &drainer, || async {
            remediations(&s, &node).await.into_iter().next()
        })
        .await;
    assert!(
        made.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with(&format!("{node}-"))
    );
    assert_eq!(made.data["spec"]["agent"], "fence_ipmilan");
    assert_eq!(made.data["spec"]["sharedparameters"]["--username"], "admin");
    let annotations = made.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("remediation.medik8s.io/template-name"),
        Some(&template)
    );
    said(&s, &drainer, &node, "PowerCycleRequested").await;
    // FAR reboots it: the node comes back with a new boot, the problem gone.
    verdict(&s, &made, "True", "RemediationFinishedSuccessfully").await;
    nodemedic_tests::cluster::Kubelet::booted(&s.env.cluster.client, &node, BOOT_B).await;
    s.env
        .set_condition(&node, "KernelDeadlock", "False", 0)
        .await;
    said(&s, &drainer, &node, "RebootProven").await;
    // Over: deleted (FAR lifts its taints then), as NodeHealthCheck deletes its own.
    s.until(
        "the proven node's remediation deleted",
        &drainer,
        || async { remediations(&s, &node).await.is_empty().then_some(()) },
    )
    .await;
    said(&s, &drainer, &node, "RemediationObjectDeleted").await;
    // FAR gives up on the second: the replacement comes now, saying why.
    let failing = s
        .until(
            "the second node's FenceAgentsRemediation",
            &drainer,
            || async { remediations(&s, &fails).await.into_iter().next() },
        )
        .await;
    verdict(&s, &failing, "False", "FenceAgentFailed").await;
    said(&s, &drainer, &fails, "ReplacingNode").await;
    let events: Vec<String> = (s.env.drainer_events(&fails).await.into_iter())
        .filter_map(|e| e.message)
        .collect();
    assert!(
        events.iter().any(|e| e.contains(
            "its remediator gave up on the power-cycle (FenceAgentFailed: fence_ipmilan said so)"
        )),
        "{events:?}"
    );
    // The attempt ended, said: a permanent failure, the remediator's reason with it.
    s.until("the attempt's end said", &drainer, || async {
        let events = s.env.drainer_events(&fails).await;
        events.into_iter().filter_map(|e| e.message).find(|e| {
            e.starts_with("Remediation attempt: power-cycle started")
                && e.contains("permanent failure")
                && e.contains("FenceAgentFailed")
        })
    })
    .await;
    // NodeHealthCheck's object: nothing made beside it, it is left as it was, and the refusal said.
    said(&s, &drainer, &taken, "PowerCycleFailed").await;
    let left = remediations(&s, &taken).await;
    assert_eq!(left.len(), 1, "nothing of ours beside it");
    assert_eq!(left[0].metadata.name.as_deref(), Some(taken.as_str()));
    assert!(left[0].metadata.labels.is_none(), "untouched");
    assert!(
        drainer
            .output()
            .contains("already remediates it, not made by nodemedic")
    );
    assert!(has_event(&s, &node, "PowerCycleRequested").await);
    drop(drainer);
    for o in remediations(&s, &taken)
        .await
        .into_iter()
        .chain(remediations(&s, &fails).await)
    {
        let _ = api(&s, "FenceAgentsRemediation")
            .delete(o.metadata.name.as_deref().unwrap(), &Default::default())
            .await;
    }
    let _ = api(&s, "FenceAgentsRemediationTemplate")
        .delete(&template, &Default::default())
        .await;
    forget_requests(&s).await;
    s.env.cleanup().await;
}
