//! An NPD `system-stats-monitor.json` file, read as NPD reads it: JSON keys matched without regard
//! to case (Go's `encoding/json`; NPD's own file spells `KnownModulesConfigPath`), `invokeInterval`
//! and `lsblkTimeout` in Go's duration notation (60s by default), a metric shown only when its
//! `displayName` is not empty. What NPD would ignore is ignored here too, with a note: an unknown
//! key, a metric ID NPD does not have, one under a section that does not collect it. What NPD
//! stops on stops the detector at start with the file's name: bad JSON (with line and column), a
//! duration that is not one, a `procPath` that does not exist, a bad `excludeInterfaceRegexp`.
//! Pure, but for [`load`], which reads the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::catalogue::{Component, MetricId, prometheus_name};

/// What one file asks for.
#[derive(Debug, Clone)]
pub struct StatsSettings {
    pub file: PathBuf,
    pub interval: Duration,
    /// Where `/proc` is (`procPath`; NPD's default `/proc`).
    pub proc_dir: PathBuf,
    /// Each metric shown, with the name Prometheus sees.
    pub shown: BTreeMap<MetricId, String>,
    /// `disk.includeRootBlk`: the whole disks (`/sys/block`).
    pub root_disks: bool,
    /// `disk.includeAllAttachedBlk`: the devices of mounted filesystems.
    pub attached_disks: bool,
    pub net_exclude: Option<regex::Regex>,
    /// `osFeature.knownModulesConfigPath`, made absolute from the file's directory.
    pub known_modules: PathBuf,
    /// What was ignored, one sentence each.
    pub notes: Vec<String>,
}

impl StatsSettings {
    pub fn wants(&self, c: Component) -> bool {
        self.shown.keys().any(|m| m.component() == c)
    }
    pub fn shows(&self, m: MetricId) -> Option<&str> {
        self.shown.get(&m).map(String::as_str)
    }
}

/// Why a file cannot be used, in the operator's words.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("{name}: shown by both {} and {} (one metric, one file)", first.display(), second.display())]
    Twice {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// Read and check every file; a name shown by two files is an error.
pub fn load(paths: &[PathBuf]) -> Result<Vec<StatsSettings>, StatsError> {
    let mut out: Vec<StatsSettings> = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| StatsError::Read {
            path: path.clone(),
            source,
        })?;
        let s = parse(path, &text)?;
        if !s.proc_dir.is_dir() {
            return Err(StatsError::Invalid {
                path: path.clone(),
                message: format!("procPath {}: no such directory", s.proc_dir.display()),
            });
        }
        for name in s.shown.values() {
            if let Some(other) = out.iter().find(|o| o.shown.values().any(|n| n == name)) {
                return Err(StatsError::Twice {
                    name: name.clone(),
                    first: other.file.clone(),
                    second: path.clone(),
                });
            }
        }
        out.push(s);
    }
    Ok(out)
}

/// One file's text.
pub fn parse(path: &Path, text: &str) -> Result<StatsSettings, StatsError> {
    let invalid = |message: String| StatsError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| StatsError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    let Value::Object(root) = root else {
        return Err(invalid("expected a JSON object of sections (cpu, disk, host, memory, osFeature, net) and invokeInterval".into()));
    };
    let mut notes = Vec::new();
    let mut known: Vec<&str> = Component::ALL.iter().map(|c| c.key()).collect();
    known.extend(["invokeInterval", "procPath"]);
    note_unknown(&root, &known, "", &mut notes);

    let interval = duration(&root, "invokeInterval", Duration::from_secs(60)).map_err(invalid)?;
    if interval.is_zero() {
        return Err(invalid("invokeInterval must be above 0s".into()));
    }
    let proc_dir = string(&root, "procPath")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/proc"), PathBuf::from);

    let mut shown = BTreeMap::new();
    for c in Component::ALL {
        let Some(section) = get(&root, c.key()) else {
            continue;
        };
        let Value::Object(section) = section else {
            return Err(invalid(format!("{}: expected an object", c.key())));
        };
        note_unknown(section, section_keys(c), c.key(), &mut notes);
        metrics_of(c, section, &mut shown, &mut notes).map_err(invalid)?;
    }

    let disk = object(&root, "disk");
    if let Some(d) = disk {
        let lsblk = duration(d, "lsblkTimeout", Duration::from_secs(5)).map_err(invalid)?;
        if lsblk.is_zero() || lsblk > interval {
            return Err(invalid(format!(
                "disk.lsblkTimeout {lsblk:?} must be above 0s and at most invokeInterval ({interval:?})"
            )));
        }
    }
    let flag = |key: &str| {
        disk.and_then(|d| get(d, key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let net_exclude = match object(&root, "net").and_then(|n| string(n, "excludeInterfaceRegexp")) {
        Some(r) if !r.is_empty() => match crate::config::patterns::regex_error(&r) {
            Some(why) => return Err(invalid(format!("net.excludeInterfaceRegexp {r:?}: {why}"))),
            None => regex::Regex::new(&r).ok(),
        },
        _ => None,
    };
    let modules = object(&root, "osFeature")
        .and_then(|o| string(o, "knownModulesConfigPath"))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "guestosconfig/known-modules.json".into());
    let known_modules = path.parent().unwrap_or(Path::new("")).join(modules);
    Ok(StatsSettings {
        file: path.to_path_buf(),
        interval,
        proc_dir,
        shown,
        root_disks: flag("includeRootBlk"),
        attached_disks: flag("includeAllAttachedBlk"),
        net_exclude,
        known_modules,
        notes,
    })
}

fn section_keys(c: Component) -> &'static [&'static str] {
    match c {
        Component::Disk => &[
            "metricsConfigs",
            "includeRootBlk",
            "includeAllAttachedBlk",
            "lsblkTimeout",
        ],
        Component::OsFeature => &["metricsConfigs", "knownModulesConfigPath"],
        Component::Net => &["metricsConfigs", "excludeInterfaceRegexp"],
        _ => &["metricsConfigs"],
    }
}

/// The metrics a section shows: each `metricsConfigs` entry with a non-empty `displayName`.
fn metrics_of(
    c: Component,
    section: &Map<String, Value>,
    shown: &mut BTreeMap<MetricId, String>,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let Some(configs) = get(section, "metricsConfigs") else {
        return Ok(());
    };
    let Value::Object(configs) = configs else {
        return Err(format!(
            "{}.metricsConfigs: expected an object of metric IDs",
            c.key()
        ));
    };
    for (id, config) in configs {
        let Some(metric) = MetricId::parse(id) else {
            let near = MetricId::ALL
                .iter()
                .filter(|m| m.component() == c)
                .min_by_key(|m| strsim::levenshtein(m.id(), id))
                .map(|m| format!(" (did you mean {}?)", m.id()))
                .unwrap_or_default();
            notes.push(format!("{}.metricsConfigs: {id:?} is not a metric of NPD's system stats monitor; ignored{near}", c.key()));
            continue;
        };
        if metric.component() != c {
            notes.push(format!(
                "{}.metricsConfigs: {id} is collected by the {} section, not this one; ignored",
                c.key(),
                metric.component().key()
            ));
            continue;
        }
        let display = config
            .as_object()
            .and_then(|o| string(o, "displayName"))
            .unwrap_or_default();
        if !display.is_empty() {
            shown.insert(metric, prometheus_name(&display));
        }
    }
    Ok(())
}

/// `key`'s value, matched as Go matches JSON keys: the exact key first, else any case.
fn get<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).or_else(|| {
        o.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn object<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    get(o, key).and_then(Value::as_object)
}

fn string(o: &Map<String, Value>, key: &str) -> Option<String> {
    get(o, key).and_then(Value::as_str).map(String::from)
}

fn duration(o: &Map<String, Value>, key: &str, default: Duration) -> Result<Duration, String> {
    match get(o, key) {
        None => Ok(default),
        Some(Value::String(s)) if s.is_empty() => Ok(default),
        Some(Value::String(s)) => crate::config::npd::parse_go_duration(s)
            .ok_or_else(|| format!("{key} {s:?}: not a duration (Go's notation: 60s, 2m, 1m30s)")),
        Some(other) => Err(format!(
            "{key}: expected a duration in quotes (\"60s\"), found {other}"
        )),
    }
}

fn note_unknown(o: &Map<String, Value>, known: &[&str], within: &str, notes: &mut Vec<String>) {
    for k in o.keys() {
        if !known.iter().any(|n| n.eq_ignore_ascii_case(k)) {
            let at = if within.is_empty() {
                String::new()
            } else {
                format!("{within}.")
            };
            notes.push(format!(
                "{at}{k}: not a setting of NPD's system stats monitor; ignored"
            ));
        }
    }
}

/// serde_json's message without its own " at line L column C" (the position leads the error).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NPD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/npd");

    fn npd_file(name: &str) -> StatsSettings {
        let path = Path::new(NPD).join(name);
        parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn npds_shipped_files_read_as_they_are() {
        let s = npd_file("system-stats-monitor.json");
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.proc_dir, PathBuf::from("/proc"));
        assert_eq!(s.shown.len(), 27, "{:?}", s.shown);
        assert_eq!(s.shows(MetricId::CpuLoad1m), Some("cpu_load_1m"));
        assert_eq!(
            s.shows(MetricId::SystemOsFeature),
            Some("system_os_feature")
        );
        assert!(s.root_disks && s.attached_disks);
        // NPD's own file spells it KnownModulesConfigPath; Go matches keys in any case.
        assert!(
            s.known_modules
                .ends_with("guestosconfig/known-modules.json")
        );
        assert!(s.notes.is_empty(), "{:?}", s.notes);
        assert!(!s.wants(Component::Net));

        let net = npd_file("net-cgroup-system-stats-monitor.json");
        assert_eq!(net.interval, Duration::from_secs(120));
        assert_eq!(net.shown.len(), 16);
        assert!(net.shown.keys().all(|m| m.component() == Component::Net));
        assert!(net.net_exclude.as_ref().unwrap().is_match("cali123"));
        assert!(net.notes.is_empty(), "{:?}", net.notes);
    }

    #[test]
    fn what_npd_ignores_is_noted_and_what_stops_npd_is_an_error_with_its_place() {
        let p = Path::new("/etc/npd/stats.json");
        let s = parse(
            p,
            r#"{"cpu": {"metricsConfigs": {"cpu/load_1min": {"displayName": "x"},
                 "memory/bytes_used": {"displayName": "m"}, "cpu/load_5m": {"displayName": ""},
                 "cpu/load_15m": {"displayName": "my.load"}}},
               "invokeinterval": "10s", "colour": 1}"#,
        )
        .unwrap();
        assert_eq!(s.interval, Duration::from_secs(10));
        assert_eq!(s.shown.len(), 1, "an empty displayName shows nothing");
        assert_eq!(s.shows(MetricId::CpuLoad15m), Some("my_load"));
        let notes = s.notes.join("\n");
        assert!(notes.contains("\"cpu/load_1min\" is not a metric of NPD's system stats monitor; ignored (did you mean cpu/load_1m?)"), "{notes}");
        assert!(
            notes.contains("memory/bytes_used is collected by the memory section"),
            "{notes}"
        );
        assert!(notes.contains("colour: not a setting"), "{notes}");

        let e = parse(p, "{\n  \"cpu\": {,\n}").unwrap_err().to_string();
        assert!(e.starts_with("/etc/npd/stats.json:2:11: "), "{e}");
        let e = parse(p, r#"{"invokeInterval": "1 minute"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/etc/npd/stats.json: invokeInterval \"1 minute\": not a duration (Go's notation: 60s, 2m, 1m30s)"
        );
        let e = parse(p, r#"{"invokeInterval": "0s"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("invokeInterval must be above 0s"), "{e}");
        let e = parse(p, r#"{"disk": {"lsblkTimeout": "2m"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lsblkTimeout 120s must be above 0s and at most invokeInterval (60s)"),
            "{e}"
        );
        let e = parse(p, r#"{"net": {"excludeInterfaceRegexp": "(cali"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("net.excludeInterfaceRegexp \"(cali\""), "{e}");
        let e = parse(p, "[]").unwrap_err().to_string();
        assert!(e.contains("expected a JSON object"), "{e}");
    }

    #[test]
    fn two_files_showing_one_name_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        let text =
            r#"{"host": {"metricsConfigs": {"host/uptime": {"displayName": "host/uptime"}}}}"#;
        std::fs::write(&a, text).unwrap();
        std::fs::write(&b, text).unwrap();
        assert_eq!(load(std::slice::from_ref(&a)).unwrap().len(), 1);
        let e = load(&[a, b]).unwrap_err().to_string();
        assert!(e.starts_with("host_uptime: shown by both "), "{e}");
        let gone = dir.path().join("gone.json");
        std::fs::write(&gone, r#"{"procPath": "/nonexistent/proc"}"#).unwrap();
        let e = load(&[gone]).unwrap_err().to_string();
        assert!(
            e.ends_with("procPath /nonexistent/proc: no such directory"),
            "{e}"
        );
    }
}
