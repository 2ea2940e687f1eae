//! draino's Deployment command lines, unchanged, against a cluster (the real control plane with
//! KUBEBUILDER_ASSETS, else the test API server): draino's own manifest (tests/fixtures/draino,
//! `--dry-run --node-label=draino-enabled=true BadCondition ReallyBadCondition`), the expr-lang
//! `--node-label-expr` form, and draino's DRAINO_* environment variables.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::cluster::{Cluster, eventually, now_rfc3339};
use serde_json::json;

const MANIFEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/draino/manifest.yml"
);

/// The draino container's command in draino's manifest, without the binary.
fn manifest_args() -> Vec<String> {
    let text = std::fs::read_to_string(MANIFEST).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("command: [/draino"))
        .expect("draino's command line");
    let inner = line.split_once('[').unwrap().1.rsplit_once(']').unwrap().0;
    inner
        .split(',')
        .map(|a| a.trim().to_string())
        .skip(1)
        .collect()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The drainer as draino's Deployment runs it; its record key Secret made first, as the shipped
/// manifests make it.
async fn drainer(
    cluster: &Cluster,
    args: &[String],
    kubeconfig: &std::path::Path,
    lease: &str,
    env: &[(&str, &str)],
) -> Killed {
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", lease, None).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.args(args)
        // What the Deployment gets from its environment: a cluster, a port, its own lock.
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--leader-election-token-name={lease}"))
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Killed(cmd.spawn().expect("start the drainer"))
}

async fn set_condition(cluster: &Cluster, node: &str, type_: &str) {
    let body = json!({"status": {"conditions": [{"type": type_, "status": "True", "reason": "Broken",
        "message": "m", "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn reasons(cluster: &Cluster, node: &str) -> Vec<String> {
    cluster
        .node_events(node)
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

/// Wait for a CordonStarting Event on `node`: what a dry run writes instead of cordoning.
async fn wait_cordon_starting(cluster: &Cluster, node: &str, what: &str) {
    eventually(what, Duration::from_secs(60), || async {
        reasons(cluster, node)
            .await
            .contains(&"CordonStarting".to_string())
            .then_some(())
    })
    .await;
}

async fn unschedulable(cluster: &Cluster, node: &str) -> bool {
    cluster
        .node(node)
        .await
        .spec
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

#[tokio::test]
async fn draino_command_lines_run_unchanged() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let id = std::process::id();

    // 1. draino's manifest: dry run, nodes labelled draino-enabled=true, two conditions.
    let args = manifest_args();
    assert_eq!(
        args,
        [
            "--dry-run",
            "--node-label=draino-enabled=true",
            "BadCondition",
            "ReallyBadCondition"
        ]
    );
    let enabled = cluster
        .create_node_with("draino-enabled", json!({"draino-enabled": "true"}))
        .await;
    let other = cluster.create_node("draino-other").await;
    set_condition(&cluster, &enabled, "ReallyBadCondition").await;
    set_condition(&cluster, &other, "BadCondition").await;
    let run = drainer(
        &cluster,
        &args,
        &kubeconfig,
        &format!("draino-manifest-{id}"),
        &[],
    )
    .await;
    wait_cordon_starting(
        &cluster,
        &enabled,
        "a dry-run CordonStarting Event on the labelled node",
    )
    .await;
    drop(run);
    assert!(
        !unschedulable(&cluster, &enabled).await,
        "--dry-run cordoned"
    );
    assert!(
        !reasons(&cluster, &other)
            .await
            .contains(&"CordonStarting".to_string()),
        "a node without draino-enabled=true was selected"
    );

    // 2. The expr-lang expression of a draino Deployment, as it is, and its other flags.
    let selected = cluster
        .create_node_with("draino-expr", json!({"draino": "node"}))
        .await;
    set_condition(&cluster, &selected, "KernelDeadlock").await;
    let args: Vec<String> = [
        "--node-label-expr=metadata['labels']['draino'] in ['master','node'] and metadata.name != nil",
        "--drain-buffer=10m",
        "--max-grace-period=8m",
        "--evict-emptydir-pods",
        "KernelDeadlock",
        "ReadonlyFilesystem",
    ]
    .map(String::from)
    .to_vec();
    let run = drainer(
        &cluster,
        &args,
        &kubeconfig,
        &format!("draino-expr-{id}"),
        &[],
    )
    .await;
    eventually(
        "the selected node cordoned",
        Duration::from_secs(60),
        || async { unschedulable(&cluster, &selected).await.then_some(()) },
    )
    .await;
    drop(run);

    // 3. The same selection from DRAINO_* variables, dry run from the environment too.
    let from_env = cluster
        .create_node_with("draino-env", json!({"pool": "env"}))
        .await;
    set_condition(&cluster, &from_env, "ReallyBadCondition").await;
    let run = drainer(
        &cluster,
        &["ReallyBadCondition".to_string()],
        &kubeconfig,
        &format!("draino-env-{id}"),
        &[
            ("DRAINO_NODE_LABEL_EXPR", "metadata.labels['pool'] == 'env'"),
            ("DRAINO_DRY_RUN", "true"),
        ],
    )
    .await;
    wait_cordon_starting(
        &cluster,
        &from_env,
        "a dry-run Event from DRAINO_ variables",
    )
    .await;
    drop(run);
    assert!(
        !unschedulable(&cluster, &from_env).await,
        "DRAINO_DRY_RUN=true cordoned"
    );
    // kingpin: a flag beats its variable, and the last of --dry-run and --no-dry-run wins.
    let run = drainer(
        &cluster,
        &["--dry-run", "ReallyBadCondition", "--no-dry-run"].map(String::from),
        &kubeconfig,
        &format!("draino-env-{id}"),
        &[
            ("DRAINO_NODE_LABEL_EXPR", "metadata.labels['pool'] == 'env'"),
            ("DRAINO_DRY_RUN", "true"),
        ],
    )
    .await;
    eventually(
        "--no-dry-run over DRAINO_DRY_RUN=true cordoned",
        Duration::from_secs(60),
        || async { unschedulable(&cluster, &from_env).await.then_some(()) },
    )
    .await;
    drop(run);

    for n in [enabled, other, selected, from_env] {
        cluster.delete_node(&n).await;
    }
}

#[test]
fn every_draino_flag_is_taken_and_a_flag_draino_never_had_is_a_clear_error() {
    // draino's own flags, including the three earlier versions refused: taken, and
    // --evict-daemonset-pods says once at start what it does (the run then stops at the missing
    // kubeconfig, exit 1, not at the flags, exit 2).
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "--evict-daemonset-pods",
            "--allow-force-delete",
            "--ignore-safe-to-evict-annotation",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "KernelDeadlock",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("their DaemonSet recreates them on the cordoned node")
            .count(),
        1,
        "{err}"
    );
    // A flag draino never had keeps its clear error.
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["--evict-condition", "KernelDeadlock"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unexpected argument '--evict-condition'"),
        "{err}"
    );
    // A kubeconfig that is not there is said once, with its path.
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "KernelDeadlock"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

#[test]
fn an_argument_that_is_not_utf8_is_an_error_not_a_crash() {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .arg(std::ffi::OsStr::from_bytes(b"--no-dry-run\xff"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unexpected argument"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn the_draino_migration_table_names_only_flags_the_drainer_has() {
    use nodemedic_tests::docs::{doc_table_flags, missing_from_help};
    let flags = doc_table_flags("docs/migrating-from-draino.md");
    assert!(flags.len() >= 20, "{flags:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let missing = missing_from_help(&flags, &help);
    assert!(
        missing.is_empty(),
        "in docs/migrating-from-draino.md, not in drainer --help: {missing:?}"
    );
    // The DRAINO_ variables the table names are read.
    for var in ["DRAINO_LISTEN", "DRAINO_DRY_RUN", "DRAINO_NODE_LABEL_EXPR"] {
        assert!(help.contains(var), "{var} not in --help");
    }
}

/// `--dry-run=false`, as draino's kingpin read it: the flag set, the value a stray argument. The
/// drainer does the same (dry run), says so with the form that turns it off in its own log (a JSON
/// line where it logs JSON, as a log collector reads it), and that it runs in dry run, then goes on
/// (here to the missing kubeconfig, exit 1); a boolean that would make it do more than asked is
/// refused (exit 2) naming the forms that work.
#[test]
fn a_draino_boolean_with_a_value_runs_as_kingpin_read_it_or_is_refused_with_the_form_that_works() {
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "--dry-run=false",
            "--log-format=json",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "KernelDeadlock",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let logged: Vec<serde_json::Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let said = |what: &str| {
        logged.iter().any(|l| {
            l["level"] == "WARN" && l["message"].as_str().is_some_and(|m| m.contains(what))
        })
    };
    assert!(
        said("--dry-run=false: --dry-run is ON, as draino had it"),
        "{err}"
    );
    assert!(said("Write --no-dry-run to turn it off"), "{err}");
    assert!(
        said("dry run: no node is cordoned, drained or changed"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "--evict-emptydir-pods=false",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "KernelDeadlock",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Write --evict-emptydir-pods to turn it on, or --no-evict-emptydir-pods (or leave it out)"),
        "{err}"
    );
}

/// `drainer convert-draino -- <draino's line>` prints a config file whose plan over the sample
/// snapshot is the plan of the line itself: draino's manifest line, and a line with most of its
/// flags whose conditions the sample nodes have (so the plans act).
#[test]
fn draino_lines_convert_to_a_config_file_that_plans_the_same() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let full: Vec<String> = [
        "--drain-buffer=10m",
        "--max-grace-period=8m0s",
        "--eviction-headroom=30s",
        "--evict-emptydir-pods",
        "--evict-unreplicated-pods",
        "--max-cordoned=50%",
        "--max-unhealthy=80%",
        "--breaker-new=80%",
        "--no-dry-run",
        "KernelDeadlock=True,10m",
        "Ready=Unknown,5m",
    ]
    .map(String::from)
    .to_vec();
    for (line, acts) in [(manifest_args(), false), (full, true)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_drainer"))
            .arg("convert-draino")
            .arg("--")
            .args(&line)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let yaml = String::from_utf8(out.stdout).unwrap();
        assert!(yaml.contains("conditions: ["), "{yaml}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("drainer.yaml");
        std::fs::write(&file, &yaml).unwrap();
        let plan = |settings: &[String]| {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_drainer"))
                .current_dir(root)
                .args(["plan", "--nodes", "config/samples/nodes.json"])
                .args(["--pods", "config/samples/pods.json"])
                .args(["--pdbs", "config/samples/pdbs.json"])
                .args(["--now", "2026-11-22T10:00:00Z", "--output", "json"])
                .args(settings)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let from_line = plan(&line);
        if acts {
            assert!(
                from_line.contains("\"action\":\"cordon\"")
                    || from_line.contains("\"action\":\"drain\""),
                "the line acts on the sample: {from_line}"
            );
        }
        assert_eq!(
            plan(&["--config".into(), file.display().to_string()]),
            from_line,
            "{yaml}"
        );
    }
}

/// What `convert-draino` leaves on the command line is said (a trial moving off draino lost its
/// Lease name when it moved to the file alone): the flags that set how the drainer runs, not what
/// it decides.
#[test]
fn convert_draino_names_the_flags_that_stay_on_the_command_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args([
            "convert-draino",
            "--",
            "--kubeconfig=/x",
            "--leader-election-token-name=draino",
            "--namespace=foo",
            "--listen=:10002",
            "--drain-buffer=10m",
            "KernelDeadlock",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let file = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for flag in [
        "--kubeconfig=/x",
        "--leader-election-token-name=draino",
        "--namespace=foo",
        "--listen=:10002",
    ] {
        assert!(err.contains(flag), "{flag} not named: {err}");
    }
    assert!(
        !err.contains("--drain-buffer"),
        "a setting goes to the file: {err}"
    );
    assert!(file.contains("drainBuffer"), "{file}");
}
