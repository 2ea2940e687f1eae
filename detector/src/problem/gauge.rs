//! Resources rules in the problem state: a pure function of (gauges, readings, their times).
//!
//! Each gauge tests one signal of every [`Sample`]: below or above a level, or reaching a level
//! within a deadline at its recent rate (least squares over the last `trend`). A reading is a
//! problem, healthy, in the band between (where nothing changes: hysteresis), or unknown (the node
//! does not have the signal, or too little history for a trend). A gauge fires once its readings
//! have been problems for its `for`, and stops once they have been healthy for as long. A
//! condition is True while any of its gauges fires, with the reason of the first (in file order);
//! its message is the reading that set it, and is not rewritten while the reason stays, so a value
//! that moves every sample writes nothing.
//!
//! A condition restored True (a restart, a reload) keeps its gauges firing until their readings
//! say healthy, so a restart never clears a problem that a trend needs minutes of history to see.
//! The problem state asks [`Gauges::verdict`] after each sample and sets the condition.

use std::collections::VecDeque;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::config::{Gauge, GaugeTest, Level};
use crate::parse::resources::{Sample, Unit, describe, show};

/// The states of a monitor's gauges, one per `Monitor::gauges`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauges(Vec<GaugeState>);

/// One gauge's state.
#[derive(Debug, Clone, Default)]
struct GaugeState {
    firing: bool,
    /// Since when the readings have gone the other way (problems while not firing, healthy while
    /// firing).
    since: Option<Timestamp>,
    /// What the last problem reading said (the condition's message when this gauge sets it).
    message: String,
    /// Recent readings (a trend's window).
    history: VecDeque<(Timestamp, f64)>,
}

/// What one reading says.
#[derive(Debug, Clone, PartialEq)]
enum Reading {
    Problem(String),
    Healthy,
    /// Between the problem level and the clear level: nothing changes.
    Between,
    Unknown,
}

/// What the gauges want of a condition: True with a reason and message, or healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict<'a> {
    Firing { reason: &'a str, message: &'a str },
    Clear,
}

/// A condition as it stands when the gauges start: whether it is True, its reason and message.
pub(crate) struct Standing<'a> {
    pub(crate) problem: bool,
    pub(crate) reason: &'a str,
    pub(crate) message: &'a str,
}

impl Gauges {
    /// The gauges at start: those of a condition already True fire (with its message; only those
    /// of its reason when one has it), the others do not.
    pub(crate) fn start(gauges: &[Gauge], conditions: &[Standing]) -> Gauges {
        let mut states = vec![GaugeState::default(); gauges.len()];
        for (c, cond) in conditions.iter().enumerate() {
            if !cond.problem {
                continue;
            }
            let same_reason = gauges
                .iter()
                .any(|g| g.condition == c && g.reason == cond.reason);
            for (g, state) in gauges.iter().zip(states.iter_mut()) {
                if g.condition == c && (!same_reason || g.reason == cond.reason) {
                    state.firing = true;
                    state.message = cond.message.to_string();
                }
            }
        }
        Gauges(states)
    }

    /// Fold one reading of the node's resources into every gauge.
    pub(crate) fn sample(&mut self, gauges: &[Gauge], sample: &Sample) {
        for (g, state) in gauges.iter().zip(self.0.iter_mut()) {
            let reading = read(g, state, sample);
            step(g, state, reading, sample.at);
        }
    }

    /// What the gauges of `condition` want now; `None` when no gauge sets it.
    pub(crate) fn verdict<'a>(
        &'a self,
        gauges: &'a [Gauge],
        condition: usize,
    ) -> Option<Verdict<'a>> {
        let mut of_c = gauges
            .iter()
            .zip(&self.0)
            .filter(|(g, _)| g.condition == condition);
        let first = of_c.next()?;
        let firing = std::iter::once(first).chain(of_c).find(|(_, s)| s.firing);
        Some(match firing {
            Some((g, s)) => Verdict::Firing {
                reason: &g.reason,
                message: &s.message,
            },
            None => Verdict::Clear,
        })
    }
}

/// Move a gauge's state by one reading at `at`.
fn step(g: &Gauge, state: &mut GaugeState, reading: Reading, at: Timestamp) {
    let held = |since: &mut Option<Timestamp>| {
        let start = *since.get_or_insert(at);
        elapsed(start, at) >= g.sustain
    };
    match (state.firing, reading) {
        (false, Reading::Problem(message)) => {
            state.message = message;
            if held(&mut state.since) {
                state.firing = true;
                state.since = None;
            }
        }
        (true, Reading::Problem(message)) => {
            state.message = message;
            state.since = None;
        }
        (true, Reading::Healthy) => {
            if held(&mut state.since) {
                state.firing = false;
                state.since = None;
            }
        }
        (_, _) => state.since = None,
    }
}

/// What `sample` says for gauge `g` (a trend's window in `state` is updated).
fn read(g: &Gauge, state: &mut GaugeState, sample: &Sample) -> Reading {
    let Some(value) = sample.get(&g.signal) else {
        return Reading::Unknown;
    };
    let unit = describe(&g.signal).map_or(Unit::Count, |(u, _)| u);
    let capacity = sample.capacity(&g.signal);
    let resolve = |l: Level| match l {
        Level::Absolute(v) => Some(v),
        Level::Percent(p) => capacity.map(|c| c * p / 100.0),
    };
    // Words only for a problem: most readings are healthy.
    let now = || describe_value(unit, value, capacity);
    let sustain = || {
        if g.sustain.is_zero() {
            String::new()
        } else {
            format!(" for {}", human(g.sustain))
        }
    };
    match g.test {
        GaugeTest::Below { at, clear } => {
            let (Some(level), Some(clear)) = (resolve(at), resolve(clear)) else {
                return Reading::Unknown;
            };
            if value < level {
                let (now, at, sustain) = (now(), level_text(at, unit), sustain());
                let msg = format!("{} is {now}, below {at}{sustain}", g.signal);
                Reading::Problem(msg)
            } else if value >= clear {
                Reading::Healthy
            } else {
                Reading::Between
            }
        }
        GaugeTest::Above { at, clear } => {
            let (Some(level), Some(clear)) = (resolve(at), resolve(clear)) else {
                return Reading::Unknown;
            };
            if value > level {
                let (now, at, sustain) = (now(), level_text(at, unit), sustain());
                let msg = format!("{} is {now}, above {at}{sustain}", g.signal);
                Reading::Problem(msg)
            } else if value <= clear {
                Reading::Healthy
            } else {
                Reading::Between
            }
        }
        GaugeTest::Reaches {
            level,
            within,
            trend,
        } => {
            remember(&mut state.history, sample.at, value, trend);
            let Some(floor) = resolve(level) else {
                return Reading::Unknown;
            };
            let target = || level_text(level, unit);
            if value <= floor {
                let (target, now) = (target(), now());
                return Reading::Problem(format!("{} has reached {target}: {now}", g.signal));
            }
            let Some(slope) = slope(&state.history, trend) else {
                return Reading::Unknown;
            };
            if slope >= 0.0 {
                return Reading::Healthy;
            }
            let eta = Duration::from_secs_f64(((value - floor) / -slope).min(1e12));
            if eta <= within {
                let (rate, target, now) = (show(unit, -slope * 60.0), target(), now());
                Reading::Problem(format!(
                    "{} reaches {target} in {} at the last {}'s rate (-{rate}/min); {now} now",
                    g.signal,
                    human(eta),
                    human(trend),
                ))
            } else if eta.as_secs_f64() > within.as_secs_f64() * 1.5 {
                Reading::Healthy
            } else {
                Reading::Between
            }
        }
    }
}

/// Keep `value` at `at` and the readings of the last `trend` (one before it too, so the window is
/// covered end to end).
fn remember(history: &mut VecDeque<(Timestamp, f64)>, at: Timestamp, value: f64, trend: Duration) {
    if history.back().is_some_and(|(t, _)| *t >= at) {
        // A reading that is not newer (a clock step back) starts the window again.
        history.clear();
    }
    history.push_back((at, value));
    while history.len() > 2 && elapsed(history[1].0, at) >= trend {
        history.pop_front();
    }
}

/// The rate (per second) of the readings by least squares; `None` with fewer than 3 readings or
/// when they span less than half of `trend`.
fn slope(history: &VecDeque<(Timestamp, f64)>, trend: Duration) -> Option<f64> {
    let (first, last) = (history.front()?.0, history.back()?.0);
    if history.len() < 3 || elapsed(first, last) < trend / 2 {
        return None;
    }
    let t0 = first.as_millisecond();
    let xs = history
        .iter()
        .map(|(t, _)| (t.as_millisecond() - t0) as f64 / 1000.0);
    let n = history.len() as f64;
    let mean_x = xs.clone().sum::<f64>() / n;
    let mean_y = history.iter().map(|(_, v)| v).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, (_, y)) in xs.zip(history) {
        num += (x - mean_x) * (y - mean_y);
        den += (x - mean_x) * (x - mean_x);
    }
    (den > 0.0).then(|| num / den)
}

/// `9.1 GiB (18.2%)`: the value, and its share of the capacity when there is one.
fn describe_value(unit: Unit, value: f64, capacity: Option<f64>) -> String {
    match (unit, capacity) {
        (Unit::Percent, _) | (_, None) => show(unit, value),
        (_, Some(c)) => format!("{} ({:.1}%)", show(unit, value), value * 100.0 / c),
    }
}

fn level_text(l: Level, unit: Unit) -> String {
    match l {
        Level::Percent(p) => format!("{}%", trim(p)),
        Level::Absolute(v) => show(unit, v),
    }
}

/// A number with at most one decimal, without a trailing `.0`.
fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A duration to the second, as `25m`, `1h 5m`, `40s`.
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    let rounded = if secs >= 600 { secs / 60 * 60 } else { secs };
    humantime::format_duration(Duration::from_secs(rounded.max(1))).to_string()
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    let d = now.as_millisecond() - since.as_millisecond();
    Duration::from_millis(d.max(0) as u64)
}

#[cfg(test)]
mod tests;
