//! Restarting a component at the drainer's request (a ladder's `restart kubelet` or `restart
//! containerd`, checked as reboot requests are by `nodemedic_common::reboot::verdict`, carried out
//! once by `crate::reboot`): its unit restarted through the host's systemd, then seen active again.
//! A unit not active within [`SETTLE`] is started again, and never left stopped: NPD's
//! health-checker `--enable-repair` kills the kubelet with `systemctl kill` and leaves it dead
//! where its unit does not restart on its own (NPD #861). Whether the restart did the job is the
//! component's own health check: the condition its check rule sets clearing, which the drainer
//! reads. I/O; the settings and the words are pure.

use std::collections::BTreeMap;
use std::time::Duration;

/// How long a restarted unit has to be active again, by default (`--restart-settle`).
#[cfg(test)]
const SETTLE: Duration = Duration::from_secs(60);
/// How often it is asked meanwhile.
const POLL: Duration = Duration::from_secs(1);
/// How long one systemctl may take.
const COMMAND: Duration = Duration::from_secs(90);

/// What `detector run` is told about restarts.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a restarted unit has to be active again (`--restart-settle`; tests shorten it).
    pub settle: Duration,
    /// The host's systemctl, its words (from the DaemonSet: through PID 1's namespaces).
    pub systemctl: Vec<String>,
    /// Each component's unit (`--restart-units`).
    pub units: BTreeMap<String, String>,
    /// At most this many restarts in 24 hours (`--restart-max-per-day`).
    pub max_per_day: u32,
}

/// `kubelet=kubelet.service,containerd=containerd.service`: each component's unit. Both
/// components must be named (a request may name either).
pub fn units(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((component, unit)) = pair.split_once('=') else {
            return Err(format!("{pair:?}: expected COMPONENT=UNIT"));
        };
        let (component, unit) = (component.trim(), unit.trim());
        if !["kubelet", "containerd"].contains(&component) {
            return Err(format!(
                "{component:?}: the components are kubelet and containerd"
            ));
        }
        if unit.is_empty() || unit.contains(char::is_whitespace) {
            return Err(format!("{pair:?}: a unit's name, without spaces"));
        }
        out.insert(component.to_string(), unit.to_string());
    }
    for c in ["kubelet", "containerd"] {
        if !out.contains_key(c) {
            return Err(format!(
                "no unit for {c} (give both: kubelet=UNIT,containerd=UNIT)"
            ));
        }
    }
    Ok(out)
}

/// What a restart came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Active again after the restart.
    Active { unit: String },
    /// Not active after the restart (`why`), active once started again.
    StartedAgain { unit: String, why: String },
    /// Not active even once started again.
    Down { unit: String, why: String },
}

impl Outcome {
    /// The Event's reason, whether it is a Warning, and its message.
    pub(crate) fn said(&self, settle: Duration) -> (&'static str, bool, String) {
        let s = settle.as_secs();
        match self {
            Outcome::Active { unit } => (
                "ComponentRestarted",
                false,
                format!(
                    "Restarted {unit} at the drainer's request: active again; its health check says whether that did it"
                ),
            ),
            Outcome::StartedAgain { unit, why } => (
                "ComponentRestarted",
                true,
                format!(
                    "Restarted {unit} at the drainer's request: not active within {s}s ({why}), so started it again: active"
                ),
            ),
            Outcome::Down { unit, why } => (
                "ComponentRestartFailed",
                true,
                format!(
                    "Restarted {unit} at the drainer's request: not active within {s}s, nor once started again ({why}); a person is needed on the node"
                ),
            ),
        }
    }
}

/// Restart `component`'s unit and see it active again (or started again, never left stopped).
pub(crate) async fn restart(opts: &Options, component: &str) -> Outcome {
    let unit = opts.units.get(component).cloned().unwrap_or_default();
    let restarted = systemctl(opts, &["restart", &unit]).await;
    let why = match (restarted, active_within(opts, &unit).await) {
        (_, Ok(())) => return Outcome::Active { unit },
        (Err(e), _) => e,
        (Ok(_), Err(e)) => e,
    };
    tracing::warn!(%unit, %why, "not active after its restart: starting it again");
    let _ = systemctl(opts, &["start", &unit]).await;
    match active_within(opts, &unit).await {
        Ok(()) => Outcome::StartedAgain { unit, why },
        Err(again) => Outcome::Down { unit, why: again },
    }
}

/// Ok once `systemctl is-active UNIT` says active, within the settle time; else what it said last.
async fn active_within(opts: &Options, unit: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + opts.settle;
    loop {
        let said = match systemctl(opts, &["is-active", unit]).await {
            Ok(out) if out.trim() == "active" => return Ok(()),
            Ok(out) => format!("it is {}", out.trim()),
            Err(e) => e,
        };
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(said);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `systemctl ARGS`: its output, or Err in words (is-active's "inactive" exits 3: its output
/// is still what is wanted, so a failure with output is that output).
async fn systemctl(opts: &Options, args: &[&str]) -> Result<String, String> {
    let (program, first) = opts.systemctl.split_first().ok_or("no systemctl")?;
    let run = tokio::process::Command::new(program)
        .args(first)
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(COMMAND, run).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(format!("cannot run {program}: {e}")),
        Err(_) => {
            return Err(format!(
                "systemctl {} took over {}s",
                args.join(" "),
                COMMAND.as_secs()
            ));
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() || (args[0] == "is-active" && !stdout.is_empty()) {
        return Ok(stdout);
    }
    Err(format!(
        "systemctl {} ended with {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_component_has_its_unit() {
        let u = units("kubelet=k3s-agent.service, containerd=k3s-agent.service").unwrap();
        assert_eq!(u["kubelet"], "k3s-agent.service");
        for (bad, says) in [
            ("kubelet=kubelet.service", "no unit for containerd"),
            ("kubelet", "COMPONENT=UNIT"),
            ("docker=docker.service", "the components are"),
            ("kubelet=,containerd=c", "without spaces"),
        ] {
            let e = units(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_unit_left_down_is_a_warning_for_a_person() {
        let down = Outcome::Down {
            unit: "kubelet.service".into(),
            why: "it is failed".into(),
        };
        let (reason, warning, message) = down.said(SETTLE);
        assert_eq!((reason, warning), ("ComponentRestartFailed", true));
        assert!(
            message.contains("nor once started again (it is failed)"),
            "{message}"
        );
        let (reason, warning, _) = Outcome::Active {
            unit: "kubelet.service".into(),
        }
        .said(SETTLE);
        assert_eq!((reason, warning), ("ComponentRestarted", false));
    }
}
