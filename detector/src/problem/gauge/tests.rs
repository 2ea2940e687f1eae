use std::sync::Arc;

use super::*;
use crate::config::load_sources;
use crate::problem::{Condition, MonitorState, Report, Status};

const FILE: &str = r#"
source: resource-monitor
input:
  kind: resources
  filesystems: {imagefs: /var/lib/containerd}
conditions:
  - type: ImageFilesystemPressureSoon
    reason: ImageFilesystemHasRoom
    message: the image filesystem has room
  - type: MemoryStalls
    reason: MemoryDoesNotStall
    message: tasks do not stall on memory
rules:
  - type: permanent
    condition: ImageFilesystemPressureSoon
    reason: ImageFilesystemNearlyFull
    signal: imagefs.available
    below: 20%
    clear: 25%
    for: 1m
  - type: permanent
    condition: ImageFilesystemPressureSoon
    reason: ImageFilesystemFillingUp
    signal: imagefs.available
    reaches: 15%
    within: 30m
    trend: 10m
  - type: permanent
    condition: MemoryStalls
    reason: MemoryPressureStall
    signal: psi.memory.some.avg10
    above: 40
"#;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn state() -> MonitorState {
    state_from(&[])
}

fn state_from(restored: &[Condition]) -> MonitorState {
    let set = load_sources(&[("resource-monitor.yaml".into(), FILE.to_string())]).unwrap();
    let m = Arc::new(set.monitors[0].clone());
    MonitorState::new(m, restored, t(0))
}

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// A reading at `secs` with the image filesystem at `free_pct` of 100 GiB free.
fn disk(secs: i64, free_pct: f64) -> Sample {
    let mut s = Sample {
        at: t(secs),
        ..Sample::default()
    };
    s.values.insert("imagefs.available".into(), free_pct * GIB);
    s.values.insert("imagefs.capacity".into(), 100.0 * GIB);
    s
}

fn psi(secs: i64, v: f64) -> Sample {
    let mut s = Sample {
        at: t(secs),
        ..Sample::default()
    };
    s.values.insert("psi.memory.some.avg10".into(), v);
    s
}

fn feed(state: &mut MonitorState, s: Sample) -> Vec<Report> {
    let mut out = Vec::new();
    state.sample(&s, &mut out);
    out
}

fn image(state: &MonitorState) -> (Status, &str, &str) {
    let c = &state.conditions()[0];
    (c.status, c.reason.as_str(), c.message.as_str())
}

#[test]
fn a_level_must_hold_for_its_duration_and_clears_only_past_its_clear_level() {
    let mut s = state();
    // Falling slowly (no trend problem within 30m): below 20% at 10s, held for 1m at 70s.
    assert!(feed(&mut s, disk(0, 21.0)).is_empty());
    assert!(feed(&mut s, disk(10, 19.9)).is_empty());
    assert!(
        feed(&mut s, disk(40, 21.0)).is_empty(),
        "a blip back resets the minute"
    );
    assert!(feed(&mut s, disk(50, 19.8)).is_empty());
    assert!(feed(&mut s, disk(100, 19.7)).is_empty());
    let out = feed(&mut s, disk(110, 19.6));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        image(&s),
        (
            Status::True,
            "ImageFilesystemNearlyFull",
            "imagefs.available is 19.6 GiB (19.6%), below 20% for 1m"
        )
    );
    // Moving within the band or below writes nothing: the message is the reading that set it.
    for (i, pct) in [19.0, 18.5, 22.0, 24.9, 23.0].iter().enumerate() {
        let out = feed(&mut s, disk(120 + 10 * i as i64, *pct));
        assert!(out.is_empty(), "at {pct}%: {out:?}");
    }
    // At the clear level for a minute: healthy again, with the condition's own words.
    assert!(feed(&mut s, disk(200, 25.0)).is_empty());
    let out = feed(&mut s, disk(260, 26.0));
    assert_eq!(out.len(), 1);
    assert_eq!(
        image(&s),
        (
            Status::False,
            "ImageFilesystemHasRoom",
            "the image filesystem has room"
        )
    );
}

#[test]
fn a_steady_fall_is_reported_before_the_level_with_when_it_will_be_reached() {
    let mut s = state();
    // 50% free, losing 1 GiB a minute: 15% in 35 minutes. Not yet within 30m, and the first
    // five minutes are too little history to say.
    let mut out = Vec::new();
    let mut secs = 0;
    let mut pct = 50.0;
    while out.is_empty() && secs < 3600 {
        out = feed(&mut s, disk(secs, pct));
        secs += 30;
        pct -= 0.5;
    }
    let at = secs - 30;
    let fired_at_pct = pct + 0.5;
    // 15% within 30m at 1%/min: fired at 45% free, after the window held half of 10m.
    assert!(
        (44.0..=45.5).contains(&fired_at_pct),
        "fired at {fired_at_pct}% ({at}s)"
    );
    assert!(
        at >= 300,
        "fired at {at}s, with less than half the trend window"
    );
    let (status, reason, message) = image(&s);
    assert_eq!((status, reason), (Status::True, "ImageFilesystemFillingUp"));
    let now = format!("{fired_at_pct:.1} GiB ({fired_at_pct:.1}%) now");
    assert!(
        message.starts_with("imagefs.available reaches 15% in ")
            && message.contains(" at the last 10m's rate (-1.0 GiB/min); ")
            && message.ends_with(&now),
        "{message}"
    );
    // The fall stops: within 1.5 x 30m no more, healthy again (the level rule never fired).
    let mut secs = at + 30;
    let mut cleared = None;
    while cleared.is_none() && secs < at + 3600 {
        if !feed(&mut s, disk(secs, fired_at_pct)).is_empty() {
            cleared = Some(secs - at);
        }
        secs += 30;
    }
    assert!(cleared.is_some());
    assert_eq!(image(&s).0, Status::False);
}

#[test]
fn the_first_firing_rule_names_the_reason_and_a_change_of_reason_is_reported() {
    let mut s = state();
    // Below 15% at once: the trend rule has no history, but the level is reached.
    let out = feed(&mut s, disk(0, 14.0));
    assert_eq!(out.len(), 1);
    assert_eq!(
        image(&s),
        (
            Status::True,
            "ImageFilesystemFillingUp",
            "imagefs.available has reached 15%: 14.0 GiB (14.0%)"
        )
    );
    // A minute later the level rule fires too; it comes first in the file: a new reason.
    let out = feed(&mut s, disk(60, 14.0));
    assert!(
        matches!(
            &out[..],
            [Report::Condition {
                transition: true,
                ..
            }]
        ),
        "{out:?}"
    );
    assert_eq!(image(&s).1, "ImageFilesystemNearlyFull");
}

#[test]
fn pressure_above_its_level_sets_its_own_condition_and_a_missing_signal_changes_nothing() {
    let mut s = state();
    assert!(feed(&mut s, disk(0, 50.0)).is_empty());
    let out = feed(&mut s, psi(10, 62.5));
    assert_eq!(out.len(), 1);
    let c = &s.conditions()[1];
    assert_eq!(
        (c.status, c.reason.as_str(), c.message.as_str()),
        (
            Status::True,
            "MemoryPressureStall",
            "psi.memory.some.avg10 is 62.5%, above 40.0%"
        )
    );
    // Readings without the signal (a kernel without PSI) neither set nor clear it.
    assert!(feed(&mut s, disk(20, 50.0)).is_empty());
    assert_eq!(s.conditions()[1].status, Status::True);
    // Default clear level: a tenth below 40.
    assert!(feed(&mut s, psi(30, 37.0)).is_empty());
    assert_eq!(feed(&mut s, psi(40, 36.0)).len(), 1);
    assert_eq!(s.conditions()[1].status, Status::False);
}

#[test]
fn a_percentage_without_a_capacity_is_unknown_not_healthy() {
    let mut s = state();
    let mut no_capacity = disk(0, 10.0);
    no_capacity.values.remove("imagefs.capacity");
    assert!(feed(&mut s, no_capacity).is_empty());
    assert_eq!(image(&s).0, Status::False);
}

#[test]
fn a_condition_restored_true_stays_until_its_readings_are_healthy_and_writes_nothing_meanwhile() {
    let restored = Condition {
        type_: "ImageFilesystemPressureSoon".into(),
        status: Status::True,
        reason: "ImageFilesystemFillingUp".into(),
        message: "imagefs.available reaches 15% in 20m".into(),
        transition: t(-600),
    };
    let mut s = state_from(&[restored]);
    // The trend has no history after the restart, and 30% is above both levels: unknown, kept.
    for i in 0..5 {
        assert!(feed(&mut s, disk(i * 30, 30.0 - 0.5 * i as f64)).is_empty());
    }
    assert_eq!(image(&s).1, "ImageFilesystemFillingUp");
    // Steady again for long enough: the trend says healthy, the condition clears.
    let mut secs = 150;
    while image(&s).0 == Status::True && secs < 3600 {
        feed(&mut s, disk(secs, 28.0));
        secs += 30;
    }
    assert_eq!(image(&s).0, Status::False);
    assert!(secs <= 900, "cleared at {secs}s");
}
