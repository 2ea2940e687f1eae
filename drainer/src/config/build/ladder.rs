//! The limits of the remediation ladders (`--reboot-deadline`, `--replace-deadline`,
//! `--max-reboots-per-node-per-day`, `--max-replacements-per-hour`, the slow start's dwell and
//! cooldown): flags over the file over the
//! defaults, a zero deadline refused. The ladders themselves are the conditions'. Pure.

use super::sources::Sources;
use crate::config::Config;

pub(super) fn build(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    let limits = &mut cfg.ladder;
    for (flag, key, value, out) in [
        (
            "reboot-deadline",
            "rebootDeadline",
            (args.reboot_deadline, &file.reboot_deadline),
            &mut limits.reboot_deadline,
        ),
        (
            "replace-deadline",
            "replaceDeadline",
            (args.replace_deadline, &file.replace_deadline),
            &mut limits.replace_deadline,
        ),
    ] {
        match s.duration(value.0, value.1, (flag, key)) {
            Some(d) if d.is_zero() => s.flag_error(format!(
                "--{flag} (or {key}) must be longer than 0s: a step needs time to prove itself"
            )),
            Some(d) => *out = d,
            None => {}
        }
    }
    if let Some(d) = s.duration(
        args.slow_start_dwell,
        &file.slow_start_dwell,
        ("slow-start-dwell", "slowStartDwell"),
    ) {
        cfg.ladder.pacing.dwell = d;
    }
    if let Some(d) = s.duration(
        args.slow_start_cooldown,
        &file.slow_start_cooldown,
        ("slow-start-cooldown", "slowStartCooldown"),
    ) {
        cfg.ladder.pacing.cooldown = d;
    }
    let limits = &mut cfg.ladder;
    if let Some(n) = args
        .max_reboots_per_node_per_day
        .or(file.max_reboots_per_node_per_day)
    {
        limits.max_reboots_per_day = n;
    }
    if let Some(n) = args
        .max_replacements_per_hour
        .or(file.max_replacements_per_hour)
    {
        limits.max_replacements_per_hour = n;
    }
}
