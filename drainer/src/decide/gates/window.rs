//! Drain windows, pure: drains start only inside one of them (cordons happen at once). Settings:
//! `config::drain_window` (the windows, parsed). State: none, only the clock. Persists nothing.

use k8s_openapi::jiff::Timestamp;

use crate::config::drain_window::DrainWindow;

/// Drains may start now (no windows, or inside one); otherwise when the next window opens.
pub(crate) fn next_window(
    windows: &[DrainWindow],
    now: Timestamp,
) -> Result<(), Option<Timestamp>> {
    if windows.is_empty() || windows.iter().any(|w| w.contains(now)) {
        return Ok(());
    }
    Err(windows.iter().filter_map(|w| w.next_start(now)).min())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn drain_windows_parse_and_say_when_they_open() {
        let w: DrainWindow = "Mon-Fri 09:00-17:00 Europe/Berlin".parse().unwrap();
        // 2026-11-24 is a Tuesday; Berlin is UTC+1 in November.
        assert!(w.contains(t("2026-11-24T08:00:00Z")), "09:00 Berlin");
        assert!(!w.contains(t("2026-11-24T07:59:59Z")));
        assert!(
            !w.contains(t("2026-11-24T16:00:00Z")),
            "17:00 Berlin is the end"
        );
        assert_eq!(
            w.next_start(t("2026-11-24T16:30:00Z")),
            Some(t("2026-11-25T08:00:00Z"))
        );
        // Friday evening: next is Monday.
        assert_eq!(
            w.next_start(t("2026-11-27T17:00:00Z")),
            Some(t("2026-11-30T08:00:00Z"))
        );
        // Past midnight, UTC by default, lists of days.
        let night: DrainWindow = "Sat,Sun 22:00-02:00".parse().unwrap();
        assert!(
            night.contains(t("2026-11-29T01:00:00Z")),
            "Sunday 01:00 is Saturday's window"
        );
        assert!(night.contains(t("2026-11-29T23:00:00Z")));
        assert!(!night.contains(t("2026-11-30T03:00:00Z")));
        assert!(
            "* 00:00-24:00"
                .parse::<DrainWindow>()
                .unwrap()
                .contains(t("2026-11-24T12:00:00Z"))
        );
        assert_eq!(
            next_window(&[w.clone(), night.clone()], t("2026-11-28T12:00:00Z")),
            Err(Some(t("2026-11-28T22:00:00Z")))
        );
        assert_eq!(next_window(&[], t("2026-11-28T12:00:00Z")), Ok(()));
        for bad in [
            "Mon-Fri",
            "Mon-Fry 09:00-17:00",
            "Mon 9-17",
            "Mon 25:00-26:00",
            "Mon 09:00-09:00",
            "Mon 09:00-17:00 Mars/Olympus",
        ] {
            let e = bad.parse::<DrainWindow>().unwrap_err();
            assert_eq!(e.window, bad);
            assert!(
                e.to_string()
                    .starts_with(&format!("drain window {bad:?}: ")),
                "{e}"
            );
        }
    }
}
