//! One parsed rule file validated into a [`Monitor`]: its header, conditions, rules or checks, and its
//! patterns compiled together. Every problem is collected with its position; nothing stops at the
//! first. Pure.

use std::path::Path;
use std::sync::Arc;

use super::errors::{Errors, parse_duration};
use super::gauge;
use super::input::{build_check, build_input};
use super::model::{
    Check, ConditionDef, DEFAULT_BUFFER_SIZE, ExecSettings, Input, MAX_BUFFER_SIZE, Monitor,
    ResourceSettings, Rule, RuleKind,
};
use super::patterns::{PatternBudget, check_pattern};
use super::raw::{RawCondition, RawMonitor, RawRule};
use crate::matcher::{self, Compiled, MAX_MESSAGE, Pattern, Target};

/// Validate one parsed file. `name` is the monitor name (file stem); `budget` spans all the files
/// being loaded.
pub(crate) fn build(
    raw: RawMonitor,
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
    let buffer_size = buffer_size(&raw, errors);
    let conditions = build_conditions(&raw.conditions, budget, errors);
    // An exec file's rules are checks even when its input has errors (they are reported already).
    let exec = (raw.input.kind.value == "exec").then(|| match &input {
        Some(Input::Exec(settings)) => settings.clone(),
        _ => ExecSettings::default(),
    });
    if exec.is_some() {
        exec_misuse(&raw, errors);
    }
    let resources = (raw.input.kind.value == "resources").then(|| match &input {
        Some(Input::Resources(settings)) => settings.clone(),
        _ => ResourceSettings::default(),
    });
    if resources.is_some() {
        gauge::resources_misuse(&raw, errors);
    }
    let mut rules = Vec::new();
    let mut checks = Vec::new();
    let mut gauges = Vec::new();
    for r in &raw.rules {
        let kind = rule_kind(r, &conditions, errors);
        if let Some(settings) = &resources {
            gauges.extend(gauge::build_gauge(r, kind, settings, errors));
            continue;
        }
        for (field, at) in gauge::gauge_fields(r) {
            errors.at(
                &at,
                format!(
                    "{field}: only the rules of an `input: {{kind: resources}}` file read signals"
                ),
            );
        }
        match build_rule(
            r,
            kind,
            exec.as_ref(),
            &raw.input.kind.value,
            budget,
            errors,
        ) {
            Some(Built::Rule(rule)) => rules.push(rule),
            Some(Built::Check(check)) => checks.push(check),
            None => {}
        }
    }
    if errors.list.len() != before {
        return None;
    }
    let compiled = compile(&raw, &rules, &conditions, buffer_size, errors)?;
    Some(Monitor {
        name: name.to_string(),
        file: file.to_path_buf(),
        source: raw.source.value.clone(),
        input: input.unwrap_or(Input::Kmsg { user_space: false }),
        lookback,
        buffer_size,
        conditions,
        rules,
        checks,
        gauges,
        compiled,
    })
}

fn buffer_size(raw: &RawMonitor, errors: &mut Errors) -> usize {
    match &raw.buffer_size {
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
    }
}

fn build_conditions(
    raw: &[RawCondition],
    budget: &mut PatternBudget,
    errors: &mut Errors,
) -> Vec<ConditionDef> {
    let mut conditions: Vec<ConditionDef> = Vec::new();
    for c in raw {
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
                    let anchor = matcher::anchored;
                    check_pattern(p, anchor, "recovery.pattern", false, budget, errors)
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
        if c.message.len() > MAX_MESSAGE {
            errors.at(
                &c.type_.referenced,
                format!(
                    "message: {} bytes; messages are at most {MAX_MESSAGE} bytes",
                    c.message.len(),
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
    conditions
}

/// What an exec file may not say: it reads no lines, so no lookback, buffer or recovery pattern.
fn exec_misuse(raw: &RawMonitor, errors: &mut Errors) {
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

/// What a rule's `type` (and `condition`) make it; `None` after an error.
fn rule_kind(r: &RawRule, conditions: &[ConditionDef], errors: &mut Errors) -> Option<RuleKind> {
    match r.type_.value.as_str() {
        "temporary" => {
            if let Some(c) = &r.condition {
                errors.at(
                    &c.referenced,
                    "condition: only permanent rules name a condition (this rule is temporary)",
                );
            }
            Some(RuleKind::Temporary)
        }
        "permanent" => match &r.condition {
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
                        format!(
                            "condition: {:?} is not declared under `conditions` in this file",
                            c.value
                        ),
                    );
                    None
                }
            },
        },
        other => {
            errors.at(
                &r.type_.referenced,
                format!("rule type {other:?}: expected `temporary` or `permanent`"),
            );
            None
        }
    }
}

/// A rule is a pattern rule or, in an exec file, a check.
enum Built {
    Rule(Rule),
    Check(Check),
}

/// One rule validated; `exec` is the file's exec settings when it is an exec file, `input` its kind.
fn build_rule(
    r: &RawRule,
    kind: Option<RuleKind>,
    exec: Option<&ExecSettings>,
    input: &str,
    budget: &mut PatternBudget,
    errors: &mut Errors,
) -> Option<Built> {
    if r.reason.value.trim().is_empty() {
        errors.at(&r.reason.referenced, "reason: must not be empty");
    }
    if let Some(why) = reason_template_error(&r.reason.value, exec.is_some()) {
        errors.at(&r.reason.referenced, why);
    }
    if let Some(m) = r.message.as_ref().filter(|m| m.len() > MAX_MESSAGE) {
        errors.at(
            &r.reason.referenced,
            format!(
                "message: a {} byte template; messages are at most {MAX_MESSAGE} bytes",
                m.len(),
            ),
        );
    }
    match (exec, &r.pattern, &r.exec) {
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
            let check = build_check(x, settings, errors)?;
            Some(Built::Check(Check {
                kind: kind?,
                reason: r.reason.value.clone(),
                ..check
            }))
        }
        (Some(_), _, None) => {
            errors.at(
                &r.reason.referenced,
                "exec: each rule of an exec input needs `exec: {path: PROGRAM, args: [...]}`, the check to run",
            );
            None
        }
        (None, _, Some(x)) => {
            errors.at(
                &x.path.referenced,
                format!("exec: only an `input: {{kind: exec}}` file runs checks (this one reads {input})"),
            );
            None
        }
        (None, None, None) => {
            errors.at(
                &r.reason.referenced,
                "pattern: required (the regex a log line must match)",
            );
            None
        }
        (None, Some(pattern), None) => {
            let multiline = pattern.value.contains('\n') || pattern.value.contains("\\n");
            let anchor = if multiline {
                matcher::anchored_multi
            } else {
                matcher::anchored
            };
            let own = multiline || r.message.is_some() || r.reason.value.contains('$');
            let pattern = check_pattern(pattern, anchor, "pattern", own, budget, errors);
            Some(Built::Rule(Rule {
                kind: kind?,
                reason: r.reason.value.clone(),
                multiline,
                source_pattern: pattern?,
                message: r.message.clone(),
            }))
        }
    }
}

/// What is wrong with `reason` as a template (`GpuXid$2`: the capture's letters and digits after
/// the text), if it is one: its text before the first capture is the reason when the capture
/// brings none, so it must be a reason itself; a check has no captures.
fn reason_template_error(reason: &str, check: bool) -> Option<String> {
    if !reason.contains('$') {
        return None;
    }
    if check {
        return Some(format!(
            "reason: {reason:?} names a capture, and an exec check has none (a template is for log rules)"
        ));
    }
    let prefix = reason.split('$').next().unwrap_or_default();
    let ok = prefix.starts_with(|c: char| c.is_ascii_alphabetic())
        && prefix.chars().all(|c| c.is_ascii_alphanumeric());
    (!ok).then(|| {
        format!(
            "reason: {reason:?}: a template's text before its first capture must be a reason of its own, letters and digits starting with a letter (\"GpuXid$2\")"
        )
    })
}

/// The file's patterns compiled once, together: where a set too large for the regex engine fails.
fn compile(
    raw: &RawMonitor,
    rules: &[Rule],
    conditions: &[ConditionDef],
    window: usize,
    errors: &mut Errors,
) -> Option<Arc<Compiled>> {
    let patterns: Vec<Pattern> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| Pattern {
            target: Target::Rule(i),
            source: r.source_pattern.clone(),
            multiline: r.multiline,
            template: r.message.clone(),
            reason: r.reason.contains('$').then(|| r.reason.clone()),
        })
        .chain(conditions.iter().enumerate().filter_map(|(i, c)| {
            c.recovery_pattern.clone().map(|p| Pattern {
                target: Target::Recovery(i),
                source: p,
                multiline: false,
                template: None,
                reason: None,
            })
        }))
        .collect();
    match Compiled::new(&patterns, window) {
        Ok(c) => Some(Arc::new(c)),
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
                    patterns.len()
                ),
            );
            None
        }
    }
}

fn is_condition_type(t: &str) -> bool {
    let mut chars = t.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' || c == '/')
}
