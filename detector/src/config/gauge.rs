//! A `resources` input and its rules as written, validated: the filesystems it reads, and each
//! rule's signal, levels and durations ([`Gauge`]). Pure.

use std::path::PathBuf;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::errors::{Errors, parse_duration};
use super::model::{Gauge, GaugeTest, Level, ResourceSettings, RuleKind};
use super::raw::{RawInput, RawLevel, RawMonitor, RawRule};
use crate::parse::resources::{PSI_RESOURCES, Unit, describe};

/// How far back a trend's rate is taken by default.
pub(crate) const DEFAULT_TREND: Duration = Duration::from_secs(600);

pub(super) fn build_resources(raw: &RawInput, errors: &mut Errors) -> Option<ResourceSettings> {
    let before = errors.list.len();
    let mut s = ResourceSettings::default();
    if let Some(p) = &raw.path {
        errors.at(
            &p.referenced,
            "input.path: a resources input reads no file; name filesystems under `filesystems` and the kernel's files with `procDir`",
        );
    }
    if let Some(i) = &raw.interval {
        match parse_duration(i, "input.interval", errors) {
            Some(d) if d < Duration::from_secs(1) => {
                errors.at(&i.referenced, "input.interval: at least 1s")
            }
            Some(d) => s.interval = d,
            None => {}
        }
    }
    if let Some(fs) = &raw.filesystems {
        s.filesystems.clear();
        for (name, path) in &fs.value {
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !valid || name == "memory" || name == "pid" || name == "psi" {
                errors.at(
                    &fs.referenced,
                    format!("input.filesystems: {name:?} cannot name a filesystem (letters, digits and `-`, starting with a letter; not memory, pid or psi)"),
                );
            } else if !path.starts_with('/') {
                errors.at(
                    &fs.referenced,
                    format!("input.filesystems.{name}: {path:?} is not an absolute path"),
                );
            } else {
                s.filesystems.push((name.clone(), PathBuf::from(path)));
            }
        }
    }
    if let Some(p) = &raw.proc_dir {
        if p.value.starts_with('/') {
            s.proc_dir = PathBuf::from(&p.value);
        } else {
            errors.at(
                &p.referenced,
                format!("input.procDir: {:?} is not an absolute path", p.value),
            );
        }
    }
    (errors.list.len() == before).then_some(s)
}

/// What a resources file may not say: it reads no lines (no lookback, buffer or recovery pattern;
/// a condition clears when its rules' readings are healthy again).
pub(super) fn resources_misuse(raw: &RawMonitor, errors: &mut Errors) {
    if let Some(l) = &raw.lookback {
        errors.at(
            &l.referenced,
            "lookback: a resources input reads no history",
        );
    }
    if let Some(b) = &raw.buffer_size {
        errors.at(
            &b.referenced,
            "bufferSize: a resources input reads no lines",
        );
    }
    for c in raw.conditions.iter().filter(|c| c.recovery.is_some()) {
        errors.at(
            &c.type_.referenced,
            "recovery: a resources condition clears when its rules' readings are back past their `clear` level",
        );
    }
}

/// The fields only a resources rule has, with their places (for "not here" errors).
pub(super) fn gauge_fields(r: &RawRule) -> Vec<(&'static str, Location)> {
    let level = |l: &Option<Spanned<RawLevel>>| l.as_ref().map(|l| l.referenced);
    let text = |t: &Option<Spanned<String>>| t.as_ref().map(|t| t.referenced);
    [
        ("signal", text(&r.signal)),
        ("below", level(&r.below)),
        ("above", level(&r.above)),
        ("clear", level(&r.clear)),
        ("reaches", level(&r.reaches)),
        ("within", text(&r.within)),
        ("trend", text(&r.trend)),
        ("for", text(&r.sustain)),
    ]
    .into_iter()
    .filter_map(|(name, loc)| loc.map(|l| (name, l)))
    .collect()
}

/// One rule of a resources file validated; `kind` is its `type` and `condition` as built.
pub(super) fn build_gauge(
    r: &RawRule,
    kind: Option<RuleKind>,
    settings: &ResourceSettings,
    errors: &mut Errors,
) -> Option<Gauge> {
    let before = errors.list.len();
    if let Some(p) = &r.pattern {
        errors.at(
            &p.referenced,
            "pattern: a resources input reads no lines; this rule tests `signal`",
        );
    }
    if let Some(x) = &r.exec {
        errors.at(
            &x.path.referenced,
            "exec: only an `input: {kind: exec}` file runs checks (this one reads resources)",
        );
    }
    if r.message.is_some() {
        errors.at(
            &r.reason.referenced,
            "message: a resources rule's message says the reading and the level it crossed",
        );
    }
    if matches!(kind, Some(RuleKind::Temporary)) {
        errors.at(
            &r.type_.referenced,
            "type: a resources rule sets its condition while its reading holds; use `permanent` with a `condition`",
        );
    }
    let Some(signal) = &r.signal else {
        errors.at(
            &r.reason.referenced,
            "signal: required (the reading the rule tests, e.g. imagefs.available)",
        );
        return None;
    };
    let unit = signal_unit(signal, settings, errors)?;
    let sustain = match &r.sustain {
        None => Duration::ZERO,
        Some(d) => parse_duration(d, "for", errors)?,
    };
    let test = test(r, unit, errors)?;
    let condition = match kind? {
        RuleKind::Permanent { condition } => condition,
        RuleKind::Temporary => return None,
    };
    (errors.list.len() == before).then(|| Gauge {
        condition,
        reason: r.reason.value.clone(),
        signal: signal.value.clone(),
        test,
        sustain,
    })
}

/// The unit of `signal`, if this input has it.
fn signal_unit(
    signal: &Spanned<String>,
    s: &ResourceSettings,
    errors: &mut Errors,
) -> Option<Unit> {
    let name = signal.value.as_str();
    let fs = name
        .rsplit_once('.')
        .map(|(fs, _)| fs)
        .filter(|fs| s.filesystems.iter().any(|(n, _)| n == fs));
    let known = match describe(name) {
        Some((unit, _)) if name.starts_with("psi.") || name == "pid.available" => Some(unit),
        Some((unit, _)) if name == "memory.available" || fs.is_some() => Some(unit),
        _ => None,
    };
    if known.is_none() {
        let filesystems: Vec<String> = s
            .filesystems
            .iter()
            .map(|(n, _)| format!("{n}.available, {n}.inodesFree"))
            .collect();
        errors.at(
            &signal.referenced,
            format!(
                "signal {name:?}: not one this input reads; expected memory.available, pid.available, {}psi.{{{}}}.{{some,full}}.{{avg10,avg60,avg300}}",
                filesystems.iter().map(|f| format!("{f}, ")).collect::<String>(),
                PSI_RESOURCES.join(",")
            ),
        );
    }
    known
}

/// The test a rule's `below`, `above` or `reaches` make, with its companions.
fn test(r: &RawRule, unit: Unit, errors: &mut Errors) -> Option<GaugeTest> {
    let given: Vec<_> = [
        ("below", &r.below),
        ("above", &r.above),
        ("reaches", &r.reaches),
    ]
    .into_iter()
    .filter_map(|(n, l)| l.as_ref().map(|l| (n, l)))
    .collect();
    let (name, raw) = match given.as_slice() {
        [one] => *one,
        [] => {
            errors.at(
                &r.reason.referenced,
                "a resources rule needs one of `below`, `above` (a level) or `reaches` with `within` (a trend)",
            );
            return None;
        }
        [_, (second, l), ..] => {
            errors.at(
                &l.referenced,
                format!("{second}: give one of `below`, `above` or `reaches` per rule (write two rules for two tests)"),
            );
            return None;
        }
    };
    let at = level(raw, name, unit, errors)?;
    if name == "reaches" {
        if let Some(c) = &r.clear {
            errors.at(
                &c.referenced,
                "clear: a trend clears when its deadline is more than 1.5 times `within` away",
            );
        }
        let Some(w) = &r.within else {
            errors.at(
                &raw.referenced,
                "reaches: needs `within` (how soon is a problem, e.g. 30m)",
            );
            return None;
        };
        let within = positive(parse_duration(w, "within", errors)?, w, "within", errors)?;
        let trend = match &r.trend {
            None => DEFAULT_TREND,
            Some(t) => positive(parse_duration(t, "trend", errors)?, t, "trend", errors)?,
        };
        return Some(GaugeTest::Reaches {
            level: at,
            within,
            trend,
        });
    }
    for (field, loc) in [("within", &r.within), ("trend", &r.trend)] {
        if let Some(l) = loc {
            errors.at(
                &l.referenced,
                format!("{field}: only a `reaches` rule has it"),
            );
        }
    }
    let below = name == "below";
    let clear = match &r.clear {
        None => default_clear(at, below),
        Some(c) => {
            let clear = level(c, "clear", unit, errors)?;
            let wrong = match (at, clear) {
                (Level::Absolute(a), Level::Absolute(c))
                | (Level::Percent(a), Level::Percent(c)) => {
                    if below {
                        c < a
                    } else {
                        c > a
                    }
                }
                _ => false,
            };
            if wrong {
                let side = if below { "at or above" } else { "at or below" };
                errors.at(&c.referenced, format!("clear: must be {side} the `{name}` level (the band between them keeps the condition as it is)"));
            }
            clear
        }
    };
    Some(if below {
        GaugeTest::Below { at, clear }
    } else {
        GaugeTest::Above { at, clear }
    })
}

/// The level a tenth of the threshold toward healthy.
fn default_clear(at: Level, below: bool) -> Level {
    let f = if below { 1.1 } else { 0.9 };
    match at {
        Level::Absolute(v) => Level::Absolute(v * f),
        Level::Percent(v) => Level::Percent((v * f).min(100.0)),
    }
}

fn positive(
    d: Duration,
    at: &Spanned<String>,
    what: &str,
    errors: &mut Errors,
) -> Option<Duration> {
    if d.is_zero() {
        errors.at(&at.referenced, format!("{what}: must be more than 0s"));
        return None;
    }
    Some(d)
}

/// A level as written: `15%` of the capacity, or a quantity (`10Gi`, `500M`, `1000`; binary and
/// decimal suffixes as in Kubernetes quantities).
fn level(raw: &Spanned<RawLevel>, what: &str, unit: Unit, errors: &mut Errors) -> Option<Level> {
    let parsed = match &raw.value {
        RawLevel::Number(n) => Ok(Level::Absolute(*n)),
        RawLevel::Text(t) => parse_level(t.trim()),
    };
    let checked = parsed.and_then(|l| match (l, unit) {
        (Level::Percent(p), _) if !(0.0..=100.0).contains(&p) => Err(format!(
            "{p}% is not a percentage of the capacity (0% to 100%)"
        )),
        (Level::Absolute(n), _) if n < 0.0 || !n.is_finite() => Err(format!("{n} is below 0")),
        (Level::Absolute(n), Unit::Percent) if n > 100.0 => Err(format!(
            "{n}: pressure stall is a percentage of time (0 to 100)"
        )),
        (l, _) => Ok(l),
    });
    match checked {
        Ok(l) => Some(l),
        Err(why) => {
            errors.at(
                &raw.referenced,
                format!("{what}: {why} (examples: 15%, 10Gi, 500Mi, 1000)"),
            );
            None
        }
    }
}

fn parse_level(t: &str) -> Result<Level, String> {
    if let Some(p) = t.strip_suffix('%') {
        return p
            .trim()
            .parse::<f64>()
            .map(Level::Percent)
            .map_err(|_| format!("{t:?} is not a percentage"));
    }
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("K", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(s, f)| t.strip_suffix(s).map(|n| (n, *f)))
        .unwrap_or((t, 1.0));
    number
        .trim()
        .parse::<f64>()
        .map(|n| Level::Absolute(n * scale))
        .map_err(|_| format!("{t:?} is not a quantity"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Input, load_sources};

    fn errors(yaml: &str) -> Vec<String> {
        match load_sources(&[("r.yaml".into(), yaml.to_string())]) {
            Ok(_) => vec![],
            Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
        }
    }

    const HEAD: &str = "source: s\ninput:\n  kind: resources\n  filesystems: {imagefs: /var/lib/containerd}\nconditions:\n  - {type: Full, reason: Room, message: room}\nrules:\n";

    #[test]
    fn a_resources_file_builds_its_gauges_with_their_defaults() {
        let yaml = format!(
            "{HEAD}  - {{type: permanent, condition: Full, reason: Low, signal: imagefs.available, below: 10Gi}}\n  - {{type: permanent, condition: Full, reason: Soon, signal: imagefs.inodesFree, reaches: 5%, within: 1h}}\n"
        );
        let set = load_sources(&[("r.yaml".into(), yaml)]).unwrap();
        let m = &set.monitors[0];
        let Input::Resources(settings) = &m.input else {
            panic!("{:?}", m.input)
        };
        assert_eq!(settings.interval, Duration::from_secs(10));
        assert_eq!(
            settings.filesystems,
            vec![("imagefs".to_string(), PathBuf::from("/var/lib/containerd"))]
        );
        let gib = 1073741824.0;
        assert_eq!(
            m.gauges[0].test,
            GaugeTest::Below {
                at: Level::Absolute(10.0 * gib),
                clear: Level::Absolute(11.0 * gib)
            }
        );
        assert_eq!(m.gauges[0].sustain, Duration::ZERO);
        assert_eq!(
            m.gauges[1].test,
            GaugeTest::Reaches {
                level: Level::Percent(5.0),
                within: Duration::from_secs(3600),
                trend: DEFAULT_TREND
            }
        );
        assert!(m.rules.is_empty() && m.checks.is_empty());
    }

    #[test]
    fn every_mistake_in_a_resources_file_is_named_at_its_place() {
        let yaml = format!(
            "{HEAD}  - {{type: permanent, condition: Full, reason: A, signal: nodefs.available, below: 10%}}\n  - {{type: permanent, condition: Full, reason: B, signal: imagefs.available, below: 10%, above: 90%}}\n  - {{type: permanent, condition: Full, reason: C, signal: imagefs.available, reaches: 5%}}\n  - {{type: temporary, reason: D, signal: psi.io.some.avg10, above: 140}}\n  - {{type: permanent, condition: Full, reason: E, signal: imagefs.available, below: 20%, clear: 10%}}\n  - {{type: permanent, condition: Full, reason: F, signal: imagefs.available, below: lots, pattern: x}}\n  - {{type: permanent, condition: Full, reason: G}}\n"
        );
        let got = errors(&yaml);
        let want = [
            "r.yaml:8:59: signal \"nodefs.available\": not one this input reads; expected memory.available, pid.available, imagefs.available, imagefs.inodesFree, psi.{cpu,memory,io}.{some,full}.{avg10,avg60,avg300}",
            "r.yaml:9:97: above: give one of `below`, `above` or `reaches` per rule (write two rules for two tests)",
            "r.yaml:10:87: reaches: needs `within` (how soon is a problem, e.g. 30m)",
            "r.yaml:11:12: type: a resources rule sets its condition while its reading holds; use `permanent` with a `condition`",
            "r.yaml:11:68: above: 140: pressure stall is a percentage of time (0 to 100) (examples: 15%, 10Gi, 500Mi, 1000)",
            "r.yaml:12:97: clear: must be at or above the `below` level (the band between them keeps the condition as it is)",
            "r.yaml:13:100: pattern: a resources input reads no lines; this rule tests `signal`",
            "r.yaml:13:85: below: \"lots\" is not a quantity (examples: 15%, 10Gi, 500Mi, 1000)",
            "r.yaml:14:48: signal: required (the reading the rule tests, e.g. imagefs.available)",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn resources_settings_belong_to_resources_files_and_signals_to_their_rules() {
        let got = errors(
            "source: s\ninput: {kind: kmsg, filesystems: {a: /a}}\nconditions:\n  - {type: X, reason: R, message: m}\nrules:\n  - {type: permanent, condition: X, reason: Y, pattern: y, signal: memory.available}\n",
        );
        assert_eq!(
            got,
            [
                "r.yaml:2:34: input.filesystems: only a resources input has it (this one is \"kmsg\")",
                "r.yaml:6:68: signal: only the rules of an `input: {kind: resources}` file read signals",
            ]
        );
        let got = errors(
            "source: s\ninput: {kind: resources, interval: 100ms, filesystems: {memory: /m, b: relative}, path: /x}\n",
        );
        assert_eq!(got.len(), 4, "{got:#?}");
    }

    #[test]
    fn levels_read_as_kubernetes_quantities_and_percentages() {
        assert_eq!(parse_level("15%"), Ok(Level::Percent(15.0)));
        assert_eq!(
            parse_level("10Gi"),
            Ok(Level::Absolute(10.0 * 1073741824.0))
        );
        assert_eq!(parse_level("500M"), Ok(Level::Absolute(5e8)));
        assert_eq!(parse_level("1.5Ki"), Ok(Level::Absolute(1536.0)));
        assert_eq!(parse_level("1000"), Ok(Level::Absolute(1000.0)));
        assert_eq!(parse_level("ten"), Err("\"ten\" is not a quantity".into()));
        assert!(
            matches!(default_clear(Level::Percent(20.0), true), Level::Percent(p) if (p - 22.0).abs() < 1e-9)
        );
        assert_eq!(
            default_clear(Level::Absolute(40.0), false),
            Level::Absolute(36.0)
        );
    }
}
