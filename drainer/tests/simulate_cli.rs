//! `drainer simulate` over the scenarios shipped in config/scenarios: each runs through the real
//! controller and its expectations hold (the zone outage at 5,000 nodes included), and each prints
//! what it printed before the controller ran them (`tests/fixtures/simulate`, saved from the
//! second implementation simulate used to have; the round count aside, which now follows the
//! controller's own wake-ups). The scenarios of the operator controls (taint-only, probation,
//! pod-policies, silent-detector) and of the common cause (bad-kernel-rollout; zone-outage saved
//! again with its common-cause lines) were saved when they were written, each line checked by
//! hand against what the scenario's description says must happen.

use std::process::Command;

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/scenarios");

fn simulate(files: &[String]) -> (std::process::ExitStatus, Vec<serde_json::Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .arg("simulate")
        .args(files)
        .args(["--output", "json"])
        .output()
        .unwrap();
    let reports = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        out.status,
        reports,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scenario(name: &str) -> String {
    format!("{SCENARIOS}/{name}.yaml")
}

#[test]
fn every_shipped_scenario_meets_its_expectations() {
    let mut files: Vec<String> = std::fs::read_dir(SCENARIOS)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let (status, reports, stderr) = simulate(&files);
    assert!(status.success(), "{stderr}\n{reports:?}");
    for (f, r) in files.iter().zip(&reports) {
        assert_eq!(r["failed"], serde_json::json!([]), "{f}");
    }
}

#[test]
fn a_zone_outage_of_30_percent_of_5000_nodes_drains_nothing() {
    let (status, reports, stderr) = simulate(&[scenario("zone-outage")]);
    assert!(status.success(), "{stderr}");
    let r = &reports[0];
    assert_eq!(r["nodes"], 5000);
    assert_eq!(r["drains"], 0);
    assert_eq!(
        r["cordons"], 0,
        "the breaker opened before any min duration was held"
    );
    assert_eq!(
        r["breaker_opened_at"], 120,
        "in the round of the outage (it starts at +2m)"
    );
    let outages: Vec<&str> = r["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["what"] == "outage started")
        .map(|h| h["detail"].as_str().unwrap())
        .collect();
    let cause = "1500 nodes set Ready=Unknown at once; all 1500 in zone-0, zone-1 or zone-2 (0 of 3500 others do)";
    assert_eq!(
        outages,
        ["zone-0", "zone-1", "zone-2"].map(|z| format!(
            "outage in {z}: 500 of 500 nodes unhealthy > 50%; likely common cause: {cause}"
        ))
    );
    let causes: Vec<&str> = r["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["what"] == "common cause")
        .map(|h| h["detail"].as_str().unwrap())
        .collect();
    assert_eq!(causes, [cause], "one report, naming the zones");
}

#[test]
fn a_bad_kernel_rollout_is_named_and_unrelated_failures_name_nothing() {
    let (status, reports, stderr) =
        simulate(&[scenario("bad-kernel-rollout"), scenario("slow-trickle")]);
    assert!(status.success(), "{stderr}");
    let causes = |r: &serde_json::Value| -> Vec<String> {
        r["happenings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["what"] == "common cause")
            .map(|h| h["detail"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        causes(&reports[0]),
        [
            "4 nodes set KernelDeadlock=True at once; all 4 run kernel 5.15.0-1031-aws (36 of 116 others do)"
        ]
    );
    let breaker = reports[0]["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["what"] == "breaker opened")
        .unwrap();
    assert!(
        breaker["detail"].as_str().unwrap().ends_with(
            "likely common cause: 13 nodes set KernelDeadlock=True within 4m; 12 run kernel 5.15.0-1031-aws (28 of 107 others do)"
        ),
        "{breaker}"
    );
    assert_eq!(
        causes(&reports[1]),
        Vec::<String>::new(),
        "six failures 15 minutes apart"
    );
}

#[test]
fn without_the_safety_gates_the_same_outage_would_cordon_the_budget_and_drain() {
    // The same scenario with the breaker and outage rules turned off shows what they prevent.
    let text = std::fs::read_to_string(scenario("zone-outage"))
        .unwrap()
        .replace(
            "  - --drain-buffer=10m\n",
            "  - --drain-buffer=10m\n  - --max-unhealthy=100%\n  - --breaker-new=100%\n  - --domain-outage=100%\n",
        );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ungated.yaml");
    std::fs::write(&f, text).unwrap();
    let (status, reports, _) = simulate(&[f.display().to_string()]);
    assert_eq!(status.code(), Some(1), "its expectations fail");
    let r = &reports[0];
    assert_eq!(r["max_cordoned_at_once"], 500, "the whole cordon budget");
    assert!(r["drains"].as_u64().unwrap() >= 1);
    assert!(
        r["failed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().starts_with("at most 0 drains")),
        "{r}"
    );
}

#[test]
fn a_scenario_that_cannot_be_read_is_exit_2_with_the_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["simulate", "/nonexistent/scenario.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/scenario.yaml: cannot read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `drainer simulate` of a scenario file `name` holding `text`, which it must refuse (exit 2): the
/// file's path and what it said.
fn refused_scenario(name: &str, text: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(name);
    std::fs::write(&f, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .arg("simulate")
        .arg(&f)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{said}");
    (f.display().to_string(), said)
}

/// A scenario's mistakes are said as a config file's are: each `file:line:column: message`, a
/// misspelt key with the key meant, every one of them.
#[test]
fn a_scenarios_mistakes_are_each_said_with_their_line_and_column() {
    let (file, said) = refused_scenario(
        "typo.yaml",
        "description: typos\nnodes:\n  - count: 3\n    zone: a\n    labbels: {pool: x}\nduraton: 10m\n",
    );
    assert!(
        said.contains(&format!(
            "{file}:5:5: unknown field `labbels`: did you mean `labels`?"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "{file}:6:1: unknown field `duraton`: did you mean `duration`?"
        )),
        "{said}"
    );
    assert!(!said.contains("error: line"), "{said}");
}

/// A bad duration is said where it stands, as a misspelt key is (issue 78: it was said with no
/// place, and only the first), and nothing that only follows from it.
#[test]
fn a_scenarios_bad_durations_are_each_said_with_their_line_and_column() {
    let (file, said) = refused_scenario(
        "durations.yaml",
        "nodes:\n  - {name: n}\nrebootTakes: 3q\nduration: 1h\nsteps:\n  - {at: 1z, nodes: {names: [n]}, set: Ready=False}\n",
    );
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(lines[0].ends_with(&format!("{file}:3:14: invalid duration \"3q\": unknown unit \"q\": s, m, h or d (ms for milliseconds), e.g. 30s, 10m or 1h30m")), "{said}");
    assert!(
        lines[1].starts_with(&format!("{file}:6:10: invalid duration \"1z\"")),
        "{said}"
    );
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/simulate");

/// The text without what depends on the machine or the loop (time taken, round count).
fn comparable(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with("simulated in") && !l.starts_with("== "))
        .map(|l| match l.find(", rounds ") {
            Some(at) => {
                let rest = &l[at + ", rounds ".len()..];
                let after = rest.find(':').map_or("", |i| &rest[i..]);
                format!("{}, rounds N{after}", &l[..at])
            }
            None => l.to_string(),
        })
        .collect()
}

#[test]
fn the_shipped_scenarios_give_the_results_they_gave_before() {
    for name in [
        "flapping-node",
        "kosmos-member-flap",
        "slow-trickle",
        "zone-outage",
        "taint-only",
        "probation",
        "pod-policies",
        "silent-detector",
        "bad-kernel-rollout",
        "reboot-heals",
        "reboot-survives",
        "reboot-never-back",
        "zone-slow-start",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
            .args(["simulate", &scenario(name)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}");
        let before = std::fs::read_to_string(format!("{FIXTURES}/{name}.txt")).unwrap();
        assert_eq!(
            comparable(&String::from_utf8(out.stdout).unwrap()),
            comparable(&before),
            "{name}: text"
        );
        let (status, reports, _) = simulate(&[scenario(name)]);
        assert!(status.success(), "{name}");
        let mut now = reports[0].clone();
        let mut before: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{FIXTURES}/{name}.json")).unwrap(),
        )
        .unwrap();
        for r in [&mut now, &mut before] {
            r.as_object_mut().unwrap().remove("rounds");
        }
        // What the gates held, new since the fixtures: there, and otherwise the same report.
        let held = now.as_object_mut().unwrap().remove("held");
        assert!(held.is_some_and(|h| h.is_array()), "{name}: held");
        assert_eq!(now, before, "{name}: json");
    }
}

/// Seed 001's case (issue 41): the early condition drains the node gracefully, through evictions,
/// and the not-evicted and critical pods stay; no other node is touched.
#[test]
fn an_early_disk_pressure_condition_drains_gracefully_sparing_not_evicted_and_critical_pods() {
    let (status, reports, err) = simulate(&[scenario("early-disk-pressure")]);
    assert!(status.success(), "{err}");
    let happened: Vec<(String, String, String)> = reports[0]["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            (s("what"), s("node"), s("detail"))
        })
        .collect();
    let what: Vec<(&str, &str)> = happened
        .iter()
        .map(|(w, n, _)| (w.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        what,
        [
            ("cordon", "node-3"),
            ("drain", "node-3"),
            ("drained", "node-3")
        ]
    );
    assert!(
        happened[0]
            .2
            .starts_with("ImageFilesystemFillingUp=True for 1m"),
        "{happened:?}"
    );
    // The web and batch pods were evicted; exactly the two kube-system pods that may never be stay.
    assert_eq!(
        happened[2].2,
        "left running: 2 pods: kube-system/node-3-agent (critical pod (priority >= 2000000000)), kube-system/node-3-proxy (not-evicted pod (scheduler.alpha.kubernetes.io/not-evicted-pod))"
    );
}
