//! `drainer explain NODE` (and `kubectl nodemedic explain NODE` given files) over the bundled
//! `kubectl get -o json` samples and the drainer's Events about node-c: each node's explanation is
//! exactly the one saved in `tests/fixtures/explain` (checked by hand when saved: the conditions
//! against `KernelDeadlock=True,10m` and `Ready=Unknown,5m`, the breaker the samples trip, node-c's
//! record and history, the PDB on its api pod, node-d's cordon at 10:08).

use std::process::Command;

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/explain");

fn explain(
    bin: &std::path::Path,
    first: &[&str],
    node: &str,
    extra: &[&str],
) -> std::process::Output {
    Command::new(bin)
        .args(first)
        .arg(node)
        .args([
            "KernelDeadlock=True,10m",
            "Ready=Unknown,5m",
            "--now",
            "2026-11-22T10:00:00Z",
        ])
        .args(["--nodes", &format!("{SAMPLES}/nodes.json")])
        .args(["--pods", &format!("{SAMPLES}/pods.json")])
        .args(["--pdbs", &format!("{SAMPLES}/pdbs.json")])
        .args(["--events", &format!("{SAMPLES}/events.json")])
        .args(extra)
        .output()
        .unwrap()
}

fn drainer() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_drainer").into()
}

#[test]
fn each_sample_node_is_explained_as_saved() {
    for node in ["node-a", "node-c", "node-d", "kosmos-member-1"] {
        let out = explain(&drainer(), &["explain"], node, &[]);
        assert!(
            out.status.success(),
            "{node}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read_to_string(format!("{FIXTURES}/{node}.txt")).unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{node}");
    }
}

#[test]
fn json_carries_the_same_explanation() {
    let out = explain(&drainer(), &["explain"], "node-c", &["--output", "json"]);
    assert!(out.status.success());
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/node-c.json")).unwrap())
            .unwrap();
    assert_eq!(got, want);
    // What a script reads: the decision, the gate that holds, the PDB, what comes next.
    assert_eq!(got["decision"]["action"], "hold");
    let breaker = got["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gate"] == "circuit breaker")
        .unwrap();
    assert_eq!(breaker["holds"], true);
    let api = got["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "api-5f2b")
        .unwrap();
    assert!(
        api["reason"]
            .as_str()
            .unwrap()
            .contains("would wait on PDB api-pdb"),
        "{api}"
    );
    assert_eq!(got["record"]["phase"], "cordoned");
    assert_eq!(
        got["history"].as_array().unwrap().len(),
        3,
        "the drainer's three Events about node-c"
    );
}

#[test]
fn with_the_breaker_out_of_the_way_node_c_drains_now_and_node_d_is_cordoned_at_ten_past_eight() {
    let lifted = [
        "--max-unhealthy",
        "100%",
        "--breaker-new",
        "100%",
        "--output",
        "json",
    ];
    let json = |node: &str| -> serde_json::Value {
        let out = explain(&drainer(), &["explain"], node, &lifted);
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let c = json("node-c");
    assert_eq!(c["decision"]["action"], "drain");
    assert_eq!(c["next"]["action"], "drain");
    assert!(c["next"].get("at").is_none(), "now: {c}");
    let d = json("node-d");
    assert_eq!(d["next"]["action"], "cordon");
    assert_eq!(d["next"]["at"], "2026-11-22T10:08:00Z");
}

#[test]
fn the_kubectl_plugin_explains_from_files_and_an_unknown_node_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-nodemedic");
    std::os::unix::fs::symlink(drainer(), &plugin).unwrap();
    let out = explain(&plugin, &["explain"], "node-d", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(format!("{FIXTURES}/node-d.txt")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
    let out = explain(&drainer(), &["explain"], "no-such-node", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no node named \"no-such-node\""));
}

#[test]
fn the_operator_guide_shows_a_real_explanation() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operator-guide.md"
    ))
    .unwrap();
    let saved = std::fs::read_to_string(format!("{FIXTURES}/node-d.txt")).unwrap();
    assert!(
        readme.contains(&saved),
        "the operator guide's explain example is not what explain prints for node-d"
    );
}

/// A condition message is written by whoever may patch the node's status: escape sequences, carriage
/// returns and line breaks in it must not drive the terminal nor fake lines of the explanation.
#[test]
fn control_characters_from_the_cluster_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let nodes: serde_json::Value = serde_json::json!({"kind": "List", "apiVersion": "v1", "items": [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-x\u{1b}[2J"},
        "status": {"conditions": [{"type": "KernelDeadlock", "status": "True",
            "reason": "Hung\u{1b}]0;title\u{7}", "lastTransitionTime": "2026-11-22T09:00:00Z",
            "message": "task blocked\r\nDecision: none — all good\u{1b}[31m\u{202e}"}]}}]});
    let path = dir.path().join("nodes.json");
    std::fs::write(&path, nodes.to_string()).unwrap();
    let pods = dir.path().join("pods.json");
    std::fs::write(
        &pods,
        r#"{"kind": "List", "apiVersion": "v1", "items": []}"#,
    )
    .unwrap();
    let out = Command::new(drainer())
        .args(["explain", "node-x\u{1b}[2J", "KernelDeadlock=True,10m"])
        .args(["--now", "2026-11-22T10:00:00Z", "--nodes"])
        .arg(&path)
        .arg("--pods")
        .arg(&pods)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{text:?}"
    );
    assert!(
        text.contains(
            "(Hung]0;title) since 2026-11-22T09:00:00Z: task blocked  Decision: none — all good[31m"
        ),
        "{text}"
    );
    assert_eq!(text.matches("\nDecision:").count(), 1, "{text}");
}
