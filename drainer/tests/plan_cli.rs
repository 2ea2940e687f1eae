//! `drainer plan` as an operator runs it, over the bundled `kubectl get -o json` samples.

use std::process::Command;

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples");

/// The plan over the samples with the circuit breaker out of the way (3 of their 5 nodes are
/// unhealthy, which trips it at its defaults: `the_samples_trip_the_breaker_at_its_defaults`).
fn plan(extra: &[&str]) -> std::process::Output {
    plan_with(&[&["--max-unhealthy", "100%", "--breaker-new", "100%"], extra].concat())
}

/// The JSON lines of a successful `--output json` run.
fn json_plans(out: std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn plan_with(extra: &[&str]) -> std::process::Output {
    plan_nodes(&format!("{SAMPLES}/nodes.json"), extra)
}

fn plan_nodes(nodes: &str, extra: &[&str]) -> std::process::Output {
    plan_files(nodes, &format!("{SAMPLES}/pods.json"), extra)
}

fn plan_files(nodes: &str, pods: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drainer"))
        .arg("plan")
        .args([
            "KernelDeadlock=True,10m",
            "Ready=Unknown,5m",
            "--now",
            "2026-11-22T10:00:00Z",
        ])
        .arg("--nodes")
        .arg(nodes)
        .arg("--pods")
        .arg(pods)
        .arg("--pdbs")
        .arg(format!("{SAMPLES}/pdbs.json"))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn json_plan_names_each_node_its_action_and_the_pods() {
    let out = plan(&["--output", "json", "--max-cordoned", "3"]);
    let plans = json_plans(out);
    let action = |n: &str| {
        plans.iter().find(|p| p["node"] == n).unwrap()["action"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(action("node-a"), "none");
    assert_eq!(action("node-b"), "cordon");
    assert_eq!(action("node-c"), "drain");
    assert_eq!(action("kosmos-member-1"), "skip");
    assert_eq!(action("node-d"), "wait");
    let c = plans.iter().find(|p| p["node"] == "node-c").unwrap();
    let pods: Vec<(String, String)> = c["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                ),
                p["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let get = |n: &str| pods.iter().find(|(p, _)| p == n).unwrap().1.as_str();
    assert_eq!(get("default/web-7d9c"), "evict");
    assert_eq!(get("kube-system/nodemedic-detector-q8"), "skip");
    assert_eq!(get("kube-system/coredns-1"), "skip");
    assert_eq!(get("kube-system/etcd-node-c"), "skip");
    assert!(
        c["pods"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["reason"].is_string())
    );
    let api = c["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "api-5f2b")
        .unwrap();
    assert!(
        api["reason"]
            .as_str()
            .unwrap()
            .contains("would wait on PDB api-pdb (0 disruptions allowed"),
        "{api}"
    );
    // nodes with no cordon/drain list no pods
    assert!(
        plans.iter().find(|p| p["node"] == "node-a").unwrap()["pods"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn default_budget_holds_the_second_bad_node() {
    let out = plan(&["--output", "json"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let b: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|p| p["node"] == "node-b")
        .unwrap();
    assert_eq!(b["action"], "wait");
    assert!(
        b["reason"]
            .as_str()
            .unwrap()
            .starts_with("cordon budget full: 1 of 1"),
        "{b}"
    );
}

#[test]
fn bad_flags_exit_2_with_a_precise_message() {
    let out = plan(&["--node-label-expr", "metadata.labels['x'] =="]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--node-label-expr: invalid CEL expression"),
        "{err}"
    );
}

#[test]
fn completions_and_man_pages_come_from_the_same_flags_as_help() {
    let drainer = || Command::new(env!("CARGO_BIN_EXE_drainer"));
    let out = drainer().args(["completions", "zsh"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(
        script.contains("--max-cordoned") && script.contains("plan"),
        "{script}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = drainer().arg("man").arg(dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = std::fs::read_to_string(dir.path().join("drainer-plan.1")).unwrap();
    assert!(
        plan.contains(".TH drainer-plan 1") && plan.contains("live"),
        "{plan}"
    );
    assert!(dir.path().join("drainer-run.1").is_file());
}

#[test]
fn the_samples_trip_the_breaker_at_its_defaults() {
    let out = plan_with(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |node: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("{node} in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // node-b would be cordoned and node-c drained: both held, with the counts and the threshold.
    assert_eq!(
        line("node-b"),
        "node-b hold breaker open: 3 of 5 nodes unhealthy > 30%"
    );
    assert!(
        line("node-c").starts_with("node-c hold breaker open"),
        "{text}"
    );
    assert!(line("node-a").ends_with("none healthy"));
}

#[test]
fn a_pause_on_the_lease_holds_everything_and_says_who() {
    let dir = tempfile::tempdir().unwrap();
    let lease = dir.path().join("lease.json");
    std::fs::write(
        &lease,
        r#"{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "nodemedic-drainer", "namespace": "kube-system",
              "annotations": {"nodemedic.io/pause": "kernel rollout"},
              "managedFields": [{"manager": "kubectl-annotate", "operation": "Update",
                "time": "2026-11-22T09:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {"f:nodemedic.io/pause": {}}}}}]},
            "spec": {"holderIdentity": "a"}}"#,
    )
    .unwrap();
    let out = plan(&["--output", "json", "--lease", lease.to_str().unwrap()]);
    let plans = json_plans(out);
    for n in ["node-b", "node-c"] {
        let p = plans.iter().find(|p| p["node"] == n).unwrap();
        assert_eq!(p["action"], "hold", "{p}");
        assert!(
            p["reason"].as_str().unwrap().starts_with(
                "paused by kubectl-annotate since 2026-11-22T09:00:00Z: kernel rollout"
            ),
            "{p}"
        );
    }
}

#[test]
fn a_node_the_drainer_reported_flapping_is_held_in_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.json");
    // The drainer's NodeFlapping Event for node-b a minute before --now, and one from another
    // component, which does not count.
    std::fs::write(
        &events,
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"metadata": {"name": "node-b.1", "namespace": "default"},
             "involvedObject": {"kind": "Node", "name": "node-b"}, "reason": "NodeFlapping",
             "message": "Node conditions changed 5 times in a short while: not cordoned or drained until stable",
             "source": {"component": "nodemedic-drainer"}, "lastTimestamp": "2026-11-22T09:59:00Z"},
            {"metadata": {"name": "node-c.1", "namespace": "default"},
             "involvedObject": {"kind": "Node", "name": "node-c"}, "reason": "NodeFlapping",
             "source": {"component": "someone-else"}, "lastTimestamp": "2026-11-22T09:59:00Z"}]}"#,
    )
    .unwrap();
    let plans = json_plans(plan(&[
        "--output",
        "json",
        "--events",
        events.to_str().unwrap(),
    ]));
    let b = plans.iter().find(|p| p["node"] == "node-b").unwrap();
    assert_eq!(b["action"], "hold", "{b}");
    assert_eq!(
        b["reason"],
        "flapping: 5 condition changes within 10m; not cordoned or drained until stable at 2026-11-22T10:09:00Z"
    );
    let c = plans.iter().find(|p| p["node"] == "node-c").unwrap();
    assert_eq!(c["action"], "drain", "{c}");
}

#[test]
fn yaml_dumps_plan_the_same_as_json() {
    // `kubectl get -o yaml` of the same objects.
    let dir = tempfile::tempdir().unwrap();
    for name in ["nodes", "pods", "pdbs"] {
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{SAMPLES}/{name}.json")).unwrap(),
        )
        .unwrap();
        let yaml = serde_saphyr::to_string(&json).unwrap();
        assert!(!yaml.trim_start().starts_with('{'));
        std::fs::write(dir.path().join(format!("{name}.yaml")), yaml).unwrap();
    }
    let from_yaml = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "plan",
            "KernelDeadlock=True,10m",
            "Ready=Unknown,5m",
            "--now",
            "2026-11-22T10:00:00Z",
        ])
        .args([
            "--max-unhealthy",
            "100%",
            "--breaker-new",
            "100%",
            "--output",
            "json",
        ])
        .arg("--nodes")
        .arg(dir.path().join("nodes.yaml"))
        .arg("--pods")
        .arg(dir.path().join("pods.yaml"))
        .arg("--pdbs")
        .arg(dir.path().join("pdbs.yaml"))
        .output()
        .unwrap();
    let yaml = json_plans(from_yaml);
    let json = json_plans(plan(&["--output", "json"]));
    assert!(!json.is_empty());
    assert_eq!(yaml, json);
    // A YAML mistake says where.
    std::fs::write(
        dir.path().join("bad.yaml"),
        "items:\n  - kind: Node\n   metadata: {}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["plan", "KernelDeadlock"])
        .arg("--nodes")
        .arg(dir.path().join("bad.yaml"))
        .arg("--pods")
        .arg(dir.path().join("pods.yaml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("bad.yaml:3:"), "{err}");
}

#[test]
fn a_node_dated_9999_12_31_is_skipped_with_its_name_and_every_other_node_is_planned() {
    // The samples with one more node whose times our types cannot hold (the API server takes them).
    let mut nodes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{SAMPLES}/nodes.json")).unwrap())
            .unwrap();
    let mut far = nodes["items"][0].clone();
    far["metadata"]["name"] = "node-far-future".into();
    far["metadata"]["creationTimestamp"] = "9999-12-31T23:59:59Z".into();
    nodes["items"].as_array_mut().unwrap().push(far);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nodes.json");
    std::fs::write(&file, serde_json::to_vec(&nodes).unwrap()).unwrap();
    let out = plan_nodes(
        file.to_str().unwrap(),
        &[
            "--output",
            "json",
            "--max-unhealthy",
            "100%",
            "--breaker-new",
            "100%",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let plans = json_plans(out);
    let planned: Vec<&str> = plans.iter().map(|p| p["node"].as_str().unwrap()).collect();
    let samples = nodes["items"].as_array().unwrap().len() - 1;
    assert_eq!(planned.len(), samples, "{planned:?}");
    assert!(!planned.contains(&"node-far-future"));
    assert_eq!(err.matches("skipped").count(), 1, "{err}");
    assert!(
        err.contains("skipped node-far-future (item 6): cannot decode it"),
        "{err}"
    );
}

/// The samples with node-c recovered 10 minutes ago (still cordoned by its record), node-b's
/// detector (owning KernelDeadlock) last heard at 09:30, the Job's pod still running, and a pod
/// policy file; their paths.
fn operator_controls_inputs(dir: &std::path::Path) -> (String, String, String) {
    let mut pods: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{SAMPLES}/pods.json")).unwrap())
            .unwrap();
    for p in pods["items"].as_array_mut().unwrap() {
        if p["metadata"]["name"] == "job-1" {
            p["status"]["phase"] = "Running".into();
        }
    }
    let pods_file = dir.join("pods.json");
    std::fs::write(&pods_file, pods.to_string()).unwrap();
    let mut nodes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{SAMPLES}/nodes.json")).unwrap())
            .unwrap();
    for n in nodes["items"].as_array_mut().unwrap() {
        let name = n["metadata"]["name"].as_str().unwrap().to_string();
        for c in n["status"]["conditions"].as_array_mut().unwrap() {
            if c["type"] != "KernelDeadlock" {
                continue;
            }
            match name.as_str() {
                "node-c" => {
                    c["status"] = "False".into();
                    c["lastTransitionTime"] = "2026-11-22T09:50:00Z".into();
                }
                "node-b" => c["lastHeartbeatTime"] = "2026-11-22T09:30:00Z".into(),
                _ => {}
            }
        }
        if name == "node-b" {
            n["metadata"]["annotations"] =
                serde_json::json!({"nodemedic.io/detector-conditions": "KernelDeadlock"});
        }
    }
    let nodes_file = dir.join("nodes.json");
    std::fs::write(&nodes_file, nodes.to_string()).unwrap();
    let policy = dir.join("drainer.yaml");
    std::fs::write(
        &policy,
        "podPolicies:\n  - name: batch-jobs\n    ownerKinds: [Job]\n    action: wait\n    maxWait: 30m\n",
    )
    .unwrap();
    (
        nodes_file.display().to_string(),
        pods_file.display().to_string(),
        policy.display().to_string(),
    )
}

#[test]
fn the_plan_shows_probation_a_silent_detector_pod_policies_and_a_no_execute_taint() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, pods, policy) = operator_controls_inputs(dir.path());
    let base = [
        "--max-unhealthy",
        "100%",
        "--breaker-new",
        "100%",
        "--max-cordoned",
        "5",
        "--detector-daemonset=",
        "--uncordon-after",
        "1h",
    ];
    let out = plan_nodes(&nodes, &base);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |node: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("{node} in\n{text}"))
            .to_string()
    };
    assert!(
        line("node-c")
            .contains("probation  conditions cleared: probation until 2026-11-22T11:00:00Z"),
        "{text}"
    );
    assert!(
        text.contains(
            "detector silent since 2026-11-22T09:30:00Z (no heartbeat of its conditions within 15m)"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("detector silent since").count(),
        1,
        "only node-b: {text}"
    );
    let plans = json_plans(plan_nodes(
        &nodes,
        &[&base[..], &["--output", "json"]].concat(),
    ));
    let b = plans.iter().find(|p| p["node"] == "node-b").unwrap();
    assert_eq!(b["silent_since"], "2026-11-22T09:30:00Z");
    assert!(
        plans
            .iter()
            .filter(|p| p["node"] != "node-b")
            .all(|p| p.get("silent_since").is_none())
    );

    // The pod policy each pod hit: node-c's running Job waited for when it is cordoned (the
    // samples' nodes as they are, --config naming the policy).
    let args = [
        "--max-unhealthy",
        "100%",
        "--breaker-new",
        "100%",
        "--config",
        &policy,
        "--max-cordoned",
        "5",
        "--output",
        "json",
    ];
    let plans = json_plans(plan_files(&format!("{SAMPLES}/nodes.json"), &pods, &args));
    let c = plans.iter().find(|p| p["node"] == "node-c").unwrap();
    let job = c["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "job-1")
        .unwrap_or_else(|| panic!("{c}"));
    assert_eq!(job["action"], "wait", "{job}");
    assert!(
        job["reason"]
            .as_str()
            .unwrap()
            .starts_with("let finish (pod policy batch-jobs): evicted only if still running 30m"),
        "{job}"
    );

    // A NoExecute problem taint is an eviction in the plan, PDBs aside.
    let out = plan_with(&[
        "--max-unhealthy",
        "90%",
        "--breaker-new",
        "90%",
        "--max-cordoned",
        "5",
        "--cordon=false",
        "--problem-taint",
        "nodemedic.io/problem:NoExecute",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("held by taint only (not cordoned): nodemedic.io/problem:NoExecute"),
        "{text}"
    );
    assert!(
        text.contains("evict  default/web-1a2b: evicted at once by the taint manager: does not tolerate nodemedic.io/problem:NoExecute"),
        "{text}"
    );
}

/// The plan holds no record key: it says records are taken as written when the nodes carry any,
/// and says nothing when none does.
#[test]
fn the_plan_says_drain_records_are_taken_unchecked() {
    let out = plan(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("1 node carries a drain record, taken as written: only the running drainer checks a record's seal"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{SAMPLES}/nodes.json")).unwrap())
            .unwrap();
    for n in nodes["items"].as_array_mut().unwrap() {
        if let Some(a) = n["metadata"]["annotations"].as_object_mut() {
            a.remove("nodemedic.io/drain");
        }
    }
    let path = dir.path().join("nodes.json");
    std::fs::write(&path, nodes.to_string()).unwrap();
    let out = plan_nodes(
        path.to_str().unwrap(),
        &["--max-unhealthy", "100%", "--breaker-new", "100%"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("drain record"), "{err}");
}

/// Files of the wrong kind (pods given as nodes) are an error naming the file and the kind, not a
/// plan of 0 nodes with exit 0.
#[test]
fn swapped_input_files_are_an_error_naming_the_file() {
    let out = plan_files(
        &format!("{SAMPLES}/pods.json"),
        &format!("{SAMPLES}/nodes.json"),
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("pods.json: nothing in it can be read as a Node"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no plan printed");
}

/// A condition type with a case typo (nodes report `KernelDeadlock`) plans every node healthy: the
/// plan says why on stderr in the live drainer's words, as `explain` does; draino's obsolete
/// `OutOfDisk` is named too.
#[test]
fn a_typo_or_an_obsolete_condition_is_warned_about_offline_as_live() {
    for command in ["plan", "explain"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
        cmd.arg(command);
        if command == "explain" {
            cmd.arg("node-c");
        }
        let out = cmd
            .args([
                "KernelDeadLock=True,10m",
                "OutOfDisk=True",
                "--now",
                "2026-11-22T10:00:00Z",
            ])
            .arg("--nodes")
            .arg(format!("{SAMPLES}/nodes.json"))
            .arg("--pods")
            .arg(format!("{SAMPLES}/pods.json"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command}: {err}");
        assert!(
            err.contains(
                "warning: no node reports a condition of type \"KernelDeadLock\", but nodes report \"KernelDeadlock\""
            ),
            "{command}: {err}"
        );
        assert!(
            err.contains("warning: no node reports \"OutOfDisk\""),
            "{command}: {err}"
        );
    }
}

/// `drainer config` (and `kubectl nodemedic config`'s offline form) warns of what `drainer run`
/// warns of at start about the settings alone, in the same words: draino's obsolete `OutOfDisk`,
/// DaemonSet pods evicted.
#[test]
fn config_offline_warns_of_what_the_live_drainer_warns_of_at_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["config", "OutOfDisk=True", "--evict-daemonset-pods"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: no node reports \"OutOfDisk\""),
        "{err}"
    );
    assert!(
        err.contains("warning: --evict-daemonset-pods: DaemonSet pods are evicted in drains"),
        "{err}"
    );
}
