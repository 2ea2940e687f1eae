//! Problem conditions as draino takes them: `Type`, `Type=Status`, `Type=Status,MinDuration` (the
//! duration the condition must have held, measured from its lastTransitionTime), and after a `:`
//! the condition's remediation ladder (`KernelDeadlock=True,10m: drain, reboot, replace`,
//! [`super::ladder`]). Pure.

use std::time::Duration;

use nodemedic_common::status::Status;

use super::ladder::{Ladder, LadderError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionSpec {
    pub(crate) type_: String,
    pub(crate) status: Status,
    pub(crate) min_duration: Duration,
    /// The steps after the drain (None: draino's form, cordon and drain, then wait).
    pub(crate) ladder: Option<Ladder>,
}

/// A condition that is not one, with the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("condition {input:?}: {type_:?} is not a condition type")]
    NotAType { input: String, type_: String },
    #[error("condition {input:?}: status {status:?} must be True, False or Unknown")]
    Status { input: String, status: String },
    #[error("condition {input:?}: invalid duration {duration:?}: {reason}")]
    Duration {
        input: String,
        duration: String,
        reason: String,
    },
    #[error("condition {input:?}: {error}")]
    Ladder { input: String, error: LadderError },
}

impl std::fmt::Display for ConditionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.type_, self.status)?;
        if !self.min_duration.is_zero() {
            write!(f, ",{}", humantime::format_duration(self.min_duration))?;
        }
        if let Some(l) = self.ladder {
            write!(f, ": {l}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ConditionSpec {
    type Err = SpecError;

    fn from_str(input: &str) -> Result<Self, SpecError> {
        let (s, ladder) = match input.split_once(':') {
            Some((c, l)) => (c, Some(l)),
            None => (input, None),
        };
        let ladder = match ladder.map(str::parse::<Ladder>).transpose() {
            Ok(l) => l,
            Err(error) => {
                let input = input.into();
                return Err(SpecError::Ladder { input, error });
            }
        };
        let (cond, dur) = match s.split_once(',') {
            Some((c, d)) => (c, Some(d)),
            None => (s, None),
        };
        let (type_, status) = match cond.split_once('=') {
            Some((t, st)) => (t.trim(), st.trim()),
            None => (cond.trim(), "True"),
        };
        if type_.is_empty()
            || !type_
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        {
            return Err(SpecError::NotAType {
                input: input.into(),
                type_: type_.into(),
            });
        }
        let status = status.parse::<Status>().map_err(|_| SpecError::Status {
            input: input.into(),
            status: status.into(),
        })?;
        let min_duration = match dur {
            None => Duration::ZERO,
            Some(d) => nodemedic_common::time::parse_duration(d.trim()).map_err(|e| {
                SpecError::Duration {
                    input: input.into(),
                    duration: d.into(),
                    reason: e.to_string(),
                }
            })?,
        };
        Ok(ConditionSpec {
            type_: type_.into(),
            status,
            min_duration,
            ladder,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_draino_forms() {
        let c: ConditionSpec = "KernelDeadlock".parse().unwrap();
        assert_eq!(
            (c.type_.as_str(), c.status, c.min_duration),
            ("KernelDeadlock", Status::True, Duration::ZERO)
        );
        let c: ConditionSpec = "Ready=Unknown,10m".parse().unwrap();
        assert_eq!(
            (c.status, c.min_duration),
            (Status::Unknown, Duration::from_secs(600))
        );
        assert_eq!(c.to_string(), "Ready=Unknown,10m");
        for bad in ["", "=True", "Ready=Maybe", "Ready=True,soon", "Bad Type"] {
            assert!(bad.parse::<ConditionSpec>().is_err(), "{bad}");
        }
        let c: ConditionSpec = "KernelDeadlock=True,10m: drain, reboot, replace"
            .parse()
            .unwrap();
        assert_eq!(
            c.to_string(),
            "KernelDeadlock=True,10m: drain, reboot, replace"
        );
        assert_eq!(c.min_duration, Duration::from_secs(600));
        let l = c.ladder.unwrap();
        assert!(l.reboot && l.replace);
        let c: ConditionSpec = "KernelDeadlock:drain".parse().unwrap();
        assert_eq!(c.to_string(), "KernelDeadlock=True: drain");
        assert_eq!(
            "KernelDeadlock=True: drain, rebot"
                .parse::<ConditionSpec>()
                .unwrap_err()
                .to_string(),
            "condition \"KernelDeadlock=True: drain, rebot\": \"rebot\" is not a step (the steps are drain, reboot and replace)"
        );
        assert_eq!(
            "Ready=Maybe".parse::<ConditionSpec>(),
            Err(SpecError::Status {
                input: "Ready=Maybe".into(),
                status: "Maybe".into()
            })
        );
    }
}
