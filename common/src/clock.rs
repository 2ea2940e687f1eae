//! The time loops read, injected so tests can pause it. [`Clock::system`] is the wall clock;
//! [`Clock::tokio`] is anchored to the wall clock when made and then advances with tokio's clock, so a
//! test under `#[tokio::test(start_paused = true)]` moves it with `tokio::time::advance` instead of
//! sleeping.

use k8s_openapi::jiff::Timestamp;

#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    #[default]
    System,
    Tokio {
        base: Timestamp,
        start: tokio::time::Instant,
    },
}

impl Clock {
    pub fn system() -> Clock {
        Clock::System
    }

    /// Now, advancing with tokio's (pausable) clock from here on.
    pub fn tokio() -> Clock {
        Clock::Tokio {
            base: Timestamp::now(),
            start: tokio::time::Instant::now(),
        }
    }

    /// `base` now, advancing with tokio's clock from here on (a simulation starting at a set time).
    pub fn tokio_at(base: Timestamp) -> Clock {
        Clock::Tokio {
            base,
            start: tokio::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Clock::System => Timestamp::now(),
            Clock::Tokio { base, start } => {
                let elapsed = start.elapsed();
                // Checked: a clock can never be moved past the end of time by a test.
                base.checked_add(elapsed).unwrap_or(Timestamp::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_moves_with_paused_time() {
        let c = Clock::tokio();
        let t0 = c.now();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(c.now().duration_since(t0).as_secs(), 3600);
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_can_start_at_a_set_time() {
        let base: Timestamp = "2026-01-05T00:00:00Z".parse().unwrap();
        let c = Clock::tokio_at(base);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(c.now().to_string(), "2026-01-05T00:01:30Z");
    }
}
