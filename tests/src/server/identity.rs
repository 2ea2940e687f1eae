//! What a node identity (`system:node:NAME`, a kubelet's credential) may write, as kube-apiserver's
//! Node authorizer and NodeRestriction admission decide it, for the Node writes the recordings show:
//! another node's object or status is refused (60), a label under a restricted prefix on its own
//! Node is refused (61), and an annotation on its own Node is allowed (62), so an annotation proves
//! nothing about who wrote it. Reads and other resources are not restricted here.

use std::collections::BTreeMap;

use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Target, error};

/// Who makes a request, as authentication gives it to authorization and admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// A request without a token: the cluster's administrator.
    pub fn admin() -> User {
        User {
            name: "system:admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    /// A kubelet's credential, `system:node:NAME` in group `system:nodes`.
    pub fn node(name: &str) -> User {
        User {
            name: format!("system:node:{name}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    /// A ServiceAccount's token. `on_node`: a pod's bound token, which carries the node-name claim
    /// (`authentication.kubernetes.io/node-name`, Kubernetes 1.30+) of the node the pod runs on.
    pub fn service_account(namespace: &str, name: &str, on_node: Option<&str>) -> User {
        let mut extra = BTreeMap::new();
        if let Some(node) = on_node {
            extra.insert(
                "authentication.kubernetes.io/node-name".to_string(),
                vec![node.to_string()],
            );
        }
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
            extra,
        }
    }

    /// The node of a node identity.
    pub(crate) fn node_name(&self) -> Option<&str> {
        self.name.strip_prefix("system:node:")
    }
}

/// Label prefixes a node may not set on itself (NodeRestriction): `node-restriction.kubernetes.io/`
/// and its subdomains.
const RESTRICTED: &[&str] = &[
    "node-restriction.kubernetes.io/",
    ".node-restriction.kubernetes.io/",
];

/// Whether node `me` may make this request; the refusal as the real server words it.
#[allow(clippy::result_large_err)] // a refusal is an HTTP response, made once per refused request
pub(crate) fn node_may(me: &str, method: &Method, t: &Target, body: &[u8]) -> Result<(), Response> {
    let writes = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if !writes || t.resource != "nodes" || t.api != "v1" {
        return Ok(());
    }
    let name = t.name.as_deref().unwrap_or_default();
    let forbidden = |message: String| {
        error(
            403,
            Some("Forbidden"),
            &format!("nodes \"{name}\" is forbidden: {message}"),
            Some(json!({"name": name, "kind": "nodes"})),
        )
    };
    if name != me {
        return Err(forbidden(format!(
            "node \"{me}\" is not allowed to modify node \"{name}\""
        )));
    }
    let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let restricted: Vec<&str> = patch
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.keys())
        .map(String::as_str)
        .filter(|k| {
            let prefix = k.split_once('/').map_or("", |(p, _)| p);
            RESTRICTED
                .iter()
                .any(|r| format!("{prefix}/") == *r || format!("{prefix}/").ends_with(r))
        })
        .collect();
    if !restricted.is_empty() {
        return Err(forbidden(format!(
            "is not allowed to modify labels: {}",
            restricted.join(", ")
        )));
    }
    Ok(())
}
