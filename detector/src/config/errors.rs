//! Rule-file errors with their positions (`file:line:column: message`), and the collector each file's
//! validation writes into. Pure.

use std::time::Duration;

use serde_saphyr::{Location, Spanned};

/// One rule-file problem, with its position (`file:line:column: message`; a problem with the file as
/// a whole, such as one that cannot be read, has line 0 and shows as `file: message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.display())]
pub struct ConfigError {
    pub(crate) file: String,
    pub(crate) line: u64,
    pub(crate) column: u64,
    pub(crate) message: String,
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

pub(super) fn parse_duration(
    s: &Spanned<String>,
    what: &str,
    errors: &mut Errors,
) -> Option<Duration> {
    match nodemedic_common::time::parse_duration(s.value.trim()) {
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
