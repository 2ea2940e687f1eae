//! The fuzz targets: every parser and loader that reads what an attacker or a bad day can write.
//! Each must return (an error is fine) and never panic or hang. See `engine.rs`.

use std::sync::{Arc, OnceLock};

use k8s_openapi::jiff::Timestamp;

use super::engine::Target;

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// kmsg records (`/dev/kmsg` and kmsg-format files), then the default rules over the message.
fn kmsg(input: &[u8]) {
    if let Ok(r) = nodemedic_detector::parse::kmsg::parse(input) {
        lines_through_default_rules(&r.message);
    }
}

/// Plain and syslog lines through the default rules (what `detector check` does with a kern.log).
fn syslog(input: &[u8]) {
    let line = String::from_utf8_lossy(input);
    let _ = nodemedic_detector::parse::syslog::split(&line);
    lines_through_default_rules(nodemedic_detector::parse::syslog::message(&line));
}

/// journalctl's JSON lines.
fn journal(input: &[u8]) {
    let line = String::from_utf8_lossy(input);
    if let Ok(e) = nodemedic_detector::parse::journal::parse(&line) {
        lines_through_default_rules(&e.line.text);
    }
}

fn lines_through_default_rules(line: &str) {
    use nodemedic_detector::problem::MonitorState;
    static RULES: OnceLock<nodemedic_detector::config::RuleSet> = OnceLock::new();
    let rules = RULES.get_or_init(nodemedic_detector::config::bundled_defaults);
    let mut out = Vec::new();
    for m in &rules.monitors {
        let mut state = MonitorState::new(Arc::new(m.clone()), &[], now());
        state.process(line, now(), &mut out);
        state.tick(now(), &mut out);
        for r in &out {
            let _ = r.event();
        }
        out.clear();
    }
}

/// A rule file: loaded as the detector loads one, then its monitors compiled and run over lines.
fn rules(input: &[u8]) {
    use nodemedic_detector::problem::MonitorState;
    let text = String::from_utf8_lossy(input).into_owned();
    let Ok(set) =
        nodemedic_detector::config::load_sources(&[(std::path::PathBuf::from("fuzz.yaml"), text)])
    else {
        return;
    };
    let mut out = Vec::new();
    for m in set.monitors {
        let mut state = MonitorState::new(Arc::new(m), &[], now());
        for line in [
            "task docker:9 blocked for more than 120 seconds.",
            "Out of memory: Killed process 1 (x)",
            "",
            "é\u{0}",
        ] {
            state.process(line, now(), &mut out);
        }
        state.tick(now(), &mut out);
        out.clear();
    }
}

/// An NPD monitor file (JSON): loaded as the detector loads one, converted as `convert-npd` does, its
/// monitor run over lines or, for a custom plugin monitor, over each kind of check result.
fn npd(input: &[u8]) {
    use nodemedic_detector::problem::MonitorState;
    use nodemedic_detector::problem::exec::Exit;
    let text = String::from_utf8_lossy(input).into_owned();
    let path = std::path::PathBuf::from("fuzz.json");
    let _ = nodemedic_detector::config::convert_npd(&path, &text);
    let Ok(set) = nodemedic_detector::config::load_sources(&[(path, text)]) else {
        return;
    };
    let mut out = Vec::new();
    for m in set.monitors {
        let checks = m.checks.len();
        let mut state = MonitorState::new(Arc::new(m), &[], now());
        state.process(
            "Killed process 1 (x) total-vm:1kB, anon-rss:1kB, file-rss:0kB",
            now(),
            &mut out,
        );
        for i in 0..checks {
            for exit in [Exit::Problem, Exit::Unknown, Exit::Healthy, Exit::Problem] {
                state.check_result(i, exit, "é output", now(), &mut out);
            }
        }
        for r in &out {
            let _ = r.event();
        }
        out.clear();
    }
}

/// A node selector: as CEL (bounded at compile time), as a label selector and as draino's expr-lang
/// translated to CEL; each compiled and evaluated over a kubelet-shaped node.
fn cel(input: &[u8]) {
    use nodemedic_drainer::config::select::Selector;
    static NODE: OnceLock<nodemedic_drainer::model::node::NodeView> = OnceLock::new();
    let node = NODE.get_or_init(|| {
        let n: k8s_openapi::api::core::v1::Node =
            serde_json::from_str(include_str!("../fixtures/scale/kubelet-like-node.json")).unwrap();
        nodemedic_drainer::model::node::NodeView::of(&n)
    });
    let expr = String::from_utf8_lossy(input);
    if let Ok(sel) = Selector::cel(&expr) {
        let _ = sel.matches(node);
    }
    if let Ok(sel) = Selector::labels(&expr) {
        let _ = sel.matches(node);
    }
    // draino's expr-lang, as `--node-label-expr` takes it when CEL cannot read it.
    if let Ok(translated) = nodemedic_drainer::config::draino::translate_expr(&expr)
        && let Ok(sel) = Selector::cel(&translated)
    {
        let _ = sel.matches(node);
    }
}

/// An AdmissionReview body as the guard receives it (read as the guard reads a request), decided for
/// a synced cache and an unsynced one.
fn admission(input: &[u8]) {
    use kube::core::admission::AdmissionResponse;
    use nodemedic_drainer::guard::{self, GuardConfig, NodeState, Request};
    let Ok(req) = guard::read_review(Some("application/json"), input) else {
        return;
    };
    let request = Request::from_admission(&req);
    let cfg = GuardConfig::default();
    for node in [NodeState::Unknown, NodeState::NotSynced] {
        let _ = guard::decide(&request, &node, &cfg);
    }
    let _ = serde_json::to_vec(&AdmissionResponse::from(&req).into_review());
}

/// The drain record annotation of a node, then the decision over that node.
fn record(input: &[u8]) {
    let raw = String::from_utf8_lossy(input);
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n", "annotations": {nodemedic_common::keys::DRAIN_RECORD_ANNOTATION: raw}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "KernelDeadlock", "status": "True",
            "lastTransitionTime": "2026-11-01T00:00:00Z"}]}
    }))
    .unwrap();
    let view = nodemedic_drainer::model::node::NodeView::of(&node);
    let _ = nodemedic_drainer::model::record::Record::parse(&view);
    let cfg = nodemedic_drainer::config::Config {
        conditions: vec!["KernelDeadlock=True".parse().unwrap()],
        ..Default::default()
    };
    let pods: [nodemedic_drainer::model::pod::PodInfo; 0] = [];
    let _ =
        nodemedic_drainer::decide::decide_views(&[view], &pods, &cfg, &Default::default(), now());
    release_interned();
}

/// The drainer interns the strings of what it caches and lets go of those nothing holds at each
/// resync. Targets that build views do the same after each input: without it every input's strings
/// stay, and near 8M of them the table's resize took seconds (reported as hangs by libFuzzer).
fn release_interned() {
    nodemedic_drainer::model::intern::purge();
}

/// Node and Pod JSON as the watches and `drainer plan` read it (times past year 9999 included).
fn objects(input: &[u8]) {
    use nodemedic_common::lenient::Lenient;
    if let Ok(Lenient::Ok(n)) =
        serde_json::from_slice::<Lenient<k8s_openapi::api::core::v1::Node>>(input)
    {
        let v = nodemedic_drainer::model::node::NodeView::of(&n);
        let _ = nodemedic_drainer::model::record::Record::parse(&v);
    }
    if let Ok(Lenient::Ok(p)) =
        serde_json::from_slice::<Lenient<k8s_openapi::api::core::v1::Pod>>(input)
    {
        let _ = nodemedic_drainer::model::pod::PodInfo::from_pod(&p, None);
    }
    if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(input) {
        nodemedic_common::lenient::clamp_times(&mut v);
    }
    release_interned();
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "kmsg",
        dictionary: &[
            "3,",
            "6,",
            ",-;",
            ",c;",
            ",+;",
            "\n SUBSYSTEM=",
            "\n DEVICE=",
            "Out of memory: Killed process ",
            "task docker:1 blocked for more than 120 seconds.",
        ],
        run: kmsg,
    },
    Target {
        name: "syslog",
        dictionary: &[
            "Nov 24 04:59:53 ",
            "2026-11-24T04:59:53.123+00:00 ",
            "host ",
            "kernel: ",
            "[12345.678901] ",
            "dockerd[1]: ",
            "EXT4-fs error",
            "Remounting filesystem read-only",
        ],
        run: syslog,
    },
    Target {
        name: "journal",
        dictionary: &[
            "\"__CURSOR\":",
            "\"MESSAGE\":",
            "\"SYSLOG_IDENTIFIER\":",
            "\"_SYSTEMD_UNIT\":",
            "\"__REALTIME_TIMESTAMP\":",
            "[1,2,3]",
            "\"18446744073709551615\"",
        ],
        run: journal,
    },
    Target {
        name: "npd",
        dictionary: &[
            "\"plugin\": \"kmsg\"",
            "\"plugin\": \"custom\"",
            "\"plugin\": \"journald\"",
            "\"plugin\": \"filelog\"",
            "\"pluginConfig\": {",
            "\"invoke_interval\": \"1.5h\"",
            "\"timeout\": \"99999999999999h\"",
            "\"max_output_length\": 0",
            "\"concurrency\": 18446744073709551615",
            "\"lookback\": \"0\"",
            "\"bufferSize\": 0",
            "\"patternGeneratedMessageSuffix\": \"$1${lines}\"",
            "\"path\": \"\"",
            "\"args\": [",
            "\"rules\": [",
            "\"conditions\": [",
            "\"type\": \"permanent\"",
            "\"condition\": ",
        ],
        run: npd,
    },
    Target {
        name: "rules",
        dictionary: &[
            "source: ",
            "input: {kind: kmsg}",
            "input: {kind: file, path: /x}",
            "rules:\n",
            "conditions:\n",
            "  - type: permanent\n",
            "    condition: ",
            "    reason: ",
            "    pattern: ",
            "recovery:",
            "lookback: ",
            "bufferSize: ",
            "multiline",
            "&a ",
            "*a",
            "!!binary",
            "(?x)",
            "\\d+",
            "{1000}",
        ],
        run: rules,
    },
    Target {
        name: "cel",
        dictionary: &[
            "metadata.labels",
            "metadata.annotations",
            "metadata.name",
            "status.conditions",
            ".exists(c, ",
            ".all(x, ",
            ".map(",
            ".filter(",
            " in ",
            " && ",
            " || ",
            "!",
            "size(",
            "matches(",
            "'draino'",
            "[1,2,3]",
            "==",
            "+",
            "dyn(",
            "int(",
            "string(",
        ],
        run: cel,
    },
    Target {
        name: "admission",
        dictionary: &[
            "\"apiVersion\":\"admission.k8s.io/v1\"",
            "\"kind\":\"AdmissionReview\"",
            "\"request\":",
            "\"operation\":\"DELETE\"",
            "\"operation\":\"CREATE\"",
            "\"subResource\":\"eviction\"",
            "\"oldObject\":",
            "\"userInfo\":",
            "\"nodeName\":",
            "\"uid\":",
        ],
        run: admission,
    },
    Target {
        name: "record",
        dictionary: &[
            "\"phase\":",
            "\"draining\"",
            "\"drained\"",
            "\"failed\"",
            "\"started\":",
            "\"attempt\":",
            "\"owner\":",
            "9999-12-31T23:59:59Z",
            "\"retryAt\":",
            "4294967295",
        ],
        run: record,
    },
    Target {
        name: "objects",
        dictionary: &[
            "\"metadata\":",
            "\"status\":",
            "\"conditions\":",
            "\"lastTransitionTime\":",
            "\"9999-12-31T23:59:59Z\"",
            "\"spec\":",
            "\"ownerReferences\":",
            "\"nodeName\":",
            "\"taints\":",
            "\"annotations\":",
        ],
        run: objects,
    },
];
