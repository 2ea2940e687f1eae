//! What operators rely on, object by object: types, least-privilege RBAC equal to the permissions
//! the code declares, workload properties, configs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use nodemedic_common::rbac::Permission;
use serde_json::Value;

use crate::render::*;

pub fn check_types(objects: &[Value]) {
    for o in objects {
        match o["kind"].as_str().unwrap() {
            "DaemonSet" => drop(typed::<DaemonSet>(o)),
            "Deployment" => drop(typed::<Deployment>(o)),
            "ConfigMap" => drop(typed::<ConfigMap>(o)),
            // The drainer's Lease, shipped without a holder (it takes it).
            "Lease" => {
                let lease = typed::<k8s_openapi::api::coordination::v1::Lease>(o);
                let holder = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                assert!(holder.is_empty(), "a Lease shipped with a holder: {o}");
            }
            // Only the drainer's record key, which Helm makes at install (kustomize ships none:
            // the install guide's line makes it): 32 random bytes, a new key each render
            // (`helm_makes_a_new_record_key_each_install`), never a key written in a manifest,
            // which would let anyone who read it forge records.
            "Secret" => {
                let secret = typed::<k8s_openapi::api::core::v1::Secret>(o);
                let name = secret.metadata.name.clone().unwrap_or_default();
                let data = secret.data.unwrap_or_default();
                assert!(
                    name.ends_with("-drainer-record-key")
                        && data.len() == 1
                        && data.get("key").is_some_and(|k| k.0.len() == 32)
                        && secret.string_data.unwrap_or_default().is_empty(),
                    "a Secret other than the record key Helm makes in the manifests: {o}"
                );
            }
            "ServiceAccount" => drop(typed::<ServiceAccount>(o)),
            "ClusterRole" => drop(typed::<ClusterRole>(o)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(o)),
            "Role" => drop(typed::<Role>(o)),
            "RoleBinding" => drop(typed::<RoleBinding>(o)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(o)),
            "Service" => drop(typed::<k8s_openapi::api::core::v1::Service>(o)),
            "NetworkPolicy" => drop(typed::<k8s_openapi::api::networking::v1::NetworkPolicy>(o)),
            "ValidatingWebhookConfiguration" => drop(typed::<
                k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            >(o)),
            "ValidatingAdmissionPolicy" => drop(typed::<
                k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
            >(o)),
            "ValidatingAdmissionPolicyBinding" => drop(typed::<
                k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            >(o)),
            // The Prometheus Operator's kinds (no k8s-openapi types): their shape is checked in
            // `monitoring`.
            "ServiceMonitor" | "PodMonitor" | "PrometheusRule" => {
                assert_eq!(o["apiVersion"], "monitoring.coreos.com/v1", "{}", o["kind"]);
                assert!(o["spec"].is_object(), "{} has a spec", o["kind"]);
            }
            other => panic!("unexpected kind {other}: add it to this test"),
        }
    }
}

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} missing"))
}

/// (group, resource, verb, namespaced) each rule of `role` (a Role or ClusterRole) grants.
pub fn rules_of(role: &Value) -> BTreeSet<(String, String, String, bool)> {
    let namespaced = role["kind"] == "Role";
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    out.insert((
                        g.as_str().unwrap().into(),
                        r.as_str().unwrap().into(),
                        v.as_str().unwrap().into(),
                        namespaced,
                    ));
                }
            }
        }
    }
    out
}

/// (group, resource, verb, namespaced) granted to a service account by the bindings in `objects`.
pub fn granted(objects: &[Value], sa: &str) -> BTreeSet<(String, String, String, bool)> {
    let mut out = BTreeSet::new();
    for b in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        if !b["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa)
        {
            continue;
        }
        let role = find(
            objects,
            b["roleRef"]["kind"].as_str().unwrap(),
            b["roleRef"]["name"].as_str().unwrap(),
        );
        out.extend(rules_of(role));
    }
    out
}

pub fn needed(perms: &[Permission]) -> BTreeSet<(String, String, String, bool)> {
    perms
        .iter()
        .flat_map(|p| {
            p.verbs.iter().map(move |v| {
                (
                    p.group.to_string(),
                    p.resource.to_string(),
                    v.to_string(),
                    p.namespaced,
                )
            })
        })
        .collect()
}

pub fn check_rbac(objects: &[Value]) {
    for o in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        let text = serde_json::to_string(&o["rules"]).unwrap();
        assert!(
            !text.contains("\"*\""),
            "{} {} uses a wildcard: {text}",
            o["kind"],
            o["metadata"]["name"]
        );
    }
    assert_eq!(
        granted(objects, "nodemedic-detector"),
        needed(nodemedic_detector::report::kube::PERMISSIONS),
        "detector RBAC vs the calls it makes"
    );
    assert_eq!(
        granted(objects, "nodemedic-drainer"),
        needed(nodemedic_drainer::act::PERMISSIONS),
        "drainer RBAC vs the calls it makes"
    );
    check_drainer_names(objects);
    check_record_key_is_a_file(objects);
}

/// The drainer reads its record key from a file its pod mounts from the record key Secret, and no
/// Role or ClusterRole of the drainer's grants anything on Secrets (issue 76, point 2): its token
/// cannot read the key.
fn check_record_key_is_a_file(objects: &[Value]) {
    let d = objects
        .iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("drainer"))
        })
        .expect("the drainer's Deployment");
    let spec = pod_spec(d);
    let args: Vec<&str> = spec["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let file = args
        .iter()
        .find_map(|a| a.strip_prefix("--record-key-file="))
        .expect("the drainer is given --record-key-file");
    let (dir, _) = file.rsplit_once('/').unwrap();
    // The previous key during a rotation comes from the same Secret (its `previous` item).
    let previous = args
        .iter()
        .find_map(|a| a.strip_prefix("--record-key-previous-file="))
        .expect("the drainer is given --record-key-previous-file");
    assert_eq!(previous, format!("{dir}/previous"));
    let mount = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert!(
        volume["secret"]["secretName"]
            .as_str()
            .is_some_and(|s| s.ends_with("drainer-record-key")),
        "{volume}"
    );
    for o in objects {
        let rules = o["rules"].as_array();
        let drainer = o["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("drainer"));
        if !["Role", "ClusterRole"].contains(&o["kind"].as_str().unwrap_or("")) || !drainer {
            continue;
        }
        for rule in rules.into_iter().flatten() {
            let resources = rule["resources"].as_array().cloned().unwrap_or_default();
            assert!(
                !resources.iter().any(|r| r == "secrets" || r == "*"),
                "{} grants {rule}",
                o["metadata"]["name"]
            );
        }
    }
}

/// The drainer's namespaced rules on Leases, ConfigMaps and Secrets name their objects and never
/// grant create (RBAC cannot name what a create makes: issue 64, point 4), and every object the
/// drainer keeps (`act::objects::owned`) is shipped, each one its Role names.
fn check_drainer_names(objects: &[Value]) {
    let role = objects
        .iter()
        .find(|o| {
            o["kind"] == "Role"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("drainer-lease"))
        })
        .expect("the drainer's Role");
    let mut named = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let resources: Vec<&str> = rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if !resources
            .iter()
            .any(|r| ["leases", "configmaps", "secrets"].contains(r))
        {
            continue;
        }
        let verbs = serde_json::to_string(&rule["verbs"]).unwrap();
        assert!(!verbs.contains("create"), "an unnamed create: {rule}");
        let names = rule["resourceNames"]
            .as_array()
            .unwrap_or_else(|| panic!("unnamed: {rule}"));
        for (r, n) in resources
            .iter()
            .flat_map(|r| names.iter().map(move |n| (r, n)))
        {
            named.insert((r.to_string(), n.as_str().unwrap().to_string()));
        }
    }
    let lease = named
        .iter()
        .find(|(r, _)| r == "leases")
        .map(|(_, n)| n.clone())
        .expect("the Lease named");
    for o in nodemedic_drainer::act::objects::owned(&lease, true, false) {
        let (kind, resource) = match o.kind {
            nodemedic_drainer::act::objects::Kind::Lease => ("Lease", "leases"),
            nodemedic_drainer::act::objects::Kind::Secret => ("Secret", "secrets"),
            nodemedic_drainer::act::objects::Kind::ConfigMap => ("ConfigMap", "configmaps"),
        };
        find(objects, kind, &o.name);
        assert!(
            named.contains(&(resource.to_string(), o.name.clone())),
            "{kind} {} not named by the Role",
            o.name
        );
    }
}

pub fn pod_spec(o: &Value) -> &Value {
    &o["spec"]["template"]["spec"]
}

pub fn check_workloads(objects: &[Value]) {
    let ds = find(objects, "DaemonSet", "nodemedic-detector");
    let spec = pod_spec(ds);
    let c = &spec["containers"][0];
    assert_eq!(ds["metadata"]["namespace"], "kube-system");
    assert_eq!(
        ds["spec"]["template"]["metadata"]["annotations"]["scheduler.alpha.kubernetes.io/not-evicted-pod"],
        ""
    );
    assert_eq!(spec["priorityClassName"], "system-node-critical");
    assert!(
        spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["operator"] == "Exists" && t.get("key").is_none()),
        "tolerates all taints"
    );
    let exprs = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"];
    assert!(
        exprs
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["key"] == "kosmos.io/node" && e["operator"] == "NotIn"),
        "kept off Kosmos leaf nodes"
    );
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName")
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The detector's credential is root's only: its exec checks run as nobody.
    assert_eq!(spec["automountServiceAccountToken"], false);
    let token = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "token")
        .expect("the token volume");
    assert_eq!(token["projected"]["defaultMode"], 0o400, "{token}");
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().any(|m| m["name"] == "token"
        && m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"));
    for (path, ro) in [
        ("/dev/kmsg", true),
        ("/var/log/journal", true),
        ("/run/log/journal", true),
        ("/etc/machine-id", true),
        ("/var/lib/nodemedic", false),
    ] {
        let m = mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("{path} not mounted"));
        assert_eq!(
            m["readOnly"].as_bool().unwrap_or(false),
            ro,
            "{path} readOnly"
        );
    }
    let rules = mounts
        .iter()
        .find(|m| m["mountPath"] == "/etc/nodemedic/rules")
        .unwrap();
    assert!(
        rules.get("subPath").is_none(),
        "rules mounted as a directory so reloads work"
    );
    let vol = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == rules["name"])
        .unwrap();
    assert_eq!(vol["configMap"]["name"], "nodemedic-detector-rules");
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--rules=/etc/nodemedic/rules")
    );
    assert!(
        c["resources"]["requests"]["memory"].is_string()
            && c["resources"]["limits"]["memory"].is_string()
    );

    let d = find(objects, "Deployment", "nodemedic-drainer");
    assert_eq!(d["spec"]["replicas"], 2);
    let spec = pod_spec(d);
    let c = &spec["containers"][0];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(spec["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let pdb = find(objects, "PodDisruptionBudget", "nodemedic-drainer");
    assert_eq!(pdb["spec"]["selector"], d["spec"]["selector"]);
}

pub fn check_configs(objects: &[Value]) {
    // The detector's rules: identical to config/rules (or an opt-in file's) and valid.
    let rules = find(objects, "ConfigMap", "nodemedic-detector-rules");
    let mut sources = Vec::new();
    // Files added to the shipped rules: exec checks and opt-in rule files.
    let mut added = 0;
    for (name, text) in rules["data"].as_object().unwrap() {
        // A rule file, or an exec check the chart was asked to add (detector.checks).
        let read = |dir: &str| std::fs::read_to_string(repo().join("config").join(dir).join(name));
        let (dir, shipped) = match read("rules") {
            Ok(t) => ("rules", t),
            // An opt-in rule file (detector.earlyPressure, deploy/early-pressure).
            Err(_) if read("rules-extra").is_ok() => {
                added += 1;
                ("rules-extra", read("rules-extra").unwrap())
            }
            Err(_) => {
                added += 1;
                let t = std::fs::read_to_string(repo().join("config/checks").join(name))
                    .unwrap_or_else(|e| {
                        panic!("{name}: neither in config/rules nor config/checks: {e}")
                    });
                ("checks", t)
            }
        };
        assert_eq!(
            text.as_str().unwrap(),
            shipped,
            "the rendered {name} differs from config/{dir}/{name}"
        );
        sources.push((PathBuf::from(name), shipped));
    }
    let rs = nodemedic_detector::config::load_sources(&sources).unwrap();
    assert_eq!(
        rs.monitors.len() - added,
        std::fs::read_dir(repo().join("config/rules"))
            .unwrap()
            .count(),
        "every rule file is shipped"
    );
    // The drainer's config: valid.
    let cfg = find(objects, "ConfigMap", "nodemedic-drainer-config");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("drainer.yaml");
    std::fs::write(&f, cfg["data"]["drainer.yaml"].as_str().unwrap()).unwrap();
    let args = nodemedic_drainer::config::flags::PolicyArgs {
        config: Some(f),
        ..Default::default()
    };
    nodemedic_drainer::config::build::build(&args).unwrap();
}

/// The recommended labels on every object (and Helm's own when `helm`).
pub fn check_labels(objects: &[Value], helm: bool) {
    for o in objects {
        let l = &o["metadata"]["labels"];
        for k in [
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
            "app.kubernetes.io/version",
            "app.kubernetes.io/part-of",
        ] {
            assert!(l[k].is_string(), "{:?} lacks the label {k}: {l}", key(o));
        }
        if helm {
            assert_eq!(l["app.kubernetes.io/managed-by"], "Helm", "{:?}", key(o));
            assert!(
                l["helm.sh/chart"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("nodemedic-")),
                "{:?}",
                key(o)
            );
        }
    }
}
