//! The Kubernetes [`Reporter`] (I/O shell): reads the Node, patches its status, writes Events. Each call is bounded
//! by a timeout so a hung connection shows up as a failed call (retried) rather than a stuck loop.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use nodemedic_common::conditions::status_patch;
use nodemedic_common::events::NodeEvents;

use super::aggregate::Write;
use super::confinement::{PROBE_LABEL, ProbeAnswer};
use super::reporter::{Error, Reporter};
use super::sync::Plan;

/// Every API call the detector makes, as RBAC (the shipped ClusterRole must grant exactly this):
/// read its Node, patch its status (conditions and the ownership annotation), write Events.
pub const PERMISSIONS: &[nodemedic_common::rbac::Permission] = &[
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes",
        verbs: &["get"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
        namespaced: false,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "events",
        verbs: &["create", "patch"],
        namespaced: false,
    },
];

/// Upper bound of one API call.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r.map_err(Error::Api),
        Err(_) => Err(Error::Timeout(CALL_TIMEOUT)),
    }
}

#[derive(Clone)]
pub(crate) struct KubeReporter {
    nodes: Api<Node>,
    /// For reading the node as JSON (see [`KubeReporter::read_node`]).
    client: kube::Client,
    events: NodeEvents,
    node: String,
}

impl KubeReporter {
    pub(crate) fn new(client: kube::Client, node: &str) -> Self {
        KubeReporter {
            nodes: Api::all(client.clone()),
            client: client.clone(),
            events: NodeEvents::new(client, node),
            node: node.to_string(),
        }
    }

    /// Read this node. Times past what our types hold (the API server takes them up to the end of
    /// 9999) are clamped to the latest they hold rather than failing the read for ever
    /// (`common::lenient::clamp_times`).
    pub(crate) async fn read_node(&self) -> Result<Node, Error> {
        let req = http::Request::get(format!("/api/v1/nodes/{}", self.node))
            .body(Vec::new())
            .map_err(|e| Error::Api(kube::Error::HttpError(e)))?;
        let text = bounded(self.client.request_text(req)).await?;
        let mut v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Error::Api(kube::Error::SerdeError(e)))?;
        nodemedic_common::lenient::clamp_times(&mut v);
        serde_json::from_value(v).map_err(|e| Error::Api(kube::Error::SerdeError(e)))
    }

    /// Ask, with a dry run that is never stored, whether a label on this Node may be set through
    /// its status (see [`super::confinement`]).
    pub(crate) async fn probe_confinement(&self) -> ProbeAnswer {
        self.probe_node(&self.node).await
    }

    /// The same dry run on another Node, the first other one listed (for a kubeconfig whose
    /// own-Node probe passed: a kubelet's credential is refused there, an administrator's is
    /// not); `None` when there is no other Node to try, or the list is not allowed.
    pub(crate) async fn probe_other_node(&self) -> Option<ProbeAnswer> {
        let params = kube::api::ListParams::default().limit(2);
        let nodes = bounded(self.nodes.list_metadata(&params)).await.ok()?;
        let other = (nodes.items.iter())
            .filter_map(|n| n.metadata.name.clone())
            .find(|n| *n != self.node)?;
        Some(self.probe_node(&other).await)
    }

    async fn probe_node(&self, node: &str) -> ProbeAnswer {
        let body = serde_json::json!({"metadata": {"labels": {PROBE_LABEL: "dry-run"}}});
        let params = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        match bounded(
            self.nodes
                .patch_status(node, &params, &Patch::Strategic(body)),
        )
        .await
        {
            Ok(_) => ProbeAnswer::Accepted,
            Err(Error::Api(kube::Error::Api(s))) => ProbeAnswer::Refused(s.code, s.message),
            Err(e) => ProbeAnswer::Failed(e.to_string()),
        }
    }
}

impl Reporter for KubeReporter {
    /// One strategic-merge patch of `nodes/{name}/status`: our conditions (with a fresh heartbeat),
    /// removals, and the ownership annotation.
    async fn patch(&self, plan: &Plan, now: Timestamp) -> Result<(), Error> {
        let heartbeat = nodemedic_common::time::rfc3339(now);
        let revision = plan.revision.as_deref();
        let body = status_patch(&plan.set, &plan.remove, &heartbeat, &plan.owned, revision);
        bounded(self.nodes.patch_status(
            &self.node,
            &PatchParams::default(),
            &Patch::Strategic(body),
        ))
        .await?;
        Ok(())
    }

    /// Create or update an Event.
    async fn write_event(&self, w: &Write) -> Result<(), Error> {
        if w.create {
            bounded(self.events.create_or_update(&w.name, &w.event)).await
        } else {
            bounded(self.events.update(&w.name, &w.event)).await
        }
    }
}
