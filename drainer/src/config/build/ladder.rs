//! The limits of the remediation ladders (`--restart-deadline`, `--reboot-deadline`, `--replace-deadline`,
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
            "restart-deadline",
            "restartDeadline",
            (args.restart_deadline, &file.restart_deadline),
            &mut limits.restart_deadline,
        ),
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
    power_cycle(s, cfg);
    if let Some(at) = &args.kured_daemonset {
        match at.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                cfg.ladder.kured = Some((ns.to_string(), name.to_string()))
            }
            _ => s.flag_error(format!(
                "--kured-daemonset {at:?}: name kured's DaemonSet as NAMESPACE/NAME (kube-system/kured)"
            )),
        }
    }
    let limits = &mut cfg.ladder;
    limits.control_plane = args.remediate_control_plane;
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

/// The power-cycle provider (flags only), and every ladder naming the step given one.
fn power_cycle(s: &mut Sources, cfg: &mut Config) {
    use crate::config::ladder::PowerCycle;
    let args = s.args;
    let provider = args.power_cycle_provider.as_deref();
    if args.remediation_template.is_some() && provider != Some("medik8s") {
        s.flag_error(
            "--remediation-template is for --power-cycle-provider=medik8s, which is not given",
        );
    }
    match provider {
        Some(p @ ("metal3" | "medik8s")) => {
            if args.power_cycle_url.is_some()
                || args.power_cycle_token_file.is_some()
                || args.power_cycle_ca_file.is_some()
                || args.power_cycle_allow_http
            {
                s.flag_error(format!("--power-cycle-provider={p} does not ask an endpoint: --power-cycle-url, --power-cycle-token-file, --power-cycle-ca-file and --power-cycle-allow-http are for the http provider"));
            }
            if p == "metal3" {
                cfg.ladder.power_cycle = Some(PowerCycle::Metal3);
            } else {
                cfg.ladder.power_cycle = medik8s(s);
            }
        }
        _ => {
            if let Some(url) = &args.power_cycle_url {
                // Its own flag, on the command line alone: the notifications' allowance would send
                // the power-cycle's bearer token in the clear too.
                match crate::config::url::check(url, args.power_cycle_allow_http) {
                    Ok(url) => {
                        if let Some(ca) = &args.power_cycle_ca_file
                            && let Err(e) = crate::config::ca::read(ca)
                        {
                            s.flag_error(format!("--power-cycle-ca-file: {e}"));
                        }
                        cfg.ladder.power_cycle = Some(PowerCycle::Http {
                            url,
                            token_file: args.power_cycle_token_file.clone(),
                            ca_file: args.power_cycle_ca_file.clone(),
                        });
                    }
                    Err(crate::config::url::UrlError::PlainHttp { url }) => s.flag_error(format!(
                        "--power-cycle-url {url}: plain http sends the power-cycle's bearer token in the clear; use https, or allow it with --power-cycle-allow-http"
                    )),
                    Err(e) => s.flag_error(format!("--power-cycle-url: {e}")),
                }
            } else if args.power_cycle_token_file.is_some()
                || args.power_cycle_ca_file.is_some()
                || args.power_cycle_allow_http
            {
                s.flag_error(
                    "--power-cycle-token-file, --power-cycle-ca-file and --power-cycle-allow-http are for --power-cycle-url, which is not given",
                );
            } else if provider.is_some() {
                s.flag_error("--power-cycle-provider=http needs --power-cycle-url");
            }
        }
    }
    if cfg.ladder.power_cycle.is_none()
        && let Some(c) = cfg
            .conditions
            .iter()
            .find(|c| c.ladder.is_some_and(|l| l.power_cycle))
    {
        s.flag_error(format!(
            "{c}: a power-cycle reboots the node from outside, through --power-cycle-url or --power-cycle-provider=metal3|medik8s, none of which is given"
        ));
    }
}

/// The medik8s provider: its template, which must be named.
fn medik8s(s: &mut Sources) -> Option<crate::config::ladder::PowerCycle> {
    let Some(named) = &s.args.remediation_template else {
        s.flag_error(
            "--power-cycle-provider=medik8s needs --remediation-template (KIND/NAMESPACE/NAME)",
        );
        return None;
    };
    match crate::model::medik8s::Template::parse(named) {
        Ok(t) => Some(crate::config::ladder::PowerCycle::Medik8s(t)),
        Err(e) => {
            s.flag_error(format!("--remediation-template: {e}"));
            None
        }
    }
}
