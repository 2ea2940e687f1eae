//! draino's command line (or `drainer run`'s) as a drainer config file: `drainer convert-draino`,
//! as `detector convert-npd` is for NPD's files. Each policy flag becomes its camelCase key (the
//! file's names are the flags'), durations are written as people write them, draino's
//! `--node-label` joins `nodeSelector`; what has no place in the file (the `--min-ready-duration`
//! floor, `--notify-url-file`) is named in notes. The file is YAML written as one JSON value per
//! key, which every YAML reader reads. Pure.

use serde_json::Value;

use crate::config::flags::PolicyArgs;

/// Flags that are `Option<bool>`: an explicit false is a setting (`--cordon=false`), not the default.
const EXPLICIT_FALSE: &[&str] = &["cordon", "notify_allow_http"];

/// The file's key for a field of [`PolicyArgs`].
pub(crate) fn key(field: &str) -> String {
    if field == "detector_daemonset" {
        return "detectorDaemonSet".into();
    }
    let mut out = String::new();
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A `Duration` as serde writes it (`{"secs": .., "nanos": ..}`), as people write it (`10m`).
fn duration(v: &Value) -> Option<Value> {
    let secs = v.get("secs")?.as_u64()?;
    let nanos = v.get("nanos")?.as_u64()?;
    let d = std::time::Duration::new(secs, nanos as u32);
    Some(Value::String(humantime::format_duration(d).to_string()))
}

/// The config file for `args`, and notes on what it does not carry.
pub fn to_file(args: &PolicyArgs) -> (String, Vec<String>) {
    let (entries, notes) = entries(args);
    let mut text = String::from(
        "# drainer config file, converted from a command line by `drainer convert-draino`.\n",
    );
    for (key, value) in entries {
        text.push_str(&format!("{key}: {value}\n"));
    }
    (text, notes)
}

/// The file's keys and values that `args` sets (a flag given), in the flags' order, and notes on
/// what the file does not carry.
pub(crate) fn entries(args: &PolicyArgs) -> (Vec<(String, Value)>, Vec<String>) {
    let mut notes = Vec::new();
    let Ok(Value::Object(fields)) = serde_json::to_value(args) else {
        return (Vec::new(), vec!["the flags could not be read".into()]);
    };
    let mut lines = Vec::new();
    let mut selector = args.node_selector.clone();
    if !args.node_labels.is_empty() {
        let labels = args.node_labels.join(",");
        selector = Some(match selector {
            Some(s) if !s.is_empty() => format!("{s},{labels}"),
            _ => labels,
        });
    }
    for (field, value) in fields {
        let value = match field.as_str() {
            "config" => {
                if args.config.is_some() {
                    notes.push(
                        "--config: that file's own settings are not merged in here; flags override it, so add what it sets that these flags do not".into(),
                    );
                }
                continue;
            }
            "node_labels" => continue,
            "node_selector" => match &selector {
                Some(s) => Value::String(s.clone()),
                None => continue,
            },
            "min_ready_duration" => {
                if args.min_ready_duration.is_some() {
                    notes.push("--min-ready-duration is a floor for the config file: keep it on the command line".into());
                }
                continue;
            }
            "power_cycle_provider"
            | "power_cycle_url"
            | "power_cycle_token_file"
            | "power_cycle_ca_file"
            | "power_cycle_allow_http"
            | "kured_daemonset"
            | "remediation_template" => {
                if !value.is_null() && value != serde_json::Value::Bool(false) {
                    notes.push(format!(
                        "--{}: keep it on the command line (a file may not redirect a reboot from outside)",
                        field.replace('_', "-")
                    ));
                }
                continue;
            }
            "notify_url_files" => {
                if !args.notify_url_files.is_empty() {
                    notes.push("--notify-url-file: keep it on the command line (it names a mounted Secret)".into());
                }
                continue;
            }
            "notify_urls" if !args.notify_urls.is_empty() => {
                notes.push("notifyUrls carry their tokens: keep the file in a Secret, or use --notify-url-file".into());
                value
            }
            _ => value,
        };
        let value = match value {
            Value::Null => continue,
            Value::Bool(false) if !EXPLICIT_FALSE.contains(&field.as_str()) => continue,
            Value::Array(a) if a.is_empty() => continue,
            Value::Object(_) => match duration(&value) {
                Some(d) => d,
                None => continue,
            },
            v => v,
        };
        lines.push((key(&field), value));
    }
    (lines, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::build;

    use crate::config::flags::parsed as args;

    /// The file builds the same settings as the flags it came from.
    #[test]
    fn the_converted_file_builds_what_the_flags_build() {
        for line in [
            &[
                "--node-label-expr=metadata['labels']['draino'] in ['node']",
                "--drain-buffer=10m",
                "--max-grace-period=8m0s",
                "--eviction-headroom=30s",
                "--dry-run",
                "--skip-drain",
                "--evict-emptydir-pods",
                "--protected-pod-annotation=critical=true",
                "KernelDeadlock",
                "ReadonlyFilesystem=True,5m",
            ][..],
            &[
                "--node-label=draino=node",
                "--node-label=pool=blue",
                "--max-cordoned=20%",
                "--cordon=false",
                "--problem-taint=nodemedic.io/problem:NoSchedule",
                "--breaker-window=7m",
                "--drain-window=Mon-Fri 09:00-17:00",
                "--detector-daemonset=monitoring/detector",
                "--uncordon-after=15m",
                "KernelDeadlock=True,10m",
            ][..],
        ] {
            let given = args(line);
            let from_flags = build::build(&given).unwrap();
            let (yaml, notes) = to_file(&given);
            assert!(notes.is_empty(), "{notes:?}");
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("drainer.yaml");
            std::fs::write(&file, &yaml).unwrap();
            let from_file = build::build(&PolicyArgs {
                config: Some(file),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{yaml}\n{e:?}"));
            assert!(
                from_flags.changes(&from_file).is_empty(),
                "{yaml}\ndiffers: {:?}",
                from_flags.changes(&from_file)
            );
        }
    }

    #[test]
    fn what_the_file_cannot_carry_is_named() {
        let given = args(&[
            "--min-ready-duration=5m",
            "--notify-url-file=/etc/secret/urls",
            "Ready=Unknown,5m",
        ]);
        let (yaml, notes) = to_file(&given);
        assert!(!yaml.contains("minReadyDuration") && !yaml.contains("notifyUrlFile"));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(key("detector_daemonset"), "detectorDaemonSet");
        assert_eq!(key("max_cordoned_per_domain"), "maxCordonedPerDomain");
    }
}
