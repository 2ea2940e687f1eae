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

#[cfg(test)]
mod tests {
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
