//! Rendering the manifests with the real tools: `kubectl kustomize` for `deploy/`, and real Helm (its
//! Go SDK through `helm-python-sdk`, `tests/tools/helm.py`) for the chart. Without a tool the test
//! that needs it says so and is skipped, except in CI (`CI` set), where a missing tool fails: `.ci/run`
//! installs both.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The YAML documents of a stream (comment-only documents left out).
pub fn parse_docs(text: &str, what: &str) -> Vec<Value> {
    format!("\n{text}")
        .split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{what}: {e}\n{d}")))
        .collect()
}

pub fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_docs(&text, &path.display().to_string())
}

/// A tool is missing: skip (say so) outside CI, fail in CI.
pub fn missing(tool: &str, install: &str) -> Option<Vec<Value>> {
    if std::env::var_os("CI").is_some() {
        panic!("{tool} is not installed ({install}); .ci/run installs it");
    }
    nodemedic_tests::envtest::say(&format!("skipped: {tool} is not installed ({install})"));
    None
}

fn run(cmd: &mut Command, what: &str) -> Result<String, std::io::Error> {
    let out = cmd.current_dir(repo()).output()?;
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout).unwrap())
}

/// `kubectl kustomize DIR`, or `None` (said) without kubectl.
pub fn kustomize(dir: &Path) -> Option<Vec<Value>> {
    match run(
        Command::new("kubectl").arg("kustomize").arg(dir),
        &format!("kubectl kustomize {}", dir.display()),
    ) {
        Ok(text) => Some(parse_docs(&text, "kubectl kustomize")),
        Err(_) => missing("kubectl", "it carries kustomize"),
    }
}

fn helm(args: &[&str]) -> Option<Result<String, String>> {
    let out = Command::new("python3")
        .arg(repo().join("tests/tools/helm.py"))
        .args(args)
        .current_dir(repo())
        .output()
        .ok()?;
    match out.status.code() {
        Some(3) => None,
        Some(0) => Some(Ok(String::from_utf8(out.stdout).unwrap())),
        _ => Some(Err(format!(
            "helm {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))),
    }
}

/// `helm template RELEASE CHART --namespace NS [--values ...]` with real Helm, or `None` (said).
pub fn helm_template(
    chart: &Path,
    release: &str,
    namespace: &str,
    values: Option<&Value>,
) -> Option<Vec<Value>> {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart.to_str().unwrap().to_string();
    let mut args = vec!["template", release, &chart, "--namespace", namespace];
    let file = dir.path().join("values.yaml");
    let file_s = file.to_str().unwrap().to_string();
    if let Some(v) = values {
        std::fs::write(&file, serde_json::to_string(v).unwrap()).unwrap();
        args.extend(["--values", &file_s]);
    }
    match helm(&args) {
        None => missing("helm-python-sdk", "pip install helm-python-sdk"),
        Some(Ok(text)) => Some(parse_docs(&text, "helm template")),
        Some(Err(e)) => panic!("{e}"),
    }
}

/// `helm template` that Helm refuses: its message, or `None` (said) without Helm. Panics if it renders.
pub fn helm_template_refused(chart: &Path, values: &Value) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart.to_str().unwrap().to_string();
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, serde_json::to_string(values).unwrap()).unwrap();
    let file_s = file.to_str().unwrap().to_string();
    let args = [
        "template",
        "nodemedic",
        &chart,
        "--namespace",
        "kube-system",
        "--values",
        &file_s,
    ];
    match helm(&args) {
        None => missing("helm-python-sdk", "pip install helm-python-sdk").map(|_| String::new()),
        Some(Ok(_)) => panic!("helm template rendered what it should refuse"),
        Some(Err(e)) => Some(e),
    }
}

/// `helm lint --strict` with real Helm: `Some(Ok(report))` when clean, `Some(Err(report))` when not.
pub fn helm_lint(chart: &Path, values: Option<&Value>) -> Option<Result<String, String>> {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart.to_str().unwrap().to_string();
    let file = dir.path().join("values.yaml");
    let file_s = file.to_str().unwrap().to_string();
    let mut args = vec!["lint", &chart];
    if let Some(v) = values {
        std::fs::write(&file, serde_json::to_string(v).unwrap()).unwrap();
        args.extend(["--values", &file_s]);
    }
    let r = helm(&args);
    if r.is_none() {
        missing("helm-python-sdk", "pip install helm-python-sdk");
    }
    r
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

pub fn key(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap().to_string(),
        o["metadata"]["name"].as_str().unwrap().to_string(),
    )
}
