//! The `resources` input through the real binary: `detector check` replaying a recording,
//! `detector sample` reading a real size-limited filesystem, and the daemon setting the early
//! condition on its Node while a real filesystem fills (a tmpfs mounted in a mount namespace of the
//! test's own, `unshare -rm`; where the machine allows none, that test says so and checks the
//! recording instead).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::tmpfs::{can_mount, filling_detector};

fn detector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_detector"))
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn json_findings(rules: &Path, input: &Path) -> Vec<serde_json::Value> {
    let out = detector()
        .args(["check", "--output", "json", "--rules"])
        .arg(rules)
        .arg("--input")
        .arg(input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The free share of the image filesystem in the recording's line `n` (1-based).
fn imagefs_free_pct(recording: &str, n: usize) -> f64 {
    let line: serde_json::Value =
        serde_json::from_str(recording.lines().nth(n - 1).unwrap()).unwrap();
    line["imagefs.available"].as_f64().unwrap() * 100.0 / line["imagefs.capacity"].as_f64().unwrap()
}

/// The bundled recording: an image filesystem filling at about 1 GiB a minute for 38 minutes,
/// then freed. The shipped rules see it coming half an hour ahead, long before the kubelet's
/// 15%, and clear once the fall has stopped.
#[test]
fn the_shipped_rules_warn_of_a_filling_image_filesystem_half_an_hour_ahead_and_clear_after() {
    let recording_path = repo("config/samples/resources.jsonl");
    let recording = std::fs::read_to_string(&recording_path).unwrap();
    let found = json_findings(
        &repo("config/rules-extra/resource-monitor.yaml"),
        &recording_path,
    );
    let summary: Vec<(&str, &str, &str)> = found
        .iter()
        .map(|f| {
            (
                f["condition"].as_str().unwrap(),
                f["status"].as_str().unwrap(),
                f["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "ImageFilesystemFillingUp",
                "True",
                "ImageFilesystemFullSoon"
            ),
            (
                "ImageFilesystemFillingUp",
                "False",
                "ImageFilesystemHasRoom"
            ),
        ]
    );
    let fired = found[0]["line"].as_u64().unwrap() as usize;
    let free = imagefs_free_pct(&recording, fired);
    assert!(free > 40.0, "fired at {free:.1}% free (line {fired})");
    let lowest = (1..=recording.lines().count())
        .map(|n| imagefs_free_pct(&recording, n))
        .fold(f64::MAX, f64::min);
    assert!(
        lowest > 15.0,
        "the recording reaches the kubelet's threshold: {lowest}"
    );
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("imagefs.available reaches 15% in "),
        "{message}"
    );
    assert_eq!(found[0]["time"], "2026-11-27T10:15:30Z");
}

#[test]
fn readings_against_log_rules_and_a_log_against_resources_rules_are_errors() {
    let out = detector()
        .args(["check", "--input"])
        .arg(repo("config/samples/resources.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("readings of a node's resources, and none of the rules"),
        "{err}"
    );
    let out = detector()
        .args(["check", "--rules"])
        .arg(repo("config/rules-extra/resource-monitor.yaml"))
        .arg("--input")
        .arg(repo("config/samples/kern.kmsg"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("read a node's resources, not lines"), "{err}");
}

#[test]
fn sample_reads_a_real_size_limited_filesystem() {
    if !can_mount() {
        // The recording stands in.
        return the_shipped_rules_warn_of_a_filling_image_filesystem_half_an_hour_ahead_and_clear_after();
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().display();
    let script = format!(
        "mount -t tmpfs -o size=8m,nr_inodes=1000 tmpfs {mnt} && head -c 3145728 /dev/zero > {mnt}/fill && exec \"$0\" sample --filesystem t={mnt}"
    );
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script, env!("CARGO_BIN_EXE_detector")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mib = 1024.0 * 1024.0;
    assert_eq!(s["t.capacity"].as_f64().unwrap(), 8.0 * mib, "{s}");
    assert_eq!(s["t.available"].as_f64().unwrap(), 5.0 * mib, "{s}");
    assert_eq!(s["t.inodes"].as_f64().unwrap(), 1000.0, "{s}");
    // The root directory and the file.
    assert_eq!(s["t.inodesFree"].as_f64().unwrap(), 998.0, "{s}");
    assert!(s["memory.available"].as_f64().unwrap() > 0.0);
}

const FILLING_RULES: &str = r#"
source: resource-monitor
input:
  kind: resources
  interval: 1s
  filesystems: {imagefs: MOUNT}
conditions:
  - type: ImageFilesystemFillingUp
    reason: ImageFilesystemHasRoom
    message: the image filesystem has room
rules:
  - {type: permanent, condition: ImageFilesystemFillingUp, reason: ImageFilesystemLow, signal: imagefs.available, below: 20%}
  - {type: permanent, condition: ImageFilesystemFillingUp, reason: ImageFilesystemFullSoon, signal: imagefs.available, reaches: 15%, within: 40s, trend: 8s}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filling_filesystem_sets_the_early_condition_on_the_node_before_the_level() {
    if !can_mount() {
        // The recording stands in.
        return the_shipped_rules_warn_of_a_filling_image_filesystem_half_an_hour_ahead_and_clear_after();
    }
    let cluster = Cluster::new().await;
    let node = cluster.create_node("filling").await;
    let dir = tempfile::tempdir().unwrap();
    cluster.write_kubeconfig(&dir.path().join("kubeconfig"));
    let kubeconfig = dir.path().join("kubeconfig");
    let detector = Path::new(env!("CARGO_BIN_EXE_detector"));
    let _group = filling_detector(
        detector,
        dir.path(),
        &node,
        &kubeconfig,
        FILLING_RULES,
        Stdio::inherit(),
    );
    let (status, reason, message) = eventually(
        "the early condition on the node",
        Duration::from_secs(90),
        || async {
            cluster
                .condition(&node, "ImageFilesystemFillingUp")
                .await
                .filter(|(s, _, _)| s == "True")
        },
    )
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "ImageFilesystemFullSoon"),
        "{message}"
    );
    // Set while more than a fifth was free: the trend saw it before the level rule (20%) and
    // long before the kubelet's 15%.
    let pct: f64 = message
        .rsplit_once('(')
        .and_then(|(_, p)| p.split_once('%'))
        .and_then(|(p, _)| p.parse().ok())
        .unwrap_or_else(|| panic!("no share in {message:?}"));
    assert!(pct > 20.0, "{message}");
    assert!(
        message.contains("MiB (") && message.ends_with("%) now"),
        "{message}"
    );
    cluster.delete_node(&node).await;
}
