//! Drain windows (`Mon-Fri 09:00-17:00 Europe/Berlin`): parsed once, then asked whether a time is
//! inside and when the next one opens. Pure.

use std::str::FromStr;

use k8s_openapi::jiff::Timestamp;

/// A weekly window: `Mon-Fri 09:00-17:00 Europe/Berlin` (days: `Mon`, `Mon-Fri`, `Sat,Sun`, `*`;
/// the zone is an IANA name, UTC when left out; an end before the start runs past midnight).
#[derive(Debug, Clone, PartialEq)]
pub struct DrainWindow {
    text: String,
    /// Monday first.
    days: [bool; 7],
    /// Minutes after midnight.
    start: u16,
    end: u16,
    tz: jiff::tz::TimeZone,
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// What is wrong with a drain window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WindowProblem {
    #[error("expected DAYS HH:MM-HH:MM [ZONE], e.g. \"Mon-Fri 09:00-17:00 Europe/Berlin\"")]
    Form,
    #[error("{0:?} is not a day (Mon, Tue, ... Sun)")]
    Day(String),
    #[error("{0:?}: expected HH:MM")]
    Time(String),
    #[error("{0:?}: not a time of day")]
    TimeOfDay(String),
    #[error("{0:?}: expected HH:MM-HH:MM")]
    Range(String),
    #[error("the window is empty (start = end)")]
    Empty,
    #[error("time zone {zone:?}: {reason}")]
    Zone { zone: String, reason: String },
}

/// A drain window that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("drain window {window:?}: {problem}")]
pub struct WindowError {
    pub(crate) window: String,
    pub(crate) problem: WindowProblem,
}

fn day(s: &str) -> Result<usize, WindowProblem> {
    let l = s.trim().to_ascii_lowercase();
    DAYS.iter()
        .position(|d| l.starts_with(d) && d.starts_with(&l[..l.len().min(3)]))
        .ok_or_else(|| WindowProblem::Day(s.into()))
}

fn minutes(s: &str) -> Result<u16, WindowProblem> {
    let (h, m) = s
        .split_once(':')
        .ok_or_else(|| WindowProblem::Time(s.into()))?;
    let (h, m): (u16, u16) = (
        h.parse().map_err(|_| WindowProblem::Time(s.into()))?,
        m.parse().map_err(|_| WindowProblem::Time(s.into()))?,
    );
    if h > 24 || m > 59 || (h == 24 && m != 0) {
        return Err(WindowProblem::TimeOfDay(s.into()));
    }
    Ok(h * 60 + m)
}

impl FromStr for DrainWindow {
    type Err = WindowError;

    fn from_str(text: &str) -> Result<Self, WindowError> {
        let wrap = |problem: WindowProblem| WindowError {
            window: text.into(),
            problem,
        };
        let parts: Vec<&str> = text.split_whitespace().collect();
        let (days_part, times, zone) = match parts.as_slice() {
            [d, t] => (*d, *t, "UTC"),
            [d, t, z] => (*d, *t, *z),
            _ => return Err(wrap(WindowProblem::Form)),
        };
        let mut days = [false; 7];
        if days_part == "*" || days_part.eq_ignore_ascii_case("daily") {
            days = [true; 7];
        } else {
            for item in days_part.split(',') {
                match item.split_once('-') {
                    Some((a, b)) => {
                        let (a, b) = (day(a).map_err(wrap)?, day(b).map_err(wrap)?);
                        let mut d = a;
                        loop {
                            days[d] = true;
                            if d == b {
                                break;
                            }
                            d = (d + 1) % 7;
                        }
                    }
                    None => days[day(item).map_err(wrap)?] = true,
                }
            }
        }
        let (a, b) = times
            .split_once('-')
            .ok_or_else(|| wrap(WindowProblem::Range(times.into())))?;
        let (start, end) = (minutes(a).map_err(wrap)?, minutes(b).map_err(wrap)?);
        if start == end {
            return Err(wrap(WindowProblem::Empty));
        }
        let tz = jiff::tz::TimeZone::get(zone).map_err(|e| {
            wrap(WindowProblem::Zone {
                zone: zone.into(),
                reason: e.to_string(),
            })
        })?;
        Ok(DrainWindow {
            text: text.to_string(),
            days,
            start,
            end,
            tz,
        })
    }
}

impl std::fmt::Display for DrainWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl DrainWindow {
    /// The open intervals starting on the local day of `t` and the days around it.
    fn intervals_around(&self, t: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let local = t.to_zoned(self.tz.clone());
        let mut out = Vec::new();
        for offset in -1i64..=8 {
            let Ok(date) = local.date().checked_add(jiff::Span::new().days(offset)) else {
                continue;
            };
            let weekday = date.weekday().to_monday_zero_offset() as usize;
            if !self.days[weekday] {
                continue;
            }
            let at = |mins: u16, next_day: bool| -> Option<Timestamp> {
                let d = if next_day {
                    date.checked_add(jiff::Span::new().days(1)).ok()?
                } else {
                    date
                };
                let (h, m) = ((mins / 60) as i8, (mins % 60) as i8);
                let dt = if h == 24 {
                    d.checked_add(jiff::Span::new().days(1))
                        .ok()?
                        .at(0, 0, 0, 0)
                } else {
                    d.at(h, m, 0, 0)
                };
                dt.to_zoned(self.tz.clone()).ok().map(|z| z.timestamp())
            };
            if let (Some(s), Some(e)) = (at(self.start, false), at(self.end, self.end < self.start))
            {
                out.push((s, e));
            }
        }
        out
    }

    /// Whether `t` is inside the window.
    pub(crate) fn contains(&self, t: Timestamp) -> bool {
        self.intervals_around(t)
            .iter()
            .any(|(s, e)| *s <= t && t < *e)
    }

    /// The next start after `t` (within eight days).
    pub(crate) fn next_start(&self, t: Timestamp) -> Option<Timestamp> {
        self.intervals_around(t)
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| *s > t)
            .min()
    }
}
