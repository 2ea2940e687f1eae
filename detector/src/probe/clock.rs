//! `detector probe clock`: whether the kernel's clock is synchronised, as `timedatectl`'s
//! `NTPSynchronized` says it (systemd's `ntp_synced()`): the maximum error the kernel reports
//! through `adjtimex(2)` is under 16 s. Every NTP daemon (chronyd, systemd-timesyncd, ntpd)
//! disciplines the kernel's clock and so lowers that error; a clock no daemon keeps grows it to
//! 16 s. The `STA_UNSYNC` flag is not read: a daemon may leave it set to keep the kernel from
//! writing the RTC. Needs no tool, socket or D-Bus: the clock is the host's in every container.
//! I/O (`nodemedic_common::sysclock`); the verdict is pure.

use super::{Found, healthy, problem, unknown};

/// systemd's threshold: `maxerror` at or over this (in microseconds) is not synchronised.
pub(crate) const MAX_ERROR_US: i64 = 16_000_000;

pub(crate) use nodemedic_common::sysclock::Reading;

/// The verdict on a reading.
pub(crate) fn verdict(r: Reading) -> Found {
    let err = format_error(r.max_error_us);
    if r.max_error_us < MAX_ERROR_US {
        healthy(format!("clock synchronised (maximum error {err})"))
    } else {
        problem(format!(
            "clock not synchronised: the kernel's maximum error is {err} (16s or more: no NTP daemon keeps it)"
        ))
    }
}

fn format_error(us: i64) -> String {
    if us >= 1_000_000 {
        format!("{}s", us / 1_000_000)
    } else {
        format!("{}ms", us / 1000)
    }
}

/// The probe: read, then judge.
pub(crate) fn probe() -> Found {
    match nodemedic_common::sysclock::read() {
        Ok(r) => verdict(r),
        Err(e) => unknown(format!(
            "cannot read the kernel's clock state (adjtimex): {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synchronised_below_sixteen_seconds_of_maximum_error() {
        let at = |max_error_us| {
            verdict(Reading {
                state: 0,
                max_error_us,
            })
        };
        assert_eq!(
            at(12_345),
            healthy("clock synchronised (maximum error 12ms)")
        );
        assert_eq!(at(MAX_ERROR_US - 1).code, 0);
        assert_eq!(
            at(MAX_ERROR_US),
            problem(
                "clock not synchronised: the kernel's maximum error is 16s (16s or more: no NTP daemon keeps it)"
            )
        );
        // TIME_ERROR (5) with a small error: a daemon that keeps STA_UNSYNC set is synchronised.
        assert_eq!(
            verdict(Reading {
                state: 5,
                max_error_us: 500
            })
            .code,
            0
        );
    }

    #[test]
    fn this_machines_clock_is_judged() {
        let found = probe();
        assert!(
            found.code <= 1 && found.message.starts_with("clock "),
            "{found:?}"
        );
    }
}
