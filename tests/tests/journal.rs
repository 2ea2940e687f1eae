//! The journal input against real journal files written by systemd-journal-remote (no journald
//! needed), read through journalctl exactly as on a node. Skipped, with the reason printed, where
//! systemd-journal-remote is not installed (`.ci/run` installs it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nodemedic_detector::checkpoint::Position;
use nodemedic_detector::report::aggregate::Limits;
use nodemedic_detector::run::{self, Options};
use nodemedic_detector::source::SourceEvent;
use nodemedic_detector::source::journal::{JournalSpec, follow};
use nodemedic_tests::cluster::{Cluster, eventually};
use tokio::sync::{mpsc, watch};

const REMOTE: &str = "/lib/systemd/systemd-journal-remote";

fn available(test: &str) -> bool {
    let ok =
        Path::new(REMOTE).exists() && Command::new("journalctl").arg("--version").output().is_ok();
    if !ok {
        eprintln!(
            "skipped {test}: {REMOTE} or journalctl is missing (Debian package systemd-journal-remote)"
        );
    }
    ok
}

/// Append entries (identifier, message) to DIR/test.journal in journal export format, each with
/// the process name and executable journald records (`_COMM`, `_EXE`, run by root): the
/// identifier's, or after a `/` another one (`dockerd/logger`: what `logger -t dockerd` writes).
fn append(dir: &Path, entries: &[(&str, &str)]) {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let mut export = String::new();
    for (i, (id, msg)) in entries.iter().enumerate() {
        let (id, comm) = id.split_once('/').unwrap_or((id, id));
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=7386a4788f4349e39ff7840b081b1d20\nSYSLOG_IDENTIFIER={id}\n_COMM={comm}\n_EXE=/usr/bin/{comm}\n_UID=0\nMESSAGE={msg}\n\n",
            now_us + i as u128,
            now_us + i as u128
        ));
    }
    let mut child = Command::new(REMOTE)
        .arg(format!("--output={}", dir.join("test.journal").display()))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(export.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

fn spec(dir: &Path) -> JournalSpec {
    JournalSpec {
        journalctl: "journalctl".into(),
        directory: Some(dir.to_path_buf()),
        identifiers: vec!["dockerd".into()],
        how: nodemedic_detector::parse::journal::IdentifierMatch::Backed,
        units: vec![],
        lookback: Duration::from_secs(300),
    }
}

async fn next_line(rx: &mut mpsc::Receiver<SourceEvent>) -> (String, String) {
    let ev = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("a journal line in time")
        .unwrap();
    match ev {
        SourceEvent::Line {
            text,
            position: Position::Journal { cursor },
            ..
        } => (text, cursor),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn follows_real_journal_files_filters_by_identifier_and_resumes_after_its_cursor() {
    if !available("follows_real_journal_files") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    append(
        dir.path(),
        &[
            ("dockerd", "first"),
            ("kubelet", "not for us"),
            ("dockerd/logger", "anyone may claim to be dockerd"),
            ("dockerd", "second"),
        ],
    );
    let health = nodemedic_common::health::Health::default();
    let (tx, mut rx) = mpsc::channel(16);
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(follow(
        spec(dir.path()),
        None,
        tx,
        health.register("j", Duration::from_secs(60)),
        stop,
    ));
    assert_eq!(next_line(&mut rx).await.0, "first");
    let (text, cursor) = next_line(&mut rx).await;
    assert_eq!(
        text, "second",
        "the kubelet entry and the one logger wrote as dockerd were filtered out"
    );
    // appended while following
    append(dir.path(), &[("dockerd", "third")]);
    assert_eq!(next_line(&mut rx).await.0, "third");
    stop_tx.send(true).unwrap();
    task.await.unwrap();

    // a restart from the checkpointed cursor of "second" sees only what came after it
    let (tx, mut rx) = mpsc::channel(16);
    let (stop_tx, stop) = watch::channel(false);
    let cp = Some(Position::Journal { cursor });
    let task = tokio::spawn(follow(
        spec(dir.path()),
        cp,
        tx,
        health.register("j2", Duration::from_secs(60)),
        stop,
    ));
    assert_eq!(next_line(&mut rx).await.0, "third");
    stop_tx.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_dockerd_journal_line_becomes_a_condition_on_the_node() {
    if !available("a_dockerd_journal_line_becomes_a_condition") {
        return;
    }
    let cluster = Cluster::new().await;
    let node = cluster.create_node("journal").await;
    let dir = tempfile::tempdir().unwrap();
    let journal_dir: PathBuf = dir.path().join("journal");
    std::fs::create_dir_all(&journal_dir).unwrap();
    std::fs::create_dir_all(dir.path().join("rules")).unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../config/rules/docker-monitor.yaml"
        ),
        dir.path().join("rules/docker-monitor.yaml"),
    )
    .unwrap();
    append(&journal_dir, &[("systemd", "Started something.")]);
    let opts = Options {
        node_name: node.clone(),
        rules: vec![dir.path().join("rules")],
        kmsg_path: dir.path().join("unused-kmsg"),
        journalctl: "journalctl".into(),
        journal_dir: Some(journal_dir.clone()),
        state_file: dir.path().join("state.json"),
        listen: "127.0.0.1:0".parse().unwrap(),
        extra_listen: None,
        heartbeat: Duration::from_secs(300),
        events: Limits::default(),
        report_tick: Duration::from_millis(50),
        check_dirs: Vec::new(),
        allow_root_checks: false,
        credential: nodemedic_common::client::Credential::Kubeconfig,
        api_server: "the test API server".into(),
        reboot: None,
        stats: Vec::new(),
    };
    let running = run::start(opts, cluster.client.clone()).await.unwrap();
    eventually("healthy default", Duration::from_secs(60), || async {
        cluster
            .condition(&node, "CorruptDockerOverlay2")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    append(
        &journal_dir,
        &[(
            "dockerd",
            "handler for GET /containers/json returned error: readlink /var/lib/docker/overlay2/l/ABC: invalid argument",
        )],
    );
    let (_, reason, _) = eventually(
        "CorruptDockerOverlay2=True",
        Duration::from_secs(60),
        || async {
            cluster
                .condition(&node, "CorruptDockerOverlay2")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    assert_eq!(reason, "CorruptDockerOverlay2");
    running.shutdown().await;
    cluster.cleanup(&[]).await;
}
