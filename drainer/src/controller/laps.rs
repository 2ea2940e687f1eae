//! How long a round's parts took, I/O (the wall clock, a log line): wall time, so that a slow round says at debug level where its time
//! went: a stall of condition -> cordon at 50,000 nodes is then found in the drainer's log, not by
//! lining the log up with a benchmark's samples by hand. Reading the clock costs nanoseconds; only a
//! round slower than [`SLOW_ROUND`] is logged.

use std::time::{Duration, Instant};

/// A round taking longer than this (wall time) is logged with its parts.
pub(super) const SLOW_ROUND: Duration = Duration::from_millis(20);

/// The parts of a round, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// The changed nodes (and a due resync) taken from the caches.
    CatchUp,
    /// The fleet's decisions, the watchdog's among them.
    Decide,
    /// Fleet-wide reports: the breaker, records, gauges, stale readiness, symptoms.
    Report,
    /// The holds written (cordons, conditions) and the drains started.
    Write,
    /// What follows: written outcomes, the tail handed over.
    Rest,
}

const PARTS: usize = 5;

/// The laps of one round: started with the round, each part ended in turn.
pub(super) struct Laps {
    start: Instant,
    last: Instant,
    took: [Duration; PARTS],
}

impl Laps {
    pub(super) fn start() -> Laps {
        Laps::start_at(Instant::now())
    }

    fn start_at(at: Instant) -> Laps {
        Laps {
            start: at,
            last: at,
            took: [Duration::ZERO; PARTS],
        }
    }

    /// `part` ended now.
    pub(super) fn end(&mut self, part: Part) {
        self.end_at(part, Instant::now());
    }

    fn end_at(&mut self, part: Part, at: Instant) {
        self.took[part as usize] += at.saturating_duration_since(self.last);
        self.last = at;
    }

    /// The whole round and each part in milliseconds when the round took longer than `limit`.
    fn slow(&self, limit: Duration) -> Option<(f64, [f64; PARTS])> {
        let total = self.last.saturating_duration_since(self.start);
        (total > limit).then(|| (ms(total), self.took.map(ms)))
    }

    /// Log the round at debug level if it was slow: the nodes `pending` in the fleet once it caught
    /// up, `decisions`, `writes`, and whether the caches were listed again.
    pub(super) fn report(&self, pending: usize, decisions: usize, writes: usize, relisted: bool) {
        if let Some((total_ms, [catch_up_ms, decide_ms, report_ms, write_ms, rest_ms])) =
            self.slow(SLOW_ROUND)
        {
            tracing::debug!(
                total_ms,
                catch_up_ms,
                decide_ms,
                report_ms,
                write_ms,
                rest_ms,
                pending,
                decisions,
                writes,
                relisted,
                "slow round"
            );
        }
    }
}

/// The debounce's sleep, asked for `asked`, took `took`: longer by more than [`SLOW_ROUND`] means
/// something else held the runtime's thread while a change waited; said at debug level.
pub(super) fn late_wake(asked: Duration, took: Duration) {
    if took > asked + SLOW_ROUND {
        tracing::debug!(
            asked_ms = ms(asked),
            took_ms = ms(took),
            "a change waited: the runtime's thread was busy"
        );
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_within_the_limit_is_not_slow_and_a_slower_one_names_its_parts() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut quick = Laps::start_at(t0);
        quick.end_at(Part::CatchUp, at(1));
        quick.end_at(Part::Decide, at(5));
        quick.end_at(Part::Rest, at(20));
        assert_eq!(quick.slow(SLOW_ROUND), None);

        let mut slow = Laps::start_at(t0);
        slow.end_at(Part::CatchUp, at(2));
        slow.end_at(Part::Decide, at(40));
        slow.end_at(Part::Report, at(41));
        slow.end_at(Part::Write, at(45));
        // A part ended twice adds up (the drains started after the writes count as writing).
        slow.end_at(Part::Write, at(46));
        slow.end_at(Part::Rest, at(50));
        assert_eq!(
            slow.slow(SLOW_ROUND),
            Some((50.0, [2.0, 38.0, 1.0, 5.0, 4.0]))
        );
    }
}
