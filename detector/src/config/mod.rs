//! Rule files: parsed (`raw`), validated and compiled (`build`), then frozen as a [`RuleSet`].
//!
//! Every error names `file:line:column` and what is wrong, so an operator can fix a ConfigMap
//! without guessing; loading never stops at the first bad file, it reports all of them.

mod load;
pub mod npd;
mod raw;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

pub use load::{bundled_defaults, convert_npd, load_paths, load_sources};

/// Default window for multi-line patterns (NPD's bufferSize default).
pub const DEFAULT_BUFFER_SIZE: usize = 10;
/// Upper bound on bufferSize: each line of the window is kept in memory per monitor.
pub const MAX_BUFFER_SIZE: usize = 1000;
/// The most pattern text all rule files together may hold (rules' and recoveries' patterns added up).
/// Parsing and compiling regexes takes memory in proportion to their text (measured on the release
/// binary: one 2.5 MB alternation peaked at 381 MB, sixty 16 KiB patterns at 177 MB, both over the
/// detector's 128 Mi limit, so one bad ConfigMap would OOM-kill the detector on every node, and again
/// at each restart). 64 KiB compiles within ~40 MB and is still hundreds of ordinary rules (the
/// bundled rules have 1.5 KiB, NPD's shipped monitor files 1.7 KiB in all).
pub const MAX_PATTERN_BYTES: usize = 64 * 1024;
/// The most rules, over all rule files, whose pattern is compiled on its own besides the monitor's
/// set: those with a `message` template (to expand captures) and multi-line ones. Each takes ~90 KB
/// (900 such rules peaked at 90 MB); the bundled and opt-in rule files have four.
pub const MAX_OWN_REGEXES: usize = 128;

/// One rule-file problem, with its position (`file:line:column: message`; a problem with the file as
/// a whole, such as one that cannot be read, has line 0 and shows as `file: message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.display())]
pub struct ConfigError {
    pub file: String,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl ConfigError {
    fn display(&self) -> String {
        let ConfigError {
            file,
            line,
            column,
            message,
        } = self;
        if *line == 0 {
            format!("{file}: {message}")
        } else {
            format!("{file}:{line}:{column}: {message}")
        }
    }
}

/// All problems found in a set of rule files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// Where lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Kmsg,
    Journal {
        identifiers: Vec<String>,
        units: Vec<String>,
        directory: Option<PathBuf>,
    },
    File {
        path: PathBuf,
        format: LineFormat,
    },
    /// Checks run as programs (NPD's custom plugin monitor); the rules are in `Monitor::checks`.
    Exec(ExecSettings),
}

impl Input {
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Kmsg => "kmsg",
            Input::Journal { .. } => "journal",
            Input::File { .. } => "file",
            Input::Exec(_) => "exec",
        }
    }
}

/// An exec input's settings (NPD's `pluginConfig` of a custom plugin monitor, same defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// Default interval of the checks.
    pub interval: Duration,
    /// Default and longest timeout of the checks.
    pub timeout: Duration,
    /// Bytes of output kept as the message.
    pub max_output: usize,
    /// Checks of this monitor running at once.
    pub concurrency: usize,
    /// A True condition is updated (with an Event) when its check prints another message.
    pub update_on_message_change: bool,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
            max_output: 80,
            concurrency: 3,
            update_on_message_change: false,
        }
    }
}

/// Most checks of one exec monitor that may run at once.
pub const MAX_CONCURRENCY: usize = 64;

/// One check of an exec monitor: a program whose exit status says how things are (0 healthy, 1 a
/// problem, anything else unknown) and whose output is the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub kind: RuleKind,
    pub reason: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    pub interval: Duration,
}

/// How a plain log file's lines are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// `Nov 22 03:27:01 host tag[pid]: message`: the prefix is stripped before matching.
    Syslog,
    /// The whole line is the message.
    Plain,
}

/// A condition a monitor owns.
#[derive(Debug, Clone)]
pub struct ConditionDef {
    pub type_: String,
    pub healthy_reason: String,
    pub healthy_message: String,
    /// Validated recovery pattern (compiled with the monitor's rules).
    pub recovery_pattern: Option<String>,
    pub recovery_after: Option<Duration>,
}

/// What a matching rule means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    /// An Event.
    Temporary,
    /// The condition at this index of the monitor's `conditions` becomes True.
    Permanent { condition: usize },
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub kind: RuleKind,
    pub reason: String,
    /// The pattern as written (its compiled form is in the monitor's `compiled`).
    pub source_pattern: String,
    pub message: Option<String>,
    /// The pattern contains a newline: it is matched against the window of recent lines.
    pub multiline: bool,
}

/// One validated rule file.
#[derive(Debug, Clone)]
pub struct Monitor {
    /// The file stem, e.g. `kernel-monitor`; names the monitor in logs, metrics and checkpoints.
    pub name: String,
    pub file: PathBuf,
    pub source: String,
    pub input: Input,
    pub lookback: Option<Duration>,
    pub buffer_size: usize,
    pub conditions: Vec<ConditionDef>,
    pub rules: Vec<Rule>,
    /// An exec monitor's checks (its `rules` are empty).
    pub checks: Vec<Check>,
    /// The patterns, compiled once (shared by the matcher of every monitor task for this file).
    pub compiled: std::sync::Arc<crate::matcher::Compiled>,
}

impl Monitor {
    /// Every rule's kind and reason: the pattern rules' and the checks'.
    pub fn reasons(&self) -> impl Iterator<Item = (RuleKind, &str)> {
        self.rules
            .iter()
            .map(|r| (r.kind.clone(), r.reason.as_str()))
            .chain(
                self.checks
                    .iter()
                    .map(|c| (c.kind.clone(), c.reason.as_str())),
            )
    }
}

/// The frozen, validated configuration.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub monitors: Vec<Monitor>,
    /// What NPD files said that does not carry over (logged at start, printed by `check`).
    pub notes: Vec<ConfigError>,
}

impl RuleSet {
    /// Every condition type declared by any monitor.
    pub fn condition_types(&self) -> Vec<String> {
        self.monitors
            .iter()
            .flat_map(|m| m.conditions.iter().map(|c| c.type_.clone()))
            .collect()
    }
}

/// Collects errors for one file.
pub(crate) struct Errors<'a> {
    pub(crate) file: &'a str,
    pub(crate) list: Vec<ConfigError>,
}

impl<'a> Errors<'a> {
    pub(crate) fn new(file: &'a str) -> Self {
        Self {
            file,
            list: Vec::new(),
        }
    }

    pub(crate) fn at(&mut self, loc: &Location, message: impl Into<String>) {
        self.list.push(ConfigError {
            file: self.file.to_string(),
            line: loc.line(),
            column: loc.column(),
            message: message.into(),
        });
    }
}

fn parse_duration(s: &Spanned<String>, what: &str, errors: &mut Errors) -> Option<Duration> {
    match humantime::parse_duration(s.value.trim()) {
        Ok(d) => Some(d),
        Err(e) => {
            errors.at(
                &s.referenced,
                format!(
                    "{what}: invalid duration {:?}: {e} (examples: 30s, 5m, 1h30m)",
                    s.value
                ),
            );
            None
        }
    }
}

/// What is left of [`MAX_PATTERN_BYTES`] and [`MAX_OWN_REGEXES`] while rule files are loaded (one
/// budget for all files: memory is what it bounds). Once spent, the pattern that went over is named
/// once, and nothing more is parsed or compiled.
pub(crate) struct PatternBudget {
    bytes: usize,
    own: usize,
    spent: bool,
}

impl PatternBudget {
    pub(crate) fn new() -> Self {
        Self {
            bytes: MAX_PATTERN_BYTES,
            own: MAX_OWN_REGEXES,
            spent: false,
        }
    }

    /// Takes `pattern` (compiled on its own too when `own`) from the budget; false, and one error,
    /// when it does not fit.
    fn take(
        &mut self,
        pattern: &Spanned<String>,
        own: bool,
        what: &str,
        errors: &mut Errors,
    ) -> bool {
        if self.spent {
            return false;
        }
        let bytes = self.bytes.checked_sub(pattern.value.len());
        let left = if own {
            self.own.checked_sub(1)
        } else {
            Some(self.own)
        };
        let message = match (bytes, left) {
            (Some(bytes), Some(own)) => {
                self.bytes = bytes;
                self.own = own;
                return true;
            }
            (None, _) => format!(
                "{what}: the rule files' patterns add up to more than {} KiB, the most the detector loads (regexes take memory to compile in proportion to their text); shorten or remove patterns",
                MAX_PATTERN_BYTES / 1024
            ),
            (_, None) => format!(
                "{what}: more than {MAX_OWN_REGEXES} rules in the rule files have a message template or a multi-line pattern, the most the detector loads (each is compiled on its own, ~90 KB); use the matched line as the message for some"
            ),
        };
        self.spent = true;
        errors.at(&pattern.referenced, message);
        false
    }
}

/// Check a pattern's syntax in the form the matcher will compile (`anchor` wraps it: the end anchor
/// is part of what must parse, e.g. a trailing `# comment` under `(?x)` would swallow it). Parsing
/// only: the patterns are compiled once, together, by [`crate::matcher::Compiled`]. The pattern is
/// charged to the `budget` first (`own`: it will be compiled on its own too), so an oversized one is
/// never parsed.
fn check_pattern(
    pattern: &Spanned<String>,
    anchor: fn(&str) -> String,
    what: &str,
    own: bool,
    budget: &mut PatternBudget,
    errors: &mut Errors,
) -> Option<String> {
    if !budget.take(pattern, own, what, errors) {
        return None;
    }
    let parse = |p: &str| {
        regex_syntax::Parser::new()
            .parse(p)
            .map_err(|e| e.to_string())
    };
    match parse(&anchor(&pattern.value)) {
        Ok(_) => Some(pattern.value.clone()),
        Err(e) => {
            // The regex error is multi-line (it draws a caret under the pattern); keep it readable on one
            // log line by folding it.
            let detail = e.lines().map(str::trim_end).collect::<Vec<_>>().join(" | ");
            // A pattern that parses alone but not wrapped hides the wrapping's `)` (a `# comment` under
            // `(?x)` runs to the end of the line): say so, since the error shows text nobody wrote.
            let hint = if parse(&pattern.value).is_ok() {
                format!(
                    " (patterns are matched as {:?}: under (?x) end a # comment with a newline)",
                    anchor("PATTERN")
                )
            } else {
                String::new()
            };
            errors.at(
                &pattern.referenced,
                format!("{what}: invalid regex {:?}: {detail}{hint}", pattern.value),
            );
            None
        }
    }
}

/// Validate one parsed file. `name` is the monitor name (file stem); `budget` spans all the files
/// being loaded.
pub(crate) fn build(
    raw: raw::RawMonitor,
    name: &str,
    file: &Path,
    budget: &mut PatternBudget,
    errors: &mut Errors,
) -> Option<Monitor> {
    let before = errors.list.len();
    if raw.source.value.trim().is_empty() {
        errors.at(
            &raw.source.referenced,
            "source: must not be empty (it names the Event source, e.g. kernel-monitor)",
        );
    }
    let input = build_input(&raw.input, errors);
    let lookback = raw
        .lookback
        .as_ref()
        .and_then(|l| parse_duration(l, "lookback", errors));
    let buffer_size = match &raw.buffer_size {
        None => DEFAULT_BUFFER_SIZE,
        Some(b) if b.value == 0 || b.value > MAX_BUFFER_SIZE => {
            errors.at(
                &b.referenced,
                format!(
                    "bufferSize: {} is out of range 1..={MAX_BUFFER_SIZE}",
                    b.value
                ),
            );
            DEFAULT_BUFFER_SIZE
        }
        Some(b) => b.value,
    };

    let mut conditions: Vec<ConditionDef> = Vec::new();
    for c in &raw.conditions {
        if !is_condition_type(&c.type_.value) {
            errors.at(
                &c.type_.referenced,
                format!("conditions: type {:?} is not a valid condition type (letters and digits, starting with a letter)", c.type_.value),
            );
        }
        if conditions.iter().any(|d| d.type_ == c.type_.value) {
            errors.at(
                &c.type_.referenced,
                format!(
                    "conditions: type {:?} is declared twice in this file",
                    c.type_.value
                ),
            );
            continue;
        }
        let (recovery_pattern, recovery_after) = match &c.recovery {
            None => (None, None),
            Some(r) => {
                let p = r.pattern.as_ref().and_then(|p| {
                    check_pattern(
                        p,
                        crate::matcher::anchored,
                        "recovery.pattern",
                        false,
                        budget,
                        errors,
                    )
                });
                let a = r
                    .after
                    .as_ref()
                    .and_then(|a| parse_duration(a, "recovery.after", errors));
                if r.pattern.is_none() && r.after.is_none() {
                    errors.at(
                        &c.type_.referenced,
                        "recovery: give a pattern, an `after` quiet period, or both",
                    );
                }
                (p, a)
            }
        };
        if c.message.len() > crate::matcher::MAX_MESSAGE {
            errors.at(
                &c.type_.referenced,
                format!(
                    "message: {} bytes; messages are at most {} bytes",
                    c.message.len(),
                    crate::matcher::MAX_MESSAGE
                ),
            );
        }
        conditions.push(ConditionDef {
            type_: c.type_.value.clone(),
            healthy_reason: c.reason.clone(),
            healthy_message: c.message.clone(),
            recovery_pattern,
            recovery_after,
        });
    }

    // An exec file's rules are checks even when its input has errors (they are reported already).
    let exec = (raw.input.kind.value == "exec").then(|| match &input {
        Some(Input::Exec(settings)) => settings.clone(),
        _ => ExecSettings::default(),
    });
    if exec.is_some() {
        if let Some(l) = &raw.lookback {
            errors.at(
                &l.referenced,
                "lookback: an exec input has no history to read back",
            );
        }
        if let Some(b) = &raw.buffer_size {
            errors.at(&b.referenced, "bufferSize: an exec input reads no lines");
        }
        for c in raw.conditions.iter().filter(|c| c.recovery.is_some()) {
            errors.at(
                &c.type_.referenced,
                "recovery: an exec check's condition returns to False when its check exits 0",
            );
        }
    }
    let mut rules = Vec::new();
    let mut checks = Vec::new();
    for r in &raw.rules {
        let kind = match r.type_.value.as_str() {
            "temporary" => {
                if let Some(c) = &r.condition {
                    errors.at(
                        &c.referenced,
                        "condition: only permanent rules name a condition (this rule is temporary)",
                    );
                }
                Some(RuleKind::Temporary)
            }
            "permanent" => {
                match &r.condition {
                    None => {
                        errors.at(
                            &r.type_.referenced,
                            "permanent rule: `condition` is required (the condition type it sets)",
                        );
                        None
                    }
                    Some(c) => match conditions.iter().position(|d| d.type_ == c.value) {
                        Some(i) => Some(RuleKind::Permanent { condition: i }),
                        None => {
                            errors.at(
                            &c.referenced,
                            format!("condition: {:?} is not declared under `conditions` in this file", c.value),
                        );
                            None
                        }
                    },
                }
            }
            other => {
                errors.at(
                    &r.type_.referenced,
                    format!("rule type {other:?}: expected `temporary` or `permanent`"),
                );
                None
            }
        };
        if r.reason.value.trim().is_empty() {
            errors.at(&r.reason.referenced, "reason: must not be empty");
        }
        if let Some(m) = r
            .message
            .as_ref()
            .filter(|m| m.len() > crate::matcher::MAX_MESSAGE)
        {
            errors.at(
                &r.reason.referenced,
                format!(
                    "message: a {} byte template; messages are at most {} bytes",
                    m.len(),
                    crate::matcher::MAX_MESSAGE
                ),
            );
        }
        match (&exec, &r.pattern, &r.exec) {
            (Some(settings), pattern, Some(x)) => {
                if let Some(p) = pattern {
                    errors.at(
                        &p.referenced,
                        "pattern: an exec input runs checks, it reads no lines; this rule's check is its `exec`",
                    );
                }
                if r.message.is_some() {
                    errors.at(
                        &r.reason.referenced,
                        "message: an exec check's message is what it prints (cut at maxOutputLength)",
                    );
                }
                if let (Some(kind), Some(check)) = (kind, build_check(x, settings, errors)) {
                    checks.push(Check {
                        kind,
                        reason: r.reason.value.clone(),
                        ..check
                    });
                }
            }
            (Some(_), _, None) => errors.at(
                &r.reason.referenced,
                "exec: each rule of an exec input needs `exec: {path: PROGRAM, args: [...]}`, the check to run",
            ),
            (None, _, Some(x)) => errors.at(
                &x.path.referenced,
                format!(
                    "exec: only an `input: {{kind: exec}}` file runs checks (this one reads {})",
                    raw.input.kind.value
                ),
            ),
            (None, None, None) => errors.at(
                &r.reason.referenced,
                "pattern: required (the regex a log line must match)",
            ),
            (None, Some(pattern), None) => {
                let multiline = pattern.value.contains('\n') || pattern.value.contains("\\n");
                let anchor = if multiline {
                    crate::matcher::anchored_multi
                } else {
                    crate::matcher::anchored
                };
                let own = multiline || r.message.is_some();
                let pattern = check_pattern(pattern, anchor, "pattern", own, budget, errors);
                if let (Some(kind), Some(pattern)) = (kind, pattern) {
                    rules.push(Rule {
                        kind,
                        reason: r.reason.value.clone(),
                        multiline,
                        source_pattern: pattern,
                        message: r.message.clone(),
                    });
                }
            }
        }
    }
    if errors.list.len() != before {
        return None;
    }
    // Compile once, together: where a set too large for the regex engine fails.
    let recoveries: Vec<(usize, String)> = conditions
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.recovery_pattern.clone().map(|p| (i, p)))
        .collect();
    let compiled = match crate::matcher::Compiled::new(&rules, &recoveries) {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => {
            let detail = e
                .to_string()
                .lines()
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join(" | ");
            let at = raw
                .rules
                .iter()
                .find_map(|r| r.pattern.as_ref().map(|p| &p.referenced))
                .unwrap_or(&raw.source.referenced);
            errors.at(
                at,
                format!(
                    "rules: the {} patterns of this file cannot be compiled together ({detail}); split the file or simplify the patterns",
                    rules.len() + recoveries.len()
                ),
            );
            return None;
        }
    };
    Some(Monitor {
        name: name.to_string(),
        file: file.to_path_buf(),
        source: raw.source.value.clone(),
        input: input.unwrap_or(Input::Kmsg),
        lookback,
        buffer_size,
        conditions,
        rules,
        checks,
        compiled,
    })
}

/// A check as written, with the input's defaults applied (kind and reason are the rule's).
fn build_check(x: &raw::RawExec, settings: &ExecSettings, errors: &mut Errors) -> Option<Check> {
    let before = errors.list.len();
    if x.path.value.trim().is_empty() {
        errors.at(
            &x.path.referenced,
            "exec.path: must name the program to run",
        );
    }
    let timeout = match &x.timeout {
        None => settings.timeout,
        Some(t) => match parse_duration(t, "exec.timeout", errors) {
            Some(d) if d > settings.timeout => {
                errors.at(
                    &t.referenced,
                    format!(
                        "exec.timeout: {} is longer than the input's timeout {} (raise input.timeout)",
                        humantime::format_duration(d),
                        humantime::format_duration(settings.timeout)
                    ),
                );
                d
            }
            Some(d) if d.is_zero() => {
                errors.at(&t.referenced, "exec.timeout: must be more than 0s");
                d
            }
            Some(d) => d,
            None => settings.timeout,
        },
    };
    let interval = match &x.interval {
        None => settings.interval,
        Some(i) => match parse_duration(i, "exec.interval", errors) {
            Some(d) if d.is_zero() => {
                errors.at(&i.referenced, "exec.interval: must be more than 0s");
                d
            }
            Some(d) => d,
            None => settings.interval,
        },
    };
    (errors.list.len() == before).then(|| Check {
        kind: RuleKind::Temporary,
        reason: String::new(),
        program: PathBuf::from(&x.path.value),
        args: x.args.clone(),
        timeout,
        interval,
    })
}

fn build_input(raw: &raw::RawInput, errors: &mut Errors) -> Option<Input> {
    let path = raw.path.as_ref().map(|p| PathBuf::from(&p.value));
    if raw.kind.value != "exec" {
        let what = raw.kind.value.as_str();
        for (field, loc) in [
            ("interval", raw.interval.as_ref().map(|s| s.referenced)),
            ("timeout", raw.timeout.as_ref().map(|s| s.referenced)),
            (
                "maxOutputLength",
                raw.max_output_length.as_ref().map(|s| s.referenced),
            ),
            (
                "concurrency",
                raw.concurrency.as_ref().map(|s| s.referenced),
            ),
        ] {
            if let Some(loc) = loc {
                errors.at(
                    &loc,
                    format!("input.{field}: only an exec input has it (this one is {what:?})"),
                );
            }
        }
    }
    match raw.kind.value.as_str() {
        "exec" => build_exec(raw, errors).map(Input::Exec),
        "kmsg" => Some(Input::Kmsg),
        "journal" => Some(Input::Journal {
            identifiers: raw.identifiers.clone(),
            units: raw.units.clone(),
            directory: path,
        }),
        "file" => {
            let format = match raw.format.as_ref().map(|f| (f, f.value.as_str())) {
                None | Some((_, "plain")) => LineFormat::Plain,
                Some((_, "syslog")) => LineFormat::Syslog,
                Some((f, other)) => {
                    errors.at(
                        &f.referenced,
                        format!("input.format {other:?}: expected `syslog` or `plain`"),
                    );
                    return None;
                }
            };
            match path {
                Some(path) => Some(Input::File { path, format }),
                None => {
                    errors.at(&raw.kind.referenced, "input: a `file` input needs `path`");
                    None
                }
            }
        }
        other => {
            errors.at(
                &raw.kind.referenced,
                format!("input.kind {other:?}: expected `kmsg`, `journal`, `file` or `exec`"),
            );
            None
        }
    }
}

fn build_exec(raw: &raw::RawInput, errors: &mut Errors) -> Option<ExecSettings> {
    let before = errors.list.len();
    let mut s = ExecSettings::default();
    if let Some(p) = &raw.path {
        errors.at(
            &p.referenced,
            "input.path: an exec input reads no file; each rule's `exec.path` names its program",
        );
    }
    if let Some(i) = &raw.interval {
        match parse_duration(i, "input.interval", errors) {
            Some(d) if d.is_zero() => {
                errors.at(&i.referenced, "input.interval: must be more than 0s")
            }
            Some(d) => s.interval = d,
            None => {}
        }
    }
    if let Some(t) = &raw.timeout {
        match parse_duration(t, "input.timeout", errors) {
            Some(d) if d.is_zero() => {
                errors.at(&t.referenced, "input.timeout: must be more than 0s")
            }
            Some(d) => s.timeout = d,
            None => {}
        }
    }
    if let Some(m) = &raw.max_output_length {
        if m.value == 0 || m.value > crate::matcher::MAX_MESSAGE {
            errors.at(
                &m.referenced,
                format!(
                    "input.maxOutputLength: {} is out of range 1..={} (messages are at most {} bytes)",
                    m.value,
                    crate::matcher::MAX_MESSAGE,
                    crate::matcher::MAX_MESSAGE
                ),
            );
        } else {
            s.max_output = m.value;
        }
    }
    if let Some(c) = &raw.concurrency {
        if c.value == 0 || c.value > MAX_CONCURRENCY {
            errors.at(
                &c.referenced,
                format!(
                    "input.concurrency: {} is out of range 1..={MAX_CONCURRENCY}",
                    c.value
                ),
            );
        } else {
            s.concurrency = c.value;
        }
    }
    if let Some(u) = raw.update_on_message_change {
        s.update_on_message_change = u;
    }
    (errors.list.len() == before).then_some(s)
}

fn is_condition_type(t: &str) -> bool {
    let mut chars = t.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' || c == '/')
}

#[cfg(test)]
mod tests;
