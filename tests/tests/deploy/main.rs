//! The shipped manifests: `deploy/` rendered as kustomize would (resources, namespace,
//! configMapGenerator), every object checked against its k8s-openapi type, RBAC checked against the
//! permissions the code declares, and the properties operators rely on checked one by one.

//!
//! Modules: `render` (how the manifests are rendered here), `checks` (what every rendering must
//! satisfy), and the scenarios below and in `guard`.

mod checks;
mod guard;
mod image;
mod render;

use serde_json::{Value, json};

use checks::*;
use render::*;

#[test]
fn kustomize_base_renders_valid_least_privilege_objects() {
    let objects = kustomize(&repo().join("deploy"));
    assert!(objects.len() >= 12, "{} objects", objects.len());
    check_types(&objects);
    check_rbac(&objects);
    check_workloads(&objects);
    check_configs(&objects);
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
pub fn tool(cmd: &str, args: &[&str]) -> Option<Vec<Value>> {
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
pub fn the_real_tools_agree_with_the_built_in_rendering_where_installed() {
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
