//! Turning raw input into [`Line`]s: pure functions, no I/O. A record that cannot be parsed is a
//! [`Malformed`] value for the caller to count and skip, never an error that stops a source.

pub mod journal;
pub mod kmsg;
pub mod syslog;

/// One log message ready for matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// Wall-clock time of the message when the input says it (journal), else `None` (the caller uses
    /// its clock).
    pub realtime_us: Option<i64>,
}

/// Why a record was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {input} record: {why}")]
pub struct Malformed {
    pub input: &'static str,
    pub why: String,
}
