//! Cluster API and Metal3 through the Kubernetes API, I/O: the Machine behind a Node in the newest
//! version served, tied to the Node as `model::capi` says, and the BareMetalHost behind it (its
//! reboot annotation). The decisions are `model::capi` and `model::metal3`'s; the RBAC is the
//! components' (`deploy/components/cluster-api`, `power-cycle-metal3`).

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::kube::{KubeCluster, api_error};
use crate::model::cluster::{ApiError, PowerCycleError};

/// An object of `group/version` `kind` (plural `plural`) in `namespace`, or `None`.
async fn dynamic(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    namespace: &str,
    name: &str,
) -> Result<Option<kube::api::DynamicObject>, PowerCycleError> {
    use kube::api::{ApiResource, DynamicObject};
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.get_opt(name)
        .await
        .map_err(|e| PowerCycleError::Api(api_error(e)))
}

impl KubeCluster {
    /// The newest of `versions` that the API server serves for `group`, or its preferred one when
    /// none of them is (discovery, asked each time: rare, and a CRD upgrade must not need a restart).
    /// `None` where the group is not served at all (no Cluster API here).
    pub(crate) async fn served(
        &self,
        group: &str,
        versions: &[&str],
    ) -> Result<Option<String>, ApiError> {
        let g = match kube::discovery::group(&self.client, group).await {
            Ok(g) => g,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
            Err(e) => return Err(api_error(e)),
        };
        let served: Vec<String> = g.versions().map(str::to_string).collect();
        Ok(Some(
            versions
                .iter()
                .find(|v| served.iter().any(|s| s == *v))
                .map(|v| v.to_string())
                .unwrap_or_else(|| g.preferred_version_or_latest().to_string()),
        ))
    }

    /// The Cluster API Machine `namespace/name` in the newest version served, if it names `node`
    /// (as decided on: name and UID; as read now: its provider ID) back (`model::capi`); `Ok(Err)`
    /// says why not.
    pub(crate) async fn machine_of(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        node_uid: &str,
    ) -> Result<Option<Result<(kube::api::DynamicObject, String), String>>, ApiError> {
        use crate::model::capi;
        let Some(version) = self.served(capi::GROUP, &capi::VERSIONS).await? else {
            return Ok(None);
        };
        let key = (
            capi::GROUP,
            version.as_str(),
            capi::MACHINE_KIND,
            capi::MACHINE_PLURAL,
        );
        let machine = dynamic(&self.client, key, namespace, name)
            .await
            .map_err(|e| match e {
                PowerCycleError::Api(e) => e,
                other => ApiError::Transport(other.to_string()),
            })?;
        let Some(machine) = machine else {
            return Ok(None);
        };
        let now = self.nodes.get_opt(node).await.map_err(api_error)?;
        let fresh = now.filter(|n| n.metadata.uid.as_deref() == Some(node_uid));
        let Some(fresh) = fresh else {
            return Ok(Some(Err(format!(
                "the Node {node} is gone or was registered again"
            ))));
        };
        let provider_id = fresh.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let who = capi::NodeIdentity {
            name: node,
            uid: node_uid,
            provider_id,
        };
        let data = serde_json::to_value(&machine).unwrap_or_default();
        Ok(Some(
            capi::names_node(&data, &who).map(|()| (machine, version)),
        ))
    }

    /// The BareMetalHost behind the Machine `namespace/machine`, only if that Machine names
    /// `node` back (`model::capi`: what a node writes about itself leads nowhere else).
    pub(crate) async fn metal3_host(
        &self,
        namespace: &str,
        machine: &str,
        node: &str,
        node_uid: &str,
    ) -> Result<(String, String), PowerCycleError> {
        use crate::model::{capi, metal3};
        let no = |why: String| PowerCycleError::NoHost(why);
        let m = match self.machine_of(namespace, machine, node, node_uid).await {
            Err(e) => return Err(PowerCycleError::Api(e)),
            Ok(None) => return Err(no(format!("no Machine {namespace}/{machine}"))),
            Ok(Some(Err(why))) => return Err(no(format!("Machine {namespace}/{machine} {why}"))),
            Ok(Some(Ok((m, _)))) => m,
        };
        let data = serde_json::to_value(&m).unwrap_or_default();
        let infra = capi::infrastructure(&data, namespace);
        if infra.kind != metal3::MACHINE_KIND {
            return Err(no(format!(
                "Machine {namespace}/{machine}'s infrastructure is a {}, not a {}",
                infra.kind,
                metal3::MACHINE_KIND
            )));
        }
        let version = match infra.version {
            Some(v) => v,
            None => (self.served(&infra.group, &capi::VERSIONS).await)
                .map_err(PowerCycleError::Api)?
                .ok_or_else(|| no(format!("{} is not served here", infra.group)))?,
        };
        let key = (
            infra.group.as_str(),
            version.as_str(),
            metal3::MACHINE_KIND,
            metal3::MACHINE_PLURAL,
        );
        let (infra_ns, infra_name) = (infra.namespace, infra.name);
        let m3m = dynamic(&self.client, key, &infra_ns, &infra_name)
            .await?
            .ok_or_else(|| no(format!("no Metal3Machine {infra_ns}/{infra_name}")))?;
        let annotations = m3m.metadata.annotations.unwrap_or_default();
        (annotations.get(metal3::HOST_ANNOTATION))
            .and_then(|a| metal3::host_named(a))
            .ok_or_else(|| {
                no(format!(
                    "Metal3Machine {infra_ns}/{infra_name} names no host ({})",
                    metal3::HOST_ANNOTATION
                ))
            })
    }

    /// The Machine (namespace, name) owning the Metal3Machine `namespace/name` and the node it
    /// names (`status.nodeRef.name`): the way back from a BareMetalHost's `spec.consumerRef` to its
    /// node, for the machines check (which then walks forward with [`Self::metal3_host`]).
    /// `Ok(Err)` says why there is none.
    pub(crate) async fn host_node(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Result<(String, String, String), String>, PowerCycleError> {
        use crate::model::{capi, metal3};
        let api = PowerCycleError::Api;
        let Some(v) = self
            .served(capi::INFRA_GROUP, &capi::VERSIONS)
            .await
            .map_err(api)?
        else {
            return Ok(Err(format!("{} is not served here", capi::INFRA_GROUP)));
        };
        let key = (
            capi::INFRA_GROUP,
            v.as_str(),
            metal3::MACHINE_KIND,
            metal3::MACHINE_PLURAL,
        );
        let Some(m3m) = dynamic(&self.client, key, namespace, name).await? else {
            return Ok(Err(format!("no Metal3Machine {namespace}/{name}")));
        };
        let owners = m3m.metadata.owner_references.unwrap_or_default();
        let owner = owners
            .iter()
            .find(|o| o.kind == capi::MACHINE_KIND && o.api_version.starts_with(capi::GROUP));
        let Some(machine) = owner.map(|o| o.name.clone()) else {
            return Ok(Err(format!(
                "Metal3Machine {namespace}/{name} has no Machine owner"
            )));
        };
        let Some(v) = self
            .served(capi::GROUP, &capi::VERSIONS)
            .await
            .map_err(api)?
        else {
            return Ok(Err(format!("{} is not served here", capi::GROUP)));
        };
        let key = (
            capi::GROUP,
            v.as_str(),
            capi::MACHINE_KIND,
            capi::MACHINE_PLURAL,
        );
        let Some(m) = dynamic(&self.client, key, namespace, &machine).await? else {
            return Ok(Err(format!("no Machine {namespace}/{machine}")));
        };
        let node = m.data["status"]["nodeRef"]["name"]
            .as_str()
            .unwrap_or_default();
        if node.is_empty() {
            return Ok(Err(format!(
                "Machine {namespace}/{machine} names no node yet"
            )));
        }
        Ok(Ok((namespace.to_string(), machine, node.to_string())))
    }

    /// Ask Metal3's baremetal-operator to power-cycle the BareMetalHost `namespace/name`: its
    /// reboot annotation, hard (the operator removes it once done).
    pub(super) async fn annotate_host(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), PowerCycleError> {
        use crate::model::metal3;
        use kube::api::{ApiResource, DynamicObject};
        use kube::core::GroupVersionKind;
        let gvk = GroupVersionKind::gvk(metal3::GROUP, metal3::VERSION, metal3::KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, metal3::PLURAL);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let patch = json!({"metadata": {"annotations": {metal3::REBOOT_ANNOTATION: metal3::HARD}}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => {
                Err(PowerCycleError::NoHost(format!("{namespace}/{name}")))
            }
            Err(e) => Err(PowerCycleError::Api(api_error(e))),
        }
    }
}
