//! A condition's status, as Kubernetes writes it: `True`, `False` or `Unknown`. Shared by the
//! detector (what it writes) and the drainer (what it matches). Pure.

/// A condition status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Status {
    True,
    False,
    Unknown,
}

/// A status that is not `True`, `False` or `Unknown` where one is required (a setting).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status {0:?} must be True, False or Unknown")]
pub struct StatusError(pub String);

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// A status as the API server has it: anything but `True` and `False` is `Unknown`, as
    /// Kubernetes reads a condition it cannot tell.
    pub fn parse(s: &str) -> Status {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }
}

impl std::str::FromStr for Status {
    type Err = StatusError;
    /// Strict: a setting must name one of the three.
    fn from_str(s: &str) -> Result<Status, StatusError> {
        match s {
            "True" => Ok(Status::True),
            "False" => Ok(Status::False),
            "Unknown" => Ok(Status::Unknown),
            other => Err(StatusError(other.to_string())),
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Status {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_strict_api_values_lenient() {
        assert_eq!("Unknown".parse::<Status>(), Ok(Status::Unknown));
        assert!("Maybe".parse::<Status>().is_err());
        assert_eq!(Status::parse("Maybe"), Status::Unknown);
        assert_eq!(Status::parse("True").to_string(), "True");
    }
}
