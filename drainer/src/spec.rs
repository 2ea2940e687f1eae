//! Problem conditions as draino takes them: `Type`, `Type=Status`, `Type=Status,MinDuration` (the
//! duration the condition must have held, measured from its lastTransitionTime).

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionSpec {
    pub type_: String,
    pub status: String,
    pub min_duration: Duration,
}

impl std::fmt::Display for ConditionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.type_, self.status)?;
        if !self.min_duration.is_zero() {
            write!(f, ",{}", humantime::format_duration(self.min_duration))?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ConditionSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
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
            return Err(format!(
                "condition {s:?}: {type_:?} is not a condition type"
            ));
        }
        if !matches!(status, "True" | "False" | "Unknown") {
            return Err(format!(
                "condition {s:?}: status {status:?} must be True, False or Unknown"
            ));
        }
        let min_duration = match dur {
            None => Duration::ZERO,
            Some(d) => humantime::parse_duration(d.trim())
                .map_err(|e| format!("condition {s:?}: invalid duration {d:?}: {e}"))?,
        };
        Ok(ConditionSpec {
            type_: type_.into(),
            status: status.into(),
            min_duration,
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
            (c.type_.as_str(), c.status.as_str(), c.min_duration),
            ("KernelDeadlock", "True", Duration::ZERO)
        );
        let c: ConditionSpec = "Ready=Unknown,10m".parse().unwrap();
        assert_eq!(
            (c.status.as_str(), c.min_duration),
            ("Unknown", Duration::from_secs(600))
        );
        assert_eq!(c.to_string(), "Ready=Unknown,10m");
        for bad in ["", "=True", "Ready=Maybe", "Ready=True,soon", "Bad Type"] {
            assert!(bad.parse::<ConditionSpec>().is_err(), "{bad}");
        }
    }
}
