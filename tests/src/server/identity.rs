//! What a node identity (`system:node:NAME`, a kubelet's credential) may write, as kube-apiserver's
//! Node authorizer and NodeRestriction admission decide it, for the Node writes the recordings show:
//! another node's object or status is refused (60), a label under a restricted prefix on its own
//! Node is refused (61), and an annotation on its own Node is allowed (62), so an annotation proves
//! nothing about who wrote it. Reads and other resources are not restricted here.

use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Target, error};

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
