//! The settings in force, as a config file: `drainer config` (the flags given, over the config
//! file, over the defaults) and `kubectl nodemedic config` (what the running drainer published).
//! Every key the file takes, in `--help`'s order and groups, each with its value and where the
//! value comes from; given back as `--config`, the text builds the same settings. A key nothing
//! sets and without a default is a comment saying so; notification URLs are counted, not shown
//! (they carry tokens). The defaults are the ones `--help` states (`[default: X]`), so this file
//! and the help cannot disagree without the round-trip test seeing it. Pure.

use std::collections::BTreeMap;

use clap::Args;
use serde_json::Value;

use crate::config::convert;
use crate::config::flags::PolicyArgs;

/// Flags that are not keys of the file (`--config` itself, a command-line-only floor, files of
/// secrets), and the ones written by hand below.
const NOT_KEYS: &[&str] = &[
    "config",
    // Added to the file's conditions, from the command line (a component's): the file lists its own.
    "add_conditions",
    "node_labels",
    "min_ready_duration",
    "notify_url_files",
    "notify_urls",
    "power_cycle_provider",
    "power_cycle_url",
    "power_cycle_token_file",
    "power_cycle_ca_file",
    "power_cycle_allow_http",
    "remediation_template",
    "remediate_control_plane",
    "kured_daemonset",
];

/// A `[default: X]` that means "not set".
const UNSET_DEFAULTS: &[&str] = &["none", "never", "no limit", "no floor"];

/// A config file's text that is not a map of keys.
#[derive(Debug, thiserror::Error)]
#[error("{0}: not a map of settings")]
pub(crate) struct NotAMap(String);

/// Whose settings are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Whose {
    /// This command line's.
    Given,
    /// The running drainer's, as published: without notification URLs.
    Published,
}

/// The settings in force for `args` and, when it has one, its config `file` (a name for it and
/// its text), as a config file. Build them first (`build`): this shows, it does not check.
pub(crate) fn render(
    args: &PolicyArgs,
    file: Option<(&str, &str)>,
    whose: Whose,
) -> Result<String, NotAMap> {
    let from_file: BTreeMap<String, Value> = match file {
        None => BTreeMap::new(),
        Some((_, text)) if text.trim().is_empty() => BTreeMap::new(),
        Some((name, text)) => {
            serde_saphyr::from_str(text).map_err(|_| NotAMap(name.to_string()))?
        }
    };
    let mut from_file = from_file;
    if let Some(Value::Array(listed)) = from_file.get_mut("conditions") {
        listed.iter_mut().for_each(unquoted_ladder);
    }
    let file_name = file.map_or("", |(name, _)| name);
    let (flags, _) = convert::entries(args);
    let flags: BTreeMap<String, Value> = flags.into_iter().collect();
    let mut out = vec![match file {
        Some((name, _)) => format!(
            "# The drainer's settings in force: flags given, over {name}, over the defaults."
        ),
        None => "# The drainer's settings in force: flags given, over the defaults.".to_string(),
    }];
    out.push("# Given back as --config, this file builds the same settings.".into());
    let groups = by_heading(|arg| {
        let field = arg.get_id().as_str();
        if NOT_KEYS.contains(&field) {
            return None;
        }
        let key = convert::key(field);
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        let stated = match arg.get_action() {
            clap::ArgAction::SetTrue => Stated::Value(Value::Bool(false)),
            clap::ArgAction::Append => Stated::Empty,
            _ => default(&help),
        };
        let l = line(&key, &flags, &from_file, file_name, stated);
        Some(joined(field, &key, args, (&flags, &from_file)).unwrap_or(l))
    });
    for (heading, lines) in groups {
        out.push(String::new());
        out.push(format!("# {heading}"));
        out.extend(lines);
    }
    out.push(String::new());
    out.push("# Only in the file".into());
    out.push(match from_file.get("podPolicies") {
        Some(v) => format!("podPolicies: {v}  # {file_name}"),
        None => "# podPolicies: none".into(),
    });
    let urls = args.notify_urls.len()
        + from_file
            .get("notifyUrls")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
    out.push(match whose {
        Whose::Published => "# notifyUrls: not published (they carry their tokens)".to_string(),
        Whose::Given => format!(
            "# notifyUrls: {urls} (not shown: they carry their tokens){}",
            if args.notify_url_files.is_empty() {
                String::new()
            } else {
                format!(
                    ", and the ones in {} --notify-url-file",
                    args.notify_url_files.len()
                )
            }
        ),
    });
    if let Some(floor) = args.min_ready_duration {
        out.push(format!(
            "# --min-ready-duration={} stays on the command line (a floor no file may lower)",
            humantime::format_duration(floor)
        ));
    }
    if args.power_cycle_provider.is_some() || args.power_cycle_url.is_some() {
        out.push(
            "# the power-cycle provider stays on the command line (a file may not redirect a reboot from outside)"
                .to_string(),
        );
    }
    if args.remediate_control_plane {
        out.push(
            "# --remediate-control-plane stays on the command line (a file may not let a ladder take a control-plane node down)"
                .to_string(),
        );
    }
    let mut text = out.join("\n");
    text.push('\n');
    Ok(text)
}

/// The line of a key that a flag joins rather than replaces (`--add-condition` the conditions,
/// draino's `--node-label` the node selector), if `field` is one and the flag is given.
fn joined(
    field: &str,
    key: &str,
    args: &PolicyArgs,
    (flags, from_file): (&BTreeMap<String, Value>, &BTreeMap<String, Value>),
) -> Option<String> {
    if field == "conditions" && !args.add_conditions.is_empty() {
        // --add-condition joins the list in force (`build::conditions`).
        let mut all: Vec<Value> = match flags.get(key).or_else(|| from_file.get(key)) {
            Some(Value::Array(listed)) => listed.clone(),
            _ => Vec::new(),
        };
        all.extend(args.add_conditions.iter().cloned().map(Value::String));
        return Some(format!(
            "{key}: {}  # with --add-condition",
            Value::Array(all)
        ));
    }
    if field == "node_selector" && !args.node_labels.is_empty() && args.node_selector.is_none() {
        // draino's --node-label joins the file's nodeSelector (`build::selector`).
        let labels = args.node_labels.join(",");
        let joined = match from_file.get(key).and_then(Value::as_str) {
            Some(s) if !s.trim().is_empty() => format!("{s},{labels}"),
            _ => labels,
        };
        return Some(format!(
            "{key}: {}  # flag --node-label",
            Value::String(joined)
        ));
    }
    None
}

/// A condition with its ladder left unquoted in the file (`- KernelDeadlock=True,10m: drain,
/// reboot`, which YAML reads as a map) written back as the one string it means, as the file's
/// reader takes it (`drainer config` once printed `[{"KernelDeadlock=True,10m":"drain, reboot"}]`).
fn unquoted_ladder(v: &mut Value) {
    let Value::Object(m) = v else { return };
    if m.len() != 1 {
        return;
    }
    let Some((condition, steps)) = m.iter().next() else {
        return;
    };
    let steps = match steps {
        Value::String(s) => s.clone(),
        Value::Array(a) => (a.iter().filter_map(Value::as_str))
            .collect::<Vec<_>>()
            .join(", "),
        _ => return,
    };
    *v = Value::String(format!("{condition}: {steps}"));
}

/// The settings of a rendered file, `key: value` each (comments and where each comes from left
/// out), in its order: what a reload compares to say what it changed.
pub(crate) fn settings(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let l = l.rsplit_once("  # ").map_or(l, |(v, _)| v);
            let (k, v) = l.split_once(": ")?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// A line for each policy flag `each` takes (`None`: left out), grouped as `--help` groups the
/// flags, the groups in the order they first appear (the positional conditions under Conditions).
fn by_heading(mut each: impl FnMut(&clap::Arg) -> Option<String>) -> Vec<(String, Vec<String>)> {
    let cmd = PolicyArgs::augment_args(clap::Command::new("drainer"));
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(line) = each(arg) else { continue };
        let heading = arg.get_help_heading().unwrap_or("Conditions");
        match groups.iter_mut().find(|(h, _)| h == heading) {
            Some((_, lines)) => lines.push(line),
            None => groups.push((heading.to_string(), vec![line])),
        }
    }
    groups
}

/// One key's line: its flag's value, else its file's, else its default, else a comment.
fn line(
    key: &str,
    flags: &BTreeMap<String, Value>,
    file: &BTreeMap<String, Value>,
    file_name: &str,
    default: Stated,
) -> String {
    if let Some(v) = flags.get(key) {
        return format!("{key}: {v}  # flag");
    }
    if let Some(v) = file.get(key).filter(|v| !v.is_null()) {
        return format!("{key}: {v}  # {file_name}");
    }
    match default {
        Stated::Value(v) => format!("{key}: {v}  # default"),
        Stated::Unset(why) => format!("# {key}: not set ({why})"),
        Stated::Empty => format!("# {key}: none"),
        Stated::None => format!("# {key}: not set"),
    }
}

/// What `--help` says a flag defaults to.
#[derive(Debug, PartialEq)]
enum Stated {
    Value(Value),
    /// Not set, and what that means.
    Unset(String),
    /// A list, empty.
    Empty,
    None,
}

/// The default a flag's help states, `[default: X]`: a number, a boolean, a string, or a word
/// saying it is not set. A switch states none: off, as a key nothing sets.
fn default(help: &str) -> Stated {
    let Some(start) = help.rfind("[default: ") else {
        return Stated::None;
    };
    let rest = &help[start + "[default: ".len()..];
    let Some(end) = rest.find(']') else {
        return Stated::None;
    };
    let v = &rest[..end];
    if UNSET_DEFAULTS.contains(&v) {
        return Stated::Unset(v.to_string());
    }
    Stated::Value(match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => match v.parse::<u64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(v.to_string()),
        },
    })
}

#[cfg(test)]
mod tests;

/// The config file's keys as Markdown (`docs/reference/drainer-config.md`): each key, the flag
/// that sets the same, the default and what it does, from the same clap definition `--help`
/// shows; and `podPolicies`, which only the file has. Written by its test.
#[cfg(test)]
pub(crate) fn reference() -> String {
    let mut out = String::from(
        "# The drainer's config file\n\nGenerated from the code: do not edit; a test fails when this \
         file differs (`NODEMEDIC_WRITE_DOCS=1 cargo test` rewrites it).\n\n`--config FILE` (the Helm \
         chart's `drainer.config`, the ConfigMap `nodemedic-drainer-config`) takes YAML with these keys, \
         the same settings as the flags; a flag given on the command line wins over its key. The file \
         is reloaded when it changes; a file with errors is refused with each error at \
         `file:line:column` and the settings in force stay. `drainer config` prints the settings in force \
         in this form, each value with where it comes from.\n",
    );
    let groups = by_heading(|arg| {
        let field = arg.get_id().as_str();
        if NOT_KEYS.contains(&field) && field != "notify_urls" {
            return None;
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let default = match arg.get_action() {
            clap::ArgAction::SetTrue => "`false`".to_string(),
            clap::ArgAction::Append => "none".to_string(),
            _ => match default(&help) {
                Stated::Value(v) => format!("`{v}`"),
                Stated::Unset(why) => why,
                Stated::Empty | Stated::None => "not set".to_string(),
            },
        };
        let text = match help.rfind("[default: ") {
            Some(i) => help[..i].trim_end(),
            None => help.trim_end(),
        };
        let number = {
            use std::any::TypeId;
            let t = arg.get_value_parser().type_id();
            [
                TypeId::of::<usize>(),
                TypeId::of::<u32>(),
                TypeId::of::<u64>(),
                TypeId::of::<i64>(),
                TypeId::of::<f64>(),
            ]
            .into_iter()
            .any(|n| t == n)
        };
        let kind = match arg.get_action() {
            clap::ArgAction::SetTrue => "boolean",
            clap::ArgAction::Append => "list",
            _ if arg.get_value_names().is_some_and(|v| v == ["BOOL"]) => "boolean",
            _ if number => "number",
            _ => "string",
        };
        let flag = match arg.get_long() {
            Some(l) => format!("`--{l}`"),
            None => "positional".to_string(),
        };
        Some(format!(
            "| `{}` | {kind} | {flag} | {default} | {} |",
            convert::key(field),
            text.replace('\n', " ").replace('|', "\\|")
        ))
    });
    for (heading, rows) in groups {
        out.push_str(&format!(
            "\n## {heading}\n\n| key | kind | flag | default | what it does |\n| --- | --- | --- | --- | --- |\n"
        ));
        for r in rows {
            out.push_str(&r);
            out.push('\n');
        }
    }
    out.push_str(POD_POLICIES);
    out
}

/// `podPolicies` has no flag: its form, by hand, beside the generated keys (the field names are
/// `file::RawPolicy`'s; the reference test checks each appears here).
#[cfg(test)]
const POD_POLICIES: &str = "
## Only in the file: `podPolicies`

What a drain does with each workload's pods: a list of policies, the first that matches a pod
decides; pods no policy matches follow the eviction settings above.

| field | what it does |
| --- | --- |
| `name` | a name for logs and Events |
| `namespaces` | the pod's namespace is one of these (none given: any) |
| `selector` | a label selector over the pod's labels, e.g. `app=db,tier!=cache` |
| `ownerKinds` | the kind of the pod's controller: `Job`, `StatefulSet`, `ReplicaSet`, `DaemonSet`, ... |
| `priorityClasses` | the pod's priority class is one of these |
| `action` | `evict` (through the Eviction API), `skip` (never evicted; the drain completes without it), `wait` (let it finish; evicted if still running `maxWait` after the drain started), `delete` (deleted when its eviction has been refused for `after`) |
| `maxWait` | with `wait`: how long to let it run |
| `after` | with `delete`: how long refusals go on before it is deleted |
";
