use super::*;
use crate::config::load_sources;

const RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: kernel has no deadlock
  - type: Flaky
    reason: NotFlaky
    message: fine
    recovery:
      pattern: 'flaky thing recovered'
      after: 10m
rules:
  - type: temporary
    reason: OOMKilling
    pattern: 'Killed process .*'
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\w+ blocked.*'
  - type: permanent
    condition: Flaky
    reason: FlakyThing
    pattern: 'flaky thing broke.*'
"#;

fn monitor() -> Arc<Monitor> {
    Arc::new(
        load_sources(&[("kernel-monitor.yaml".into(), RULES.into())])
            .unwrap()
            .monitors
            .remove(0),
    )
}

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn run(state: &mut MonitorState, line: &str, at: Timestamp) -> Vec<Report> {
    let mut out = Vec::new();
    state.process(line, at, &mut out);
    out
}

#[test]
fn starts_healthy_and_benign_lines_report_nothing() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    assert!(s.conditions().iter().all(|c| c.status == Status::False));
    assert_eq!(s.conditions()[0].reason, "KernelHasNoDeadlock");
    assert!(run(&mut s, "all is well", t(1)).is_empty());
}

#[test]
fn temporary_rule_reports_a_problem_and_changes_no_condition() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    let out = run(&mut s, "Killed process 1 (x)", t(1));
    assert_eq!(
        out,
        vec![Report::Problem {
            reason: "OOMKilling".into(),
            message: "Killed process 1 (x)".into(),
            at: t(1),
        }]
    );
    let ev = out[0].event().unwrap();
    assert_eq!(
        (ev.severity, ev.at, ev.problem),
        (nodemedic_common::events::Severity::Warning, t(1), true),
        "a finished Event, stamped with the line's own time"
    );
    assert!(s.conditions().iter().all(|c| c.status == Status::False));
}

#[test]
fn permanent_rule_sets_condition_once_and_stays_true_without_recovery() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    let out = run(&mut s, "task docker:5 blocked for more", t(5));
    assert_eq!(out.len(), 1);
    let Report::Condition {
        condition,
        transition,
        ..
    } = &out[0]
    else {
        panic!("{out:?}")
    };
    assert!(transition);
    assert_eq!(
        (condition.status, condition.reason.as_str()),
        (Status::True, "DockerHung")
    );
    let ev = out[0].event().unwrap();
    assert_eq!(
        (ev.severity, ev.reason.as_str(), ev.at),
        (
            nodemedic_common::events::Severity::Warning,
            "DockerHung",
            t(5)
        )
    );
    assert_eq!(condition.transition, t(5));
    // the same line again: nothing new
    assert!(run(&mut s, "task docker:5 blocked for more", t(6)).is_empty());
    // no recovery configured: time alone does not clear it
    let mut out = Vec::new();
    s.tick(t(100_000), &mut out);
    assert!(out.is_empty());
    assert_eq!(s.conditions()[0].status, Status::True);
}

#[test]
fn a_new_message_updates_the_condition_without_a_transition() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    run(&mut s, "task docker:5 blocked for more", t(5));
    let out = run(&mut s, "task docker:6 blocked for more", t(7));
    let Report::Condition {
        condition,
        transition,
        ..
    } = &out[0]
    else {
        panic!()
    };
    assert!(!transition);
    assert_eq!(out[0].event(), None, "a new message alone writes no Event");
    assert_eq!(
        condition.transition,
        t(5),
        "lastTransitionTime only moves when the status changes"
    );
    assert_eq!(condition.message, "task docker:6 blocked for more");
}

#[test]
fn recovery_pattern_returns_condition_to_its_healthy_default() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    run(&mut s, "flaky thing broke badly", t(1));
    assert_eq!(s.conditions()[1].status, Status::True);
    let out = run(&mut s, "flaky thing recovered", t(2));
    let Report::Condition {
        condition,
        transition,
        ..
    } = &out[0]
    else {
        panic!()
    };
    assert!(transition);
    assert_eq!(
        out[0].event().map(|e| (e.severity, e.problem)),
        Some((nodemedic_common::events::Severity::Normal, false))
    );
    assert_eq!(
        (
            condition.status,
            condition.reason.as_str(),
            condition.message.as_str()
        ),
        (Status::False, "NotFlaky", "fine")
    );
    // a recovery line while healthy reports nothing
    assert!(run(&mut s, "flaky thing recovered", t(3)).is_empty());
}

#[test]
fn quiet_period_recovers_counting_from_the_last_problem_line() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    run(&mut s, "flaky thing broke", t(0));
    run(&mut s, "flaky thing broke again", t(300));
    let mut out = Vec::new();
    s.tick(t(600), &mut out);
    assert!(out.is_empty(), "only 5 minutes since the last problem line");
    s.tick(t(900), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(s.conditions()[1].status, Status::False);
}

#[test]
fn restored_true_condition_stays_true_and_false_ones_are_reset_to_defaults() {
    let restored = vec![
        Condition {
            type_: "KernelDeadlock".into(),
            status: Status::True,
            reason: "DockerHung".into(),
            message: "m".into(),
            transition: t(-50),
        },
        Condition {
            type_: "Flaky".into(),
            status: Status::False,
            reason: "Whatever".into(),
            message: "x".into(),
            transition: t(-50),
        },
    ];
    let s = MonitorState::new(monitor(), &restored, t(0));
    assert_eq!(s.conditions()[0], restored[0]);
    assert_eq!(s.conditions()[1].reason, "NotFlaky");
}

#[test]
fn reconfigure_keeps_true_conditions_of_types_that_still_exist() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    run(&mut s, "task docker:5 blocked for more", t(5));
    s.reconfigure(monitor(), t(10));
    assert_eq!(s.conditions()[0].status, Status::True);
    assert_eq!(s.conditions()[0].transition, t(5));
}

#[test]
fn reconfigure_keeps_healthy_conditions_unchanged_unless_their_default_changed() {
    let mut s = MonitorState::new(monitor(), &[], t(0));
    let before = s.conditions().to_vec();
    s.reconfigure(monitor(), t(10));
    assert_eq!(
        s.conditions(),
        &before[..],
        "same rules: the same conditions, transition times included (no node write)"
    );
    let edited = Arc::new(
        load_sources(&[(
            "kernel-monitor.yaml".into(),
            RULES.replace("message: fine", "message: all fine"),
        )])
        .unwrap()
        .monitors
        .remove(0),
    );
    s.reconfigure(edited, t(20));
    assert_eq!(s.conditions()[0], before[0], "KernelDeadlock unchanged");
    assert_eq!(s.conditions()[1].message, "all fine");
    assert_eq!(
        s.conditions()[1].transition,
        t(20),
        "a new default is a new condition"
    );
}

#[test]
fn transition_message_uses_npd_wording() {
    let c = Condition {
        type_: "KernelDeadlock".into(),
        status: Status::True,
        reason: "DockerHung".into(),
        message: "task x".into(),
        transition: t(0),
    };
    assert_eq!(
        Report::transition_message(&c),
        r#"Node condition KernelDeadlock is now: True, reason: DockerHung, message: "task x""#
    );
}

#[test]
fn input_events_are_applied_as_lines_while_bad_records_change_nothing() {
    use crate::checkpoint::Position;
    let mut s = MonitorState::new(monitor(), &[], t(0));
    let mut out = Vec::new();
    let position = Position::Kmsg {
        boot_id: "b".into(),
        seq: 1,
    };
    s.apply(&SourceEvent::Malformed { why: "x".into() }, &mut out);
    s.apply(&SourceEvent::Overrun, &mut out);
    assert!(out.is_empty());
    let line = |text: &str| SourceEvent::Line {
        text: text.into(),
        at: t(5),
        position: position.clone(),
        user: false,
    };
    s.apply(
        &line("task docker:abc blocked for more than 120 seconds."),
        &mut out,
    );
    assert!(matches!(
        &out[..],
        [Report::Condition { condition, transition: true, .. }]
            if condition.type_ == "KernelDeadlock" && condition.status == Status::True
    ));
}

#[test]
fn only_conditions_set_since_the_machine_booted_are_restored() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n"},
        "status": {"conditions": [
            {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung",
             "lastTransitionTime": "2026-11-27T09:00:00Z"},
            {"type": "Flaky", "status": "True", "reason": "FlakyThing",
             "lastTransitionTime": "2026-11-27T11:00:00Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-27T09:00:00Z"},
        ]}
    }))
    .unwrap();
    let booted: Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
    let (kept, before) = Condition::true_this_boot(&node, Some(booted));
    let names = |cs: &[Condition]| cs.iter().map(|c| c.type_.clone()).collect::<Vec<_>>();
    assert_eq!(names(&kept), ["Flaky"]);
    assert_eq!(
        names(&before),
        ["KernelDeadlock"],
        "found before the reboot"
    );
    let (kept, before) = Condition::true_this_boot(&node, None);
    assert_eq!(
        (names(&kept).len(), before.len()),
        (2, 0),
        "boot time unknown: kept, as before"
    );
}

/// Issue 76: a /dev/kmsg record written from user space (root anywhere on the node can write one,
/// and the kernel never lets it claim the kernel's facility) may raise an Event, but neither sets
/// nor clears a condition, unless its monitor says `input.userSpace: true`.
#[test]
fn a_line_written_from_user_space_raises_events_but_moves_no_condition_unless_allowed() {
    let user_line = |text: &str| SourceEvent::Line {
        text: text.into(),
        at: t(5),
        position: crate::checkpoint::Position::Kmsg {
            boot_id: "b".into(),
            seq: 1,
        },
        user: true,
    };
    let mut s = MonitorState::new(monitor(), &[], t(0));
    let mut out = Vec::new();
    s.apply(&user_line("Killed process 1 (x)"), &mut out);
    assert!(
        matches!(&out[..], [Report::Problem { reason, .. }] if reason == "OOMKilling"),
        "{out:?}"
    );
    out.clear();
    s.apply(&user_line("task docker:abc blocked for 120 s"), &mut out);
    s.apply(&user_line("flaky thing broke"), &mut out);
    assert!(out.is_empty(), "no condition moved: {out:?}");
    // A condition the kernel set is not cleared by a recovery line from user space.
    run(&mut s, "flaky thing broke", t(6));
    out.clear();
    s.apply(&user_line("flaky thing recovered"), &mut out);
    assert!(out.is_empty(), "{out:?}");
    // A monitor that says so takes them all.
    let allowed = load_sources(&[(
        "kernel-monitor.yaml".into(),
        RULES.replace(
            "input: {kind: kmsg}",
            "input: {kind: kmsg, userSpace: true}",
        ),
    )])
    .unwrap()
    .monitors
    .remove(0);
    let mut s = MonitorState::new(Arc::new(allowed), &[], t(0));
    s.apply(&user_line("task docker:abc blocked for 120 s"), &mut out);
    assert!(
        matches!(&out[..], [Report::Condition { condition, .. }] if condition.type_ == "KernelDeadlock"),
        "{out:?}"
    );
}
