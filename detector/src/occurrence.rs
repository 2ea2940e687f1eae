//! What happens in the detector, as values whose `emit()` logs and counts together (vector's
//! `internal_events` is the model). Problems become Events through the aggregator (`report::aggregate`,
//! which folds floods), so an occurrence here logs and counts; the Event text is the problem
//! state's (`problem::Report::event`). Shell (logging and metrics only).

use std::time::Duration;

use crate::metrics::{Metrics, Reload, Report};
use crate::problem::Condition;

#[derive(Debug)]
pub(crate) enum Occurrence<'a> {
    /// A temporary rule matched.
    TemporaryProblem {
        monitor: &'a str,
        reason: &'a str,
        message: &'a str,
    },
    /// A condition changed; `problem`: it turned True (counted as a problem, as NPD does).
    ConditionChanged {
        monitor: &'a str,
        condition: &'a Condition,
        problem: bool,
    },
    /// The rule files were reloaded.
    Reloaded { monitors: usize },
    /// A reload was rejected; the last good rules stay.
    ReloadRejected {
        errors: &'a crate::config::ConfigErrors,
    },
    /// A write to the API server failed and is retried. Counted every time; logged when `log` is
    /// `Some(n)` (`n` earlier failures were not logged: see `common::throttle`).
    ReportFailed {
        kind: Report,
        error: &'a str,
        retry_in: Option<Duration>,
        log: Option<u64>,
    },
    /// A write kept failing. Events: the key is dropped. Conditions: the checkpoint stops waiting
    /// for them (they are still retried).
    ReportGivenUp {
        kind: Report,
        error: &'a str,
        tries: u32,
    },
    /// kmsg records were overwritten before they could be read.
    Overrun { monitor: &'a str },
    /// A loop (an input, the writer) made no progress for longer than allowed (/healthz fails).
    Stalled { name: &'a str, silent: Duration },
    /// It made progress again.
    Recovered { name: &'a str },
    /// An exec check ran. `unknown_in_a_row`: how many runs in a row could not say (0 when this one
    /// did); from [`CHECK_FAILING_AFTER`] on, `/healthz` names the check (still answering ok: a broken
    /// check script is not a reason to restart the detector).
    CheckRan {
        monitor: &'a str,
        check: &'a str,
        result: &'a crate::source::exec::CheckResult,
        unknown_in_a_row: u32,
        health: &'a nodemedic_common::health::Health,
    },
    /// A monitor's input could not be started (no thread to be had): the monitor does not run, and
    /// its input's health entry stays silent, so `/healthz` names it.
    InputFailed {
        error: &'a crate::source::SpawnError,
    },
}

/// Runs in a row a check could not say before `/healthz` names it.
pub(crate) const CHECK_FAILING_AFTER: u32 = 3;

impl Occurrence<'_> {
    pub(crate) fn emit(&self, m: &Metrics) {
        match self {
            Occurrence::TemporaryProblem {
                monitor,
                reason,
                message,
            } => {
                tracing::info!(%monitor, %reason, %message, "temporary problem");
                m.matched(monitor, reason);
                m.problem(reason);
            }
            Occurrence::ConditionChanged {
                monitor,
                condition: c,
                problem,
            } => {
                tracing::info!(%monitor, condition = %c.type_, status = c.status.as_str(), reason = %c.reason, message = %c.message, "condition changed");
                if *problem {
                    m.matched(monitor, &c.reason);
                    m.problem(&c.reason);
                }
            }
            Occurrence::Reloaded { monitors } => {
                tracing::info!(%monitors, "rule files reloaded");
                m.reload(Reload::Success);
            }
            Occurrence::ReloadRejected { errors } => {
                for e in &errors.0 {
                    tracing::error!(error = %e, "rule file rejected");
                }
                tracing::error!(
                    errors = errors.0.len(),
                    "reload failed; keeping the last good rules"
                );
                m.reload(Reload::Failure);
            }
            Occurrence::ReportFailed {
                kind,
                error,
                retry_in,
                log,
            } => {
                if let Some(quiet) = log {
                    let retry_in = retry_in
                        .map_or_else(String::new, |d| humantime::format_duration(d).to_string());
                    tracing::warn!(kind = kind.as_str(), %error, %retry_in, earlier_failures_not_logged = quiet, "writing to the API server failed; will retry with the latest state (logged at most once a minute)");
                }
                m.report_error(*kind);
            }
            Occurrence::ReportGivenUp { kind, error, tries } => {
                match kind {
                    Report::Events => {
                        tracing::error!(kind = kind.as_str(), %error, %tries, "an Event write kept failing; dropping it (its occurrences are lost)")
                    }
                    Report::Conditions => {
                        tracing::error!(kind = kind.as_str(), %error, %tries, "condition writes keep failing; the checkpoint moves on without them (they are still retried)")
                    }
                }
                m.report_given_up(*kind);
            }
            Occurrence::Overrun { monitor } => {
                tracing::warn!(%monitor, "kmsg ring buffer overrun: records were lost before they could be read");
                m.overrun(monitor);
            }
            Occurrence::Stalled { name, silent } => {
                tracing::error!(%name, ?silent, "no progress; /healthz fails until it recovers");
                m.stall(name);
            }
            Occurrence::Recovered { name } => tracing::info!(%name, "making progress again"),
            Occurrence::CheckRan {
                monitor,
                check,
                result,
                unknown_in_a_row,
                health,
            } => check_ran(m, monitor, check, result, *unknown_in_a_row, health),
            Occurrence::InputFailed { error } => {
                tracing::error!(%error, "monitor not started; /healthz will name its input")
            }
        }
    }
}

fn check_ran(
    m: &Metrics,
    monitor: &str,
    check: &str,
    r: &crate::source::exec::CheckResult,
    unknown_in_a_row: u32,
    health: &nodemedic_common::health::Health,
) {
    use crate::source::exec::Exit;
    let result = match (r.exit, r.timed_out) {
        (_, true) => crate::metrics::CheckOutcome::Timeout,
        (Exit::Healthy, _) => crate::metrics::CheckOutcome::Healthy,
        (Exit::Problem, _) => crate::metrics::CheckOutcome::Problem,
        (Exit::Unknown, _) => crate::metrics::CheckOutcome::Unknown,
    };
    m.check_ran(monitor, result);
    match unknown_in_a_row {
        0 => {
            tracing::debug!(%check, exit = ?r.exit, message = %r.message, "check ran");
            health.note(check, None);
        }
        n => {
            // The first failure and every 10th of a streak are logged.
            if n == 1 || n % 10 == 0 {
                let code = r
                    .code
                    .map_or_else(|| "none (killed)".to_string(), |c| c.to_string());
                tracing::warn!(%check, %code, timed_out = r.timed_out, message = %r.message, stderr = %r.stderr, in_a_row = n, "check could not say (status Unknown)");
            }
            if n >= CHECK_FAILING_AFTER {
                let why = format!("could not say {n} times in a row: {}", r.message);
                health.note(check, Some(why));
            }
        }
    }
}
