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
        "DockerHung",
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
    assert!(e[0].contains("unclosed group"), "{}", e[0]);
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
    assert!(
        missing.0[0].to_string().contains("cannot read"),
        "{missing}"
    );
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
        errs[0].starts_with("kernel-monitor.yaml:12:") && errs[0].contains("invalid regex"),
        "{errs:?}"
    );
}

#[test]
fn patterns_too_large_to_compile_together_are_a_load_error_not_a_crash() {
    // One 2 MB alternation: each piece is fine, the compiled program exceeds the size limit.
    let alternation: Vec<String> = (0..150_000).map(|i| format!("w{i:06}")).collect();
    let big = GOOD.replace(
        "pattern: 'task docker:\\w+ blocked'",
        &format!("pattern: '({})'", alternation.join("|")),
    );
    let errs = errors(&[("kernel-monitor.yaml", &big)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("kernel-monitor.yaml:12:")
            && errs[0].contains("cannot be compiled together"),
        "{errs:?}"
    );
}

#[test]
fn ten_thousand_rules_load_or_fail_cleanly() {
    let mut file = GOOD.to_string();
    for i in 0..10_000 {
        file.push_str(&format!(
            "  - type: temporary\n    reason: R{i}\n    pattern: 'message number {i} happened'\n"
        ));
    }
    // Either outcome is acceptable; a panic is not.
    match load(&[("kernel-monitor.yaml", &file)]) {
        Ok(rs) => assert_eq!(rs.monitors[0].rules.len(), 10_001),
        Err(e) => assert!(
            e.0[0].to_string().contains("cannot be compiled together"),
            "{e:?}"
        ),
    }
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
