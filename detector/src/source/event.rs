//! What inputs produce ([`SourceEvent`], an exec check's [`CheckResult`], a resources reading) and the timing they keep
//! (idle polls, silence limits, default lookback). Pure data.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::checkpoint::Position;

/// How long an input may be silent (not even an idle beat) before /healthz calls it stuck.
pub const MAX_SILENCE: Duration = Duration::from_secs(60);
/// How often idle inputs wake up (to beat, to notice rotation, to stop).
pub const IDLE_POLL: Duration = Duration::from_millis(250);
/// Default lookback when a rule file gives none (NPD's kernel monitor default).
pub const DEFAULT_LOOKBACK: Duration = Duration::from_secs(300);

/// What an input produces.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent {
    /// A message to match, with its time and the position to checkpoint once it is reported.
    Line {
        text: String,
        at: Timestamp,
        position: Position,
        /// Written to /dev/kmsg from user space (a facility other than the kernel's: any root
        /// process on the node can write one, and the kernel never lets it claim its own): it may
        /// raise an Event, never set or clear a condition, unless its monitor says `userSpace`.
        user: bool,
    },
    /// One run of an exec check, and how many runs the monitor has had (its position).
    Check {
        result: CheckResult,
        position: Position,
    },
    /// A reading of the node's resources (a `resources` input; no position: nothing to resume).
    Sample(crate::parse::resources::Sample),
    /// A record that could not be parsed (counted, skipped).
    Malformed { why: String },
    /// Records lost before we could read them (kmsg ring buffer overrun: EPIPE).
    Overrun,
}

/// What a check's run said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit 0.
    Healthy,
    /// Exit 1.
    Problem,
    /// Any other exit, a signal, a timeout, or the program could not be started.
    Unknown,
}

impl Exit {
    /// NPD's mapping of an exit code (`None`: killed by a signal).
    pub(crate) fn of_code(code: Option<i32>) -> Exit {
        match code {
            Some(0) => Exit::Healthy,
            Some(1) => Exit::Problem,
            _ => Exit::Unknown,
        }
    }
}

/// One run of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Index in `Monitor::checks`.
    pub(crate) check: usize,
    pub exit: Exit,
    /// Its stdout, trimmed and cut to the input's maxOutputLength (or why it could not run).
    pub message: String,
    /// The exit code (`None`: a signal, a timeout, not started).
    pub(crate) code: Option<i32>,
    pub(crate) timed_out: bool,
    /// The first line of its stderr, for the log.
    pub(crate) stderr: String,
    pub at: Timestamp,
}
