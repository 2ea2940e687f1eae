//! What a scenario talks to. By default a fresh [`TestApiServer`] on loopback; with `NODEMEDIC_E2E=1`
//! the cluster `KUBECONFIG` points at (scenarios then create uniquely named Nodes and delete them
//! afterwards; scenarios that need fault injection say they are skipped).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::server::TestApiServer;

/// True when scenarios should run against a real cluster.
pub fn e2e() -> bool {
    std::env::var("NODEMEDIC_E2E").is_ok_and(|v| v == "1" || v == "true")
}

pub struct Cluster {
    pub client: kube::Client,
    /// The test server, when not running against a real cluster.
    pub fake: Option<TestApiServer>,
}

impl Cluster {
    pub async fn new() -> Cluster {
        if e2e() {
            let client = kube::Client::try_default()
                .await
                .expect("NODEMEDIC_E2E=1 needs a reachable cluster in KUBECONFIG");
            Cluster { client, fake: None }
        } else {
            let server = TestApiServer::start().await;
            Cluster {
                client: server.client(),
                fake: Some(server),
            }
        }
    }

    /// The fake server, or `None` with a printed reason (for fault-injection scenarios).
    pub fn fake_or_skip(&self, scenario: &str) -> Option<&TestApiServer> {
        if self.fake.is_none() {
            eprintln!(
                "skipped {scenario}: needs fault injection, which only the test API server offers"
            );
        }
        self.fake.as_ref()
    }

    /// Create a Node with a kubelet-like Ready condition; returns its name (made unique on a real cluster).
    pub async fn create_node(&self, hint: &str) -> String {
        let name = if self.fake.is_some() {
            hint.to_string()
        } else {
            format!("nodemedic-e2e-{hint}-{}", std::process::id())
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }))
        .unwrap();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        let ready = json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
            "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"
        }]}});
        nodes
            .patch_status(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Strategic(ready),
            )
            .await
            .expect("set Ready");
        name
    }

    pub async fn node(&self, name: &str) -> Node {
        Api::<Node>::all(self.client.clone())
            .get(name)
            .await
            .expect("get node")
    }

    /// The node's condition of `type_` as (status, reason, message).
    pub async fn condition(&self, node: &str, type_: &str) -> Option<(String, String, String)> {
        let n = self.node(node).await;
        n.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| {
                (
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
    }

    /// Events about the node (core/v1, namespace default).
    pub async fn node_events(&self, node: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), "default");
        api.list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
            .await
            .expect("list events")
            .items
    }

    pub async fn delete_node(&self, name: &str) {
        let _ = Api::<Node>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }
}

/// Poll `check` until it returns `Some`, or panic naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
