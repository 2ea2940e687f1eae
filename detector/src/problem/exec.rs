//! Exec checks in the problem state: NPD's custom plugin monitor semantics, as a pure function of
//! (rules, check results, clock).
//!
//! A check's exit status says how things are: 0 healthy (its condition False), 1 a problem (True),
//! anything else, a signal or a timeout unknown (Unknown). A temporary check's problem is an Event; a
//! permanent check's status moves its condition, NPD's five cases:
//! 1. True -> False/Unknown: the healthy reason; the healthy message for False, the output for Unknown;
//! 2. False/Unknown -> True: the check's reason and output;
//! 3. False <-> Unknown: as 1;
//! 4. True stays True: updated when the reason differs, or the output does and the input says
//!    `updateOnMessageChange` (NPD's enable_message_change_based_condition_update);
//! 5. otherwise nothing changes (no write, no Event).
//!
//! Where NPD differs: it also writes a temporary check's Event when the check could not run (exit 2,
//! a timeout); here that is logged and counted (`nodemedic_detector_check_runs_total{result}`), not
//! reported as the problem it could not check.

use k8s_openapi::jiff::Timestamp;

use super::{Condition, MonitorState, Report, Status};
use crate::config::{Input, RuleKind};

pub use crate::source::exec::Exit;

/// The condition status a run's exit means.
fn status(exit: Exit) -> Status {
    match exit {
        Exit::Healthy => Status::False,
        Exit::Problem => Status::True,
        Exit::Unknown => Status::Unknown,
    }
}

impl MonitorState {
    /// Fold the result of check `index` (of `Monitor::checks`), run at `at` and printing `message`
    /// (already cut to the input's maxOutputLength), into the state; reports are appended to `out`.
    pub fn check_result(
        &mut self,
        index: usize,
        exit: Exit,
        message: &str,
        at: Timestamp,
        out: &mut Vec<Report>,
    ) {
        let Some(check) = self.monitor.checks.get(index) else {
            return;
        };
        let condition = match check.kind {
            RuleKind::Temporary => {
                if exit == Exit::Problem {
                    out.push(Report::Problem {
                        reason: check.reason.clone(),
                        message: message.to_string(),
                        at,
                    });
                }
                return;
            }
            RuleKind::Permanent { condition } => condition,
        };
        let (Some(def), Some(current)) = (
            self.monitor.conditions.get(condition),
            self.conditions.get(condition),
        ) else {
            return;
        };
        let on_message =
            matches!(&self.monitor.input, Input::Exec(s) if s.update_on_message_change);
        let status = status(exit);
        let healthy = |status: Status| {
            let message = if status == Status::False {
                def.healthy_message.clone()
            } else {
                // Unknown: what the check said is what helps find out why.
                message.to_string()
            };
            (def.healthy_reason.clone(), message)
        };
        let (reason, message) = match (current.status, status) {
            (Status::True, Status::True)
                if current.reason != check.reason || (on_message && current.message != message) =>
            {
                (check.reason.clone(), message.to_string())
            }
            (Status::True, Status::True) => return,
            (Status::True, other) => healthy(other),
            (_, Status::True) => (check.reason.clone(), message.to_string()),
            (was, now) if was != now => healthy(now),
            _ => return,
        };
        let next = Condition {
            type_: current.type_.clone(),
            status,
            reason,
            message,
            transition: at,
        };
        self.conditions[condition] = next.clone();
        if status == Status::True {
            self.last_problem[condition] = Some(at);
        }
        out.push(Report::Condition {
            condition: next,
            transition: true,
            at,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::load_sources;

    const CHECKS: &str = r#"
source: ntp-custom-plugin-monitor
input: {kind: exec, updateOnMessageChange: UPDATE}
conditions:
  - type: NTPProblem
    reason: NTPIsUp
    message: ntp service is up
rules:
  - type: temporary
    reason: NTPIsDown
    exec: {path: /bin/true}
  - type: permanent
    condition: NTPProblem
    reason: NTPIsDown
    exec: {path: /bin/true}
  - type: permanent
    condition: NTPProblem
    reason: ChronyIsDown
    exec: {path: /bin/true}
"#;

    fn state(update: bool) -> MonitorState {
        let yaml = CHECKS.replace("UPDATE", if update { "true" } else { "false" });
        let set = load_sources(&[("ntp.yaml".into(), yaml)]).unwrap();
        let m = Arc::new(set.monitors.into_iter().next().unwrap());
        MonitorState::new(m, &[], Timestamp::UNIX_EPOCH)
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    /// (status, reason, message) of the condition after each result, and the Events' reasons.
    fn run(
        s: &mut MonitorState,
        results: &[(usize, Exit, &str)],
    ) -> Vec<(String, String, String, usize)> {
        let mut seen = Vec::new();
        for (i, (check, exit, message)) in results.iter().enumerate() {
            let mut out = Vec::new();
            s.check_result(*check, *exit, message, at(i as i64 + 1), &mut out);
            let c = &s.conditions()[0];
            let events = out.iter().filter(|r| r.event().is_some()).count();
            seen.push((
                c.status.as_str().to_string(),
                c.reason.clone(),
                c.message.clone(),
                events,
            ));
        }
        seen
    }

    fn row(
        status: &str,
        reason: &str,
        message: &str,
        events: usize,
    ) -> (String, String, String, usize) {
        (status.into(), reason.into(), message.into(), events)
    }

    #[test]
    fn a_checks_exit_codes_move_the_condition_as_npds_custom_plugins_do() {
        let mut s = state(false);
        let got = run(
            &mut s,
            &[
                (1, Exit::Healthy, "fine"),           // 5: False stays False
                (1, Exit::Problem, "ntp is down"),    // 2: -> True, check's reason and output
                (1, Exit::Problem, "still down"),     // 5: same reason, message changes ignored
                (2, Exit::Problem, "chrony is down"), // 4: True stays True, another reason
                (1, Exit::Unknown, "exit 3"),         // 1: True -> Unknown, healthy reason, output
                (1, Exit::Healthy, "fine"),           // 3: Unknown -> False, healthy message
                (1, Exit::Unknown, "exit 3"),         // 3: False -> Unknown
            ],
        );
        assert_eq!(
            got,
            [
                row("False", "NTPIsUp", "ntp service is up", 0),
                row("True", "NTPIsDown", "ntp is down", 1),
                row("True", "NTPIsDown", "ntp is down", 0),
                row("True", "ChronyIsDown", "chrony is down", 1),
                row("Unknown", "NTPIsUp", "exit 3", 1),
                row("False", "NTPIsUp", "ntp service is up", 1),
                row("Unknown", "NTPIsUp", "exit 3", 1),
            ]
        );
    }

    #[test]
    fn message_changes_update_a_true_condition_when_asked() {
        let mut s = state(true);
        let got = run(
            &mut s,
            &[
                (1, Exit::Problem, "offset 2s"),
                (1, Exit::Problem, "offset 9s"),
                (1, Exit::Problem, "offset 9s"),
            ],
        );
        assert_eq!(
            got,
            [
                row("True", "NTPIsDown", "offset 2s", 1),
                row("True", "NTPIsDown", "offset 9s", 1),
                row("True", "NTPIsDown", "offset 9s", 0),
            ]
        );
    }

    #[test]
    fn a_temporary_check_reports_problems_only() {
        let mut s = state(false);
        let mut out = Vec::new();
        for exit in [Exit::Healthy, Exit::Unknown, Exit::Problem] {
            s.check_result(0, exit, "ntp is down", at(1), &mut out);
        }
        assert_eq!(
            out,
            [Report::Problem {
                reason: "NTPIsDown".into(),
                message: "ntp is down".into(),
                at: at(1)
            }]
        );
        // An index past the checks (a stale result after a reload) changes nothing.
        s.check_result(9, Exit::Problem, "x", at(2), &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn exit_codes_map_as_in_npd() {
        assert_eq!(Exit::of_code(Some(0)), Exit::Healthy);
        assert_eq!(Exit::of_code(Some(1)), Exit::Problem);
        assert_eq!(Exit::of_code(Some(2)), Exit::Unknown);
        assert_eq!(Exit::of_code(Some(127)), Exit::Unknown);
        assert_eq!(Exit::of_code(None), Exit::Unknown);
    }
}
