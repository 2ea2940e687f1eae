//! What kubectl reads before it asks for anything: `/version`, and API discovery (`/api`, `/apis`,
//! `/api/v1`, `/apis/GROUP/VERSION`) in its legacy form, for the resources this server stores.
//! kubectl asks for aggregated discovery first (`Accept: ...;as=APIGroupDiscoveryList`) and reads
//! the legacy lists when the answer is plain `application/json`, as kube-apiserver before 1.26
//! answers; names, kinds, scopes and short names are kube-apiserver's (`kubectl api-resources`).
//! It answers as v1.30 unless told to answer as an older minor release
//! ([`super::TestApiServer::pretend_minor`]): then the kinds that release did not serve are absent
//! (ValidatingAdmissionPolicy v1 came in 1.30), as `kubectl apply` then finds them.

use serde_json::{Value, json};

/// (group/version, resource, kind, namespaced, short names, subresources).
type Row = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
);

const RESOURCES: &[Row] = &[
    ("v1", "nodes", "Node", false, &["no"], &["status"]),
    ("v1", "pods", "Pod", true, &["po"], &["status", "eviction"]),
    ("v1", "namespaces", "Namespace", false, &["ns"], &["status"]),
    ("v1", "events", "Event", true, &["ev"], &[]),
    ("v1", "secrets", "Secret", true, &[], &[]),
    ("v1", "configmaps", "ConfigMap", true, &["cm"], &[]),
    ("v1", "services", "Service", true, &["svc"], &["status"]),
    (
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        &[],
    ),
    (
        "apps/v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        &["status"],
    ),
    (
        "apps/v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        &["status"],
    ),
    (
        "apps/v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        &["status"],
    ),
    (
        "apps/v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        &["status"],
    ),
    (
        "policy/v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &["status"],
    ),
    ("coordination.k8s.io/v1", "leases", "Lease", true, &[], &[]),
    ("events.k8s.io/v1", "events", "Event", true, &["ev"], &[]),
    (
        "rbac.authorization.k8s.io/v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        &[],
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "roles",
        "Role",
        true,
        &[],
        &[],
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        &[],
    ),
    (
        "networking.k8s.io/v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        &["netpol"],
        &[],
    ),
    (
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        &[],
        &[],
    ),
    (
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        false,
        &[],
        &["status"],
    ),
    (
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        false,
        &[],
        &[],
    ),
];

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The minor release each kind came in at its group version, where it is after 1.26.
fn since(kind: &str) -> u32 {
    match kind {
        "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => 30,
        _ => 0,
    }
}

/// The kinds a server of `minor` serves.
fn served(minor: u32) -> impl Iterator<Item = &'static Row> {
    RESOURCES.iter().filter(move |r| since(r.2) <= minor)
}

/// The group versions served, in order, without duplicates.
fn group_versions(minor: u32) -> Vec<&'static str> {
    let mut out: Vec<&str> = Vec::new();
    for r in served(minor) {
        if r.0 != "v1" && !out.contains(&r.0) {
            out.push(r.0);
        }
    }
    out
}

fn resource_list(gv: &str, minor: u32) -> Option<Value> {
    let mut resources = Vec::new();
    for &(_, name, kind, namespaced, short, subs) in served(minor).filter(|r| r.0 == gv) {
        let singular = kind.to_lowercase();
        let mut r = json!({"name": name, "singularName": singular, "namespaced": namespaced,
            "kind": kind, "verbs": VERBS});
        if !short.is_empty() {
            r["shortNames"] = json!(short);
        }
        resources.push(r);
        for sub in subs {
            let (kind, verbs) = match *sub {
                "eviction" => ("Eviction", json!(["create"])),
                _ => (kind, json!(["get", "patch", "update"])),
            };
            let mut s = json!({"name": format!("{name}/{sub}"), "singularName": "",
                "namespaced": namespaced, "kind": kind, "verbs": verbs});
            if *sub == "eviction" {
                s["group"] = json!("policy");
                s["version"] = json!("v1");
            }
            resources.push(s);
        }
    }
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
    })
}

/// The answer to a GET of `path`, if it is a discovery path, from a server of release 1.`minor`.
pub(crate) fn answer(path: &str, addr: &str, minor: u32) -> Option<Value> {
    match path.trim_end_matches('/') {
        "/version" => Some(
            json!({"major": "1", "minor": minor.to_string(), "gitVersion": format!("v1.{minor}.0"),
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.22", "compiler": "gc", "platform": "linux/amd64"}),
        ),
        "/api" => Some(json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})),
        "/apis" => {
            let groups: Vec<Value> = group_versions(minor)
                .into_iter()
                .map(|gv| {
                    let (group, version) = gv.split_once('/').unwrap();
                    let v = json!({"groupVersion": gv, "version": version});
                    json!({"name": group, "versions": [v.clone()], "preferredVersion": v})
                })
                .collect();
            Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        "/api/v1" => resource_list("v1", minor),
        p => {
            let gv = p.strip_prefix("/apis/")?;
            (gv.matches('/').count() == 1)
                .then(|| resource_list(gv, minor))
                .flatten()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_resources_are_listed_as_kube_apiserver_lists_them() {
        let apis = answer("/apis", "127.0.0.1:1", 30).unwrap();
        let names: Vec<&str> = apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"policy") && names.contains(&"coordination.k8s.io"));
        let core = answer("/api/v1", "x", 30).unwrap();
        let nodes = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "nodes")
            .unwrap();
        assert_eq!(nodes["namespaced"], false);
        assert_eq!(nodes["shortNames"], json!(["no"]));
        assert!(
            answer("/apis/policy/v1", "x", 30).unwrap()["resources"][0]["shortNames"]
                == json!(["pdb"])
        );
        assert!(answer("/apis/nothing.example/v1", "x", 30).is_none());
        assert!(
            answer("/api/v1/nodes", "x", 30).is_none(),
            "not a discovery path"
        );
    }

    #[test]
    fn an_older_release_serves_neither_its_version_nor_its_kinds_from_later() {
        let v = answer("/version", "x", 26).unwrap();
        assert_eq!(
            (v["minor"].as_str(), v["gitVersion"].as_str()),
            (Some("26"), Some("v1.26.0"))
        );
        let kinds = |minor| {
            answer("/apis/admissionregistration.k8s.io/v1", "x", minor)
                .map(|l| {
                    l["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["kind"].as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        assert!(kinds(30).contains(&"ValidatingAdmissionPolicy".to_string()));
        assert!(!kinds(26).contains(&"ValidatingAdmissionPolicy".to_string()));
        assert!(kinds(26).contains(&"ValidatingWebhookConfiguration".to_string()));
    }
}
