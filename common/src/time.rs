//! Times as the API server stores them: RFC 3339 in UTC, whole seconds (`metav1.Time`).

use k8s_openapi::jiff::Timestamp;

/// `2026-11-22T10:00:00Z`
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn whole_seconds_in_utc() {
        let t: k8s_openapi::jiff::Timestamp = "2026-11-22T10:00:00.75+02:00".parse().unwrap();
        assert_eq!(super::rfc3339(t), "2026-11-22T08:00:00Z");
    }
}
