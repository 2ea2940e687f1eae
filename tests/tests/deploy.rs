//! The shipped manifests: `deploy/` rendered as kustomize would (resources, namespace,
//! configMapGenerator), every object checked against its k8s-openapi type, RBAC checked against the
//! permissions the code declares, and the properties operators rely on checked one by one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use nodemedic_common::rbac::Permission;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---\n")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| {
            serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

const CLUSTER_SCOPED: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PriorityClass",
];

/// Render a kustomization directory the way `kubectl kustomize` does for the features we use.
fn kustomize(dir: &Path) -> Vec<Value> {
    let k: Value = docs(&dir.join("kustomization.yaml")).remove(0);
    let mut out = Vec::new();
    for r in k["resources"].as_array().into_iter().flatten() {
        let p = dir.join(r.as_str().unwrap());
        out.extend(if p.is_dir() { kustomize(&p) } else { docs(&p) });
    }
    for g in k["configMapGenerator"].as_array().into_iter().flatten() {
        let mut data = serde_json::Map::new();
        for f in g["files"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            let key = Path::new(f)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            data.insert(key, json!(std::fs::read_to_string(dir.join(f)).unwrap()));
        }
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": g["name"]}, "data": data}));
    }
    if let Some(ns) = k["namespace"].as_str() {
        for o in out
            .iter_mut()
            .filter(|o| !CLUSTER_SCOPED.contains(&o["kind"].as_str().unwrap_or("")))
        {
            o["metadata"]["namespace"] = json!(ns);
        }
    }
    out
}

/// Deserialize into the typed object and back: what comes back must be what was written (a
/// misspelled or misplaced field would be dropped by the typed round trip).
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(o: &Value) -> T {
    let t: T = serde_json::from_value(o.clone())
        .unwrap_or_else(|e| panic!("{} {}: {e}", o["kind"], o["metadata"]["name"]));
    let back = serde_json::to_value(&t).unwrap();
    assert_eq!(
        &back, o,
        "{} {} does not round-trip through its k8s-openapi type",
        o["kind"], o["metadata"]["name"]
    );
    t
}

fn check_types(objects: &[Value]) {
    for o in objects {
        match o["kind"].as_str().unwrap() {
            "DaemonSet" => drop(typed::<DaemonSet>(o)),
            "Deployment" => drop(typed::<Deployment>(o)),
            "ConfigMap" => drop(typed::<ConfigMap>(o)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(o)),
            "ClusterRole" => drop(typed::<ClusterRole>(o)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(o)),
            "Role" => drop(typed::<Role>(o)),
            "RoleBinding" => drop(typed::<RoleBinding>(o)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(o)),
            "Service" => drop(typed::<k8s_openapi::api::core::v1::Service>(o)),
            "ValidatingWebhookConfiguration" => drop(typed::<
                k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            >(o)),
            other => panic!("unexpected kind {other}: add it to this test"),
        }
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} missing"))
}

/// (group, resource, verb, namespaced) granted to a service account by the bindings in `objects`.
fn granted(objects: &[Value], sa: &str) -> BTreeSet<(String, String, String, bool)> {
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
        let namespaced = role["kind"] == "Role";
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
    }
    out
}

fn needed(perms: &[Permission]) -> BTreeSet<(String, String, String, bool)> {
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

fn check_rbac(objects: &[Value]) {
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
}

fn pod_spec(o: &Value) -> &Value {
    &o["spec"]["template"]["spec"]
}

fn check_workloads(objects: &[Value]) {
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
    let mounts = c["volumeMounts"].as_array().unwrap();
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

fn check_configs(objects: &[Value]) {
    // The detector's rules: identical to config/rules and valid.
    let rules = find(objects, "ConfigMap", "nodemedic-detector-rules");
    let mut sources = Vec::new();
    for (name, text) in rules["data"].as_object().unwrap() {
        let shipped = std::fs::read_to_string(repo().join("config/rules").join(name)).unwrap();
        assert_eq!(
            text.as_str().unwrap(),
            shipped,
            "deploy/base/rules/{name} differs from config/rules/{name}"
        );
        sources.push((PathBuf::from(name), shipped));
    }
    let rs = nodemedic_detector::config::load_sources(&sources).unwrap();
    assert_eq!(
        rs.monitors.len(),
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
    let args = nodemedic_drainer::policy::PolicyArgs {
        config: Some(f),
        ..Default::default()
    };
    nodemedic_drainer::policy::build(&args).unwrap();
}

#[test]
fn kustomize_base_renders_valid_least_privilege_objects() {
    let objects = kustomize(&repo().join("deploy"));
    assert!(objects.len() >= 12, "{} objects", objects.len());
    check_types(&objects);
    check_rbac(&objects);
    check_workloads(&objects);
    check_configs(&objects);
}

/// Look up `.Values.a.b` style paths.
fn lookup<'a>(values: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches(".Values.")
        .split('.')
        .fold(values, |v, k| &v[k])
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Render the chart with `helm template` semantics for the subset of template syntax it uses
/// (`{{ .Values.x }}`, `{{ .Release.Namespace }}`, `| quote`, `{{- toYaml .Values.x | nindent N }}`,
/// `{{- (.Files.Glob "dir/*.yaml").AsConfig | nindent N }}`, `{{- if .Values.x }}` / `{{- end }}`).
/// Anything else in a template fails the test, so the chart cannot silently outgrow this renderer.
fn helm_template(chart: &Path, namespace: &str) -> Vec<Value> {
    helm_template_with(
        chart,
        namespace,
        &docs(&chart.join("values.yaml")).remove(0),
    )
}

fn helm_template_with(chart: &Path, namespace: &str, values: &Value) -> Vec<Value> {
    let values = values.clone();
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart.join("templates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let mut rendered = String::new();
        let mut conditions: Vec<bool> = Vec::new();
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            let t = line.trim();
            if let Some(expr) = t.strip_prefix("{{- if ").and_then(|r| r.strip_suffix("}}")) {
                let v = lookup(&values, expr.trim());
                conditions.push(!(v.is_null() || v == &json!(false) || v == &json!("")));
                continue;
            }
            if t == "{{- end }}" {
                conditions.pop().expect("unbalanced end");
                continue;
            }
            if conditions.contains(&false) {
                continue;
            }
            if let Some(inner) = t.strip_prefix("{{-").and_then(|r| r.strip_suffix("}}")) {
                let (expr, indent) = inner
                    .split_once("| nindent")
                    .expect("block expressions use nindent");
                let indent: usize = indent.trim().parse().unwrap();
                let expr = expr.trim();
                let block = if let Some(path) = expr.strip_prefix("toYaml ") {
                    serde_saphyr::to_string(lookup(&values, path.trim())).unwrap()
                } else if let Some(glob) = expr
                    .strip_prefix("(.Files.Glob \"")
                    .and_then(|r| r.strip_suffix("\").AsConfig"))
                {
                    let (dir, suffix) = glob.split_once("/*").unwrap();
                    let mut names: Vec<PathBuf> = std::fs::read_dir(chart.join(dir))
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .filter(|p| p.to_str().unwrap().ends_with(suffix))
                        .collect();
                    names.sort();
                    names
                        .iter()
                        .map(|p| {
                            let body = std::fs::read_to_string(p).unwrap();
                            let indented: String = body
                                .lines()
                                .map(|l| {
                                    if l.is_empty() {
                                        "\n".to_string()
                                    } else {
                                        format!("  {l}\n")
                                    }
                                })
                                .collect();
                            format!(
                                "{}: |\n{indented}",
                                p.file_name().unwrap().to_str().unwrap()
                            )
                        })
                        .collect()
                } else {
                    panic!("{}: unsupported template expression {expr:?}", f.display())
                };
                for l in block.lines() {
                    rendered.push_str(&format!(
                        "{}{l}\n",
                        if l.is_empty() {
                            String::new()
                        } else {
                            " ".repeat(indent)
                        }
                    ));
                }
                continue;
            }
            let mut l = line.to_string();
            while let Some(start) = l.find("{{") {
                let end = l[start..].find("}}").unwrap() + start;
                let expr = l[start + 2..end].trim();
                let (path, quote) = match expr.split_once('|') {
                    Some((p, f)) if f.trim() == "quote" => (p.trim(), true),
                    Some((_, f)) => panic!("{}: unsupported filter {f:?}", f),
                    None => (expr, false),
                };
                let v = if path == ".Release.Namespace" {
                    namespace.to_string()
                } else {
                    scalar(lookup(&values, path))
                };
                let v = if quote { format!("{v:?}") } else { v };
                l.replace_range(start..end + 2, &v);
            }
            rendered.push_str(&l);
            rendered.push('\n');
        }
        assert!(conditions.is_empty(), "{}: unbalanced if", f.display());
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("rendered.yaml");
        std::fs::write(&tmp, &rendered).unwrap();
        out.extend(docs(&tmp));
    }
    out
}

fn key(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap().to_string(),
        o["metadata"]["name"].as_str().unwrap().to_string(),
    )
}

#[test]
fn helm_chart_renders_the_same_objects_as_the_kustomize_base() {
    let chart = repo().join("deploy/helm/nodemedic");
    let helm = helm_template(&chart, "kube-system");
    let mut base = kustomize(&repo().join("deploy"));
    check_types(&helm);
    check_rbac(&helm);
    check_workloads(&helm);
    check_configs(&helm);
    let mut helm = helm;
    helm.sort_by_key(key);
    base.sort_by_key(key);
    assert_eq!(
        helm.iter().map(key).collect::<Vec<_>>(),
        base.iter().map(key).collect::<Vec<_>>()
    );
    for (h, b) in helm.iter_mut().zip(base.iter_mut()) {
        if key(h)
            == (
                "ConfigMap".to_string(),
                "nodemedic-drainer-config".to_string(),
            )
        {
            // Same settings; the text differs (toYaml vs a commented file).
            let parse = |o: &Value| {
                serde_saphyr::from_str::<Value>(o["data"]["drainer.yaml"].as_str().unwrap())
                    .unwrap()
            };
            assert_eq!(parse(h), parse(b), "drainer config");
            continue;
        }
        assert_eq!(
            h,
            b,
            "{:?} differs between the Helm chart and the kustomize base",
            key(h)
        );
    }
    // Values operators change take effect.
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["drainer"]["replicas"] = json!(3);
    v["drainer"]["image"]["tag"] = json!("9.9.9");
    v["detector"]["createRulesConfigMap"] = json!(false);
    v["detector"]["rulesConfigMap"] = json!("my-rules");
    v["detector"]["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    let custom = helm_template_with(&chart, "monitoring", &v);
    let d = find(&custom, "Deployment", "nodemedic-drainer");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["namespace"], "monitoring");
    assert_eq!(
        pod_spec(d)["containers"][0]["image"],
        "nodemedic/drainer:9.9.9"
    );
    assert!(
        pod_spec(d)["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--namespace=monitoring"))
    );
    assert!(
        !custom.iter().any(
            |o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "nodemedic-detector-rules"
        )
    );
    let ds = find(&custom, "DaemonSet", "nodemedic-detector");
    assert_eq!(
        pod_spec(ds)["tolerations"],
        json!([{"key": "dedicated", "operator": "Exists"}])
    );
    assert!(
        pod_spec(ds)["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|vol| vol["configMap"]["name"] == "my-rules")
    );
}

/// Run a renderer if it is installed; `None` (with the reason printed) otherwise.
fn tool(cmd: &str, args: &[&str]) -> Option<Vec<Value>> {
    let out = match std::process::Command::new(cmd)
        .args(args)
        .current_dir(repo())
        .output()
    {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "{cmd} {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => {
            eprintln!(
                "skipped the {cmd} comparison: {cmd} is not installed (the built-in rendering was checked)"
            );
            return None;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out.yaml");
    std::fs::write(&f, format!("\n{}", String::from_utf8(out.stdout).unwrap())).unwrap();
    let mut objects = docs(&f);
    objects.sort_by_key(key);
    Some(objects)
}

#[test]
fn the_real_tools_agree_with_the_built_in_rendering_where_installed() {
    let mut base = kustomize(&repo().join("deploy"));
    base.sort_by_key(key);
    if let Some(k) = tool("kubectl", &["kustomize", "deploy"]) {
        assert_eq!(
            k.iter().map(key).collect::<Vec<_>>(),
            base.iter().map(key).collect::<Vec<_>>(),
            "kubectl kustomize"
        );
    }
    if let Some(h) = tool(
        "helm",
        &[
            "template",
            "nodemedic",
            "deploy/helm/nodemedic",
            "--namespace",
            "kube-system",
        ],
    ) {
        assert_eq!(
            h.iter().map(key).collect::<Vec<_>>(),
            base.iter().map(key).collect::<Vec<_>>(),
            "helm template"
        );
    }
}

#[test]
fn guard_overlay_webhook_and_kyverno_alternative() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::Service;
    let dir = repo().join("deploy/guard");
    let objects = docs(&dir.join("guard.yaml"));
    let svc = find(&objects, "Service", "nodemedic-guard");
    let _: Service = typed(svc);
    let vwc = find(
        &objects,
        "ValidatingWebhookConfiguration",
        "nodemedic-kosmos-guard",
    );
    let _: ValidatingWebhookConfiguration = typed(vwc);
    let w = &vwc["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Ignore");
    assert_eq!(w["timeoutSeconds"], 3);
    assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
    assert_eq!(w["sideEffects"], "NoneOnDryRun");
    let rules: Vec<(String, String)> = w["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let ops = r["operations"].as_array().unwrap().clone();
            let res = r["resources"].as_array().unwrap().clone();
            ops.into_iter().flat_map(move |o| {
                res.clone().into_iter().map(move |x| {
                    (
                        o.as_str().unwrap().to_string(),
                        x.as_str().unwrap().to_string(),
                    )
                })
            })
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            ("DELETE".into(), "pods".into()),
            ("CREATE".into(), "pods/eviction".into())
        ],
        "scoped to pod deletions and evictions only"
    );
    assert_eq!(
        w["clientConfig"]["service"]["name"],
        svc["metadata"]["name"]
    );
    assert_eq!(w["clientConfig"]["service"]["path"], "/validate");

    // The patch: flags point into the mounted Secret, the Service targets its port by name.
    let patch = docs(&dir.join("drainer-guard-patch.yaml")).remove(0);
    let c = &patch["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    for flag in ["--guard-tls-cert=", "--guard-tls-key="] {
        let path = args
            .iter()
            .find_map(|a| a.strip_prefix(flag))
            .unwrap_or_else(|| panic!("{flag} missing"));
        assert!(path.starts_with(mount), "{flag}{path} is not under {mount}");
    }
    assert!(
        args.iter()
            .any(|a| a.starts_with("--guard-listen=0.0.0.0:9443"))
    );
    assert_eq!(c["ports"][0]["name"], svc["spec"]["ports"][0]["targetPort"]);
    let base = kustomize(&repo().join("deploy"));
    let base_args =
        &pod_spec(find(&base, "Deployment", "nodemedic-drainer"))["containers"][0]["args"];
    for a in base_args.as_array().unwrap() {
        assert!(
            args.contains(&a.as_str().unwrap()),
            "the patch keeps the base argument {a}"
        );
    }
    // Rendered with the real tool where installed.
    if let Some(rendered) = tool("kubectl", &["kustomize", "deploy/guard"]) {
        check_types(
            &rendered
                .iter()
                .filter(|o| o["kind"] != "Service")
                .cloned()
                .collect::<Vec<_>>(),
        );
        let d = find(&rendered, "Deployment", "nodemedic-drainer");
        let c = &pod_spec(d)["containers"][0];
        assert!(
            c["args"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == "--guard-listen=0.0.0.0:9443")
        );
        assert!(
            pod_spec(d)["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["secret"]["secretName"] == "nodemedic-guard-tls")
        );
        assert!(
            pod_spec(d)["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == "config"),
            "base volumes kept"
        );
    }
    // The Kyverno alternative carries the same three preconditions.
    let k = docs(&dir.join("kyverno-policy.yaml")).remove(0);
    let text = serde_json::to_string(&k).unwrap();
    assert_eq!(k["kind"], "ClusterPolicy");
    for needle in ["node-controller", "kosmos.io/node", "Ready", "DELETE"] {
        assert!(text.contains(needle), "kyverno policy lacks {needle}");
    }
}

#[test]
fn helm_chart_with_the_guard_matches_the_guard_overlay() {
    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["guard"]["enabled"] = json!(true);
    let mut helm = helm_template_with(&chart, "kube-system", &v);
    check_types(&helm);
    check_rbac(&helm);
    let d = find(&helm, "Deployment", "nodemedic-drainer");
    let args = &pod_spec(d)["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--guard-listen=0.0.0.0:9443"),
        "{args}"
    );
    find(
        &helm,
        "ValidatingWebhookConfiguration",
        "nodemedic-kosmos-guard",
    );
    find(&helm, "Service", "nodemedic-guard");
    if let Some(overlay) = tool("kubectl", &["kustomize", "deploy/guard"]) {
        helm.sort_by_key(key);
        assert_eq!(
            helm.iter().map(key).collect::<Vec<_>>(),
            overlay.iter().map(key).collect::<Vec<_>>()
        );
        for (h, o) in helm.iter().zip(overlay.iter()) {
            if key(h).1 == "nodemedic-drainer-config" {
                continue; // same settings, different text (checked in the default-values test)
            }
            assert_eq!(
                h,
                o,
                "{:?}: Helm with guard.enabled differs from kubectl kustomize deploy/guard",
                key(h)
            );
        }
    }
}
