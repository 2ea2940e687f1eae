//! `drainer backtest --history` as an operator runs it before a rollout: two concatenated `kubectl
//! get events -A -o json` dumps (NPD-style condition Events among others) and a node list, replayed
//! under two policies side by side. The output is exactly the one saved in
//! `tests/fixtures/backtest/expected.txt`, checked by hand when saved: the cautious policy (30m, one
//! at a time) never cordons node-7, whose deadlock lasted 17 minutes; the eager one (5m) does; both
//! uncordon node-3 only after its recovery held its min duration.

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn backtest(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drainer"))
        .current_dir(ROOT)
        .args([
            "backtest",
            "--history",
            "tests/fixtures/backtest/events.json",
        ])
        .args(["--nodes", "tests/fixtures/backtest/nodes.json"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn two_policies_are_compared_on_a_recorded_history() {
    let out = backtest(&[
        "--policy",
        "tests/fixtures/backtest/cautious.yaml",
        "--policy",
        "tests/fixtures/backtest/eager.yaml",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want =
        std::fs::read_to_string(format!("{ROOT}/tests/fixtures/backtest/expected.txt")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn json_gives_each_policys_summary() {
    let out = backtest(&[
        "--policy",
        "tests/fixtures/backtest/eager.yaml",
        "--output",
        "json",
    ]);
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["policy"], "tests/fixtures/backtest/eager.yaml");
    assert_eq!(
        (s["nodes_drained"].as_u64(), s["breaker_openings"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(s["max_cordoned_at_once"], 2);
}

#[test]
fn a_history_needs_a_policy_and_a_bad_file_says_where() {
    let out = backtest(&[]);
    assert_eq!(out.status.code(), Some(2), "clap: --policy is required");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"items\": []}\n{oops").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .current_dir(ROOT)
        .args(["simulate", "--history"])
        .arg(&bad)
        .args(["--policy", "tests/fixtures/backtest/eager.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "an unreadable input: 1");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("bad.json: not JSON at line 2, column 2"), "{e}");
    // A node list given as the history: an error naming it (it named the policy file).
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .current_dir(ROOT)
        .args([
            "simulate",
            "--history",
            "tests/fixtures/backtest/nodes.json",
        ])
        .args(["--policy", "tests/fixtures/backtest/eager.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("tests/fixtures/backtest/nodes.json: no condition transitions in it")
            && !e.contains("eager.yaml"),
        "{e}"
    );
}

#[test]
fn the_operator_guide_shows_a_real_backtest() {
    let readme = std::fs::read_to_string(format!("{ROOT}/docs/operator-guide.md")).unwrap();
    let saved =
        std::fs::read_to_string(format!("{ROOT}/tests/fixtures/backtest/expected.txt")).unwrap();
    assert!(
        readme.contains(&saved),
        "the operator guide's backtest example is not what the backtest prints"
    );
}

/// One name for one thing: `drainer backtest`, `kubectl nodemedic backtest` (the binary under the
/// plugin's name) and the older `drainer simulate --history` print the same backtest.
#[test]
fn backtest_is_one_command_under_both_names() {
    let policy = ["--policy", "tests/fixtures/backtest/eager.yaml"];
    let files = [
        "--history",
        "tests/fixtures/backtest/events.json",
        "--nodes",
        "tests/fixtures/backtest/nodes.json",
    ];
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-nodemedic");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drainer"), &plugin).unwrap();
    let run = |exe: &std::path::Path, sub: &str| {
        let out = Command::new(exe)
            .current_dir(ROOT)
            .arg(sub)
            .args(files)
            .args(policy)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let drainer = std::path::Path::new(env!("CARGO_BIN_EXE_drainer"));
    let ours = run(drainer, "backtest");
    assert!(
        String::from_utf8_lossy(&ours).contains("== policy tests/fixtures/backtest/eager.yaml")
    );
    assert_eq!(run(&plugin, "backtest"), ours, "kubectl nodemedic backtest");
    assert_eq!(run(drainer, "simulate"), ours, "drainer simulate --history");
}

/// A policy with a ladder replays too: node-7's deadlock cleared within its reboot's deadline in
/// the recorded history, so its reboot is proven; node-3's lasted past it, so it is replaced.
#[test]
fn a_policy_with_a_ladder_is_replayed_with_its_reboots_proven_by_the_history() {
    let out = backtest(&["--policy", "tests/fixtures/backtest/ladder.yaml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |what: &str, node: &str| {
        text.lines()
            .any(|l| l.contains(&format!("  {what}")) && l.contains(&format!("{node}:")))
    };
    assert!(line("reboot ", "node-7"), "{text}");
    assert!(line("uncordon", "node-7"), "{text}");
    assert!(text.contains("reboot proven   node-7"), "{text}");
    assert!(line("reboot ", "node-3"), "{text}");
    assert!(line("replace", "node-3"), "{text}");
    assert!(text.contains("the problem survived the reboot"), "{text}");
    assert!(
        !line("uncordon", "node-3"),
        "replaced, never let go: {text}"
    );
}
