//! Repeated warnings, said once and then at most once per period: during an API outage every retry
//! fails, and a line per retry on every node is a log flood that hides the one line that matters.
//! Pure (the caller passes the clock), so the policy is unit-tested.

use std::time::{Duration, Instant};

/// One warning site's throttle.
#[derive(Debug, Clone)]
pub struct Throttle {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

/// How often a repeated warning is logged while it keeps happening.
pub const EVERY: Duration = Duration::from_secs(60);

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(EVERY)
    }
}

impl Throttle {
    pub fn new(every: Duration) -> Self {
        Throttle {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// The warning happened at `now`: `Some(n)` when it should be logged (`n` earlier ones were
    /// not), `None` when it is kept quiet.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.saturating_duration_since(t) < self.every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// It stopped happening (a success): the next occurrence is logged at once.
    pub fn reset(&mut self) {
        self.last = None;
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_then_once_per_period_with_the_count_in_between_and_again_after_a_success() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::from_secs(60));
        assert_eq!(t.allow(t0), Some(0));
        for s in 1..60 {
            assert_eq!(t.allow(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(t.allow(t0 + Duration::from_secs(60)), Some(59));
        assert_eq!(t.allow(t0 + Duration::from_secs(61)), None);
        t.reset();
        assert_eq!(t.allow(t0 + Duration::from_secs(62)), Some(0));
    }
}
