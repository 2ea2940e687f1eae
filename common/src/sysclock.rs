//! The kernel's clock discipline, read with `adjtimex(2)` (no change asked for): the detector's
//! `probe clock`, which judges it. I/O (one system call).

/// What `adjtimex` said: its return value (the clock state, `TIME_OK` .. `TIME_ERROR`) and the
/// maximum error the kernel reports, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub state: i32,
    pub max_error_us: i64,
}

/// The kernel's clock state now.
#[allow(unsafe_code)]
pub fn read() -> Result<Reading, std::io::Error> {
    // SAFETY: an all-zero timex is valid (modes 0: read only); the kernel fills the struct we own.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: tx is a live, exclusive timex for the duration of the call.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Reading {
        state,
        max_error_us: tx.maxerror,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machines_clock_is_read() {
        let r = super::read().expect("adjtimex reads without privileges");
        assert!(r.max_error_us >= 0, "{r:?}");
        assert!((0..=5).contains(&r.state), "{r:?}");
    }
}
