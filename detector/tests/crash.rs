//! kill -9 in a loop while problem lines keep coming: the Event counts on the real API server add up
//! to exactly the lines written, none lost and none counted twice (the checkpoint stores each Event's
//! count with the input positions, and Event names survive the restart; see `report::aggregate`).
//! The detector runs as its own process against the real control plane (KUBEBUILDER_ASSETS) or the
//! test API server.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nodemedic_detector::source::kmsg::monotonic_now_us;
use nodemedic_tests::cluster::{Cluster, eventually};

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
lookback: 5m
rules:
  - type: temporary
    reason: OOMKilling
    pattern: 'Out of memory: Killed process \d+ \((.+)\).*'
  - type: temporary
    reason: TaskHung
    pattern: 'task \S+ blocked for more than \d+ seconds\.'
"#;

struct Kmsg {
    path: std::path::PathBuf,
    seq: u64,
}

impl Kmsg {
    fn append(&mut self, n: usize) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .unwrap();
        for _ in 0..n {
            self.seq += 1;
            let message = if self.seq.is_multiple_of(3) {
                format!(
                    "task worker{}:1 blocked for more than 120 seconds.",
                    self.seq
                )
            } else {
                format!("Out of memory: Killed process {} (app)", self.seq)
            };
            writeln!(f, "3,{},{},-;{message}", self.seq, monotonic_now_us()).unwrap();
        }
    }
}

fn start(dir: &std::path::Path, node: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_detector"))
        .args(["run", "--node-name", node, "--listen", "127.0.0.1:0"])
        .arg("--rules")
        .arg(dir.join("rules"))
        .arg("--kmsg-path")
        .arg(dir.join("kmsg"))
        .arg("--state-file")
        .arg(dir.join("state.json"))
        .args(["--event-interval", "300ms"])
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the detector")
}

fn kill9(mut child: Child) {
    // Child::kill is SIGKILL: no shutdown path runs.
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Sum of the counts of this node's Events by reason.
async fn counts(cluster: &Cluster, node: &str) -> (i64, i64, usize) {
    let events = cluster.node_events_from(node, &["kernel-monitor"]).await;
    let sum = |reason: &str| {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| i64::from(e.count.unwrap_or(1)))
            .sum::<i64>()
    };
    (sum("OOMKilling"), sum("TaskHung"), events.len())
}

// Two workers: the test's blocking waits do not stall the test API server on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_counts_survive_a_kill_9_loop_exactly() {
    // The real control plane with KUBEBUILDER_ASSETS, else the test API server.
    let cluster = Cluster::new().await;
    let node = cluster.create_node("crash").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/kernel.yaml"), RULES).unwrap();
    std::fs::write(dir.path().join("kmsg"), "").unwrap();
    cluster.write_kubeconfig(&dir.path().join("kubeconfig"));
    let mut kmsg = Kmsg {
        path: dir.path().join("kmsg"),
        seq: 0,
    };

    // Kill at varied moments: before the first write, mid-flood, between checkpoints.
    let lifetimes_ms = [150u64, 900, 400, 1300, 250, 700, 1100, 500, 1600, 350];
    for (round, life) in lifetimes_ms.iter().enumerate() {
        let child = start(dir.path(), &node);
        let deadline = std::time::Instant::now() + Duration::from_millis(*life);
        while std::time::Instant::now() < deadline {
            kmsg.append(7 + round);
            std::thread::sleep(Duration::from_millis(40));
        }
        kill9(child);
    }
    kmsg.append(5);
    let written = kmsg.seq as i64;
    let (oom, hung) = (written - written / 3, written / 3);

    let last = start(dir.path(), &node);
    let got = eventually(
        "Event counts to reach the lines written",
        Duration::from_secs(60),
        || async {
            let c = counts(&cluster, &node).await;
            (c.0 >= oom && c.1 >= hung).then_some(c)
        },
    )
    .await;
    // Any late write has landed once the state file's position is the last line: the detector moves
    // it only after every report up to it was accepted. Then the counts must not overshoot either.
    let last_seq = kmsg.seq;
    eventually("the checkpoint at the last line", Duration::from_secs(60), || async {
        let cp = nodemedic_detector::checkpoint::Checkpoint::load(&dir.path().join("state.json"));
        cp.monitors
            .values()
            .any(|p| {
                matches!(p, nodemedic_detector::checkpoint::Position::Kmsg { seq, .. } if *seq >= last_seq)
            })
            .then_some(())
    })
    .await;
    let settled = counts(&cluster, &node).await;
    kill9(last);
    eprintln!(
        "{written} lines over {} kill -9 restarts: OOMKilling {} of {oom}, TaskHung {} of {hung}, in {} Events",
        lifetimes_ms.len(),
        settled.0,
        settled.1,
        settled.2
    );
    assert_eq!((got.0, got.1), (oom, hung));
    assert_eq!(
        (settled.0, settled.1),
        (oom, hung),
        "no occurrence counted twice"
    );
    cluster.delete_node(&node).await;
}
