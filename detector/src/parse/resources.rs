//! A node's resources as numbers: the readings of the `resources` input ([`Sample`]), parsed from
//! the kernel's text (`/proc/pressure/*`, `/proc/meminfo`, `/proc/loadavg`, `pid_max`) and written
//! and read as one JSON object per line (what `detector sample` prints and `detector check` reads).
//! Pure.
//!
//! Signals are named as the kubelet names its eviction signals where it has one, so a rule reads
//! like the kubelet's thresholds it is meant to stay ahead of:
//!
//! | signal | value | capacity (what `%` is of) |
//! |---|---|---|
//! | `memory.available` | `MemAvailable`, bytes | `memory.capacity` (`MemTotal`) |
//! | `NAME.available` | bytes free to unprivileged users (`statvfs` `f_bavail`) of filesystem NAME | `NAME.capacity` |
//! | `NAME.inodesFree` | free inodes of filesystem NAME | `NAME.inodes` |
//! | `pid.available` | `pid_max` (or `threads-max`, the smaller) less the tasks that exist | `pid.capacity` |
//! | `psi.RESOURCE.KIND.WINDOW` | pressure stall: `cpu`/`memory`/`io`, `some`/`full`, `avg10`/`avg60`/`avg300`, percent of time | 100 |
//!
//! The kubelet's `memory.available` is its cgroup working set's complement, not `MemAvailable`; the
//! two differ by the page cache the kernel can reclaim, so a rule on `MemAvailable` sees trouble the
//! kubelet's reading sees later, never sooner.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::Malformed;

/// The resources measured by pressure stall information.
pub(crate) const PSI_RESOURCES: [&str; 3] = ["cpu", "memory", "io"];

/// One reading of every signal the node has, at one time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    pub at: Timestamp,
    /// Signal (and capacity) name -> value. A signal the node does not have (no PSI in the kernel,
    /// a filesystem not mounted) is absent.
    pub values: BTreeMap<String, f64>,
}

/// How a signal's values are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Bytes,
    Count,
    /// Pressure stall: percent of time.
    Percent,
}

/// What kind of signal a name is, and the name of its capacity (`None`: a percentage already).
pub(crate) fn describe(signal: &str) -> Option<(Unit, Option<String>)> {
    if let Some(rest) = signal.strip_prefix("psi.") {
        let mut parts = rest.split('.');
        let ok = matches!(parts.next(), Some(r) if PSI_RESOURCES.contains(&r))
            && matches!(parts.next(), Some("some" | "full"))
            && matches!(parts.next(), Some("avg10" | "avg60" | "avg300"))
            && parts.next().is_none();
        return ok.then_some((Unit::Percent, None));
    }
    if signal == "pid.available" {
        return Some((Unit::Count, Some("pid.capacity".into())));
    }
    if let Some(fs) = signal.strip_suffix(".available") {
        return Some((Unit::Bytes, Some(format!("{fs}.capacity"))));
    }
    if let Some(fs) = signal.strip_suffix(".inodesFree") {
        return Some((Unit::Count, Some(format!("{fs}.inodes"))));
    }
    None
}

impl Sample {
    /// A signal's value, if the node has it.
    pub(crate) fn get(&self, signal: &str) -> Option<f64> {
        self.values.get(signal).copied()
    }

    /// What `%` of `signal` is of: its capacity (100 for a pressure stall percentage).
    pub(crate) fn capacity(&self, signal: &str) -> Option<f64> {
        match describe(signal)? {
            (Unit::Percent, _) => Some(100.0),
            (_, Some(key)) => self.get(&key).filter(|c| *c > 0.0),
            (_, None) => None,
        }
    }

    /// The sample as one line of JSON: `{"at": RFC 3339, SIGNAL: NUMBER, ...}`.
    pub fn to_json_line(&self) -> String {
        let mut map = serde_json::Map::new();
        map.insert("at".into(), nodemedic_common::time::rfc3339(self.at).into());
        for (k, v) in &self.values {
            let n = if v.fract() == 0.0 && v.abs() < 9.0e15 {
                serde_json::Value::from(*v as i64)
            } else {
                serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into)
            };
            map.insert(k.clone(), n);
        }
        serde_json::Value::Object(map).to_string()
    }

    /// Read one line of [`Sample::to_json_line`]: `at` is required, every other field a number.
    pub fn from_json_line(line: &str) -> Result<Sample, Malformed> {
        let bad = |why: String| Malformed {
            input: "sample",
            why,
        };
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .map_err(|e| bad(format!("not a JSON object of readings: {e}")))?;
        let mut sample = Sample::default();
        let mut at = None;
        for (k, v) in map {
            if k == "at" {
                let text = v.as_str().unwrap_or_default();
                at = Some(
                    text.parse::<Timestamp>()
                        .map_err(|e| bad(format!("\"at\": {v} is not an RFC 3339 time ({e})")))?,
                );
            } else {
                let n = v
                    .as_f64()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| bad(format!("{k:?}: {v} is not a number")))?;
                sample.values.insert(k, n);
            }
        }
        sample.at = at.ok_or_else(|| bad("no \"at\" (the time of the reading)".into()))?;
        Ok(sample)
    }
}

/// Whether a line looks like a [`Sample`] rather than a journal entry (both are JSON objects).
pub(crate) fn looks_like_sample(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with('{') && l.contains("\"at\"") && !l.contains("\"MESSAGE\"")
}

/// The averages of one `/proc/pressure/RESOURCE` file, added to `out` as
/// `psi.RESOURCE.{some,full}.{avg10,avg60,avg300}`. Lines it does not know are ignored (a newer
/// kernel may add some); a known line with a bad number is an error.
pub(crate) fn pressure(
    resource: &str,
    text: &str,
    out: &mut BTreeMap<String, f64>,
) -> Result<(), Malformed> {
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(kind @ ("some" | "full")) = fields.next() else {
            continue;
        };
        for field in fields {
            let Some((name, value)) = field.split_once('=') else {
                continue;
            };
            if !matches!(name, "avg10" | "avg60" | "avg300") {
                continue;
            }
            let v: f64 = value.parse().map_err(|_| Malformed {
                input: "pressure",
                why: format!("{resource}: {kind} {name}={value:?} is not a number"),
            })?;
            out.insert(format!("psi.{resource}.{kind}.{name}"), v);
        }
    }
    Ok(())
}

/// `MemAvailable` and `MemTotal` of `/proc/meminfo`, in bytes, as `memory.available` and
/// `memory.capacity` (either absent when the file lacks it); read by [`super::host::meminfo`], as
/// the system stats monitor reads it.
pub(crate) fn meminfo(text: &str, out: &mut BTreeMap<String, f64>) {
    let m = super::host::meminfo(text);
    for (key, signal) in [
        ("MemAvailable", "memory.available"),
        ("MemTotal", "memory.capacity"),
    ] {
        if let Some(v) = m.get(key) {
            out.insert(signal.into(), *v as f64);
        }
    }
}

/// The number of tasks (processes and threads) that exist: the denominator of `/proc/loadavg`'s
/// fourth field (`running/total`). The kubelet reads it there too (sysinfo's count is 16 bits).
pub(crate) fn tasks(loadavg: &str) -> Option<f64> {
    let field = loadavg.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// `pid.available` and `pid.capacity` from the task count and the kernel's limits (`pid_max`,
/// `threads-max`: the smaller bounds how many tasks can exist).
pub(crate) fn pids(
    tasks: f64,
    pid_max: Option<f64>,
    threads_max: Option<f64>,
) -> Option<(f64, f64)> {
    let capacity = match (pid_max, threads_max) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    Some(((capacity - tasks).max(0.0), capacity))
}

/// A number written for an operator: bytes in binary units, counts plain, percentages with one
/// decimal.
pub(crate) fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Percent => format!("{v:.1}%"),
        Unit::Count => format!("{}", v.round() as i64),
        Unit::Bytes => {
            const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
            let mut v = v;
            let mut i = 0;
            while v.abs() >= 1024.0 && i + 1 < UNITS.len() {
                v /= 1024.0;
                i += 1;
            }
            if i == 0 {
                format!("{v:.0} B")
            } else {
                format!("{v:.1} {}", UNITS[i])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_files_give_each_average_and_skip_what_they_do_not_know() {
        let mut out = BTreeMap::new();
        pressure(
            "memory",
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=6180154\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=4708261\nnew kind=1\n",
            &mut out,
        )
        .unwrap();
        assert_eq!(out.get("psi.memory.some.avg10"), Some(&1.5));
        assert_eq!(out.get("psi.memory.some.avg60"), Some(&0.25));
        assert_eq!(out.get("psi.memory.full.avg10"), Some(&0.75));
        assert_eq!(out.len(), 6, "{out:?}");
        let err = pressure("io", "some avg10=x avg60=0 avg300=0 total=1\n", &mut out).unwrap_err();
        assert_eq!(err.why, "io: some avg10=\"x\" is not a number");
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let mut out = BTreeMap::new();
        meminfo(
            "MemTotal:       24567890 kB\nMemFree:  1 kB\nMemAvailable:   1000 kB\n",
            &mut out,
        );
        assert_eq!(out.get("memory.available"), Some(&1_024_000.0));
        assert_eq!(out.get("memory.capacity"), Some(&(24_567_890.0 * 1024.0)));
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn pids_count_from_the_smaller_limit() {
        assert_eq!(tasks("0.18 1.01 1.49 1/80 6794"), Some(80.0));
        assert_eq!(tasks("0.18 1.01"), None);
        assert_eq!(
            pids(80.0, Some(32768.0), Some(192730.0)),
            Some((32688.0, 32768.0))
        );
        assert_eq!(pids(80.0, None, Some(100.0)), Some((20.0, 100.0)));
        assert_eq!(pids(80.0, None, None), None);
    }

    /// The machine running the tests has these files: what it reads from them is what the kernel
    /// says, in range.
    #[test]
    fn this_machines_proc_files_parse() {
        let mut out = BTreeMap::new();
        let mem = std::fs::read_to_string("/proc/meminfo").unwrap();
        meminfo(&mem, &mut out);
        let (avail, total) = (out["memory.available"], out["memory.capacity"]);
        assert!(avail > 0.0 && avail <= total, "{avail} of {total}");
        let load = std::fs::read_to_string("/proc/loadavg").unwrap();
        assert!(tasks(&load).unwrap() >= 1.0);
        if let Ok(text) = std::fs::read_to_string("/proc/pressure/memory") {
            pressure("memory", &text, &mut out).unwrap();
            let v = out["psi.memory.some.avg10"];
            assert!((0.0..=100.0).contains(&v), "{v}");
        }
    }

    #[test]
    fn a_sample_survives_its_json_line_and_bad_lines_say_what_is_wrong() {
        let mut s = Sample {
            at: "2026-11-27T10:00:00Z".parse().unwrap(),
            ..Sample::default()
        };
        s.values.insert("imagefs.available".into(), 9_000_000_000.0);
        s.values.insert("psi.io.some.avg10".into(), 2.5);
        let line = s.to_json_line();
        assert_eq!(
            line,
            r#"{"at":"2026-11-27T10:00:00Z","imagefs.available":9000000000,"psi.io.some.avg10":2.5}"#
        );
        assert!(looks_like_sample(&line));
        assert_eq!(Sample::from_json_line(&line).unwrap(), s);
        let why = |l: &str| Sample::from_json_line(l).unwrap_err().why;
        assert_eq!(why(r#"{"x":1}"#), "no \"at\" (the time of the reading)");
        assert_eq!(
            why(r#"{"at":"2026-11-27T10:00:00Z","x":"1"}"#),
            "\"x\": \"1\" is not a number"
        );
        assert!(
            why(r#"{"at":"yesterday"}"#)
                .starts_with("\"at\": \"yesterday\" is not an RFC 3339 time")
        );
        assert!(why("[1]").starts_with("not a JSON object of readings"));
        assert!(!looks_like_sample(r#"{"MESSAGE":"x","at":1}"#));
    }

    #[test]
    fn signals_know_their_unit_and_capacity() {
        let mut s = Sample::default();
        s.values.insert("nodefs.capacity".into(), 200.0);
        assert_eq!(s.capacity("nodefs.available"), Some(200.0));
        assert_eq!(s.capacity("psi.cpu.some.avg60"), Some(100.0));
        assert_eq!(s.capacity("imagefs.available"), None);
        assert_eq!(describe("psi.cpu.half.avg60"), None);
        assert_eq!(
            describe("nodefs.inodesFree"),
            Some((Unit::Count, Some("nodefs.inodes".into())))
        );
        assert_eq!(describe("memory.used"), None);
        assert_eq!(show(Unit::Bytes, 1536.0 * 1024.0 * 1024.0), "1.5 GiB");
        assert_eq!(show(Unit::Percent, 12.345), "12.3%");
        assert_eq!(show(Unit::Count, 41.6), "42");
    }
}
