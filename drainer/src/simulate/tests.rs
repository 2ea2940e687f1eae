//! Scenarios run end to end through the controller on paused time.

use super::scenario::{expand, settings};
use super::*;

fn start() -> Timestamp {
    "2026-11-24T10:00:00Z".parse().unwrap()
}

fn run_text(text: &str) -> Report {
    let s = parse("test.yaml", text).unwrap();
    run("test.yaml", &s, start()).unwrap()
}

#[test]
fn templates_expand_the_index_and_its_modulo() {
    assert_eq!(expand("node-{i}", 7), "node-7");
    assert_eq!(expand("zone-{i%3}", 7), "zone-1");
    assert_eq!(expand("r{i%2}-n{i}", 5), "r1-n5");
}

#[test]
fn a_single_failure_is_cordoned_drained_and_uncordoned_after_recovery() {
    let r = run_text(
        r#"
args: ["KernelDeadlock=True,2m", "--drain-buffer=1m"]
nodes: [{count: 20, name: "n{i}", labels: {zone: "z{i%4}"}, conditions: ["KernelDeadlock=False"]}]
duration: 20m
drainTakes: 30s
steps:
  - {at: 1m, nodes: {names: [n3]}, set: KernelDeadlock=True}
  - {at: 10m, nodes: {names: [n3]}, set: KernelDeadlock=False}
expect:
  breakerNeverOpens: true
  drainsAtLeast: 1
  allUncordonedWithin: 3m
"#,
    );
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    let whats: Vec<(&str, u64)> = r
        .happenings
        .iter()
        .map(|h| (h.what.as_str(), h.at_secs))
        .collect();
    assert_eq!(
        whats,
        vec![
            ("cordon", 180),
            ("drain", 240),
            ("drained", 270),
            ("uncordon", 720)
        ],
        "cordoned 2m after the problem, drained after the 1m buffer, uncordoned 2m after recovery"
    );
}

#[test]
fn bad_scenarios_are_clear_errors() {
    let e = parse("s.yaml", "nodes: []\nduration: 1m\nsteps: []\nnope: 1\n").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("s.yaml:4:1: unknown field `nope`"),
        "{e}"
    );
    let s = parse(
        "s.yaml",
        "args: [\"--max-cordoned=0\"]\nnodes: []\nduration: 1m\n",
    )
    .unwrap();
    let e = run("s.yaml", &s, start()).unwrap_err();
    assert!(e.to_string().contains("--max-cordoned"), "{e}");
    let s = parse(
        "s.yaml",
        "args: [\"Ready=Unknown\"]\nnodes: [{name: a}]\nduration: 1m\nsteps: [{at: 1m, nodes: {names: [b]}, set: Ready=Unknown}]\n",
    )
    .unwrap();
    let e = run("s.yaml", &s, start()).unwrap_err();
    assert!(e.to_string().contains("pick no node"), "{e}");
    for step in [
        "{at: 1m, nodes: {names: [a]}}",
        "{at: 1m, nodes: {names: [a]}, set: Ready=False, detector: stop}",
    ] {
        let text = format!(
            "args: [\"Ready=Unknown\"]\nnodes: [{{name: a}}]\nduration: 1m\nsteps: [{step}]\n"
        );
        let s = parse("s.yaml", &text).unwrap();
        let e = run("s.yaml", &s, start()).unwrap_err();
        assert!(
            e.to_string().contains("give either `set` or `detector`"),
            "{e}"
        );
    }
}

#[test]
fn a_stopped_detector_is_silent_and_a_running_one_never_is() {
    let r = run_text(
        r#"
args: ["KernelDeadlock=True,2m", "--detector-silent-after=10m"]
nodes: [{count: 5, name: "n{i}", conditions: ["KernelDeadlock=False"], detector: true}]
heartbeat: 2m
duration: 30m
steps:
  - {at: 3m, nodes: {names: [n1]}, detector: stop}
  - {at: 20m, nodes: {names: [n1]}, detector: start}
expect:
  silent: [n1]
  drainsAtMost: 0
"#,
    );
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    let whats: Vec<(&str, u64)> = r
        .happenings
        .iter()
        .map(|h| (h.what.as_str(), h.at_secs))
        .collect();
    // Last heard at 2m (the beat at 4m came after the stop): silent from 12m, checked every 3m20s
    // (a third of the limit), heard again after the beat at 20m.
    assert_eq!(whats.len(), 2, "{whats:?}");
    assert_eq!(whats[0].0, "detector silent");
    assert!((720..=920).contains(&whats[0].1), "{whats:?}");
    assert_eq!(whats[1].0, "detector heard");
    assert!((1200..=1400).contains(&whats[1].1), "{whats:?}");
}

/// A backtest of a shipped scenario's history (its changes, as `--history-file` records them,
/// replayed on its nodes under its settings) does what `simulate` does with the scenario: the
/// same actions on the same nodes at the same times.
#[test]
fn a_backtest_of_each_shipped_scenarios_history_does_what_simulate_does() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/scenarios");
    let mut checked = 0;
    for name in [
        "flapping-node",
        "slow-trickle",
        "kosmos-member-flap",
        "taint-only",
        "probation",
        "zone-outage",
    ] {
        let file = format!("{dir}/{name}.yaml");
        let s = parse(&file, &std::fs::read_to_string(&file).unwrap()).unwrap();
        let start = start();
        let mut plan = Plan::of(&file, &s, start).unwrap();
        let simulated = run_plan(&mut Plan::of(&file, &s, start).unwrap()).unwrap();
        // Through a file and back, as a recorded history is read.
        let lines: String = history::of_plan(&plan)
            .iter()
            .map(|t| serde_json::to_string(t).unwrap() + "\n")
            .collect();
        let recorded = history::read("history.jsonl", &lines).unwrap();
        assert_eq!(recorded.skipped, 0);
        let after = plan
            .end
            .duration_since(plan.last_step.unwrap())
            .unsigned_abs();
        let cfg = settings(&file, &s.args).unwrap();
        let nodes = std::mem::take(&mut plan.nodes);
        let mut replay = history::plan(&file, &recorded.transitions, &nodes, cfg, after).unwrap();
        // How long pods take to go and the tick are the stand-in's, not the history's.
        (replay.drain_takes, replay.tick) = (plan.drain_takes, plan.tick);
        let offset = replay.start.duration_since(start).as_secs();
        let backtested = run_plan(&mut replay).unwrap();
        assert_eq!(
            timeline(&backtested, offset),
            timeline(&simulated, 0),
            "{name}"
        );
        checked += simulated.happenings.len();
    }
    assert!(checked > 50, "{checked} happenings compared");
}

/// A report's happenings as (seconds from its start + `shift`, what, node).
fn timeline(r: &Report, shift: i64) -> Vec<(i64, String, Option<String>)> {
    r.happenings
        .iter()
        .map(|h| (h.at_secs as i64 + shift, h.what.clone(), h.node.clone()))
        .collect()
}

/// With `--history-file` the controller records each transition of a watched condition it
/// observes; that file, backtested under the same settings, gives what the controller did.
#[test]
fn the_drainer_records_what_it_observed_and_a_backtest_of_it_does_what_it_did() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/scenarios");
    let file = format!("{dir}/slow-trickle.yaml");
    let s = parse(&file, &std::fs::read_to_string(&file).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    let mut plan = Plan::of(&file, &s, start()).unwrap();
    plan.cfg.history_file = Some(path.clone());
    let live = run_plan(&mut plan).unwrap();
    let recorded =
        history::read("history.jsonl", &std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        recorded.transitions,
        history::of_plan(&plan),
        "every change, as observed"
    );
    let after = plan
        .end
        .duration_since(plan.last_step.unwrap())
        .unsigned_abs();
    let cfg = settings(&file, &s.args).unwrap();
    let mut replay = history::plan(&file, &recorded.transitions, &plan.nodes, cfg, after).unwrap();
    (replay.drain_takes, replay.tick) = (plan.drain_takes, plan.tick);
    let offset = replay.start.duration_since(plan.start).as_secs();
    let backtested = run_plan(&mut replay).unwrap();
    assert_eq!(timeline(&backtested, offset), timeline(&live, 0));
    assert!(live.drains >= 6);
}
