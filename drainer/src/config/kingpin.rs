//! A draino boolean given a value (`--dry-run=false`), as draino's flag parser had it; pure.
//!
//! kingpin (gopkg.in/alecthomas/kingpin.v2, draino's) takes no value for a boolean: its lexer splits
//! `--dry-run=false` into the flag and a separate argument, the flag is set (true), and `false` is
//! left over as a positional argument, which for draino is one more node condition (kingpin's
//! `parseFlag` and `ParseContext.Next`; kingpin issue #322 shows it: `--test-bool=false myArg` gives
//! `test-bool=true args=[false myArg]`). So a draino line with `--dry-run=false` ran draino in dry
//! run, watching a condition named "false" that no node has.
//!
//! nodemedic does the same where the result is the cautious one (the flag set makes the drainer do
//! less: `--dry-run`, `--skip-drain`, `--debug`), drops the stray value and says so; where the flag
//! set would make it do more than the value asks for (evict DaemonSet pods, force deletions), it
//! refuses, naming the forms that work. A value that agrees with kingpin's result (`=true`) is taken.

use std::ffi::OsString;

use super::draino::BOOLS;

/// Booleans that, set, make the drainer do less.
const CAUTIOUS: &[&str] = &["dry-run", "skip-drain", "debug"];

/// The arguments with each `--FLAG=VALUE` of a draino boolean made `--FLAG` as kingpin reads it,
/// and what to tell the operator about each; or why one is refused.
pub(crate) fn bool_values(args: Vec<OsString>) -> Result<(Vec<OsString>, Vec<String>), String> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut said = Vec::new();
    let mut out = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let split = (i < end)
            .then(|| arg.to_str())
            .flatten()
            .and_then(|a| a.strip_prefix("--"))
            .and_then(|a| a.split_once('='))
            .filter(|(flag, _)| BOOLS.contains(flag))
            .map(|(flag, value)| (flag.to_string(), value.to_string()));
        let Some((flag, value)) = split else {
            out.push(arg);
            continue;
        };
        let truthy = matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "on"
        );
        if !truthy && !CAUTIOUS.contains(&flag.as_str()) {
            return Err(format!(
                "--{flag}={value}: draino's flag parser takes no value for a boolean and would have \
                 turned --{flag} ON (reading {value:?} as a node condition); nodemedic will not guess. \
                 Write --{flag} to turn it on, or --no-{flag} (or leave it out) to keep it off"
            ));
        }
        said.push(if truthy {
            format!("--{flag}={value}: taken as --{flag} (draino's flag parser takes no value for a boolean)")
        } else {
            format!(
                "--{flag}={value}: --{flag} is ON, as draino had it (its flag parser takes no value for a \
                 boolean: it set the flag and read {value:?} as a node condition). Write --no-{flag} to \
                 turn it off"
            )
        });
        out.push(OsString::from(format!("--{flag}")));
    }
    Ok((out, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        bool_values(args.iter().map(OsString::from).collect())
            .map(|(a, s)| (a.into_iter().map(|a| a.into_string().unwrap()).collect(), s))
    }

    #[test]
    fn a_cautious_boolean_with_false_is_set_as_kingpin_set_it_and_said() {
        let (args, said) = run(&["drainer", "--dry-run=false", "KernelDeadlock"]).unwrap();
        assert_eq!(args, ["drainer", "--dry-run", "KernelDeadlock"]);
        assert_eq!(said.len(), 1);
        assert!(
            said[0].contains("--dry-run is ON") && said[0].contains("--no-dry-run"),
            "{}",
            said[0]
        );
    }

    #[test]
    fn a_boolean_that_would_do_more_than_asked_is_refused_naming_the_forms_that_work() {
        let e = run(&["drainer", "--evict-daemonset-pods=false", "KernelDeadlock"]).unwrap_err();
        assert!(
            e.contains("Write --evict-daemonset-pods to turn it on, or --no-evict-daemonset-pods"),
            "{e}"
        );
        // Agreeing with kingpin's result: taken.
        let (args, said) = run(&["drainer", "--evict-daemonset-pods=true", "K"]).unwrap();
        assert_eq!(args, ["drainer", "--evict-daemonset-pods", "K"]);
        assert!(
            said[0].contains("taken as --evict-daemonset-pods"),
            "{}",
            said[0]
        );
    }

    #[test]
    fn other_flags_and_anything_after_the_separator_are_left_alone() {
        let args = ["drainer", "--listen=:10002", "--", "--dry-run=false"];
        let (out, said) = run(&args).unwrap();
        assert_eq!(out, args);
        assert!(said.is_empty());
    }
}
