//! Where a setting comes from while the configuration is built: its flag, else the file's key
//! with its position; and the errors found so far. Pure.

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use serde_saphyr::Spanned;

use crate::config::file::FileConfig;
use crate::config::flags::PolicyArgs;

/// One configuration error and where it is: typed and comparable, all of them reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// In the command line (the message names the flag).
    #[error("{0}")]
    Flag(String),
    /// In the YAML file, at a line and column.
    #[error("{}:{line}:{column}: {message}", file.display())]
    File {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The YAML file cannot be read.
    #[error("{}: cannot read: {message}", file.display())]
    Read { file: PathBuf, message: String },
}

/// Where values come from while building, and the errors found so far.
pub(super) struct Sources<'a> {
    pub(super) args: &'a PolicyArgs,
    pub(super) file: &'a FileConfig,
    pub(super) path: PathBuf,
    pub(super) errors: Vec<PolicyError>,
}

impl Sources<'_> {
    pub(super) fn at(&self, s: &Spanned<impl Sized>, msg: impl Display) -> PolicyError {
        PolicyError::File {
            file: self.path.clone(),
            line: s.referenced.line() as usize,
            column: s.referenced.column() as usize,
            message: msg.to_string(),
        }
    }

    pub(super) fn flag_error(&mut self, msg: impl Display) {
        self.errors.push(PolicyError::Flag(msg.to_string()));
    }

    /// A value from its flag, else from the file (with its position), parsed by `parse`.
    pub(super) fn pick<T, E: Display>(
        &mut self,
        flag: Option<&str>,
        from_file: &Option<Spanned<String>>,
        (flag_name, key): (&str, &str),
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Option<T> {
        match (flag, from_file) {
            (Some(v), _) => parse(v)
                .map_err(|e| self.flag_error(format!("--{flag_name}: {e}")))
                .ok(),
            (None, Some(s)) => match parse(&s.value) {
                Ok(v) => Some(v),
                Err(e) => {
                    let err = self.at(s, format!("{key}: {e}"));
                    self.errors.push(err);
                    None
                }
            },
            _ => None,
        }
    }

    /// Repeatable flags replace the file's list.
    pub(super) fn each<T, E: Display>(
        &mut self,
        flags: &[String],
        from_file: &[Spanned<String>],
        (flag_name, key): (&str, &str),
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Vec<T> {
        if !flags.is_empty() {
            return flags
                .iter()
                .filter_map(|v| self.pick(Some(v), &None, (flag_name, key), &parse))
                .collect();
        }
        from_file
            .iter()
            .filter_map(|s| self.pick(None, &Some(s.clone()), (flag_name, key), &parse))
            .collect()
    }

    /// A safety limit (a budget, a breaker threshold, a domain limit) from its flag, else from the
    /// file. When both give one, the command line's is a ceiling the file may only tighten: a
    /// value `within` it is taken, a looser one (or one that cannot be compared) is an error at
    /// its position, so an edit of the ConfigMap never loosens what the command line set and a
    /// reload with it is refused.
    pub(super) fn limit<T, E: Display>(
        &mut self,
        flag: Option<&str>,
        from_file: &Option<Spanned<String>>,
        (flag_name, key): (&str, &str),
        parse: impl Fn(&str) -> Result<T, E>,
        within: impl Fn(&T, &T) -> Option<bool>,
    ) -> Option<T> {
        let (Some(flag), Some(file)) = (flag, from_file) else {
            return self.pick(flag, from_file, (flag_name, key), parse);
        };
        let ceiling = self.pick(Some(flag), &None, (flag_name, key), &parse)?;
        let value = self.pick(None, from_file, (flag_name, key), &parse)?;
        let why = match within(&value, &ceiling) {
            Some(true) => return Some(value),
            Some(false) => "looser than",
            None => "not comparable (a count and a percentage) with",
        };
        let err = self.at(
            file,
            format!(
                "{key} {:?} is {why} --{flag_name} {flag} given on the command line: a config edit may only tighten it",
                file.value
            ),
        );
        self.errors.push(err);
        Some(ceiling)
    }

    /// A duration from its (typed) flag, else from the file.
    pub(super) fn duration(
        &mut self,
        flag: Option<Duration>,
        from_file: &Option<Spanned<String>>,
        names: (&str, &str),
    ) -> Option<Duration> {
        let text = flag.map(|d| humantime::format_duration(d).to_string());
        self.pick(text.as_deref(), from_file, names, parse_duration)
    }
}

/// A duration that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid duration {text:?}: {source}")]
pub(crate) struct DurationError {
    text: String,
    source: nodemedic_common::time::DurationError,
}

pub(super) fn parse_duration(v: &str) -> Result<Duration, DurationError> {
    nodemedic_common::time::parse_duration(v.trim()).map_err(|source| DurationError {
        text: v.to_string(),
        source,
    })
}
