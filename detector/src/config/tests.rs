use std::path::PathBuf;
use std::time::Duration;

use super::patterns::MAX_PATTERN_BYTES;
use super::*;

fn load(files: &[(&str, &str)]) -> Result<RuleSet, ConfigErrors> {
    let sources: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(n, t)| (PathBuf::from(n), t.to_string()))
        .collect();
    load_sources(&sources)
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    load(files)
        .unwrap_err()
        .0
        .iter()
        .map(|e| e.to_string())
        .collect()
}

const GOOD: &str = "source: kernel-monitor
input:
  kind: kmsg
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: kernel has no deadlock
rules:
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\\w+ blocked'
";

#[test]
fn bundled_defaults_are_valid_and_keep_npd_names() {
    let rs = bundled_defaults();
    let types = rs.condition_types();
    for t in [
        "KernelDeadlock",
        "ReadonlyFilesystem",
        "CorruptDockerOverlay2",
        "XfsShutdown",
    ] {
        assert!(types.contains(&t.to_string()), "{t} missing from {types:?}");
    }
    let reasons: Vec<&str> = rs
        .monitors
        .iter()
        .flat_map(|m| m.rules.iter().map(|r| r.reason.as_str()))
        .collect();
    for r in [
        "OOMKilling",
        "TaskHung",
        "KernelOops",
        "XfsHasShutdown",
        "FilesystemIsReadOnly",
        "KubeletStart",
        "CorruptDockerImage",
    ] {
        assert!(reasons.contains(&r), "{r} missing");
    }
    let sources: Vec<&str> = rs.monitors.iter().map(|m| m.source.as_str()).collect();
    assert!(sources.contains(&"kernel-monitor") && sources.contains(&"systemd-monitor"));
}

#[test]
fn a_good_file_compiles() {
    let rs = load(&[("k.yaml", GOOD)]).unwrap();
    let m = &rs.monitors[0];
    assert_eq!(m.name, "k");
    assert_eq!(m.buffer_size, DEFAULT_BUFFER_SIZE);
    assert_eq!(m.rules[0].kind, RuleKind::Permanent { condition: 0 });
}

#[test]
fn unknown_field_is_reported_with_its_position() {
    let text = GOOD.replace(
        "    reason: DockerHung\n",
        "    reason: DockerHung\n    patern: x\n",
    );
    let e = errors(&[("k.yaml", &text)]);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("k.yaml:12:5: "), "{}", e[0]);
    assert!(e[0].contains("patern"), "{}", e[0]);
}

#[test]
fn bad_regex_is_reported_at_the_pattern() {
    let text = GOOD.replace("'task docker:\\w+ blocked'", "'task (docker'");
    let e = errors(&[("k.yaml", &text)]);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("k.yaml:12:14: pattern: invalid regex \"task (docker\""),
        "{}",
        e[0]
    );
    // What is wrong, where in the pattern as written: not the matcher's wrapping of it.
    assert!(e[0].ends_with("unclosed group at character 6"), "{}", e[0]);
    assert!(!e[0].contains("(?:"), "{}", e[0]);
}

#[test]
fn permanent_rule_naming_an_undeclared_condition() {
    let text = GOOD.replace("condition: KernelDeadlock", "condition: KernelDeadLock");
    let e = errors(&[("k.yaml", &text)]);
    assert_eq!(
        e,
        vec![
            "k.yaml:10:16: condition: \"KernelDeadLock\" is not declared under `conditions` in this file"
        ]
    );
}

#[test]
fn duplicate_condition_type_across_files_names_both_places() {
    let e = errors(&[("a.yaml", GOOD), ("b.yaml", GOOD)]);
    assert_eq!(
        e,
        vec!["b.yaml:5:11: condition type \"KernelDeadlock\" is already declared at a.yaml:5:11"]
    );
}

#[test]
fn every_error_of_every_file_is_reported() {
    let bad = "source: x
input: {kind: tape}
lookback: soon
rules:
  - type: sometimes
    reason: R
    pattern: ok
  - type: permanent
    reason: R
    pattern: '['
";
    let e = errors(&[("bad.yaml", bad), ("also.yaml", "source: [unclosed")]);
    let joined = e.join("\n");
    assert!(
        joined.contains("bad.yaml:2:15: input.kind \"tape\""),
        "{joined}"
    );
    assert!(
        joined.contains("bad.yaml:3:11: lookback: invalid duration"),
        "{joined}"
    );
    assert!(
        joined.contains("bad.yaml:5:11: rule type \"sometimes\""),
        "{joined}"
    );
    assert!(
        joined.contains("bad.yaml:8:11: permanent rule: `condition` is required"),
        "{joined}"
    );
    assert!(
        joined.contains("bad.yaml:10:14: pattern: invalid regex"),
        "{joined}"
    );
    assert!(joined.contains("also.yaml:"), "{joined}");
}

#[test]
fn file_input_needs_a_path_and_a_known_format() {
    let e = errors(&[("f.yaml", "source: s\ninput: {kind: file, format: xml}\n")]);
    assert_eq!(
        e,
        vec!["f.yaml:2:29: input.format \"xml\": expected `syslog` or `plain`"]
    );
    let e = errors(&[("f.yaml", "source: s\ninput: {kind: file}\n")]);
    assert_eq!(e, vec!["f.yaml:2:15: input: a `file` input needs `path`"]);
}

#[test]
fn recovery_needs_a_pattern_or_a_period() {
    let text = GOOD.replace(
        "    message: kernel has no deadlock\n",
        "    message: kernel has no deadlock\n    recovery: {}\n",
    );
    let e = errors(&[("k.yaml", &text)]);
    assert_eq!(
        e,
        vec!["k.yaml:5:11: recovery: give a pattern, an `after` quiet period, or both"]
    );
}

#[test]
fn load_paths_reads_a_directory_skipping_hidden_entries() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.yaml"), GOOD).unwrap();
    std::fs::create_dir(dir.path().join("..data")).unwrap();
    std::fs::write(dir.path().join("..data/k.yaml"), GOOD).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml").unwrap();
    let rs = load_paths(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(rs.monitors.len(), 1);
    let missing = load_paths(&[dir.path().join("nope")]).unwrap_err();
    // A file as a whole has no position to give: `path: cannot read: ...`, not `path:0:0: ...`.
    assert_eq!(
        missing.0[0].to_string(),
        format!(
            "{}: cannot read: No such file or directory (os error 2)",
            dir.path().join("nope").display()
        )
    );
}

#[test]
fn a_rule_file_whose_name_is_not_utf8_is_read() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"kernel-\xff.yaml");
    std::fs::write(dir.path().join(name), GOOD).unwrap();
    let rs = load_paths(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(rs.monitors.len(), 1);
    assert_eq!(rs.monitors[0].name, "kernel-\u{fffd}");
}

#[test]
fn a_pattern_that_parses_alone_but_not_anchored_is_rejected_at_its_position() {
    // Under (?x) a trailing comment swallows the end anchor the matcher appends: it used to pass
    // validation and abort the detector when the matcher compiled it.
    let file = GOOD.replace(
        "pattern: 'task docker:\\w+ blocked'",
        "pattern: '(?x) task \\s docker # a comment'",
    );
    let errs = errors(&[("kernel-monitor.yaml", &file)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("kernel-monitor.yaml:12:")
            && errs[0].contains("invalid regex")
            && errs[0].contains("end a # comment with a newline"),
        "{errs:?}"
    );
    // A pattern that is wrong on its own gets no such hint.
    let file = GOOD.replace(
        "pattern: 'task docker:\\w+ blocked'",
        "pattern: 'task (docker'",
    );
    let errs = errors(&[("kernel-monitor.yaml", &file)]);
    assert!(
        errs.len() == 1 && errs[0].contains("unclosed group") && !errs[0].contains("(?x)"),
        "{errs:?}"
    );
}

#[test]
fn patterns_too_large_to_compile_together_are_a_load_error_not_a_crash() {
    // Short text, huge program: a Unicode class (letters) repeated is far over the regex size limit
    // once compiled.
    let big = GOOD.replace(
        "pattern: 'task docker:\\w+ blocked'",
        "pattern: '(?:\\pL{100}){100}'",
    );
    let errs = errors(&[("kernel-monitor.yaml", &big)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("kernel-monitor.yaml:12:")
            && errs[0].contains("cannot be compiled together"),
        "{errs:?}"
    );
}

fn alternation(words: usize, from: usize) -> String {
    (from..from + words)
        .map(|i| format!("w{i:06}"))
        .collect::<Vec<_>>()
        .join("|")
}

#[test]
fn patterns_that_add_up_to_more_than_64_kib_are_refused_before_compiling() {
    // One 2 MB alternation (its compile peaked at 381 MB): refused at its own position, unparsed.
    let big = GOOD.replace(
        "pattern: 'task docker:\\w+ blocked'",
        &format!("pattern: '({})'", alternation(300_000, 0)),
    );
    let errs = errors(&[("kernel-monitor.yaml", &big)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "kernel-monitor.yaml:12:14: pattern: the rule files' patterns add up to more than 64 KiB"
        ),
        "{errs:?}"
    );

    // Many patterns that fit alone: the one that goes over is named, once, whatever follows it.
    let mut file = GOOD.to_string();
    for i in 0..20 {
        file.push_str(&format!(
            "  - type: temporary\n    reason: R{i}\n    pattern: '{}'\n",
            alternation(500, i * 500)
        ));
    }
    let errs = errors(&[("kernel-monitor.yaml", &file)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    // 3,999 bytes each (500 words of 7, and the bars): 16 fit beside the first rule's, the 17th
    // (its pattern on line 15 + 3 * 16) goes over.
    assert!(
        errs[0].starts_with("kernel-monitor.yaml:63:14: pattern: the rule files' patterns add up"),
        "{errs:?}"
    );

    // Recovery patterns count too, and just under the budget loads.
    let under = alternation(MAX_PATTERN_BYTES / 8 - 10, 0);
    let with_recovery = GOOD.replace(
        "message: kernel has no deadlock",
        &format!("message: kernel has no deadlock\n    recovery:\n      pattern: '{under}'"),
    );
    if let Err(e) = load(&[("kernel-monitor.yaml", &with_recovery)]) {
        panic!("{e:?}");
    }
    let over = GOOD.replace(
        "message: kernel has no deadlock",
        &format!(
            "message: kernel has no deadlock\n    recovery:\n      pattern: '{}'",
            alternation(MAX_PATTERN_BYTES / 8 + 10, 0)
        ),
    );
    let errs = errors(&[("kernel-monitor.yaml", &over)]);
    assert!(
        errs.len() == 1 && errs[0].contains("recovery.pattern: the rule files' patterns add up"),
        "{errs:?}"
    );

    // The budget spans files (memory is what it bounds): two files of 40 KiB each, the second is
    // refused, the first not.
    let file = |name: &str, from| {
        format!(
            "source: {name}\ninput: {{kind: kmsg}}\nrules:\n  - type: temporary\n    reason: Many\n    pattern: '{}'\n",
            alternation(40 * 1024 / 8, from)
        )
    };
    let errs = errors(&[("a.yaml", &file("a", 0)), ("b.yaml", &file("b", 10_000))]);
    assert!(
        errs.len() == 1
            && errs[0].starts_with("b.yaml:6:14: pattern: the rule files' patterns add up"),
        "{errs:?}"
    );
}

#[test]
fn more_than_128_rules_compiled_on_their_own_are_refused() {
    // Rules with a message template (or a multi-line pattern) get their own regex, ~90 KB each.
    let rules = |n: usize, message: &str| {
        let mut f = GOOD.to_string();
        for i in 0..n {
            f.push_str(&format!(
                "  - type: temporary\n    reason: R{i}\n{message}    pattern: 'problem (\\d+) number {i}'\n"
            ));
        }
        f
    };
    let templated = "    message: 'problem $1'\n";
    assert!(load(&[("kernel-monitor.yaml", &rules(128, templated))]).is_ok());
    let errs = errors(&[("kernel-monitor.yaml", &rules(129, templated))]);
    // The 129th templated rule: its pattern on line 13 + 4 * 128 + 3.
    assert!(
        errs.len() == 1
            && errs[0].starts_with("kernel-monitor.yaml:528:14: pattern: more than 128 rules"),
        "{errs:?}"
    );
    // Without templates they are only in the monitor's set.
    assert!(load(&[("kernel-monitor.yaml", &rules(1000, ""))]).is_ok());
}

#[test]
fn ten_thousand_rules_are_refused_cleanly() {
    let mut file = GOOD.to_string();
    for i in 0..10_000 {
        file.push_str(&format!(
            "  - type: temporary\n    reason: R{i}\n    pattern: 'message number {i} happened'\n"
        ));
    }
    let errs = errors(&[("kernel-monitor.yaml", &file)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("add up to more than 64 KiB"), "{errs:?}");
}

#[test]
fn messages_longer_than_1_kib_are_rejected_where_they_are_written() {
    let long = "x".repeat(2000);
    let file = format!(
        "source: x\ninput: {{kind: kmsg}}\nconditions:\n  - type: Big\n    reason: Fine\n    message: {long}\nrules:\n  - type: temporary\n    reason: Loud\n    pattern: boom\n    message: {long}\n"
    );
    let e = errors(&[("big.yaml", &file)]).join("\n");
    assert!(
        e.contains("big.yaml:4:11: message: 2000 bytes; messages are at most 1024 bytes"),
        "{e}"
    );
    assert!(
        e.contains("big.yaml:9:13: message: a 2000 byte template"),
        "{e}"
    );
}

const EXEC: &str = "source: health-checker
input:
  kind: exec
  interval: 10s
  timeout: 3m
  concurrency: 1
conditions:
  - type: KubeletUnhealthy
    reason: KubeletIsHealthy
    message: kubelet on the node is functioning properly
rules:
  - type: permanent
    condition: KubeletUnhealthy
    reason: KubeletUnhealthy
    exec:
      path: /usr/bin/curl
      args: [-sf, http://127.0.0.1:10248/healthz]
      timeout: 10s
";

#[test]
fn an_exec_file_compiles_with_npd_defaults_where_unset() {
    let rs = load(&[("kubelet.yaml", EXEC)]).unwrap();
    let m = &rs.monitors[0];
    let Input::Exec(s) = &m.input else {
        panic!("{:?}", m.input)
    };
    assert_eq!(
        (s.interval, s.timeout, s.max_output, s.concurrency),
        (Duration::from_secs(10), Duration::from_secs(180), 80, 1)
    );
    assert!(m.rules.is_empty());
    assert_eq!(m.checks.len(), 1);
    let c = &m.checks[0];
    assert_eq!(c.program, PathBuf::from("/usr/bin/curl"));
    assert_eq!(c.args, ["-sf", "http://127.0.0.1:10248/healthz"]);
    assert_eq!(
        (c.timeout, c.interval),
        (Duration::from_secs(10), Duration::from_secs(10))
    );
    assert_eq!(c.kind, RuleKind::Permanent { condition: 0 });
}

#[test]
fn exec_mistakes_are_reported_where_they_are() {
    let bad = "source: x
input: {kind: exec, timeout: 5s, maxOutputLength: 0, concurrency: 100}
lookback: 5m
rules:
  - type: temporary
    reason: A
    pattern: 'x'
  - type: temporary
    reason: B
    exec: {path: /bin/true, timeout: 10s, interval: 0s}
  - type: temporary
    reason: C
    pattern: 'y'
    exec: {path: /bin/true}
";
    let got = errors(&[("x.yaml", bad)]);
    let want = [
        "x.yaml:2:51: input.maxOutputLength: 0 is out of range 1..=1024",
        "x.yaml:2:67: input.concurrency: 100 is out of range 1..=64",
        "x.yaml:3:11: lookback: an exec input has no history to read back",
        "x.yaml:6:13: exec: each rule of an exec input needs",
        "x.yaml:10:38: exec.timeout: 10s is longer than the input's timeout 5s",
        "x.yaml:10:53: exec.interval: must be more than 0s",
        "x.yaml:13:14: pattern: an exec input runs checks",
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.starts_with(w), "{g}\n  should start with\n{w}");
    }
    let log = "source: k\ninput: {kind: kmsg, interval: 5s}\nrules:\n  - type: temporary\n    reason: A\n    exec: {path: /bin/true}\n";
    let got = errors(&[("k.yaml", log)]);
    assert!(
        got[0].starts_with("k.yaml:2:31: input.interval: only an exec input has it"),
        "{got:#?}"
    );
    assert!(got[1].starts_with("k.yaml:6:18: exec: only an `input: {kind: exec}` file runs checks (this one reads kmsg)"), "{got:#?}");
}

#[test]
fn npd_files_load_with_errors_at_their_json_positions() {
    let npd = r#"{
  "plugin": "custom",
  "pluginConfig": {"invoke_interval": "30x", "timeout": "5s"},
  "source": "ntp-custom-plugin-monitor",
  "conditions": [{"type": "NTPProblem", "reason": "NTPIsUp", "message": "ntp service is up"}],
  "rules": [
    {"type": "permanent", "condition": "NTPProblem", "reason": "NTPIsDown", "path": "./check_ntp.sh", "timeout": "7s"}
  ]
}"#;
    let got = errors(&[("ntp.json", npd)]);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("ntp.json:3:39: invalid Go duration \"30x\""),
        "{}",
        got[0]
    );
    assert!(
        got[1]
            .starts_with("ntp.json:7:114: exec.timeout: 7s is longer than the input's timeout 5s"),
        "{}",
        got[1]
    );
    let stats = errors(&[(
        "system-stats-monitor.json",
        r#"{"cpu": {"metricsConfigs": {}}}"#,
    )]);
    assert!(
        stats[0].contains("plugin: missing") && stats[0].contains("--config.system-stats-monitor"),
        "{stats:#?}"
    );
    let other = errors(&[("abrt.json", r#"{"plugin": "abrt", "source": "x"}"#)]);
    assert!(
        other[0].starts_with(
            "abrt.json:1:12: plugin \"abrt\": expected kmsg, journald, filelog or custom"
        ),
        "{other:#?}"
    );
}

#[test]
fn npd_system_log_files_mean_what_they_meant_to_npd() {
    let npd = r#"{
  "plugin": "journald",
  "pluginConfig": {"source": "dockerd"},
  "logPath": "/var/log/journal",
  "source": "docker-monitor",
  "metricsReporting": false,
  "conditions": [],
  "rules": [
    {"type": "temporary", "condition": "Ignored", "reason": "Corrupt", "pattern": "Error \\w+", "patternGeneratedMessageSuffix": " (see $HOME)"}
  ]
}"#;
    let rs = load(&[("docker-monitor.json", npd)]).unwrap();
    let m = &rs.monitors[0];
    assert_eq!(
        m.input,
        Input::Journal {
            identifiers: vec!["dockerd".into()],
            how: crate::parse::journal::IdentifierMatch::SyslogIdentifier,
            units: vec![],
            directory: Some("/var/log/journal".into())
        }
    );
    // No lookback in NPD means 0 (nothing from before the start); bufferSize 0 means 10.
    assert_eq!(m.lookback, Some(Duration::ZERO));
    assert_eq!(m.buffer_size, DEFAULT_BUFFER_SIZE);
    assert_eq!(m.rules[0].message.as_deref(), Some("${lines} (see $$HOME)"));
    assert_eq!(rs.notes.len(), 2, "{:?}", rs.notes);
    // The source is spoofable in NPD's meaning, and said so where it is written.
    assert!(
        rs.notes[0]
            .to_string()
            .starts_with("docker-monitor.json:3:30: pluginConfig.source \"dockerd\" matches SYSLOG_IDENTIFIER as NPD does"),
        "{}",
        rs.notes[0]
    );
    assert!(
        rs.notes[1]
            .to_string()
            .starts_with("docker-monitor.json:6:23: metricsReporting false"),
        "{}",
        rs.notes[1]
    );
}

#[test]
fn unknown_keys_do_not_hide_the_other_errors_of_a_file() {
    let bad = "source: x
input: {kind: kmsg}
rules:
  - type: temporary
    reason: A
    pattern: a
    colour: red
  - type: temporry
    reason: B
    pattern: '('
";
    let got = errors(&[("bad.yaml", bad)]);
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].starts_with("bad.yaml:7:5: unknown field `colour`"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("bad.yaml:8:11: rule type \"temporry\""),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("bad.yaml:10:14: pattern: invalid regex"),
        "{got:#?}"
    );
    // The position is said once, not again inside the message.
    assert!(got.iter().all(|e| !e.contains("line 7 column")), "{got:#?}");
}

#[test]
fn an_indentation_mistake_shows_the_line() {
    let bad = "source: x\ninput: {kind: kmsg}\nrules:\n  - type: temporary\n    reason: A\n    pattern: a\n   - type: temporary\n    reason: B\n    pattern: b\n";
    let got = errors(&[("bad.yaml", bad)]);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].starts_with("bad.yaml:7:4: "), "{got:#?}");
    assert!(got[0].contains("7 |    - type: temporary"), "{}", got[0]);
    assert!(
        got[0].contains("indented 3 spaces, the item above 2"),
        "{}",
        got[0]
    );
}

#[test]
fn a_reason_template_must_start_as_a_reason_and_belongs_to_log_rules() {
    let rule = |reason: &str| {
        format!("{GOOD}  - type: temporary\n    reason: '{reason}'\n    pattern: 'Xid (\\d+)'\n")
    };
    assert!(load(&[("kernel-monitor.yaml", &rule("GpuXid$1"))]).is_ok());
    for bad in ["$1", "9Xid$1", "Gpu-Xid$1"] {
        let errs = errors(&[("kernel-monitor.yaml", &rule(bad))]);
        assert!(
            errs.len() == 1 && errs[0].contains("a template's text before its first capture"),
            "{bad}: {errs:?}"
        );
    }
}
