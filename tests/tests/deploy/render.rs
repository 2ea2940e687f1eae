//! Rendering the manifests without a cluster: kustomize semantics (resources, namespace,
//! configMapGenerator) and the chart's template subset. To be replaced by the real `kubectl kustomize`
//! and Helm (the shipping issue).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

pub fn docs(path: &Path) -> Vec<Value> {
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

pub const CLUSTER_SCOPED: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PriorityClass",
];

/// Render a kustomization directory the way `kubectl kustomize` does for the features we use.
pub fn kustomize(dir: &Path) -> Vec<Value> {
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
pub fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(o: &Value) -> T {
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

/// Look up `.Values.a.b` style paths.
pub fn lookup<'a>(values: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches(".Values.")
        .split('.')
        .fold(values, |v, k| &v[k])
}

pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Render the chart with `helm template` semantics for the subset of template syntax it uses
/// (`{{ .Values.x }}`, `{{ .Release.Namespace }}`, `| quote`, `{{- toYaml .Values.x | nindent N }}`,
/// `{{- (.Files.Glob "dir/*.yaml").AsConfig | nindent N }}`, `{{- if .Values.x }}` / `{{- end }}`).
/// Anything else in a template fails the test, so the chart cannot silently outgrow this renderer.
pub fn helm_template(chart: &Path, namespace: &str) -> Vec<Value> {
    helm_template_with(
        chart,
        namespace,
        &docs(&chart.join("values.yaml")).remove(0),
    )
}

pub fn helm_template_with(chart: &Path, namespace: &str, values: &Value) -> Vec<Value> {
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

pub fn key(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap().to_string(),
        o["metadata"]["name"].as_str().unwrap().to_string(),
    )
}
