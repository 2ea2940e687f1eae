//! An input as written, validated: `kmsg`, `journal`, `file` or `exec` with its settings and checks
//! (`resources` is in `gauge`).
//! Pure.

use std::path::PathBuf;

use super::errors::{Errors, parse_duration};
use super::model::{Check, ExecSettings, Input, LineFormat, MAX_CONCURRENCY, RuleKind, RunAs};
use super::raw;
use crate::matcher::MAX_MESSAGE;

/// A check as written, with the input's defaults applied (kind and reason are the rule's).
pub(super) fn build_check(
    x: &raw::RawExec,
    settings: &ExecSettings,
    errors: &mut Errors,
) -> Option<Check> {
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
    let run_as = match x.run_as.as_ref().map(|r| (r, r.value.as_str())) {
        None | Some((_, "nobody")) => RunAs::Nobody,
        Some((_, "root")) => RunAs::Root,
        Some((r, other)) => {
            errors.at(
                &r.referenced,
                format!("exec.runAs {other:?}: expected `nobody` (the default) or `root`"),
            );
            RunAs::Nobody
        }
    };
    (errors.list.len() == before).then(|| Check {
        kind: RuleKind::Temporary,
        reason: String::new(),
        program: PathBuf::from(&x.path.value),
        args: x.args.clone(),
        timeout,
        interval,
        run_as,
    })
}

pub(super) fn build_input(raw: &raw::RawInput, errors: &mut Errors) -> Option<Input> {
    let path = raw.path.as_ref().map(|p| PathBuf::from(&p.value));
    let what = raw.kind.value.as_str();
    if what != "resources" {
        for (field, loc) in [
            (
                "filesystems",
                raw.filesystems.as_ref().map(|s| s.referenced),
            ),
            ("procDir", raw.proc_dir.as_ref().map(|s| s.referenced)),
        ] {
            if let Some(loc) = loc {
                errors.at(
                    &loc,
                    format!("input.{field}: only a resources input has it (this one is {what:?})"),
                );
            }
        }
    }
    if what != "exec" {
        let interval = raw.interval.as_ref().filter(|_| what != "resources");
        for (field, loc) in [
            ("interval", interval.map(|s| s.referenced)),
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
        "resources" => super::gauge::build_resources(raw, errors).map(Input::Resources),
        "kmsg" => Some(Input::Kmsg {
            user_space: raw.user_space,
        }),
        "journal" => Some(Input::Journal {
            identifiers: raw.identifiers.clone(),
            how: if raw.syslog_identifier_only {
                crate::parse::journal::IdentifierMatch::SyslogIdentifier
            } else {
                crate::parse::journal::IdentifierMatch::Backed
            },
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
                format!("input.kind {other:?}: expected `kmsg`, `journal`, `file`, `exec` or `resources`"),
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
        if m.value == 0 || m.value > MAX_MESSAGE {
            errors.at(
                &m.referenced,
                format!(
                    "input.maxOutputLength: {} is out of range 1..={} (messages are at most {} bytes)",
                    m.value,
                    MAX_MESSAGE,
                    MAX_MESSAGE
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
