//! Detector scenarios: the real detector (`run::start`) with a real kube::Client over HTTP, against the
//! real control plane when KUBEBUILDER_ASSETS is set (else the test API server, or a real cluster with
//! NODEMEDIC_E2E=1). Scenarios that inject API faults always use the test API server.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use kube::ResourceExt;
use nodemedic_detector::report::aggregate::Limits;
use nodemedic_detector::report::confinement::PROBE_LABEL;
use nodemedic_detector::run::{self, Options, Running};
use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::cluster::{Cluster, eventually};

/// The bound of every wait for something the detector does: generous, so a busy machine is not a
/// failure; a passing wait returns as soon as it sees it.
const WAIT: Duration = Duration::from_secs(60);

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
lookback: 5m
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: kernel has no deadlock
  - type: FlakyDisk
    reason: DiskIsFine
    message: disk is fine
    recovery:
      pattern: 'disk sdz recovered'
rules:
  - type: temporary
    reason: OOMKilling
    pattern: 'Out of memory: Killed process \d+ \((.+)\).*'
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\w+ blocked for more than \w+ seconds\.'
  - type: permanent
    condition: FlakyDisk
    reason: DiskErrors
    pattern: 'disk sdz failing.*'
  - type: temporary
    reason: TestBarrier
    pattern: 'nodemedic-test-barrier \d+'
"#;

/// The Event reason of [`Harness::barrier`]'s lines (left out of what scenarios count).
const BARRIER: &str = "TestBarrier";

struct Harness {
    cluster: Cluster,
    node: String,
    dir: tempfile::TempDir,
    seq: u64,
}

impl Harness {
    async fn new(hint: &str) -> Harness {
        Harness::on(Cluster::new().await, hint).await
    }

    /// On the test API server whatever the environment (fault injection).
    async fn fake(hint: &str) -> Harness {
        Harness::on(Cluster::fake().await, hint).await
    }

    async fn on(cluster: Cluster, hint: &str) -> Harness {
        let node = cluster.create_node(hint).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        std::fs::write(dir.path().join("rules/kernel.yaml"), RULES).unwrap();
        std::fs::write(dir.path().join("kmsg"), "").unwrap();
        Harness {
            cluster,
            node,
            dir,
            seq: 0,
        }
    }

    fn rules_dir(&self) -> PathBuf {
        self.dir.path().join("rules")
    }

    fn options(&self) -> Options {
        Options {
            node_name: self.node.clone(),
            rules: vec![self.rules_dir()],
            kmsg_path: self.dir.path().join("kmsg"),
            journalctl: "journalctl".into(),
            journal_dir: None,
            state_file: self.dir.path().join("state/detector.json"),
            listen: "127.0.0.1:0".parse().unwrap(),
            extra_listen: None,
            heartbeat: Duration::from_secs(300),
            events: Limits {
                min_interval: Duration::from_millis(200),
                ..Default::default()
            },
            report_tick: Duration::from_millis(50),
            check_dirs: Vec::new(),
            allow_root_checks: false,
            credential: nodemedic_common::client::Credential::Kubeconfig,
            api_server: "the test API server".into(),
            reboot: None,
            stats: Vec::new(),
        }
    }

    async fn start(&self) -> Running {
        run::start(self.options(), self.cluster.client_for("detector"))
            .await
            .expect("detector starts")
    }

    /// Status PATCHes of this scenario's detector, counted at the API server.
    fn status_patches(&self) -> usize {
        self.cluster
            .requests_from("detector", "patch", "nodes", "status")
    }

    /// Event writes of this scenario's detector, counted at the API server.
    fn event_writes(&self) -> usize {
        self.cluster
            .requests_from("detector", "create", "events", "")
            + self
                .cluster
                .requests_from("detector", "patch", "events", "")
    }

    /// Events about the node written by the detector (not by the cluster's controllers), barriers
    /// aside.
    async fn own_events(&self) -> Vec<k8s_openapi::api::core::v1::Event> {
        self.cluster
            .node_events_from(&self.node, &["kernel-monitor"])
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() != Some(BARRIER))
            .collect()
    }

    /// Wait until the detector has read and reported every kernel line appended before this call,
    /// so that what it has *not* done can be asserted without waiting a fixed time: a line of the
    /// barrier rule is appended, lines are read in order, and its Event (reason [`BARRIER`]) is
    /// written once everything before it was matched and reported.
    async fn barrier(&mut self) {
        let marker = format!("nodemedic-test-barrier {}", self.seq + 1);
        self.kmsg(&marker);
        eventually(
            &format!("the barrier line {marker:?} reported"),
            WAIT,
            || async {
                self.events(BARRIER)
                    .await
                    .into_iter()
                    .find(|e| e.message.as_deref().is_some_and(|m| m.contains(&marker)))
            },
        )
        .await;
    }

    /// Append a kernel record (kmsg format, current monotonic timestamp).
    fn kmsg(&mut self, message: &str) {
        self.kmsg_with_pri(3, message);
    }

    /// A record as root writes one to /dev/kmsg from user space: the user facility (PRI 14).
    fn kmsg_from_user_space(&mut self, message: &str) {
        self.kmsg_with_pri(14, message);
    }

    fn kmsg_with_pri(&mut self, pri: u8, message: &str) {
        self.seq += 1;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("kmsg"))
            .unwrap();
        writeln!(f, "{pri},{},{},-;{message}", self.seq, monotonic_now_us()).unwrap();
    }

    /// Start and wait until the healthy defaults are on the Node.
    async fn start_healthy(&self) -> Running {
        let running = self.start().await;
        self.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
            .await;
        running
    }

    async fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        self.cluster.condition(&self.node, type_).await
    }

    async fn wait_condition(
        &self,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> (String, String, String) {
        eventually(
            &format!("{type_}={status} ({reason}) on the node"),
            WAIT,
            || async {
                self.condition(type_)
                    .await
                    .filter(|c| c.0 == status && c.1 == reason)
            },
        )
        .await
    }

    async fn events(&self, reason: &str) -> Vec<k8s_openapi::api::core::v1::Event> {
        self.cluster
            .node_events(&self.node)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    async fn wait_event(&self, reason: &str) -> k8s_openapi::api::core::v1::Event {
        eventually(&format!("an Event with reason {reason}"), WAIT, || async {
            self.events(reason).await.into_iter().next()
        })
        .await
    }

    async fn finish(self, running: Running) {
        running.shutdown().await;
        self.cluster.cleanup(&[]).await;
    }
}

#[tokio::test]
async fn permanent_line_sets_the_condition_and_emits_events_temporary_line_emits_an_event_only() {
    let mut h = Harness::new("perm").await;
    let running = h.start().await;
    // healthy defaults are written first, next to the kubelet's Ready
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    assert_eq!(
        h.condition("Ready").await.unwrap().0,
        "True",
        "kubelet's condition untouched"
    );
    // NPD's series exist from the start at 0, so increase() alerts written for NPD see the first one.
    let at_start = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    for series in [
        "problem_counter{reason=\"OOMKilling\"} 0",
        "problem_counter{reason=\"DockerHung\"} 0",
        "problem_gauge{type=\"KernelDeadlock\",reason=\"DockerHung\"} 0",
        "problem_gauge{type=\"FlakyDisk\",reason=\"DiskErrors\"} 0",
    ] {
        assert!(at_start.contains(series), "{series} missing:\n{at_start}");
    }

    h.kmsg("Out of memory: Killed process 42 (stress) total-vm:1kB");
    let oom = h.wait_event("OOMKilling").await;
    assert_eq!(oom.type_.as_deref(), Some("Warning"));
    assert_eq!(
        oom.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("kernel-monitor")
    );
    assert_eq!(
        oom.message.as_deref(),
        Some("Out of memory: Killed process 42 (stress) total-vm:1kB")
    );
    assert_eq!(
        h.condition("KernelDeadlock").await.unwrap().0,
        "False",
        "a temporary rule changes no condition"
    );

    // Root on the node writes a kernel-looking line to /dev/kmsg (the user facility): it is not
    // the kernel's, and sets nothing (issue 76). The kernel's next line, read after it, is the
    // barrier: once its Event is counted, the first was read and passed over.
    h.kmsg_from_user_space("INFO: task docker:78 blocked for more than 120 seconds.");
    h.kmsg("Out of memory: Killed process 42 (stress) total-vm:1kB");
    eventually("the kernel line after it counted", WAIT, || async {
        let evs = h.events("OOMKilling").await;
        (evs.len() == 1 && evs[0].count == Some(2)).then_some(())
    })
    .await;
    assert_eq!(
        h.condition("KernelDeadlock").await.unwrap().0,
        "False",
        "a line written from user space is not a kernel line"
    );

    h.kmsg("INFO: task docker:77 blocked for more than 120 seconds.");
    let (_, _, message) = h
        .wait_condition("KernelDeadlock", "True", "DockerHung")
        .await;
    assert_eq!(
        message,
        "INFO: task docker:77 blocked for more than 120 seconds."
    );
    let ev = h.wait_event("DockerHung").await;
    assert_eq!(
        ev.message.as_deref(),
        Some(
            r#"Node condition KernelDeadlock is now: True, reason: DockerHung, message: "INFO: task docker:77 blocked for more than 120 seconds.""#
        )
    );
    let node = h.cluster.node(&h.node).await;
    assert_eq!(
        node.metadata
            .annotations
            .unwrap()
            .get(nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION)
            .map(String::as_str),
        Some("FlakyDisk,KernelDeadlock")
    );

    // repeats are aggregated into the same Event's count
    for _ in 0..5 {
        h.kmsg("Out of memory: Killed process 43 (stress) total-vm:1kB");
    }
    eventually("OOMKilling count 7", WAIT, || async {
        let evs = h.events("OOMKilling").await;
        (evs.len() == 1 && evs[0].count == Some(7)).then_some(())
    })
    .await;

    // the operations endpoints
    let base = format!("http://{}", running.addr);
    let metrics = nodemedic_tests::http_get(&format!("{base}/metrics")).await;
    assert!(
        metrics.contains("problem_counter{reason=\"OOMKilling\"} 7"),
        "{metrics}"
    );
    assert!(
        metrics.contains("problem_gauge{type=\"KernelDeadlock\",reason=\"DockerHung\"} 1"),
        "{metrics}"
    );
    let conditions = nodemedic_tests::http_get(&format!("{base}/conditions")).await;
    assert!(conditions.contains("\"DockerHung\""), "{conditions}");
    let health = nodemedic_tests::http_get(&format!("{base}/healthz")).await;
    assert!(health.starts_with("ok\n"), "{health}");
    h.finish(running).await;
}

/// The newest `lastHeartbeatTime` among the detector's conditions on the node, and whether every
/// one of them carries it (a heartbeat refreshes them all at once).
/// Issue 76 (an attacker's review), in the running detector with the shipped rules: records the
/// kernel writes at its own facility with a user's words at their start (a crashing program named
/// `remounting fs read-only`, a container's audit message naming an XFS shutdown) set no condition.
/// The kernel's own XFS record after them is the barrier: once it has set XfsShutdown, the others
/// were read and passed over.
#[tokio::test]
async fn a_users_words_in_kernel_records_set_no_condition_on_the_running_detector() {
    let mut h = Harness::new("user-words").await;
    std::fs::remove_file(h.rules_dir().join("kernel.yaml")).unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/rules");
    for f in ["readonly-monitor.yaml", "kernel-monitor.yaml"] {
        std::fs::copy(shipped.join(f), h.rules_dir().join(f)).unwrap();
    }
    let running = h.start().await;
    h.wait_condition("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly")
        .await;
    h.kmsg_with_pri(
        6,
        "remounting fs r[2714]: segfault at 0 ip 000055d4c5a3d129 sp 00007ffc8e9f7a10 error 6 in remounting fs read-only[55d4c5a3d000+1000] likely on CPU 1 (core 1, socket 0)",
    );
    h.kmsg_with_pri(
        5,
        "audit: type=1107 audit(1765000000.123:45): pid=1 uid=0 auid=4294967295 ses=4294967295 msg='XFS (x): Metadata I/O error. Shutting down filesystem'",
    );
    h.kmsg_with_pri(
        3,
        "INFO: task docker:2211 blocked for more than 120 seconds.",
    );
    h.kmsg_with_pri(
        1,
        "XFS (sdb1): Log I/O Error Detected. Shutting down filesystem",
    );
    let (_, _, message) = h
        .wait_condition("XfsShutdown", "True", "XfsHasShutdown")
        .await;
    assert_eq!(
        message,
        "XFS (sdb1): Log I/O Error Detected. Shutting down filesystem"
    );
    for (condition, healthy) in [
        ("ReadonlyFilesystem", "FilesystemIsNotReadOnly"),
        ("KernelDeadlock", "KernelHasNoDeadlock"),
    ] {
        let now = h.condition(condition).await.unwrap();
        assert_eq!(
            (now.0.as_str(), now.1.as_str()),
            ("False", healthy),
            "{condition}: {now:?}"
        );
    }
    // The hung task is still said, as an Event.
    h.wait_event("TaskHung").await;
    running.shutdown().await;
    h.cluster.cleanup(&[]).await;
}

async fn heartbeat(h: &Harness) -> Option<(k8s_openapi::jiff::Timestamp, bool)> {
    let node = h.cluster.node(&h.node).await;
    let beats: Vec<_> = node
        .status?
        .conditions?
        .into_iter()
        .filter(|c| ["KernelDeadlock", "FlakyDisk"].contains(&c.type_.as_str()))
        .map(|c| c.last_heartbeat_time.map(|t| t.0))
        .collect::<Option<Vec<_>>>()?;
    let newest = *beats.iter().max()?;
    Some((
        newest,
        beats.len() == 2 && beats.iter().all(|b| *b == newest),
    ))
}

#[tokio::test]
async fn an_idle_detector_refreshes_its_heartbeats_on_its_period_and_no_more_often() {
    // The drainer's watchdog takes a node whose detector's heartbeats stop for three periods as
    // silent: this is what proves an idle detector alive.
    let h = Harness::new("heartbeat").await;
    let period = Duration::from_secs(2);
    let options = Options {
        heartbeat: period,
        ..h.options()
    };
    let running = run::start(options, h.cluster.client_for("detector"))
        .await
        .expect("detector starts");
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    let mut beats = vec![heartbeat(&h).await.expect("heartbeats written").0];
    for i in 0..2 {
        let last = beats[i];
        let (next, all) = eventually("the heartbeat refreshed", WAIT, || async {
            heartbeat(&h).await.filter(|(t, _)| *t > last)
        })
        .await;
        assert!(
            all,
            "every condition of the detector carries the new heartbeat"
        );
        beats.push(next);
    }
    for pair in beats.windows(2) {
        let gap = pair[1].as_second() - pair[0].as_second();
        assert!(
            gap >= period.as_secs() as i64,
            "refreshed {gap}s after the last, more often than the period: {beats:?}"
        );
    }
    assert_eq!(
        h.cluster
            .condition(&h.node, "KernelDeadlock")
            .await
            .unwrap()
            .0,
        "False",
        "nothing else changed"
    );
    // The revision of the rules that set them is on the node too (the drainer's common cause
    // compares it).
    let want = nodemedic_detector::config::load_paths(&[h.rules_dir()])
        .unwrap()
        .revision;
    let node = h.cluster.node(&h.node).await;
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get(nodemedic_common::keys::RULES_REVISION_ANNOTATION),
        Some(&want)
    );
    assert_eq!(want.len(), 12);
    h.finish(running).await;
}

#[tokio::test]
async fn a_detector_whose_input_stalls_stops_claiming_health_until_it_reads_again() {
    // The kernel log is a FIFO nobody writes to yet: opening it blocks, as a reader hung on a dead
    // device would, so the input stops beating; after MAX_SILENCE its healthy conditions are
    // Unknown. A writer appearing unblocks it and they are healthy again.
    let h = Harness::new("stalled").await;
    let fifo = h.dir.path().join("kmsg");
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let running = h.start().await;
    let wait = WAIT + nodemedic_detector::source::MAX_SILENCE;
    let stalled = eventually(
        "KernelDeadlock=Unknown (DetectorInputStalled)",
        wait,
        || async {
            h.condition("KernelDeadlock")
                .await
                .filter(|c| c.0 == "Unknown" && c.1 == "DetectorInputStalled")
        },
    )
    .await;
    assert!(stalled.2.contains("has stalled since"), "{stalled:?}");
    // Unblock the reader: open the FIFO for writing and keep it open.
    let writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    drop(writer);
    h.finish(running).await;
}

#[tokio::test]
async fn restart_keeps_true_conditions_and_reports_nothing_again() {
    let mut h = Harness::new("restart").await;
    let running = h.start().await;
    h.kmsg("INFO: task docker:1 blocked for more than 120 seconds.");
    h.kmsg("Out of memory: Killed process 1 (a) total-vm:1kB");
    h.wait_condition("KernelDeadlock", "True", "DockerHung")
        .await;
    h.wait_event("OOMKilling").await;
    // give the checkpoint its (1 s) chance to be written after the reports landed
    eventually("checkpoint written", WAIT, || async {
        std::fs::metadata(h.dir.path().join("state/detector.json")).ok()
    })
    .await;
    running.shutdown().await;
    // Only the detector's own Events: a real cluster's node lifecycle controller writes its own
    // (RegisteredNode) about the same node.
    let events_before = h.own_events().await;
    let status_patches_before = h.status_patches();

    let running = h.start().await;
    // the condition is still True after the restart (NPD would reset it to False), once the detector
    // has read everything again (the lookback) and a line after it
    h.barrier().await;
    assert_eq!(h.condition("KernelDeadlock").await.unwrap().1, "DockerHung");
    assert_eq!(h.condition("KernelDeadlock").await.unwrap().0, "True");
    let events_after = h.own_events().await;
    assert_eq!(
        events_after.len(),
        events_before.len(),
        "nothing re-reported after restart"
    );
    for (a, b) in events_after.iter().zip(&events_before) {
        assert_eq!(
            (a.reason.as_deref(), a.count),
            (b.reason.as_deref(), b.count),
            "no count grew"
        );
    }
    assert!(
        h.status_patches() <= status_patches_before + 1,
        "at most one status write after the restart (nothing changed but the owner check)"
    );
    // and new lines are still seen
    h.kmsg("Out of memory: Killed process 2 (b) total-vm:1kB");
    eventually("second OOM counted", WAIT, || async {
        let evs = h.events("OOMKilling").await;
        evs.iter()
            .any(|e| e.message.as_deref().is_some_and(|m| m.contains("(b)")))
            .then_some(())
    })
    .await;
    h.finish(running).await;
}

#[tokio::test]
async fn a_removed_rule_removes_its_condition_and_a_bad_reload_keeps_the_last_good_rules() {
    let mut h = Harness::new("reload").await;
    let running = h.start().await;
    h.wait_condition("FlakyDisk", "False", "DiskIsFine").await;

    // a bad file: rejected, the old rules stay in force
    std::fs::write(
        h.rules_dir().join("kernel.yaml"),
        RULES.replace("'disk sdz failing.*'", "'disk (sdz'"),
    )
    .unwrap();
    let metrics_url = format!("http://{}/metrics", running.addr);
    eventually("the bad file rejected", WAIT, || async {
        (reloads(&nodemedic_tests::http_get(&metrics_url).await, "failure") >= 1).then_some(())
    })
    .await;
    h.kmsg("disk sdz failing badly");
    h.wait_condition("FlakyDisk", "True", "DiskErrors").await;
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.contains("nodemedic_detector_reloads_total{result=\"failure\"}"),
        "{metrics}"
    );

    // drop FlakyDisk from the rules: it disappears from the node; KernelDeadlock and Ready stay
    let without = rules_without_flaky_disk();
    assert!(!without.contains("FlakyDisk"));
    std::fs::write(h.rules_dir().join("kernel.yaml"), without).unwrap();
    eventually("FlakyDisk removed from the node", WAIT, || async {
        h.condition("FlakyDisk").await.is_none().then_some(())
    })
    .await;
    assert!(h.condition("KernelDeadlock").await.is_some());
    assert!(h.condition("Ready").await.is_some());
    let node = h.cluster.node(&h.node).await;
    assert_eq!(
        node.metadata
            .annotations
            .unwrap()
            .get(nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION)
            .map(String::as_str),
        Some("KernelDeadlock")
    );
    h.finish(running).await;
}

#[tokio::test]
async fn conditions_owned_before_a_restart_but_no_longer_declared_are_removed_at_start() {
    let h = Harness::new("stale").await;
    // A previous version owned "OldProblem"; another tool owns "OtherTool".
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
        kube::Api::all(h.cluster.client.clone());
    let patch = serde_json::json!({
        "metadata": {"annotations": {nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION: "OldProblem"}},
        "status": {"conditions": [
            {"type": "OldProblem", "status": "True", "reason": "X", "message": "x", "lastTransitionTime": "2026-11-22T00:00:00Z", "lastHeartbeatTime": "2026-11-22T00:00:00Z"},
            {"type": "OtherTool", "status": "True", "reason": "Y", "message": "y", "lastTransitionTime": "2026-11-22T00:00:00Z", "lastHeartbeatTime": "2026-11-22T00:00:00Z"}
        ]}
    });
    nodes
        .patch_status(
            &h.node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(patch),
        )
        .await
        .unwrap();
    let running = h.start().await;
    eventually("OldProblem removed", WAIT, || async {
        h.condition("OldProblem").await.is_none().then_some(())
    })
    .await;
    assert!(
        h.condition("OtherTool").await.is_some(),
        "a type we never owned is never touched"
    );
    assert!(h.condition("Ready").await.is_some());
    h.finish(running).await;
}

#[tokio::test]
async fn recovery_pattern_returns_the_condition_to_healthy() {
    let mut h = Harness::new("recover").await;
    let running = h.start().await;
    h.kmsg("disk sdz failing with I/O errors");
    h.wait_condition("FlakyDisk", "True", "DiskErrors").await;
    h.kmsg("disk sdz recovered");
    let (_, _, msg) = h.wait_condition("FlakyDisk", "False", "DiskIsFine").await;
    assert_eq!(msg, "disk is fine");
    let ev = h.wait_event("DiskIsFine").await;
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    h.finish(running).await;
}

#[tokio::test]
async fn api_errors_and_429s_are_retried_and_the_latest_change_lands() {
    // Injected 500/429/503 answers: only the test API server does that on demand.
    let mut h = Harness::fake("faults").await;
    let fake = h.cluster.fake.clone().expect("the test API server");
    let running = h.start_healthy().await;
    fake.fail_next("PATCH", &format!("/nodes/{}/status", h.node), 500, 1);
    fake.fail_next("PATCH", &format!("/nodes/{}/status", h.node), 429, 2);
    fake.fail_next("POST", "/events", 503, 1);
    h.kmsg("INFO: task docker:9 blocked for more than 120 seconds.");
    h.wait_condition("KernelDeadlock", "True", "DockerHung")
        .await;
    h.wait_event("DockerHung").await;
    let failed = fake
        .log()
        .iter()
        .filter(|l| l.path.ends_with("/status") && l.status >= 429)
        .count();
    assert_eq!(failed, 3, "the injected failures were hit and retried past");
    // All three injected failures reach the detector's own retry and are counted.
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    let counted: u64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("nodemedic_detector_report_errors_total{kind=\"conditions\"} ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(counted >= 3, "{metrics}");
    h.finish(running).await;
}

#[tokio::test]
async fn an_event_the_api_keeps_refusing_is_given_up_and_the_checkpoint_moves_on() {
    // A refusal that does not pass (quota, a webhook, RBAC): only the test API server does it on demand.
    let mut h = Harness::fake("refused").await;
    let fake = h.cluster.fake.clone().expect("the test API server");
    let mut opts = h.options();
    opts.events.retry = Duration::from_millis(100);
    opts.events.max_tries = 3;
    let running = run::start(opts, h.cluster.client_for("detector"))
        .await
        .expect("detector starts");
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    fake.fail_next("POST", "/events", 403, 3);
    h.kmsg("Out of memory: Killed process 7 (app)");
    let addr = running.addr;
    eventually("the refused Event to be given up", WAIT, || async move {
        let m = nodemedic_tests::http_get(&format!("http://{addr}/metrics")).await;
        m.contains("nodemedic_detector_reports_given_up_total{kind=\"events\"} 1")
            .then_some(())
    })
    .await;
    let state = h.dir.path().join("state/detector.json");
    eventually("the checkpoint to pass the refused line", WAIT, || async {
        let text = std::fs::read_to_string(&state).unwrap_or_default();
        text.contains(&format!("\"seq\": {}", h.seq)).then_some(())
    })
    .await;
    assert_eq!(
        fake.count("POST", "/events"),
        3,
        "three tries, then nothing more"
    );
    // The next occurrence is a new Event again.
    h.kmsg("Out of memory: Killed process 8 (app)");
    h.wait_event("OOMKilling").await;
    h.finish(running).await;
}

#[tokio::test]
async fn a_hung_call_times_out_a_dropped_one_is_retried_and_both_land() {
    // A server that never answers, and a connection cut before the answer: the test API server only.
    let mut h = Harness::fake("hung").await;
    let fake = h.cluster.fake.clone().expect("the test API server");
    let running = h.start_healthy().await;
    fake.inject(
        "PATCH",
        &format!("/nodes/{}/status", h.node),
        nodemedic_tests::server::FaultKind::Hang,
        1,
    );
    fake.inject(
        "POST",
        "/events",
        nodemedic_tests::server::FaultKind::Drop,
        1,
    );
    h.kmsg("INFO: task docker:9 blocked for more than 120 seconds.");
    // The hung PATCH is abandoned after the call timeout (10 s) and the state written again.
    eventually(
        "the condition after the hung call",
        Duration::from_secs(60),
        || async {
            h.condition("KernelDeadlock")
                .await
                .filter(|c| c.0 == "True" && c.1 == "DockerHung")
        },
    )
    .await;
    h.wait_event("DockerHung").await;
    let dropped = fake.log().iter().filter(|l| l.status == 0).count();
    assert_eq!(dropped, 1, "the dropped connection was hit");
    let m = nodemedic_tests::http_get(&format!("http://{}/healthz", running.addr)).await;
    assert!(
        m.starts_with("ok\n"),
        "a hung API call is not a stuck detector: {m}"
    );
    h.finish(running).await;
}

#[tokio::test]
async fn its_own_node_dated_past_year_9999_does_not_keep_the_detector_from_starting() {
    let h = Harness::new("y9999").await;
    // kube-apiserver takes times up to 9999-12-31T23:59:59Z; our types end 26 hours earlier.
    let nodes: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        h.cluster.client.clone(),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
    );
    nodes
        .patch_status(
            &h.node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(serde_json::json!({"status": {"conditions": [{
                "type": "VendorThing", "status": "False", "reason": "Odd", "message": "m",
                "lastHeartbeatTime": "9999-12-31T23:59:59Z",
                "lastTransitionTime": "9999-12-31T23:59:59Z"}]}})),
        )
        .await
        .expect("the API server takes the date");
    let running = h.start().await;
    eventually("the detector's conditions on the node", WAIT, || async {
        let n = nodes.get(&h.node).await.ok()?;
        let text = serde_json::to_string(&n.data).ok()?;
        text.contains("KernelHasNoDeadlock").then_some(())
    })
    .await;
    let n = nodes.get(&h.node).await.unwrap();
    assert!(
        serde_json::to_string(&n.data)
            .unwrap()
            .contains("9999-12-31T23:59:59Z"),
        "the other condition is left as it was"
    );
    h.finish(running).await;
}

/// A monitor with temporary rules only: it declares no condition, so adding or removing its file
/// changes nothing on the Node.
const EXTRA: &str = r#"
source: extra-monitor
input: {kind: kmsg}
rules:
  - type: temporary
    reason: ExtraThing
    pattern: 'extra thing happened'
"#;

/// `nodemedic_detector_rule_file_checks_total`: the times the rule files were looked at.
fn checks(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("nodemedic_detector_rule_file_checks_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn reloads(metrics: &str, result: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "nodemedic_detector_reloads_total{{result=\"{result}\"}} "
            ))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn at_rest_nothing_is_written_even_when_rule_files_are_read_edited_removed_or_swapped() {
    let h = Harness::new("quiet").await;
    // The rules: a ConfigMap-style directory (kernel.yaml) and a plain one (extra.yaml).
    std::fs::remove_file(h.rules_dir().join("kernel.yaml")).unwrap();
    configmap_write(&h.rules_dir(), 0, RULES);
    let plain = h.dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("extra.yaml"), EXTRA).unwrap();
    let mut opts = h.options();
    opts.rules.push(plain.clone());
    let running = run::start(opts, h.cluster.client_for("detector"))
        .await
        .unwrap();
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    h.wait_condition("FlakyDisk", "False", "DiskIsFine").await;
    let metrics_url = format!("http://{}/metrics", running.addr);
    // The start-up write has landed (both conditions are on the Node, written together).
    let writes = h.status_patches();
    let heartbeat = h.condition("KernelDeadlock").await;
    let metric = |f: fn(&str) -> u64| {
        let url = metrics_url.clone();
        async move { f(&nodemedic_tests::http_get(&url).await) }
    };
    let checked = |n: u64| {
        let url = metrics_url.clone();
        async move {
            eventually(&format!("{n} look(s) at the rule files"), WAIT, || async {
                (checks(&nodemedic_tests::http_get(&url).await) >= n).then_some(())
            })
            .await
        }
    };

    // Reads (what `cat` and the detector's own re-reads do) are no change: not even looked at.
    for _ in 0..20 {
        let _ = std::fs::read_to_string(h.rules_dir().join("kernel.yaml")).unwrap();
        let _ = std::fs::read_to_string(plain.join("extra.yaml")).unwrap();
    }
    // A swap to identical content, and a plain file rewritten with the same bytes: looked at (after
    // the reads, which would have been looked at first), and no reload.
    configmap_write(&h.rules_dir(), 1, RULES);
    std::fs::write(plain.join("extra.yaml"), EXTRA).unwrap();
    checked(1).await;
    let m = nodemedic_tests::http_get(&metrics_url).await;
    assert_eq!(
        reloads(&m, "success"),
        0,
        "nothing changed, nothing reloaded: {m}"
    );

    // An edit that changes no condition, a swap with a comment added, and the removal of a file
    // that declares no condition: each reloads once, none writes the Node.
    std::fs::write(
        plain.join("extra.yaml"),
        EXTRA.replace("extra thing happened", "extra thing occurred"),
    )
    .unwrap();
    eventually("the edit reloaded", WAIT, || async {
        (reloads(&nodemedic_tests::http_get(&metrics_url).await, "success") == 1).then_some(())
    })
    .await;
    configmap_write(&h.rules_dir(), 2, &format!("# edited\n{RULES}"));
    eventually("the swap reloaded", WAIT, || async {
        (reloads(&nodemedic_tests::http_get(&metrics_url).await, "success") == 2).then_some(())
    })
    .await;
    std::fs::remove_file(plain.join("extra.yaml")).unwrap();
    eventually("the removal reloaded", WAIT, || async {
        (reloads(&nodemedic_tests::http_get(&metrics_url).await, "success") == 3).then_some(())
    })
    .await;
    // Quiet afterwards: no reload loop, no writes. A last swap to the same content is looked at and
    // not reloaded; a reload loop (the detector reacting to its own reads) would have looked and
    // reloaded again before it.
    let looked = metric(checks).await;
    configmap_write(&h.rules_dir(), 3, &format!("# edited\n{RULES}"));
    checked(looked + 1).await;
    let m = nodemedic_tests::http_get(&metrics_url).await;
    assert_eq!(reloads(&m, "success"), 3, "no reload loop: {m}");
    assert!(
        !m.contains("monitor=\"extra-monitor\""),
        "the removed monitor's series are gone: {m}"
    );
    assert_eq!(
        h.status_patches(),
        writes,
        "no status write at rest (heartbeat 5m), whatever happened to the rule files"
    );
    assert_eq!(h.condition("KernelDeadlock").await, heartbeat);
    h.finish(running).await;
}

#[tokio::test]
async fn a_line_written_to_the_real_dev_kmsg_is_seen() {
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .is_ok()
        && std::fs::OpenOptions::new()
            .read(true)
            .open("/dev/kmsg")
            .is_ok();
    if !writable {
        eprintln!(
            "skipped a_line_written_to_the_real_dev_kmsg_is_seen: /dev/kmsg is not readable and writable here (needs root / CAP_SYSLOG)"
        );
        return;
    }
    let h = Harness::new("devkmsg").await;
    // The test writes its line from user space, as root: the kernel gives it the user facility (it
    // never lets user space claim the kernel's), which may raise an Event (this one), never set a
    // condition, as the README's test line does.
    let mut opts = h.options();
    opts.kmsg_path = "/dev/kmsg".into();
    let running = run::start(opts, h.cluster.client.clone()).await.unwrap();
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    let marker = format!("nodemedic-test-{}", std::process::id());
    // A harmless line that matches the OOM rule, tagged so it cannot be confused with a real one.
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap()
        .write_all(format!("Out of memory: Killed process 1 ({marker}) total-vm:0kB\n").as_bytes())
        .unwrap();
    eventually("the /dev/kmsg line as an Event", WAIT, || async {
        h.events("OOMKilling")
            .await
            .into_iter()
            .find(|e| e.message.as_deref().is_some_and(|m| m.contains(&marker)))
    })
    .await;
    h.finish(running).await;
}

/// Lay out `dir` like a ConfigMap volume: `..<ts>/kernel.yaml`, `..data -> ..<ts>`,
/// `kernel.yaml -> ..data/kernel.yaml`; a later call swaps `..data` atomically as the kubelet does.
fn configmap_write(dir: &std::path::Path, generation: u32, content: &str) {
    use std::os::unix::fs::symlink;
    let ts = format!("..2026_11_22_00_00_{generation:02}.000000000");
    std::fs::create_dir_all(dir.join(&ts)).unwrap();
    std::fs::write(dir.join(&ts).join("kernel.yaml"), content).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&ts, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    if !dir.join("kernel.yaml").exists() {
        symlink("..data/kernel.yaml", dir.join("kernel.yaml")).unwrap();
    }
    if generation > 0 {
        let _ = std::fs::remove_dir_all(dir.join(format!(
            "..2026_11_22_00_00_{:02}.000000000",
            generation - 1
        )));
    }
}

fn rules_without_flaky_disk() -> String {
    RULES
        .replace("  - type: FlakyDisk\n    reason: DiskIsFine\n    message: disk is fine\n    recovery:\n      pattern: 'disk sdz recovered'\n", "")
        .replace("  - type: permanent\n    condition: FlakyDisk\n    reason: DiskErrors\n    pattern: 'disk sdz failing.*'\n", "")
}

#[tokio::test]
async fn configmap_symlink_swaps_are_reloaded_every_time() {
    let h = Harness::new("configmap").await;
    std::fs::remove_file(h.rules_dir().join("kernel.yaml")).unwrap();
    configmap_write(&h.rules_dir(), 0, RULES);
    let running = h.start_healthy().await;
    h.wait_condition("FlakyDisk", "False", "DiskIsFine").await;

    configmap_write(&h.rules_dir(), 1, &rules_without_flaky_disk());
    eventually("FlakyDisk removed after the first swap", WAIT, || async {
        h.condition("FlakyDisk").await.is_none().then_some(())
    })
    .await;
    configmap_write(&h.rules_dir(), 2, RULES);
    h.wait_condition("FlakyDisk", "False", "DiskIsFine").await;
    h.finish(running).await;
}

#[tokio::test]
async fn a_flood_of_problem_lines_becomes_one_aggregated_event_not_a_storm() {
    let h = Harness::new("flood").await;
    let running = h.start_healthy().await;
    const N: u64 = 20_000;
    let mono = monotonic_now_us();
    let mut text = String::with_capacity(N as usize * 64);
    for i in 0..N {
        text.push_str(&format!(
            "3,{},{mono},-;Out of memory: Killed process {i} (stress) total-vm:1kB\n",
            1_000 + i
        ));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(h.dir.path().join("kmsg"))
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let ev = eventually(
        &format!("one OOMKilling Event with count {N}"),
        Duration::from_secs(60),
        || async {
            let evs = h.events("OOMKilling").await;
            (evs.len() == 1 && evs[0].count == Some(N as i32)).then(|| evs[0].clone())
        },
    )
    .await;
    assert_eq!(
        ev.message.as_deref(),
        Some(&*format!(
            "Out of memory: Killed process {} (stress) total-vm:1kB",
            N - 1
        )),
        "latest message"
    );
    let writes = h.event_writes();
    assert!(
        writes <= 40,
        "{writes} event writes for {N} lines: the aggregator must fold them"
    );
    h.finish(running).await;
}

#[tokio::test]
async fn a_flood_that_only_changes_a_conditions_message_writes_the_node_rarely() {
    let h = Harness::new("msgflood").await;
    // Healthy conditions on the Node: the start-up write has landed.
    let running = h.start_healthy().await;
    let before = h.status_patches();
    let started = std::time::Instant::now();
    // Lines arriving over time, each with its own text (a batch read at once is folded anyway).
    const N: u64 = 40;
    for i in 0..N {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(h.dir.path().join("kmsg"))
            .unwrap();
        writeln!(
            f,
            "3,{},{},-;INFO: task docker:{i} blocked for more than 120 seconds.",
            5_000 + i,
            monotonic_now_us()
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = format!(
        "INFO: task docker:{} blocked for more than 120 seconds.",
        N - 1
    );
    eventually("the last message on the node", WAIT, || async {
        h.condition("KernelDeadlock")
            .await
            .filter(|c| c.0 == "True" && c.2 == last)
    })
    .await;
    let writes = h.status_patches() - before;
    // The transition at once, then a message at most every 10 s: however long a busy machine
    // took to write the lines, never one write per line.
    let allowed = 2 + started.elapsed().as_secs() as usize / 10;
    assert!(
        writes <= allowed,
        "{writes} status PATCHes for {N} lines in {:?}: the transition at once, messages at most every 10 s",
        started.elapsed()
    );
    h.finish(running).await;
}

const CHECKS: &str = r#"
source: health-checker
input: {kind: exec, interval: 200ms, timeout: 500ms, concurrency: 3}
conditions:
  - type: KubeletUnhealthy
    reason: KubeletIsHealthy
    message: kubelet is fine
rules:
  - type: permanent
    condition: KubeletUnhealthy
    reason: KubeletUnhealthy
    exec: {path: /bin/sh, args: [-c, "echo kubelet down; exit 1"]}
  - type: temporary
    reason: BrokenCheck
    exec: {path: /bin/sh, args: [-c, "echo no such tool >&2; exit 3"]}
  - type: temporary
    reason: SlowCheck
    exec: {path: /bin/sh, args: [-c, "sleep 60"]}
"#;

#[tokio::test]
async fn exec_checks_set_conditions_and_a_broken_or_hung_check_stalls_nothing_else() {
    let mut h = Harness::new("exec").await;
    std::fs::write(h.rules_dir().join("checks.yaml"), CHECKS).unwrap();
    // The checks are shell one-liners: the shell's directory is allowed (--check-dir).
    let mut opts = h.options();
    opts.check_dirs = vec!["/bin".into(), "/usr/bin".into()];
    let running = run::start(opts, h.cluster.client_for("detector"))
        .await
        .expect("detector starts");
    let base = format!("http://{}", running.addr);
    // The permanent check's condition, with its output as the message.
    eventually("KubeletUnhealthy True", WAIT, || async {
        h.cluster
            .condition(&h.node, "KubeletUnhealthy")
            .await
            .filter(|(s, r, m)| s == "True" && r == "KubeletUnhealthy" && m == "kubelet down")
    })
    .await;
    // A check that cannot say is named by /healthz, which still answers ok.
    let health = eventually("/healthz names the broken check", WAIT, || async {
        let body = nodemedic_tests::http_get(&format!("{base}/healthz")).await;
        body.contains("check:checks/BrokenCheck: could not say")
            .then_some(body)
    })
    .await;
    assert!(health.starts_with("ok\n"), "{health}");
    // The kernel monitor still reads while one check hangs until its timeout, again and again.
    h.kmsg("Out of memory: Killed process 42 (java)");
    eventually("OOMKilling Event beside the checks", WAIT, || async {
        (h.events("OOMKilling").await.len() == 1).then_some(())
    })
    .await;
    let metrics = nodemedic_tests::http_get(&format!("{base}/metrics")).await;
    for series in [
        "nodemedic_detector_check_runs_total{monitor=\"checks\",result=\"timeout\"}",
        "nodemedic_detector_check_runs_total{monitor=\"checks\",result=\"unknown\"}",
        "nodemedic_detector_check_runs_total{monitor=\"checks\",result=\"problem\"}",
        "problem_gauge{type=\"KubeletUnhealthy\",reason=\"KubeletUnhealthy\"} 1",
        "problem_counter{reason=\"SlowCheck\"} 0",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
    // No temporary Event for a check that could not say (NPD would write BrokenCheck Events).
    let broken = h
        .cluster
        .node_events_from(&h.node, &["health-checker"])
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("BrokenCheck"))
        .count();
    assert_eq!(broken, 0);
    h.finish(running).await;
}

/// The detector run with its node's own credential (`system:node:NAME` in group `system:nodes`,
/// the kubelet's kubeconfig: `deploy/kubelet-credential`): it reports on its Node as with its
/// ServiceAccount, and Node authorization (with NodeRestriction) refuses it any other Node
/// (recording 60). On real kube-apiservers of both supported releases, authorizing as clusters do
/// (Node,RBAC), the identity given by impersonation; on the test API server where none is built.
#[tokio::test]
async fn with_the_nodes_own_credential_the_detector_reports_on_its_node_and_no_other() {
    let planes = nodemedic_tests::envtest::shared_planes();
    if planes.is_empty() {
        let h = Harness::fake("kubelet-cred").await;
        let own = h.cluster.fake.clone().unwrap().client_as_node(&h.node);
        node_credential_on(h, own).await;
    }
    for plane in planes {
        let h = Harness::on(Cluster::on(plane), "kubelet-cred").await;
        let own = plane.client_impersonating_groups(
            &format!("system:node:{}", h.node),
            &["system:nodes", "system:authenticated"],
        );
        node_credential_on(h, own).await;
    }
}

async fn node_credential_on(mut h: Harness, own: kube::Client) {
    let other = h.cluster.create_node("kubelet-cred-other").await;
    let running = run::start(h.options(), own.clone())
        .await
        .expect("detector starts with the node's credential");
    h.wait_condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
        .await;
    h.kmsg("INFO: task docker:77 blocked for more than 120 seconds.");
    h.wait_condition("KernelDeadlock", "True", "DockerHung")
        .await;
    // The same credential writing another node's status: refused.
    let body = serde_json::json!({"status": {"conditions": [{"type": "KernelDeadlock",
        "status": "True", "reason": "Forged", "message": "m"}]}});
    let refused = kube::Api::<k8s_openapi::api::core::v1::Node>::all(own)
        .patch_status(
            &other,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(body),
        )
        .await;
    match refused {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("the node's credential wrote another node: {other:?}"),
    }
    assert_eq!(h.cluster.condition(&other, "KernelDeadlock").await, None);
    running.shutdown().await;
}

/// What the detector's credential may write is found out at start (a dry-run label on its own
/// Node) and named at /healthz: the ServiceAccount under the shipped own-node policy (a token with
/// the node-name claim, on the test API server, which evaluates the policy) is "own node only",
/// and the detector's every write (conditions, its annotations, Events) passes the policy; the
/// ServiceAccount without the policy is "cluster-wide"; a kubeconfig's user is as confined as it is.
#[tokio::test]
async fn healthz_names_what_the_credential_may_write_and_the_detector_works_under_the_policy() {
    use nodemedic_common::client::Credential;
    use nodemedic_tests::server::User;
    let mut h = Harness::fake("credential-mode").await;
    let Some(server) = h.cluster.fake.clone() else {
        unreachable!("Harness::fake runs on the test API server");
    };
    let sa = User::service_account("kube-system", "nodemedic-detector", Some(&h.node));
    // A kubeconfig is tried on another Node too: a kubelet's is refused there, an administrator's
    // is not (it used to be called a kubelet's either way).
    let _other = h.cluster.create_node("credential-other").await;
    let cases = [
        (
            "unconfined",
            Credential::ServiceAccount,
            "ServiceAccount, cluster-wide",
            sa.clone(),
        ),
        (
            "kubeconfig",
            Credential::Kubeconfig,
            "credential: kubeconfig, any node: its user may write every Node",
            User::admin(),
        ),
        (
            "kubelet",
            Credential::Kubeconfig,
            "credential: kubeconfig, own node only",
            User::node(&h.node),
        ),
        (
            "policy",
            Credential::ServiceAccount,
            "ServiceAccount, own node only",
            sa.clone(),
        ),
    ];
    for (case, credential, said, user) in cases {
        if case == "policy" {
            nodemedic_tests::admission::install_own_node_policy(&h.cluster.client).await;
        }
        let mut opts = h.options();
        opts.credential = credential;
        opts.state_file = h.dir.path().join(format!("state-{case}/detector.json"));
        let running = run::start(opts, server.client_as(user))
            .await
            .expect("detector starts");
        let body = nodemedic_tests::http_get(&format!("http://{}/healthz", running.addr)).await;
        assert!(body.starts_with("ok\n"), "{body}");
        assert!(body.contains(said), "{case}: {body}");
        assert!(
            h.cluster
                .node(&h.node)
                .await
                .labels()
                .get(PROBE_LABEL)
                .is_none(),
            "the probe is a dry run"
        );
        if case == "policy" {
            // Under the policy the detector still reports: a condition, its annotations, an Event.
            h.kmsg("INFO: task docker:78 blocked for more than 120 seconds.");
            h.wait_condition("KernelDeadlock", "True", "DockerHung")
                .await;
            h.kmsg("Out of memory: Killed process 78 (policy-test) total-vm:1kB, anon-rss:0kB, file-rss:0kB");
            eventually(
                "the OOMKilling Event under the policy",
                Duration::from_secs(30),
                || async {
                    h.cluster
                        .node_events(&h.node)
                        .await
                        .into_iter()
                        .any(|e| e.reason.as_deref() == Some("OOMKilling"))
                        .then_some(())
                },
            )
            .await;
            let node = h.cluster.node(&h.node).await;
            assert!(
                node.annotations()
                    .contains_key(nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION),
                "its annotation written under the policy"
            );
        }
        running.shutdown().await;
    }
}
