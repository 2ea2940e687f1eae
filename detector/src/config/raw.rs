//! Rule files as written: serde structs with positions, `deny_unknown_fields`, nothing interpreted yet.
//! `super::build` turns them into the compiled, validated model.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One rule file describes one monitor.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMonitor {
    /// Event source component shown as "From" in `kubectl describe node`, e.g. `kernel-monitor`.
    pub source: Spanned<String>,
    /// Where lines come from.
    pub input: RawInput,
    /// On a first start (no checkpoint), how far back to read, e.g. `5m`. Default: the input's own
    /// (kmsg: 5m, journal: 5m, file: from the end).
    #[serde(default)]
    pub lookback: Option<Spanned<String>>,
    /// How many recent lines a multi-line pattern can span (NPD's bufferSize). Default 10.
    #[serde(default)]
    pub buffer_size: Option<Spanned<usize>>,
    /// Conditions this monitor owns, with their healthy defaults.
    #[serde(default)]
    pub conditions: Vec<RawCondition>,
    /// Patterns and what a match means.
    #[serde(default)]
    pub rules: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawInput {
    /// `kmsg` | `journal` | `file`.
    pub kind: Spanned<String>,
    /// journal: keep entries whose SYSLOG_IDENTIFIER is one of these (any when both lists are empty).
    #[serde(default)]
    pub identifiers: Vec<String>,
    /// journal: keep entries whose _SYSTEMD_UNIT is one of these.
    #[serde(default)]
    pub units: Vec<String>,
    /// file: the log file to follow; journal: a journal directory (default: the system journal).
    #[serde(default)]
    pub path: Option<Spanned<String>>,
    /// file: `syslog` (RFC 3164 prefix stripped) or `plain` (the whole line). Default `plain`.
    #[serde(default)]
    pub format: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCondition {
    #[serde(rename = "type")]
    pub type_: Spanned<String>,
    /// Healthy reason, e.g. `KernelHasNoDeadlock`.
    pub reason: String,
    /// Healthy message.
    pub message: String,
    /// How the condition returns to healthy. Without it, it stays True (as in NPD).
    #[serde(default)]
    pub recovery: Option<RawRecovery>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRecovery {
    /// A line matching this pattern returns the condition to healthy.
    #[serde(default)]
    pub pattern: Option<Spanned<String>>,
    /// With no problem line for this long, the condition returns to healthy, e.g. `30m`.
    #[serde(default)]
    pub after: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRule {
    /// `temporary` (an Event) or `permanent` (a condition becomes True).
    #[serde(rename = "type")]
    pub type_: Spanned<String>,
    /// For permanent rules: the condition type it sets.
    #[serde(default)]
    pub condition: Option<Spanned<String>>,
    pub reason: Spanned<String>,
    /// A regex (Rust syntax). It must match up to the end of the newest line; `\n` in it spans lines.
    pub pattern: Spanned<String>,
    /// Message template: `$1`, `${name}` expand captures. Default: the matched line(s).
    #[serde(default)]
    pub message: Option<String>,
}
