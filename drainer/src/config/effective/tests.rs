use super::*;
use crate::config::build;
use crate::config::flags::parsed as args;

/// The settings `text` builds, as `--config` would.
fn built_from(text: &str) -> crate::config::Config {
    let from = PolicyArgs {
        config: Some("effective.yaml".into()),
        ..Default::default()
    };
    build::build_with_text(&from, text, true).unwrap_or_else(|e| {
        panic!(
            "{text}\ndoes not build: {}",
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

/// The line of `key` in `text`.
fn line_of<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{key}:")) || l.starts_with(&format!("# {key}:")))
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

#[test]
fn the_defaults_written_out_build_the_defaults() {
    let given = args(&["KernelDeadlock=True,10m"]);
    let text = render(&given, None, Whose::Given).unwrap();
    let by_flags = build::build(&given).unwrap();
    let changes = by_flags.changes(&built_from(&text));
    assert!(changes.is_empty(), "{text}\ndiffers: {changes:?}");
    assert_eq!(
        line_of(&text, "drainBuffer"),
        "drainBuffer: \"10m\"  # default"
    );
    assert_eq!(
        line_of(&text, "maxDrainsInFlight"),
        "maxDrainsInFlight: 1  # default"
    );
    assert_eq!(line_of(&text, "cordon"), "cordon: true  # default");
    assert_eq!(line_of(&text, "skipDrain"), "skipDrain: false  # default");
    assert_eq!(line_of(&text, "problemTaints"), "# problemTaints: none");
    assert_eq!(
        line_of(&text, "maxCordonedPerDomain"),
        "# maxCordonedPerDomain: not set (no limit)"
    );
    assert_eq!(
        line_of(&text, "conditions"),
        "conditions: [\"KernelDeadlock=True,10m\"]  # flag"
    );
    for heading in [
        "# Selection",
        "# Budgets",
        "# Safety gates",
        "# Only in the file",
    ] {
        assert!(
            text.lines().any(|l| l == heading),
            "no {heading} in\n{text}"
        );
    }
}

#[test]
fn flags_over_the_file_over_the_defaults_and_each_says_which() {
    let file = "\
conditions: [\"ReadonlyFilesystem\"]
drainBuffer: 20m
maxCordoned: \"3\"
evictEmptydirPods: true
drainWindows: [\"Mon-Fri 09:00-17:00\"]
podPolicies:
  - name: databases
    namespaces: [db]
    action: skip
";
    let mut given = args(&[
        "--drain-buffer=5m",
        "--node-label=pool=blue",
        "--problem-taint=nodemedic.io/problem:NoSchedule",
        "--uncordon-after=15m",
        "KernelDeadlock=True,10m",
    ]);
    given.config = Some("drainer.yaml".into());
    let in_force = build::build_with_text(&given, file, true).unwrap();
    let text = render(&given, Some(("drainer.yaml", file)), Whose::Given).unwrap();
    let changes = in_force.changes(&built_from(&text));
    assert!(changes.is_empty(), "{text}\ndiffers: {changes:?}");
    assert_eq!(line_of(&text, "drainBuffer"), "drainBuffer: \"5m\"  # flag");
    assert_eq!(
        line_of(&text, "maxCordoned"),
        "maxCordoned: \"3\"  # drainer.yaml"
    );
    assert_eq!(
        line_of(&text, "conditions"),
        "conditions: [\"KernelDeadlock=True,10m\"]  # flag"
    );
    assert_eq!(
        line_of(&text, "nodeSelector"),
        "nodeSelector: \"pool=blue\"  # flag --node-label"
    );
    assert!(
        line_of(&text, "podPolicies").ends_with("# drainer.yaml"),
        "{text}"
    );
    assert_eq!(
        line_of(&text, "maxGracePeriod"),
        "maxGracePeriod: \"8m\"  # default"
    );
}

/// draino's `--node-label` joins the file's `nodeSelector`, as the drainer builds it.
#[test]
fn node_labels_join_the_files_selector() {
    let file = "nodeSelector: \"zone=a\"\n";
    let mut given = args(&["--node-label=pool=blue", "KernelDeadlock"]);
    given.config = Some("drainer.yaml".into());
    let in_force = build::build_with_text(&given, file, true).unwrap();
    let text = render(&given, Some(("drainer.yaml", file)), Whose::Given).unwrap();
    assert!(in_force.changes(&built_from(&text)).is_empty(), "{text}");
    assert_eq!(
        line_of(&text, "nodeSelector"),
        "nodeSelector: \"zone=a,pool=blue\"  # flag --node-label"
    );
}

#[test]
fn an_added_condition_joins_the_files_list_and_builds_back() {
    let file = "conditions:\n  - KernelDeadlock=True,10m\n";
    let mut given = args(&["--add-condition=MaintenanceScheduled=True"]);
    given.config = Some("drainer.yaml".into());
    let in_force = build::build_with_text(&given, file, true).unwrap();
    let text = render(&given, Some(("drainer.yaml", file)), Whose::Given).unwrap();
    assert!(in_force.changes(&built_from(&text)).is_empty(), "{text}");
    assert_eq!(
        line_of(&text, "conditions"),
        "conditions: [\"KernelDeadlock=True,10m\",\"MaintenanceScheduled=True\"]  # with --add-condition"
    );
}

#[test]
fn notification_urls_are_counted_never_shown() {
    let file = "notifyUrls: [\"https://hooks.example/services/FILE-TOKEN\"]\n";
    let mut given = args(&[
        "--notify-url=https://hooks.example/services/FLAG-TOKEN",
        "--min-ready-duration=5m",
        "KernelDeadlock",
    ]);
    given.config = Some("drainer.yaml".into());
    let text = render(&given, Some(("drainer.yaml", file)), Whose::Given).unwrap();
    assert!(!text.contains("TOKEN"), "{text}");
    assert!(text.contains("# notifyUrls: 2 (not shown"), "{text}");
    assert!(
        text.contains("--min-ready-duration=5m stays on the command line"),
        "{text}"
    );
}

#[test]
fn a_file_that_is_not_a_map_is_named() {
    let e = render(
        &PolicyArgs::default(),
        Some(("drainer.yaml", "- a\n- b\n")),
        Whose::Given,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "drainer.yaml: not a map of settings");
}

#[test]
fn defaults_are_read_as_help_states_them() {
    assert_eq!(
        default("Drains at once. [default: 1]"),
        Stated::Value(Value::from(1u64))
    );
    assert_eq!(
        default("x [default: true]"),
        Stated::Value(Value::Bool(true))
    );
    assert_eq!(
        default("x [default: 10%]"),
        Stated::Value(Value::from("10%"))
    );
    assert_eq!(default("x [default: never]"), Stated::Unset("never".into()));
    assert_eq!(default("Also evict pods."), Stated::None);
}

/// docs/reference/drainer-config.md is what the code generates, and names every field of a pod
/// policy the file takes.
#[test]
fn the_committed_config_reference_is_what_the_code_generates() {
    let generated = reference();
    for field in [
        "name",
        "namespaces",
        "selector",
        "ownerKinds",
        "priorityClasses",
        "action",
        "maxWait",
        "after",
    ] {
        assert!(
            generated.contains(&format!("| `{field}` |")),
            "podPolicies {field}"
        );
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    nodemedic_common::cli::check_reference(&root, "docs/reference/drainer-config.md", &generated)
        .unwrap();
}

#[test]
fn the_power_cycle_provider_stays_on_the_command_line() {
    let given = args(&[
        "KernelDeadlock=True,10m",
        "--power-cycle-url=https://gw.example/power?key=s3cret",
    ]);
    let text = render(&given, None, Whose::Given).unwrap();
    assert!(
        !text.contains("s3cret") && !text.contains("powerCycle"),
        "{text}"
    );
    assert!(
        text.contains("# the power-cycle provider stays on the command line"),
        "{text}"
    );
    // The file builds what it says (the provider is the command line's to give).
    built_from(&text);
}

#[test]
fn a_ladder_left_unquoted_is_written_back_as_the_string_it_means() {
    for file in [
        "conditions:\n  - KernelDeadlock=True,10m: drain, reboot, replace\n",
        "conditions:\n  - KernelDeadlock=True,10m: [drain, reboot, replace]\n",
    ] {
        let mut given = args(&[]);
        given.config = Some("drainer.yaml".into());
        let in_force = build::build_with_text(&given, file, true).unwrap();
        let text = render(&given, Some(("drainer.yaml", file)), Whose::Given).unwrap();
        assert_eq!(
            line_of(&text, "conditions"),
            "conditions: [\"KernelDeadlock=True,10m: drain, reboot, replace\"]  # drainer.yaml"
        );
        assert!(in_force.changes(&built_from(&text)).is_empty(), "{text}");
    }
}
