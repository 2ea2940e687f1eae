//! Problem conditions as draino takes them: `Type`, `Type=Status`, `Type=Status,MinDuration` (the
//! duration the condition must have held, measured from its lastTransitionTime), and after a `:`
//! the condition's remediation ladder (`KernelDeadlock=True,10m: drain, reboot, replace`,
//! [`super::ladder`]). One type may be listed more than once, each for some of its reasons
//! (`GpuUnhealthy=True,reason=GpuXidReset,5m: drain, reboot` beside
//! `GpuUnhealthy=True,reason=GpuXidReplace|GpuFellOffTheBus: drain, replace`): the first listed
//! that a node's condition matches is the one it is held under. Pure.

use std::time::Duration;

use nodemedic_common::status::Status;

use super::ladder::{Ladder, LadderError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionSpec {
    pub(crate) type_: String,
    pub(crate) status: Status,
    pub(crate) min_duration: Duration,
    /// The condition's reasons it is for (empty: any).
    pub(crate) reasons: Vec<String>,
    /// The steps after the drain (None: draino's form, cordon and drain, then wait).
    pub(crate) ladder: Option<Ladder>,
}

impl ConditionSpec {
    /// Whether `c` is this spec's condition in its problem status, with one of its reasons.
    pub(crate) fn matches(&self, c: &crate::model::node::Condition) -> bool {
        *c.type_ == *self.type_ && c.status == self.status && self.for_reason(c.reason.as_deref())
    }

    /// Whether a condition of this type with `reason` is this spec's.
    pub(crate) fn for_reason(&self, reason: Option<&str>) -> bool {
        self.reasons.is_empty() || reason.is_some_and(|r| self.reasons.iter().any(|x| x == r))
    }

    /// `Type=Status`, with the reason a node's condition has when the spec names reasons
    /// (`GpuUnhealthy=True (GpuXidReset)`): how a held problem is said.
    pub(crate) fn describe(&self, reason: Option<&str>) -> String {
        match reason.filter(|_| !self.reasons.is_empty()) {
            Some(r) => format!("{}={} ({r})", self.type_, self.status),
            None => format!("{}={}", self.type_, self.status),
        }
    }
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
    #[error("condition {input:?}: {why}")]
    Reason { input: String, why: String },
}

impl std::fmt::Display for ConditionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.type_, self.status)?;
        if !self.reasons.is_empty() {
            write!(f, ",reason={}", self.reasons.join("|"))?;
        }
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
        let mut parts = s.split(',');
        let cond = parts.next().unwrap_or_default();
        let (mut dur, mut reasons) = (None, Vec::new());
        for part in parts {
            match part.trim().strip_prefix("reason=") {
                Some(r) => reasons = reasons_of(input, r)?,
                None if dur.is_none() => dur = Some(part),
                None => {
                    return Err(SpecError::Duration {
                        input: input.into(),
                        duration: part.into(),
                        reason: "a second duration (one min duration, then reason=A|B if any)"
                            .into(),
                    });
                }
            }
        }
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
            reasons,
            ladder,
        })
    }
}

/// `reason=A|B`'s reasons: each a condition reason as the API server takes one (CamelCase: a
/// letter, then letters, digits, `_`, `,` or `:`).
fn reasons_of(input: &str, list: &str) -> Result<Vec<String>, SpecError> {
    let bad = |why: String| SpecError::Reason {
        input: input.into(),
        why,
    };
    let reasons: Vec<String> = list.split('|').map(|r| r.trim().to_string()).collect();
    for r in &reasons {
        let ok = r.starts_with(|c: char| c.is_ascii_alphabetic())
            && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(bad(format!(
                "reason {r:?} is not a condition reason (CamelCase, e.g. reason=DockerHung|TaskHung)"
            )));
        }
    }
    Ok(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_read_in_each_of_drainos_forms_and_a_bad_one_refused() {
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
        let c: ConditionSpec =
            "GpuUnhealthy=True,reason=GpuXidReplace|GpuFellOffTheBus,5m: drain, replace"
                .parse()
                .unwrap();
        assert_eq!(c.reasons, ["GpuXidReplace", "GpuFellOffTheBus"]);
        assert_eq!(c.min_duration, Duration::from_secs(300));
        assert_eq!(
            c.to_string(),
            "GpuUnhealthy=True,reason=GpuXidReplace|GpuFellOffTheBus,5m: drain, replace"
        );
        assert!(c.for_reason(Some("GpuFellOffTheBus")) && !c.for_reason(Some("GpuXidReset")));
        assert!(!c.for_reason(None));
        let any: ConditionSpec = "GpuUnhealthy".parse().unwrap();
        assert!(any.for_reason(None) && any.for_reason(Some("X")));
        let e = "GpuUnhealthy=True,reason=Xid 79"
            .parse::<ConditionSpec>()
            .unwrap_err();
        assert!(e.to_string().contains("is not a condition reason"), "{e}");
        assert!("Ready=False,5m,10m".parse::<ConditionSpec>().is_err());
        let c: ConditionSpec = "KernelDeadlock:drain".parse().unwrap();
        assert_eq!(c.to_string(), "KernelDeadlock=True: drain");
        assert_eq!(
            "KernelDeadlock=True: drain, rebot"
                .parse::<ConditionSpec>()
                .unwrap_err()
                .to_string(),
            "condition \"KernelDeadlock=True: drain, rebot\": \"rebot\" is not a step (the steps are restart kubelet, restart containerd, drain, reboot, power-cycle and replace)"
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
