//! Reading rule files from disk (a directory of `*.yaml`/`*.yml` or single files) or from memory (the
//! bundled defaults), and the checks that span files.
//! I/O (reads the files); the rest of `config` is pure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::build::build;
use super::errors::{ConfigError, ConfigErrors, Errors};
use super::model::{Monitor, RuleSet};
use super::npd;
use super::patterns::PatternBudget;
use super::raw::RawMonitor;

/// The default rule files, compiled into the binary so `detector check` works with no files around.
pub(crate) const BUNDLED: &[(&str, &str)] = &[
    (
        "kernel-monitor.yaml",
        include_str!("../../../config/rules/kernel-monitor.yaml"),
    ),
    (
        "readonly-monitor.yaml",
        include_str!("../../../config/rules/readonly-monitor.yaml"),
    ),
    (
        "docker-monitor.yaml",
        include_str!("../../../config/rules/docker-monitor.yaml"),
    ),
    (
        "containerd-monitor.yaml",
        include_str!("../../../config/rules/containerd-monitor.yaml"),
    ),
    (
        "systemd-monitor.yaml",
        include_str!("../../../config/rules/systemd-monitor.yaml"),
    ),
];

/// The bundled default rules.
pub fn bundled_defaults() -> RuleSet {
    let sources: Vec<(PathBuf, String)> = BUNDLED
        .iter()
        .map(|(n, t)| (PathBuf::from(format!("<bundled>/{n}")), t.to_string()))
        .collect();
    load_sources(&sources).expect("the bundled rule files are valid (a unit test checks this)")
}

/// Load rule files from paths: each path is a file or a directory whose `*.yaml`/`*.yml` files and NPD
/// monitor files (`*.json`, see `npd`) are read in name order (hidden entries such as a ConfigMap's
/// `..data` are skipped).
pub fn load_paths(paths: &[PathBuf]) -> Result<RuleSet, ConfigErrors> {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match rule_files(path) {
            Ok(files) => {
                for f in files {
                    match std::fs::read_to_string(&f) {
                        Ok(text) => sources.push((f, text)),
                        Err(e) => errors.push(io_error(&f, &e)),
                    }
                }
            }
            Err(e) => errors.push(io_error(path, &e)),
        }
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    load_sources(&sources)
}

fn io_error(path: &Path, e: &std::io::Error) -> ConfigError {
    ConfigError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
    }
}

fn rule_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        std::fs::metadata(path)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            // A name that is not UTF-8 is read too (as its lossy text), not skipped unsaid.
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            !name.starts_with('.')
                && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
                && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The rules' revision: the first 12 hex digits of a SHA-256 over each file's name and text, in
/// order (the same files give the same revision on every node and after every restart).
pub(crate) fn revision(sources: &[(PathBuf, String)]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (path, text) in sources {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        ctx.update(name.as_bytes());
        ctx.update(&[0]);
        ctx.update(text.as_bytes());
        ctx.update(&[0]);
    }
    ctx.finish().as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parse and validate `(path, text)` pairs; all errors of all files are returned together.
pub fn load_sources(sources: &[(PathBuf, String)]) -> Result<RuleSet, ConfigErrors> {
    let mut all_errors = Vec::new();
    let mut monitors: Vec<Monitor> = Vec::new();
    // condition type -> (file, line, column) of its first declaration
    let mut declared: HashMap<String, (String, u64, u64)> = HashMap::new();
    let mut names: HashMap<String, String> = HashMap::new();
    let mut notes = Vec::new();
    let mut budget = PatternBudget::new();
    for (path, text) in sources {
        let file = path.display().to_string();
        let mut errors = Errors::new(&file);
        let name = path
            .file_stem()
            .map_or_else(|| "monitor".into(), |s| s.to_string_lossy().into_owned());
        let is_npd = path.extension().is_some_and(|e| e == "json");
        // Parse errors first; the checks of what did parse add the file's other errors.
        let parsed: Option<RawMonitor> = if is_npd {
            let (npd, found) = nodemedic_common::yaml::parse_partial::<npd::NpdMonitor>(text);
            push_yaml(&mut errors, found);
            npd.and_then(|npd| {
                npd::to_rule_file(npd, &mut errors).map(|(raw, found)| {
                    notes.extend(found.into_iter().map(|n| ConfigError {
                        file: file.clone(),
                        line: n.line,
                        column: n.column,
                        message: n.message,
                    }));
                    raw
                })
            })
        } else {
            let (raw, found) = nodemedic_common::yaml::parse_partial::<RawMonitor>(text);
            push_yaml(&mut errors, found);
            raw
        };
        match parsed {
            None => {}
            Some(raw) => {
                for c in &raw.conditions {
                    let here = (
                        file.clone(),
                        c.type_.referenced.line(),
                        c.type_.referenced.column(),
                    );
                    if let Some((f, l, col)) = declared.get(&c.type_.value) {
                        if f != &file {
                            errors.at(
                                &c.type_.referenced,
                                format!(
                                    "condition type {:?} is already declared at {f}:{l}:{col}",
                                    c.type_.value
                                ),
                            );
                        }
                    } else {
                        declared.insert(c.type_.value.clone(), here);
                    }
                }
                if let Some(other) = names.insert(name.clone(), file.clone()) {
                    errors.list.push(ConfigError {
                        file: file.clone(),
                        line: 1,
                        column: 1,
                        message: format!(
                            "monitor name {name:?} (the file stem) is also used by {other}"
                        ),
                    });
                }
                if let Some(m) = build(raw, &name, path, &mut budget, &mut errors)
                    && errors.list.is_empty()
                {
                    monitors.push(m);
                }
            }
        }
        all_errors.extend(errors.list);
    }
    if all_errors.is_empty() {
        Ok(RuleSet {
            monitors,
            notes,
            revision: revision(sources),
        })
    } else {
        Err(ConfigErrors(all_errors))
    }
}

fn push_yaml(errors: &mut Errors, found: Vec<nodemedic_common::yaml::YamlError>) {
    errors.list.extend(found.into_iter().map(|e| ConfigError {
        file: errors.file.to_string(),
        line: e.line,
        column: e.column,
        message: e.message,
    }));
}

/// `detector convert-npd`: an NPD monitor file as a rule file (YAML text), and what did not carry over.
/// The NPD file is validated first (errors at their JSON positions); the YAML is then loaded again to
/// make sure it means the same monitor.
pub fn convert_npd(path: &Path, text: &str) -> Result<(String, Vec<ConfigError>), ConfigErrors> {
    let loaded = load_sources(&[(path.to_path_buf(), text.to_string())])?;
    let file = path.display().to_string();
    let mut errors = Errors::new(&file);
    let parsed = serde_saphyr::from_str::<npd::NpdMonitor>(text)
        .ok()
        .and_then(|npd| npd::to_rule_file(npd, &mut errors));
    let Some((raw, _)) = parsed else {
        return Err(ConfigErrors(errors.list));
    };
    let body = serde_saphyr::to_string(&raw).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            message: format!("cannot write the rule file: {e}"),
        }])
    })?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("the NPD file");
    let mut yaml = format!("# Converted from {name} by `detector convert-npd`.\n");
    for n in &loaded.notes {
        yaml.push_str(&format!(
            "# Not carried over ({name}:{}:{}): {}\n",
            n.line, n.column, n.message
        ));
    }
    yaml.push_str(&body);
    let stem = path.with_extension("yaml");
    load_sources(&[(stem, yaml.clone())]).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            message: format!("the converted rule file does not load (a bug in convert-npd): {e}"),
        }])
    })?;
    Ok((yaml, loaded.notes))
}
