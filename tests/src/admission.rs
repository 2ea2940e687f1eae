//! The shipped own-node ValidatingAdmissionPolicy (deploy/components/own-node-policy/policy.yaml), put on
//! an API server for scenarios that run the detector under it or attack it.

use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;

/// The policy file, from the repository's root.
pub const OWN_NODE_POLICY: &str = "deploy/components/own-node-policy/policy.yaml";

/// The shipped policy and its binding, as JSON documents.
pub fn own_node_policy_docs() -> Vec<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(OWN_NODE_POLICY);
    let text = std::fs::read_to_string(&path).expect("the shipped own-node policy");
    serde_saphyr::from_multiple(&text).expect("the shipped own-node policy parses")
}

/// The `admissionregistration.k8s.io/v1` resource of `kind`.
pub fn resource(kind: &str) -> ApiResource {
    let plural = match kind {
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
        other => panic!("not an admission policy kind: {other}"),
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        plural,
    )
}

/// Create the shipped policy and binding as `admin`.
pub async fn install_own_node_policy(admin: &kube::Client) {
    for doc in own_node_policy_docs() {
        let kind = doc["kind"].as_str().expect("a kind").to_string();
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource(&kind));
        api.create(
            &PostParams::default(),
            &serde_json::from_value(doc).expect("an object"),
        )
        .await
        .unwrap_or_else(|e| panic!("create the shipped {kind}: {e}"));
    }
}
