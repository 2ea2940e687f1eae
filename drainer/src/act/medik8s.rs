//! The medik8s provider's calls on a real API server (`model::medik8s` says what is made and
//! read): the remediation object created from the operator's template, ours listed to be
//! followed, and deleted once the attempt is over (as NodeHealthCheck deletes its own once the node
//! is healthy: Fence Agents Remediation lifts its taints then). I/O.

use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use kube::core::GroupVersionKind;

use super::kube::{KubeCluster, api_error};
use crate::model::cluster::{ApiError, PowerCycleError};
use crate::model::medik8s::{self, Remediation, Template};

/// Granted only for `--power-cycle-provider=medik8s` with Fence Agents Remediation
/// (`deploy/components/power-cycle-medik8s`): the template read, the remediation objects listed
/// (ours followed; another's for the node found), created and deleted. In the remediator's
/// namespace only (a Role there). Another remediator's template needs the same verbs on its kinds.
pub const MEDIK8S_PERMISSIONS: &[nodemedic_common::rbac::Permission] = &[
    nodemedic_common::rbac::Permission {
        group: "fence-agents-remediation.medik8s.io",
        resource: "fenceagentsremediationtemplates",
        verbs: &["get"],
        namespaced: true,
    },
    nodemedic_common::rbac::Permission {
        group: "fence-agents-remediation.medik8s.io",
        resource: "fenceagentsremediations",
        verbs: &["list", "create", "delete"],
        namespaced: true,
    },
];

/// The API of `t`'s remediation objects, or of the template itself.
fn api(client: &kube::Client, t: &Template, template: bool) -> Api<DynamicObject> {
    let kind = if template {
        t.kind.as_str()
    } else {
        t.remediation_kind()
    };
    let gvk = GroupVersionKind::gvk(&t.group, &t.version, kind);
    // kube's plural of the kind (lowercase, `s`): what each medik8s CRD names its plural.
    let resource = ApiResource::from_gvk(&gvk);
    Api::namespaced_with(client.clone(), &t.namespace, &resource)
}

fn label() -> String {
    format!("{}={}", medik8s::MANAGED_BY.0, medik8s::MANAGED_BY.1)
}

impl KubeCluster {
    /// Ask `t`'s remediator for `node`, once per attempt (`operation`): an object of ours for an
    /// earlier attempt is deleted first; while one not ours names the node (NodeHealthCheck's, a
    /// person's), the request is refused and that object left to whoever made it.
    pub(super) async fn remediate(
        &self,
        t: &Template,
        node: &str,
        operation: &str,
    ) -> Result<(), PowerCycleError> {
        let failed = PowerCycleError::Api;
        let kind = t.remediation_kind();
        let objects = api(&self.client, t, false);
        let all = (objects.list(&ListParams::default()).await).map_err(|e| failed(api_error(e)))?;
        for o in &all.items {
            let v = serde_json::to_value(o).unwrap_or_default();
            if !medik8s::names_node(&v, node) {
                continue;
            }
            match medik8s::read(&v) {
                Some(r) if r.operation == operation => return Ok(()),
                Some(r) => self.delete_remediation(t, &r).await.map_err(failed)?,
                None => {
                    return Err(PowerCycleError::NoHost(format!(
                        "{kind} {}/{} already remediates it, not made by nodemedic (NodeHealthCheck's, or a person's): left to it",
                        t.namespace,
                        o.metadata.name.as_deref().unwrap_or_default()
                    )));
                }
            }
        }
        let Some(template) = (api(&self.client, t, true).get_opt(&t.name).await)
            .map_err(|e| failed(api_error(e)))?
        else {
            return Err(PowerCycleError::NoHost(format!("there is no {t}")));
        };
        let data = serde_json::to_value(&template).unwrap_or_default();
        let object = medik8s::object(t, &data, node, operation).map_err(PowerCycleError::NoHost)?;
        let object: DynamicObject = serde_json::from_value(object)
            .map_err(|e| PowerCycleError::NoHost(format!("the template {t}: {e}")))?;
        match objects.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(PowerCycleError::NoHost(format!(
                "a {kind} named {node} already exists in {}, not made by nodemedic: left to it",
                t.namespace
            ))),
            Err(e) => Err(failed(api_error(e))),
        }
    }

    /// Our remediation objects of `t`'s kind, in its namespace.
    pub(super) async fn remediations(&self, t: &Template) -> Result<Vec<Remediation>, ApiError> {
        let params = ListParams::default().labels(&label());
        let list = api(&self.client, t, false)
            .list(&params)
            .await
            .map_err(api_error)?;
        Ok((list.items.iter())
            .filter_map(|o| medik8s::read(&serde_json::to_value(o).ok()?))
            .collect())
    }

    /// Delete our object `r` (that object only: its UID a precondition); gone already is done.
    pub(super) async fn delete_remediation(
        &self,
        t: &Template,
        r: &Remediation,
    ) -> Result<(), ApiError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(r.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api(&self.client, t, false).delete(&r.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(api_error(e)),
        }
    }
}
