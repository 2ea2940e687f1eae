//! Times as the API server stores them: RFC 3339 in UTC, whole seconds (`metav1.Time`).

use k8s_openapi::jiff::Timestamp;

/// `2026-11-22T10:00:00Z`
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `t + d`, saturating at the last representable time instead of panicking: times come from API
/// objects and log records, and the API server accepts dates up to 9999-12-31.
pub fn add(t: Timestamp, d: std::time::Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// `t - d`, saturating at the first representable time.
pub fn sub(t: Timestamp, d: std::time::Duration) -> Timestamp {
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}

/// How long something has lasted, as people read it: its two largest units, `10d 9h`, `9h 40m`,
/// `12m 3s`, `45s` (humantime's `10days 9h 40m 57s` reads as a word run together, and its seconds
/// mean nothing after days). For elapsed times in messages; settings keep humantime's exact form,
/// which parses back.
pub fn spoken(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let units = [
        (s / 86_400, "d"),
        (s / 3_600 % 24, "h"),
        (s / 60 % 60, "m"),
        (s % 60, "s"),
    ];
    let first = units.iter().position(|(n, _)| *n > 0);
    let Some(i) = first else {
        return "0s".to_string();
    };
    units[i..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// serde, for a duration kept as written in a file: refused where it stands (the file's line and
/// column) when it does not parse, not later with no place to show.
pub mod duration_text {
    use serde::de::{Deserialize, Deserializer, Error};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_duration(s.trim())
            .map_err(|e| D::Error::custom(format!("invalid duration {s:?}: {e}")))?;
        Ok(s)
    }

    /// The same, for an optional one (with `#[serde(default)]`).
    pub fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        deserialize(d).map(Some)
    }
}

/// A duration as the flags and files take them (`30s`, `10m`, `1h30m`; humantime's grammar), its
/// errors said in the same notation (humantime's own suggest `10sec or 10ms`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, DurationError> {
    humantime::parse_duration(s.trim()).map_err(DurationError)
}

/// A duration that does not parse.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationError(humantime::DurationError);

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use humantime::DurationError as E;
        match &self.0 {
            E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
                write!(
                    f,
                    "a unit is needed after {value}: {value}s, {value}m or {value}h"
                )
            }
            E::UnknownUnit { unit, .. } => write!(
                f,
                "unknown unit {unit:?}: s, m, h or d (ms for milliseconds), e.g. 30s, 10m or 1h30m"
            ),
            E::InvalidCharacter(at) | E::NumberExpected(at) => write!(
                f,
                "not a duration (at character {}): a number and a unit, e.g. 30s, 10m or 1h30m",
                at + 1
            ),
            E::NumberOverflow => f.write_str("too long a duration"),
            E::Empty => f.write_str("empty: a number and a unit, e.g. 10m"),
        }
    }
}

impl std::error::Error for DurationError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_the_flags_write_them_and_errors_say_so_in_that_notation() {
        assert_eq!(parse_duration(" 1h30m ").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("30s").unwrap().as_secs(), 30);
        let said = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(said("10"), "a unit is needed after 10: 10s, 10m or 10h");
        assert!(!said("10").contains("sec or"), "humantime's own words");
        assert!(
            said("10x").starts_with("unknown unit \"x\""),
            "{}",
            said("10x")
        );
        assert!(
            said("m10").contains("a number and a unit"),
            "{}",
            said("m10")
        );
        assert!(said("").starts_with("empty"), "{}", said(""));
    }

    #[test]
    fn whole_seconds_in_utc() {
        let t: k8s_openapi::jiff::Timestamp = "2026-11-22T10:00:00.75+02:00".parse().unwrap();
        assert_eq!(super::rfc3339(t), "2026-11-22T08:00:00Z");
    }

    #[test]
    fn arithmetic_near_the_end_of_time_saturates() {
        use k8s_openapi::jiff::Timestamp;
        let late: Timestamp = "9999-12-30T21:00:00Z".parse().unwrap();
        let hours = std::time::Duration::from_secs(7200);
        assert_eq!(super::add(late, hours), Timestamp::MAX);
        assert_eq!(super::sub(Timestamp::MIN, hours), Timestamp::MIN);
        assert_eq!(super::add(Timestamp::UNIX_EPOCH, hours).as_second(), 7200);
    }
}

#[cfg(test)]
mod spoken_tests {
    use super::spoken;
    use std::time::Duration;

    #[test]
    fn elapsed_times_read_in_their_two_largest_units() {
        let d = Duration::from_secs;
        assert_eq!(spoken(d(10 * 86_400 + 9 * 3_600 + 40 * 60 + 57)), "10d 9h");
        assert_eq!(spoken(d(14 * 86_400)), "14d");
        assert_eq!(spoken(d(9 * 3_600 + 40 * 60 + 57)), "9h 40m");
        assert_eq!(spoken(d(3_600 + 57)), "1h");
        assert_eq!(spoken(d(12 * 60 + 3)), "12m 3s");
        assert_eq!(spoken(d(45)), "45s");
        assert_eq!(spoken(Duration::from_millis(999)), "0s");
    }
}
