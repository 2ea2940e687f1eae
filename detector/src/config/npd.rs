//! node-problem-detector's monitor files, as they are: a system-log-monitor file (`plugin` kmsg,
//! journald or filelog) or a custom-plugin-monitor file (`plugin: custom`), in JSON. Pure.
//!
//! They are read with the YAML parser (JSON is YAML), so every error has its line and column in the
//! JSON file, and turned into the rule file they mean ([`RawMonitor`]), which is validated like any
//! other. What does not carry over is said: [`Note`]s, printed by `detector convert-npd` and logged
//! when such a file is loaded.
//!
//! | NPD | rule file |
//! | --- | --- |
//! | `plugin: kmsg` | `input: {kind: kmsg}` (`logPath` other than /dev/kmsg: use `--kmsg-path`) |
//! | `plugin: journald`, `pluginConfig.source`, `logPath` | `input: {kind: journal, identifiers: [source], path: logPath}` |
//! | `plugin: filelog`, `logPath` | `input: {kind: file, path: logPath, format: syslog}` (timestamp/message regexes: see the note) |
//! | `plugin: custom`, `pluginConfig` | `input: {kind: exec, interval, timeout, maxOutputLength, concurrency, updateOnMessageChange}` |
//! | `lookback` (Go duration; none: `0`) | `lookback` |
//! | `bufferSize` (0: 10) | `bufferSize` |
//! | `rules[].pattern`, `patternGeneratedMessageSuffix` | `pattern`, `message: "${lines}<suffix>"` |
//! | `rules[].path`, `args`, `timeout`, `invoke_interval` | `exec: {path, args, timeout, interval}` |

use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::errors::Errors;
use super::raw::{RawCondition, RawExec, RawInput, RawMonitor, RawRule};

/// An NPD monitor file. Unknown keys are ignored, as NPD's JSON decoding does.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NpdMonitor {
    #[serde(default)]
    pub(crate) plugin: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) plugin_config: Option<Spanned<PluginConfig>>,
    #[serde(default)]
    pub(crate) log_path: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) lookback: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) buffer_size: Option<Spanned<usize>>,
    #[serde(default)]
    pub(crate) source: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) metrics_reporting: Option<Spanned<bool>>,
    #[serde(default)]
    pub(crate) skip_list: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(crate) delay: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) conditions: Option<Vec<NpdCondition>>,
    #[serde(default)]
    pub(crate) rules: Option<Vec<NpdRule>>,
}

/// Every plugin's `pluginConfig` keys (NPD keeps them as a string map for log plugins and a struct
/// for custom plugins).
#[derive(Debug, Default, Deserialize)]
pub struct PluginConfig {
    /// journald: the SYSLOG_IDENTIFIER to read.
    #[serde(default)]
    pub(crate) source: Option<Spanned<String>>,
    /// filelog: regexes and layout of the timestamp and message.
    #[serde(default)]
    pub(crate) timestamp: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) message: Option<Spanned<String>>,
    #[serde(default, rename = "timestampFormat")]
    pub timestamp_format: Option<Spanned<String>>,
    /// custom
    #[serde(default)]
    pub(crate) invoke_interval: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) max_output_length: Option<Spanned<usize>>,
    #[serde(default)]
    pub(crate) concurrency: Option<Spanned<usize>>,
    #[serde(default)]
    pub(crate) enable_message_change_based_condition_update: Option<bool>,
    #[serde(default)]
    pub(crate) skip_initial_status: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct NpdCondition {
    #[serde(rename = "type")]
    pub(crate) type_: Spanned<String>,
    #[serde(default)]
    pub(crate) reason: String,
    #[serde(default)]
    pub(crate) message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NpdRule {
    #[serde(rename = "type")]
    pub(crate) type_: Spanned<String>,
    #[serde(default)]
    pub(crate) condition: Option<Spanned<String>>,
    pub(crate) reason: Spanned<String>,
    #[serde(default)]
    pub(crate) pattern: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) pattern_generated_message_suffix: Option<String>,
    #[serde(default)]
    pub(crate) path: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) timeout: Option<Spanned<String>>,
    #[serde(default, rename = "invoke_interval")]
    pub(crate) invoke_interval: Option<Spanned<String>>,
}

/// Something of an NPD file that does not carry over, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) line: u64,
    pub(crate) column: u64,
    pub(crate) message: String,
}

/// An NPD file as a rule file, and what did not carry over. Errors (no `plugin`, a plugin nodemedic
/// has no equivalent for, a bad Go duration) go to `errors`.
pub(crate) fn to_rule_file(
    mut npd: NpdMonitor,
    errors: &mut Errors,
) -> Option<(RawMonitor, Vec<Note>)> {
    let mut notes = Notes(Vec::new());
    let Some(plugin) = npd.plugin.take() else {
        errors.at(
            &Location::UNKNOWN,
            "plugin: missing, so not a log or custom plugin monitor file. A system stats monitor file (cpu, disk, memory, net sections) is given with --config.system-stats-monitor, not as a rule file; log monitors have plugin kmsg, journald or filelog, custom plugin monitors plugin custom",
        );
        return None;
    };
    let here = plugin.referenced;
    let kind = plugin_kind(&plugin, errors)?;
    let input = input(kind, here, &mut npd, &mut notes, errors)?;
    unsupported(&npd, &mut notes);
    let lookback = if kind == "exec" {
        npd.lookback.take().and_then(|l| go(l, errors))
    } else {
        // NPD's default lookback is 0: nothing from before the start.
        Some(
            npd.lookback
                .take()
                .and_then(|l| go(l, errors))
                .unwrap_or_else(|| Spanned::new("0s".to_string(), here, here)),
        )
    };
    let buffer_size = if kind == "exec" {
        npd.buffer_size
    } else {
        // NPD reads 0 (or no value) as its default, 10.
        npd.buffer_size.filter(|b| b.value != 0)
    };
    let conditions = npd
        .conditions
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|c| RawCondition {
            type_: c.type_,
            reason: c.reason,
            message: c.message,
            recovery: None,
        })
        .collect();
    let rules = npd
        .rules
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|r| rule(r, errors))
        .collect();
    let source = npd.source.take().unwrap_or_else(|| {
        errors.at(
            &here,
            "source: missing (it names the Event source, e.g. kernel-monitor)",
        );
        Spanned::new(String::new(), here, here)
    });
    let monitor = RawMonitor {
        source,
        input,
        lookback,
        buffer_size,
        conditions,
        rules,
    };
    Some((monitor, notes.0))
}

/// What did not carry over, with where it was said.
struct Notes(Vec<Note>);

impl Notes {
    fn at(&mut self, loc: &Location, message: impl Into<String>) {
        self.0.push(Note {
            line: loc.line(),
            column: loc.column(),
            message: message.into(),
        })
    }
}

/// Our input kind for NPD's plugin.
fn plugin_kind(plugin: &Spanned<String>, errors: &mut Errors) -> Option<&'static str> {
    match plugin.value.as_str() {
        "kmsg" => Some("kmsg"),
        "journald" => Some("journal"),
        "filelog" => Some("file"),
        "custom" => Some("exec"),
        other => {
            errors.at(
                &plugin.referenced,
                format!("plugin {other:?}: expected kmsg, journald, filelog or custom (the plugins of NPD's system-log-monitor and custom-plugin-monitor)"),
            );
            None
        }
    }
}

/// The input of `kind` from the file's `logPath` and `pluginConfig` (taken out of `npd`).
fn input(
    kind: &'static str,
    here: Location,
    npd: &mut NpdMonitor,
    notes: &mut Notes,
    errors: &mut Errors,
) -> Option<RawInput> {
    let config = npd
        .plugin_config
        .take()
        .map(|c| c.value)
        .unwrap_or_default();
    let spanned = |v: &str| Spanned::new(v.to_string(), here, here);
    let mut input = RawInput {
        kind: spanned(kind),
        identifiers: Vec::new(),
        syslog_identifier_only: false,
        user_space: false,
        units: Vec::new(),
        path: None,
        format: None,
        interval: None,
        timeout: None,
        max_output_length: None,
        concurrency: None,
        update_on_message_change: None,
        filesystems: None,
        proc_dir: None,
    };
    match kind {
        "kmsg" => {
            if let Some(p) = npd.log_path.as_ref().filter(|p| p.value != "/dev/kmsg") {
                notes.at(
                    &p.referenced,
                    format!(
                        "logPath {:?}: kmsg is read from --kmsg-path (default /dev/kmsg) for every monitor",
                        p.value
                    ),
                );
            }
        }
        "journal" => {
            if let Some(source) = &config.source {
                notes.at(
                    &source.referenced,
                    format!(
                        "pluginConfig.source {:?} matches SYSLOG_IDENTIFIER as NPD does, which any process on the node can claim (`logger -t {}`); in nodemedic's YAML rules, `identifiers` also need journald's own _SYSTEMD_UNIT, or _EXE run as root, to agree",
                        source.value, source.value
                    ),
                );
            }
            input.syslog_identifier_only = true;
            input.identifiers.extend(config.source.map(|s| s.value));
            input.path = npd.log_path.take();
        }
        "file" => {
            let Some(path) = npd.log_path.take() else {
                errors.at(&here, "logPath: a filelog monitor needs the file to read");
                return None;
            };
            input.path = Some(path);
            input.format = Some(spanned("syslog"));
            if let Some(m) = config.message.as_ref().or(config.timestamp.as_ref()) {
                notes.at(
                    &m.referenced,
                    "pluginConfig timestamp/message/timestampFormat: lines are read as syslog lines instead (an RFC 3164 or RFC 3339 timestamp, host and tag stripped, and the kernel's [uptime] stamp); other layouts are matched whole",
                );
            }
        }
        _ => {
            input.interval = config.invoke_interval.and_then(|d| go(d, errors));
            input.timeout = config.timeout.and_then(|d| go(d, errors));
            input.max_output_length = config.max_output_length;
            input.concurrency = config.concurrency;
            input.update_on_message_change = config.enable_message_change_based_condition_update;
            if let Some(s) = config.skip_initial_status.as_ref().filter(|s| s.value) {
                notes.at(
                    &s.referenced,
                    "skip_initial_status: conditions are always written at start (True ones as the Node had them)",
                );
            }
        }
    }
    Some(input)
}

/// NPD settings with no counterpart, noted.
fn unsupported(npd: &NpdMonitor, notes: &mut Notes) {
    if let Some(m) = npd.metrics_reporting.as_ref().filter(|m| !m.value) {
        notes.at(
            &m.referenced,
            "metricsReporting false: problem_counter and problem_gauge are always reported",
        );
    }
    if let Some(s) = npd.skip_list.as_ref().filter(|s| !s.value.is_empty()) {
        notes.at(
            &s.referenced,
            "skipList: not needed (lines no pattern can match are skipped by a literal prefilter)",
        );
    }
    if let Some(d) = &npd.delay {
        notes.at(
            &d.referenced,
            format!(
                "delay {:?}: not supported; lines are read from the start",
                d.value
            ),
        );
    }
}

/// One NPD rule (a pattern, or a custom plugin's check) as ours.
fn rule(r: NpdRule, errors: &mut Errors) -> RawRule {
    let message = r
        .pattern_generated_message_suffix
        .filter(|s| !s.is_empty())
        .map(|s| format!("${{lines}}{}", s.replace('$', "$$")));
    // NPD runs its checks as root: an NPD file keeps that meaning (said once per file, see `input`).
    let exec = r.path.map(|path| RawExec {
        run_as: Some(Spanned::new(
            "root".to_string(),
            path.referenced,
            path.referenced,
        )),
        path,
        args: r.args,
        timeout: r.timeout.and_then(|d| go(d, errors)),
        interval: r.invoke_interval.and_then(|d| go(d, errors)),
    });
    RawRule {
        // NPD ignores `condition` on temporary rules; so do we.
        condition: if r.type_.value == "temporary" {
            None
        } else {
            r.condition
        },
        type_: r.type_,
        reason: r.reason,
        pattern: r.pattern,
        message,
        exec,
        signal: None,
        below: None,
        above: None,
        clear: None,
        reaches: None,
        within: None,
        trend: None,
        sustain: None,
    }
}

/// A Go duration (`5m`, `1h30m`, `1.5s`, `300ms`, `0`) in our notation, or an error at its place.
fn go(d: Spanned<String>, errors: &mut Errors) -> Option<Spanned<String>> {
    match parse_go_duration(&d.value) {
        Some(v) => Some(Spanned::new(
            humantime::format_duration(v).to_string(),
            d.referenced,
            d.defined,
        )),
        None => {
            errors.at(
                &d.referenced,
                format!(
                    "invalid Go duration {:?} (examples: 30s, 5m, 1h30m, 500ms)",
                    d.value
                ),
            );
            None
        }
    }
}

/// Go's `time.ParseDuration`, for non-negative values.
pub(crate) fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return None;
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let nanos: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        let value: f64 = number.parse().ok()?;
        let part = value * nanos;
        if !part.is_finite() || part > u64::MAX as f64 {
            return None;
        }
        total = total.checked_add(Duration::from_nanos(part.round() as u64))?;
        rest = next;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_does() {
        let cases = [
            ("0", Some(0)),
            ("5m", Some(300_000)),
            ("1h30m", Some(5_400_000)),
            ("1.5s", Some(1_500)),
            ("300ms", Some(300)),
            ("2m30s", Some(150_000)),
            ("", None),
            ("5", None),
            ("5x", None),
            ("-5s", None),
            ("m", None),
        ];
        for (text, want) in cases {
            let got = parse_go_duration(text).map(|d| d.as_millis() as u64);
            assert_eq!(got, want, "{text:?}");
        }
    }
}
