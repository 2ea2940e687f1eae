//! Inputs: each runs on its own (a thread for blocking device/file reads, a task for the journalctl
//! child) and sends [`SourceEvent`]s to its monitor over a bounded channel, so one slow or broken input
//! never stalls another. Each beats a health handle while it is alive, also when idle.

pub mod exec;
pub mod file;
pub mod follow;
pub mod journal;
pub mod kmsg;
pub mod wake;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::checkpoint::Position;

/// How long an input may be silent (not even an idle beat) before /healthz calls it stuck.
pub const MAX_SILENCE: Duration = Duration::from_secs(60);
/// How often idle inputs wake up (to beat, to notice rotation, to stop).
pub const IDLE_POLL: Duration = Duration::from_millis(250);

/// What an input produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEvent {
    /// A message to match, with its time and the position to checkpoint once it is reported.
    Line {
        text: String,
        at: Timestamp,
        position: Position,
    },
    /// A record that could not be parsed (counted, skipped).
    Malformed { why: String },
    /// Records lost before we could read them (kmsg ring buffer overrun: EPIPE).
    Overrun,
}
