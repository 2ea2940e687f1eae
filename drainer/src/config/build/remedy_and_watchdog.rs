//! The remedy and watchdog settings from the flags over the file, and what they must satisfy
//! together (`config::remedy`). Pure.

use super::sources::Sources;
use crate::config::{Budget, Config, Taint};

/// A probation taint: `KEY[=VALUE]`, or with its effect, which must be PreferNoSchedule.
fn probation_taint(v: &str) -> Result<Taint, String> {
    let with_effect = if v.contains(':') {
        v.to_string()
    } else {
        format!("{v}:PreferNoSchedule")
    };
    let t: Taint = with_effect.parse().map_err(|e| format!("{e}"))?;
    if t.effect != "PreferNoSchedule" {
        return Err(format!(
            "{v:?}: a probation taint is PreferNoSchedule (the node takes work back gradually)"
        ));
    }
    Ok(t)
}

/// `NAMESPACE/NAME`, or empty (none).
fn daemonset(v: &str) -> Result<Option<(String, String)>, String> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    match v.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(Some((ns.to_string(), name.to_string())))
        }
        _ => Err(format!("{v:?}: expected NAMESPACE/NAME")),
    }
}

/// The remedy and watchdog settings, from the flags over the file.
pub(super) fn build(s: &mut Sources, cfg: &mut Config) {
    let (args, file) = (s.args, s.file);
    cfg.remedy.taints = s.each(
        &args.problem_taints,
        &file.problem_taints,
        ("problem-taint", "problemTaints"),
        str::parse::<Taint>,
    );
    if let Some(c) = args.cordon.or(file.cordon) {
        cfg.remedy.cordon = c;
    }
    if let Some(d) = s.duration(
        args.uncordon_after,
        &file.uncordon_after,
        ("uncordon-after", "uncordonAfter"),
    ) {
        cfg.remedy.uncordon_after = d;
    }
    cfg.remedy.probation_taint = s.pick(
        args.probation_taint.as_deref(),
        &file.probation_taint,
        ("probation-taint", "probationTaint"),
        probation_taint,
    );
    if let Some(d) = s.duration(
        args.detector_silent_after,
        &file.detector_silent_after,
        ("detector-silent-after", "detectorSilentAfter"),
    ) {
        cfg.watchdog.silent_after = (!d.is_zero()).then_some(d);
    }
    if let Some(ds) = s.pick(
        args.detector_daemonset.as_deref(),
        &file.detector_daemonset,
        ("detector-daemonset", "detectorDaemonSet"),
        daemonset,
    ) {
        cfg.watchdog.daemonset = ds;
    }
    cfg.history_file = args.history_file.clone().or(file.history_file.clone());
    cfg.watchdog.conditions = s.each(
        &args.detector_conditions,
        &file.detector_conditions,
        ("detector-conditions", "detectorConditions"),
        |v: &str| match v.trim() {
            "" => Err("an empty condition type"),
            t => Ok(t.to_string()),
        },
    );
    check(s, cfg);
}

/// What the settings together must satisfy.
fn check(s: &mut Sources, cfg: &Config) {
    let r = &cfg.remedy;
    if !r.cordon && r.taints.is_empty() {
        s.flag_error(
            "--cordon=false needs at least one --problem-taint: otherwise nothing marks a problem node",
        );
    }
    let off = |b: Budget| b == Budget::Percent(100.0);
    let breaker_off = off(cfg.safety.max_unhealthy) && off(cfg.safety.breaker_new);
    if r.evicts() && (breaker_off || off(cfg.max_cordoned)) {
        s.flag_error(
            "a NoExecute --problem-taint evicts every pod that does not tolerate it at once, \
             PodDisruptionBudgets aside: it needs the circuit breaker (--max-unhealthy or \
             --breaker-new under 100%) and a cordon budget (--max-cordoned under 100%)",
        );
    }
    if r.probation_taint.is_some() && r.uncordon_after.is_zero() {
        s.flag_error("--probation-taint needs --uncordon-after (the probation it is for)");
    }
    if let Some(p) = &r.probation_taint
        && r.taints
            .iter()
            .any(|t| t.key == p.key && t.effect == p.effect)
    {
        s.flag_error(format!(
            "--probation-taint {p} is also a --problem-taint: probation would not change it"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::build::build;
    use crate::config::flags::PolicyArgs;
    use crate::config::remedy::DEFAULT_SILENT_AFTER;
    use std::time::Duration;

    fn args(extra: &[&str]) -> Result<Config, Vec<String>> {
        use clap::Parser;
        #[derive(Parser)]
        struct A {
            #[command(flatten)]
            p: PolicyArgs,
        }
        let argv = ["drainer", "KernelDeadlock=True"].iter().chain(extra);
        let a = A::try_parse_from(argv).map_err(|e| vec![e.to_string()])?;
        build(&a.p).map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_power_cycle_needs_its_provider_on_the_command_line() {
        let e = args(&["KernelDeadlock=True: drain, reboot, power-cycle"]).unwrap_err();
        assert!(
            e.iter().any(|e| e.contains("none of which is given")),
            "{e:?}"
        );
        let e = args(&["--power-cycle-url=http://gw.example/p"]).unwrap_err();
        assert!(e.iter().any(|e| e.contains("plain http")), "{e:?}");
        // The notifications' allowance does not send the power-cycle's token in the clear; its own does.
        let e = args(&[
            "--power-cycle-url=http://gw.example/p",
            "--notify-allow-http",
        ])
        .unwrap_err();
        assert!(
            e.iter().any(|e| e.contains("--power-cycle-allow-http")),
            "{e:?}"
        );
        let c = args(&[
            "--power-cycle-url=http://gw.example/p",
            "--power-cycle-allow-http",
        ])
        .unwrap();
        assert!(c.ladder.power_cycle.is_some());
        // A CA file is read at start: one that holds no certificate is refused, by name.
        let e = args(&[
            "--power-cycle-url=https://gw.example/p",
            "--power-cycle-ca-file=/nonexistent/ca.pem",
        ])
        .unwrap_err();
        assert!(
            e.iter()
                .any(|e| e.contains("--power-cycle-ca-file: /nonexistent/ca.pem")),
            "{e:?}"
        );
        let e = args(&["--power-cycle-ca-file=/ca.pem"]).unwrap_err();
        assert!(
            e.iter().any(|e| e.contains("are for --power-cycle-url")),
            "{e:?}"
        );
        let e = args(&["--power-cycle-provider=metal3", "--power-cycle-allow-http"]).unwrap_err();
        assert!(
            e.iter().any(|e| e.contains("does not ask an endpoint")),
            "{e:?}"
        );
        let c = args(&[
            "KernelDeadlock=True: drain, power-cycle",
            "--power-cycle-url=https://gw.example/power?key=s3cret",
            "--power-cycle-token-file=/var/run/token",
        ])
        .unwrap();
        let p = c.ladder.power_cycle.unwrap();
        assert_eq!(
            p.to_string(),
            "the power-cycle endpoint https://gw.example/…"
        );
        assert!(!format!("{p:?}").contains("s3cret"));
        let e = args(&["--power-cycle-token-file=/t"]).unwrap_err();
        assert!(
            e.iter()
                .any(|e| e.contains("--power-cycle-token-file, --power-cycle-ca-file and --power-cycle-allow-http are for --power-cycle-url")),
            "{e:?}"
        );
        // medik8s: the template named, by kind alone or in full; nothing else about it.
        let c = args(&[
            "KernelDeadlock=True: drain, power-cycle",
            "--power-cycle-provider=medik8s",
            "--remediation-template=SelfNodeRemediationTemplate/medik8s/snr",
        ])
        .unwrap();
        assert_eq!(
            c.ladder.power_cycle.unwrap().to_string(),
            "medik8s (SelfNodeRemediationTemplate medik8s/snr)"
        );
        for (bad, says) in [
            (
                &["--power-cycle-provider=medik8s"][..],
                "needs --remediation-template",
            ),
            (
                &["--remediation-template=FenceAgentsRemediationTemplate/m/f"][..],
                "is for --power-cycle-provider=medik8s",
            ),
            (
                &[
                    "--power-cycle-provider=medik8s",
                    "--remediation-template=Fence/m/f",
                ][..],
                "--remediation-template: \"Fence\" is not one of",
            ),
            (
                &[
                    "--power-cycle-provider=medik8s",
                    "--remediation-template=FenceAgentsRemediationTemplate/m/f",
                    "--power-cycle-url=https://gw.example/p",
                ][..],
                "does not ask an endpoint",
            ),
        ] {
            let e = args(bad).unwrap_err();
            assert!(e.iter().any(|e| e.contains(says)), "{bad:?}: {e:?}");
        }
    }

    #[test]
    fn the_common_cause_watch_from_flags_and_the_file() {
        let d = args(&[]).unwrap();
        assert_eq!(
            (d.safety.correlate_min, d.safety.correlate_window),
            (3, Duration::from_secs(600))
        );
        let c = args(&["--correlate-min=5", "--correlate-window=3m"]).unwrap();
        assert_eq!(
            (c.safety.correlate_min, c.safety.correlate_window),
            (5, Duration::from_secs(180))
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("drainer.yaml");
        std::fs::write(&file, "correlateMin: 0\ncorrelateWindow: 1x\n").unwrap();
        let e = args(&[&format!("--config={}", file.display())]).unwrap_err();
        assert!(e.iter().any(|e| e.contains("correlateWindow")), "{e:?}");
        std::fs::write(&file, "correlateMin: 0\ncorrelateWindow: 20m\n").unwrap();
        let c = args(&[&format!("--config={}", file.display())]).unwrap();
        assert_eq!(
            (c.safety.correlate_min, c.safety.correlate_window),
            (0, Duration::from_secs(1200))
        );
    }

    #[test]
    fn taints_probation_and_the_watchdog_from_flags() {
        let c = args(&[
            "--problem-taint=nodemedic.io/problem=yes:NoSchedule",
            "--cordon=false",
            "--uncordon-after=30m",
            "--probation-taint=nodemedic.io/probation",
            "--detector-silent-after=0s",
            "--detector-daemonset=monitoring/npd",
            "--detector-conditions=KernelDeadlock,ReadonlyFilesystem",
        ])
        .unwrap();
        assert!(!c.remedy.cordon);
        assert_eq!(
            c.remedy.taints[0].to_string(),
            "nodemedic.io/problem=yes:NoSchedule"
        );
        assert_eq!(c.remedy.uncordon_after, Duration::from_secs(1800));
        assert_eq!(
            c.remedy.probation_taint.unwrap().to_string(),
            "nodemedic.io/probation:PreferNoSchedule"
        );
        assert_eq!(c.watchdog.silent_after, None, "0s turns it off");
        assert_eq!(
            c.watchdog.daemonset,
            Some(("monitoring".into(), "npd".into()))
        );
        assert_eq!(
            c.watchdog.conditions,
            ["KernelDeadlock", "ReadonlyFilesystem"]
        );
        let d = args(&[]).unwrap();
        assert!(d.remedy.cordon && d.remedy.taints.is_empty());
        assert_eq!(d.watchdog.silent_after, Some(DEFAULT_SILENT_AFTER));
        assert!(args(&["--cordon"]).unwrap().remedy.cordon);
    }

    #[test]
    fn what_would_leave_a_node_unmarked_or_evict_unbounded_is_refused() {
        let e = args(&["--cordon=false"]).unwrap_err();
        assert!(
            e[0].contains("--cordon=false needs at least one --problem-taint"),
            "{e:?}"
        );
        let no_execute = "--problem-taint=nodemedic.io/problem:NoExecute";
        assert!(
            args(&[no_execute]).is_ok(),
            "the breaker and a budget are on by default"
        );
        let e = args(&[no_execute, "--max-unhealthy=100%", "--breaker-new=100%"]).unwrap_err();
        assert!(e[0].contains("needs the circuit breaker"), "{e:?}");
        let e = args(&[no_execute, "--max-cordoned=100%"]).unwrap_err();
        assert!(e[0].contains("cordon budget"), "{e:?}");
        let e = args(&["--probation-taint=x"]).unwrap_err();
        assert!(e[0].contains("needs --uncordon-after"), "{e:?}");
        let e = args(&["--uncordon-after=1m", "--probation-taint=x:NoSchedule"]).unwrap_err();
        assert!(e[0].contains("PreferNoSchedule"), "{e:?}");
        let e = args(&["--detector-daemonset=nope"]).unwrap_err();
        assert!(e[0].contains("NAMESPACE/NAME"), "{e:?}");
    }

    #[test]
    fn probation_taints_are_prefer_no_schedule_and_daemonsets_namespaced() {
        assert_eq!(
            probation_taint("nodemedic.io/probation")
                .unwrap()
                .to_string(),
            "nodemedic.io/probation:PreferNoSchedule"
        );
        assert_eq!(
            probation_taint("k=v:PreferNoSchedule").unwrap().to_string(),
            "k=v:PreferNoSchedule"
        );
        assert!(probation_taint("k:NoSchedule").is_err());
        assert!(probation_taint(":PreferNoSchedule").is_err());
        assert_eq!(
            daemonset("kube-system/nodemedic-detector").unwrap(),
            Some(("kube-system".into(), "nodemedic-detector".into()))
        );
        assert_eq!(daemonset(" ").unwrap(), None);
        for bad in ["x", "/x", "x/", "a/b/c"] {
            assert!(daemonset(bad).is_err(), "{bad}");
        }
    }
}
