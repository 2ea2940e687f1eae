//! Rule files as written: serde structs with positions, `deny_unknown_fields`, nothing interpreted yet.
//! `super::build` turns them into the compiled, validated model. Pure.

use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

/// One rule file describes one monitor.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawMonitor {
    /// Event source component shown as "From" in `kubectl describe node`, e.g. `kernel-monitor`.
    pub(crate) source: Spanned<String>,
    /// Where lines come from.
    pub(crate) input: RawInput,
    /// On a first start (no checkpoint), how far back to read, e.g. `5m`. Default: the input's own
    /// (kmsg: 5m, journal: 5m, file: from the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lookback: Option<Spanned<String>>,
    /// How many recent lines a multi-line pattern can span (NPD's bufferSize). Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) buffer_size: Option<Spanned<usize>>,
    /// Conditions this monitor owns, with their healthy defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<RawCondition>,
    /// Patterns and what a match means.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) rules: Vec<RawRule>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawInput {
    /// `kmsg` | `journal` | `file` | `exec` | `resources`.
    pub(crate) kind: Spanned<String>,
    /// journal: keep entries whose SYSLOG_IDENTIFIER is one of these (any when both lists are empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) identifiers: Vec<String>,
    /// journal: `identifiers` match SYSLOG_IDENTIFIER alone (NPD's meaning, for NPD's JSON configs);
    /// not in YAML, where journald's own fields must back them.
    #[serde(skip)]
    pub(crate) syslog_identifier_only: bool,
    /// kmsg: match records written to /dev/kmsg from user space too (any facility but the
    /// kernel's; any root process on the node can write one). Default false: kernel records only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) user_space: bool,
    /// journal: keep entries whose _SYSTEMD_UNIT is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) units: Vec<String>,
    /// file: the log file to follow; journal: a journal directory (default: the system journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<Spanned<String>>,
    /// file: `syslog` (RFC 3164 prefix stripped) or `plain` (the whole line). Default `plain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) format: Option<Spanned<String>>,
    /// exec: how often each check runs (NPD's invoke_interval). Default 30s. resources: how often
    /// the resources are read. Default 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<Spanned<String>>,
    /// exec: a check still running after this long is killed, with its process group (NPD's timeout).
    /// Default 5s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timeout: Option<Spanned<String>>,
    /// exec: how much of a check's output becomes the message (NPD's max_output_length). Default 80.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_output_length: Option<Spanned<usize>>,
    /// exec: how many checks of this file run at once (NPD's concurrency). Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) concurrency: Option<Spanned<usize>>,
    /// exec: a True condition whose check prints another message is updated, with an Event
    /// (NPD's enable_message_change_based_condition_update). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) update_on_message_change: Option<bool>,
    /// resources: filesystems to watch, by signal name (`nodefs: /host/var/lib/kubelet`). Default
    /// `nodefs: /var/lib/kubelet, imagefs: /var/lib/containerd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) filesystems: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    /// resources: where the kernel's files are. Default `/proc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) proc_dir: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawCondition {
    #[serde(rename = "type")]
    pub(crate) type_: Spanned<String>,
    /// Healthy reason, e.g. `KernelHasNoDeadlock`.
    pub(crate) reason: String,
    /// Healthy message.
    pub(crate) message: String,
    /// How the condition returns to healthy. Without it, it stays True (as in NPD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) recovery: Option<RawRecovery>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawRecovery {
    /// A line matching this pattern returns the condition to healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pattern: Option<Spanned<String>>,
    /// With no problem line for this long, the condition returns to healthy, e.g. `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) after: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawRule {
    /// `temporary` (an Event) or `permanent` (a condition becomes True).
    #[serde(rename = "type")]
    pub(crate) type_: Spanned<String>,
    /// For permanent rules: the condition type it sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) condition: Option<Spanned<String>>,
    pub(crate) reason: Spanned<String>,
    /// A regex (Rust syntax). It must match up to the end of the newest line; `\n` in it spans lines.
    /// Log inputs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pattern: Option<Spanned<String>>,
    /// The check to run (exec inputs only): exit 0 healthy, 1 a problem, anything else unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exec: Option<RawExec>,
    /// Message template: `$1`, `${name}` expand captures. Default: the matched line(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    /// resources: the signal the rule reads (`imagefs.available`, `psi.memory.some.avg10`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) signal: Option<Spanned<String>>,
    /// resources: a problem below this level (`10Gi`, `15%` of the capacity, `1000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) below: Option<Spanned<RawLevel>>,
    /// resources: a problem above this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) above: Option<Spanned<RawLevel>>,
    /// resources: the level at which a `below`/`above` problem is over. Default: the threshold
    /// moved a tenth of itself toward healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clear: Option<Spanned<RawLevel>>,
    /// resources: a problem when the signal, at its recent rate, reaches this level `within`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reaches: Option<Spanned<RawLevel>>,
    /// resources: with `reaches`, how soon is a problem, e.g. `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) within: Option<Spanned<String>>,
    /// resources: with `reaches`, how far back the rate is taken. Default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) trend: Option<Spanned<String>>,
    /// resources: how long the test must hold before the condition is set (and its opposite
    /// before it clears). Default 0s: the first reading.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub(crate) sustain: Option<Spanned<String>>,
}

/// A level as written: a number, or text with a unit (`10Gi`, `500M`) or a percent sign.
#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub(crate) enum RawLevel {
    Number(f64),
    Text(String),
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawExec {
    /// The program (NPD's `path`); a relative path is relative to the detector's working directory,
    /// as in NPD.
    pub(crate) path: Spanned<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) args: Vec<String>,
    /// At most the input's `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timeout: Option<Spanned<String>>,
    /// This check's own interval (NPD's per-rule invoke_interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<Spanned<String>>,
    /// `nobody` (the default: uid and gid 65534, no capabilities) or `root`, for a check that truly
    /// needs it (a runtime socket, the host's namespaces); a root check is logged at load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_as: Option<Spanned<String>>,
}
