//! The [`Cluster`] over the Kubernetes API, I/O: the typed writes rendered as strategic merge
//! patches, evictions through `policy/v1`, Events as core/v1 (`nodemedic_common::events`), and a
//! pod's going read from the watch cache. The RBAC it needs is listed here, next to the calls.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use nodemedic_common::events::{NodeEvent, NodeEvents};
use nodemedic_common::evict::Evicted;
use nodemedic_common::rbac::Permission;
use nodemedic_common::time::rfc3339;
use serde_json::{Map, Value, json};

use crate::model::cluster::{
    ApiError, Cluster, ConditionPatch, Data, EventTarget, Kept, MachineMark, NodePatch,
    NodeVersion, PowerCycleError, PowerCycleRequest, PowerTarget, REMEDIATE_MACHINE_ANNOTATION,
};
use crate::model::pod::Uid;
use crate::observe::Observed;

/// Granted only with `--delete-drained-node-after` (its own ClusterRole: `deploy/delete-drained-nodes`,
/// or the chart when `drainer.config.deleteDrainedNodeAfter` is set).
pub const DELETE_NODES_PERMISSIONS: &[Permission] = &[Permission {
    group: "",
    resource: "nodes",
    verbs: &["delete"],
    namespaced: false,
}];

/// Granted only where Cluster API runs the nodes (its own ClusterRole: `deploy/cluster-api`, or the
/// chart's `drainer.clusterAPI`): a replacement marks the node's Machine for its MachineHealthCheck
/// instead of deleting the Node.
pub const CLUSTER_API_PERMISSIONS: &[Permission] = &[Permission {
    group: "cluster.x-k8s.io",
    resource: "machines",
    verbs: &["get", "patch"],
    // In the namespaces of this cluster's Machines only (a Role in each): a node names its
    // Machine's namespace itself.
    namespaced: true,
}];

/// Granted only for `--power-cycle-provider=metal3` (`deploy/components/power-cycle-metal3`): the
/// Machine read to check it names the node back, its Metal3Machine read for the host's name, the
/// host's reboot annotation written. In the namespace of this cluster's hosts only (a Role there).
pub const METAL3_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "cluster.x-k8s.io",
        resource: "machines",
        verbs: &["get"],
        namespaced: true,
    },
    Permission {
        group: "infrastructure.cluster.x-k8s.io",
        resource: "metal3machines",
        verbs: &["get"],
        namespaced: true,
    },
    Permission {
        group: "metal3.io",
        resource: "baremetalhosts",
        verbs: &["patch"],
        namespaced: true,
    },
];

/// Granted only with `--kured-daemonset` (`deploy/components/kured`, or the chart's
/// `drainer.kured.daemonSet`): kured's DaemonSet, by name, for its reboot lock (read only).
pub const KURED_PERMISSIONS: &[Permission] = &[Permission {
    group: "apps",
    resource: "daemonsets",
    verbs: &["get", "list", "watch"],
    namespaced: true,
}];

/// Granted only with `--allow-force-delete` (its own ClusterRole: `deploy/allow-force-delete`, or the
/// chart when `drainer.config.allowForceDelete` is set).
pub const FORCE_DELETE_PERMISSIONS: &[Permission] = &[Permission {
    group: "",
    resource: "pods",
    verbs: &["delete"],
    namespaced: false,
}];

/// Every API call the drainer makes, as RBAC (the shipped roles must grant exactly this): watch Nodes
/// and Pods, patch Nodes (cordon, record) and their status (DrainScheduled), evict Pods (drains and
/// stale readiness; their going is seen through the watch), write Events, and hold its Lease in its
/// own namespace.
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        group: "",
        resource: "nodes",
        verbs: &["get", "list", "watch", "patch"],
        namespaced: false,
    },
    Permission {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
        namespaced: false,
    },
    Permission {
        group: "",
        resource: "pods",
        // No get: a drain waits for evicted pods through the watch.
        verbs: &["list", "watch"],
        namespaced: false,
    },
    Permission {
        group: "",
        resource: "pods/eviction",
        verbs: &["create"],
        namespaced: false,
    },
    Permission {
        group: "",
        resource: "events",
        // patch: one Event per wait or per blocked node whose count grows; list and watch: the
        // kubelets' FailedCreatePodSandBox Events (words for PodsNotStarting).
        verbs: &["create", "patch", "list", "watch"],
        namespaced: false,
    },
    // Its Lease, by name: the manifests make it (`act::objects`), so no create.
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "update"],
        namespaced: true,
    },
    // No Secret: the record key (`act::key`) is a file its pod mounts (`--record-key-file`), so its
    // token cannot read it. (A drainer run without that flag reads its Secret through the API and
    // needs `secrets get/update` on that one name; the shipped manifests grant none.)
    // The detector watchdog reads where the detector DaemonSet runs (it lives in the drainer's
    // namespace in the shipped manifests and chart).
    Permission {
        group: "apps",
        resource: "daemonsets",
        verbs: &["get"],
        namespaced: true,
    },
    // Its settings, published for `kubectl nodemedic` (`config::published`), its reboot requests
    // and its record memory (`act::recall`), by name: the manifests make them (`act::objects`), so
    // no create (it would be any ConfigMap in the namespace).
    Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "update"],
        namespaced: true,
    },
];

/// The API server as the drainer writes to it; a pod's going is read from `observed` (the watch).
#[derive(Clone)]
pub struct KubeCluster {
    pub(super) client: kube::Client,
    pub(super) nodes: Api<Node>,
    /// The drainer's own ConfigMaps, in its Lease's namespace.
    configmaps: Api<k8s_openapi::api::core::v1::ConfigMap>,
    observed: Observed,
}

impl KubeCluster {
    /// `namespace`: the Lease's, where the drainer's own ConfigMaps are.
    pub(crate) fn new(client: kube::Client, observed: Observed, namespace: &str) -> KubeCluster {
        KubeCluster {
            nodes: Api::all(client.clone()),
            configmaps: Api::namespaced(client.clone(), namespace),
            client,
            observed,
        }
    }
}

pub(super) fn api_error(e: kube::Error) -> ApiError {
    let text = nodemedic_common::client::said(&e);
    match &e {
        kube::Error::Api(s) => ApiError::Status { code: s.code, text },
        _ => ApiError::Transport(text),
    }
}

/// `patch` as a strategic merge patch body.
pub(crate) fn node_patch_body(patch: &NodePatch) -> Value {
    let strings = |m: &std::collections::BTreeMap<String, Option<String>>| -> Map<String, Value> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
            .collect()
    };
    let mut metadata = Map::new();
    if let Some(rv) = &patch.resource_version {
        metadata.insert("resourceVersion".into(), json!(rv));
    }
    if !patch.labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(strings(&patch.labels)));
    }
    if !patch.annotations.is_empty() {
        metadata.insert(
            "annotations".into(),
            Value::Object(strings(&patch.annotations)),
        );
    }
    let mut spec = Map::new();
    if let Some(u) = patch.unschedulable {
        spec.insert("unschedulable".into(), json!(u));
    }
    if let Some(t) = &patch.taints {
        spec.insert("taints".into(), json!(t));
    }
    let mut body = Map::new();
    if !metadata.is_empty() {
        body.insert("metadata".into(), Value::Object(metadata));
    }
    if !spec.is_empty() {
        body.insert("spec".into(), Value::Object(spec));
    }
    Value::Object(body)
}

/// `patches` as a strategic merge patch body of the status (conditions merge by type).
pub(crate) fn condition_patch_body(patches: &[ConditionPatch]) -> Value {
    let conditions: Vec<Value> = patches.iter().map(condition_body).collect();
    json!({"status": {"conditions": conditions}})
}

fn condition_body(patch: &ConditionPatch) -> Value {
    match patch {
        ConditionPatch::Set {
            type_,
            status,
            reason,
            message,
            at,
        } => json!({
            "type": type_, "status": status.as_str(), "reason": reason, "message": message,
            "lastHeartbeatTime": rfc3339(*at), "lastTransitionTime": rfc3339(*at),
        }),
        ConditionPatch::Remove { type_ } => json!({"type": type_, "$patch": "delete"}),
    }
}

impl Cluster for KubeCluster {
    async fn read_configmap(&self, name: &str) -> Result<Option<Data>, ApiError> {
        let cm = self.configmaps.get_opt(name).await.map_err(api_error)?;
        Ok(cm.map(|c| c.data.unwrap_or_default()))
    }

    async fn keep_configmap(
        &self,
        name: &str,
        wanted: &Data,
        same: fn(&Data, &Data) -> bool,
    ) -> Result<Kept, ApiError> {
        use kube::api::PostParams;
        let held = self.configmaps.get_opt(name).await.map_err(api_error)?;
        match held {
            Some(cm) if same(cm.data.as_ref().unwrap_or(&Data::new()), wanted) => {
                Ok(Kept::Unchanged)
            }
            // Replaced as read (its resourceVersion): a write made meanwhile is a conflict.
            Some(mut cm) => {
                cm.data = Some(wanted.clone());
                let pp = PostParams::default();
                self.configmaps
                    .replace(name, &pp, &cm)
                    .await
                    .map_err(api_error)?;
                Ok(Kept::Written)
            }
            None if wanted.is_empty() => Ok(Kept::Unchanged),
            None => {
                let cm = crate::act::objects::drainer_configmap(name, wanted.clone());
                let pp = PostParams::default();
                self.configmaps.create(&pp, &cm).await.map_err(api_error)?;
                Ok(Kept::Written)
            }
        }
    }

    async fn daemon_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, ApiError> {
        let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name).await.map_err(api_error)
    }

    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), ApiError> {
        let body = Patch::Strategic(node_patch_body(patch));
        let answer = self.nodes.patch(name, &PatchParams::default(), &body).await;
        answer.map(|_| ()).map_err(api_error)
    }

    async fn patch_node_status(
        &self,
        name: &str,
        patch: &[ConditionPatch],
    ) -> Result<(), ApiError> {
        let body = Patch::Strategic(condition_patch_body(patch));
        let answer = self
            .nodes
            .patch_status(name, &PatchParams::default(), &body)
            .await;
        answer.map(|_| ()).map_err(api_error)
    }

    async fn read_node(&self, name: &str) -> Result<Node, ApiError> {
        self.nodes.get(name).await.map_err(api_error)
    }

    async fn mark_machine(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        node_uid: &str,
    ) -> Result<MachineMark, ApiError> {
        use crate::model::capi;
        use kube::api::{ApiResource, DynamicObject};
        let version = match self.machine_of(namespace, name, node, node_uid).await? {
            None => return Ok(MachineMark::Missing),
            Some(Err(why)) => return Ok(MachineMark::OtherNode(why)),
            Some(Ok((_, version))) => version,
        };
        let gvk = kube::core::GroupVersionKind::gvk(capi::GROUP, &version, capi::MACHINE_KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, capi::MACHINE_PLURAL);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let patch = json!({"metadata": {"annotations": {REMEDIATE_MACHINE_ANNOTATION: ""}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api_error)?;
        Ok(MachineMark::Marked)
    }

    async fn power_cycle(
        &self,
        target: &PowerTarget,
        request: &PowerCycleRequest,
    ) -> Result<(), PowerCycleError> {
        match target {
            PowerTarget::Http { url, token, ca } => {
                super::power::post(url, token.as_deref(), ca.as_deref(), request).await
            }
            PowerTarget::Metal3 {
                namespace,
                machine,
                node,
                node_uid,
            } => {
                super::power::retried(|| async {
                    let (ns, host) = self.metal3_host(namespace, machine, node, node_uid).await?;
                    self.annotate_host(&ns, &host).await
                })
                .await
            }
            PowerTarget::Medik8s {
                template,
                node,
                operation,
            } => super::power::retried(|| self.remediate(template, node, operation)).await,
        }
    }

    async fn remediations(
        &self,
        template: &crate::model::medik8s::Template,
    ) -> Result<Vec<crate::model::medik8s::Remediation>, ApiError> {
        KubeCluster::remediations(self, template).await
    }

    async fn delete_remediation(
        &self,
        template: &crate::model::medik8s::Template,
        r: &crate::model::medik8s::Remediation,
    ) -> Result<(), ApiError> {
        KubeCluster::delete_remediation(self, template, r).await
    }

    async fn delete_node(&self, name: &str, only: &NodeVersion) -> Result<(), ApiError> {
        let (resource_version, uid) = match only {
            NodeVersion::Version(v) => (Some(v.clone()), None),
            NodeVersion::Uid(u) => (None, Some(u.clone())),
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version,
                uid,
            }),
            ..Default::default()
        };
        let answer = self.nodes.delete(name, &params).await;
        answer.map(|_| ()).map_err(api_error)
    }

    async fn evict(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
    ) -> Result<Evicted, ApiError> {
        nodemedic_common::evict::evict(&self.client, namespace, name, grace_seconds)
            .await
            .map_err(api_error)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        grace_seconds: i64,
    ) -> Result<(), ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(grace_seconds.max(0) as u32),
            preconditions: uid.map(|u| Preconditions {
                uid: Some(u.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        api.delete(name, &params)
            .await
            .map(|_| ())
            .map_err(api_error)
    }

    async fn pod_gone(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&Uid>,
        deadline: tokio::time::Instant,
        or_finished: bool,
    ) -> bool {
        self.observed
            .wait_gone(namespace, name, uid, deadline, or_finished)
            .await
    }

    async fn event(
        &self,
        target: &EventTarget,
        ev: &NodeEvent,
        existing: Option<&str>,
    ) -> Result<String, ApiError> {
        match target {
            EventTarget::Node(node) => {
                let events = NodeEvents::new(self.client.clone(), node);
                match existing {
                    Some(name) => events.update(name, ev).await.map(|()| name.to_string()),
                    None => events.create(ev).await,
                }
            }
            EventTarget::Object { regarding, host } => {
                let ns = regarding.namespace.clone().unwrap_or_default();
                let client = self.client.clone();
                nodemedic_common::events::create_for(client, &ns, regarding.clone(), host, ev).await
            }
        }
        .map_err(api_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cordon_is_one_patch_of_version_annotations_and_unschedulable() {
        let patch = NodePatch {
            resource_version: Some("7".into()),
            unschedulable: Some(true),
            ..Default::default()
        }
        .annotation("a", Some("1".into()))
        .annotation("b", None);
        assert_eq!(
            node_patch_body(&patch),
            json!({"metadata": {"resourceVersion": "7", "annotations": {"a": "1", "b": null}},
                   "spec": {"unschedulable": true}})
        );
    }

    #[test]
    fn a_condition_is_set_or_deleted_by_its_type() {
        let at = "2026-11-24T10:00:00Z".parse().unwrap();
        let set = ConditionPatch::Set {
            type_: "DrainScheduled".into(),
            status: nodemedic_common::status::Status::True,
            reason: "Draino".into(),
            message: "m".into(),
            at,
        };
        assert_eq!(
            condition_patch_body(std::slice::from_ref(&set)),
            json!({"status": {"conditions": [{"type": "DrainScheduled", "status": "True",
                "reason": "Draino", "message": "m", "lastHeartbeatTime": "2026-11-24T10:00:00Z",
                "lastTransitionTime": "2026-11-24T10:00:00Z"}]}})
        );
        let remove = ConditionPatch::Remove {
            type_: "DrainScheduled".into(),
        };
        assert_eq!(
            condition_patch_body(std::slice::from_ref(&remove)),
            json!({"status": {"conditions": [{"type": "DrainScheduled", "$patch": "delete"}]}})
        );
    }
}
