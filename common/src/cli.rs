//! What packagers need from a binary's command line: shell completion scripts (clap_complete) and
//! man pages (clap_mangen), both generated from the same clap definition as `--help`, so they never
//! disagree with it.

use std::io::Write;
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// The `completions SHELL` subcommand's work: the completion script for `cmd`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}

/// `completions SHELL` as a binary's subcommand: the script on stdout.
pub fn completions_command(cmd: clap::Command, shell: Shell) -> std::process::ExitCode {
    completions(cmd, shell, &mut std::io::stdout());
    std::process::ExitCode::SUCCESS
}

/// `man DIR` as a binary's subcommand: the pages written, their paths on stdout.
pub fn man_command(cmd: clap::Command, dir: &Path) -> std::process::ExitCode {
    match man_pages(cmd, dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write man pages into {}: {e}", dir.display());
            std::process::ExitCode::from(1)
        }
    }
}

/// The `man DIR` subcommand's work: a page for `cmd` and one per subcommand (`drainer.1`,
/// `drainer-run.1`, ...), written into `dir` (created if missing). Returns the files written.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd;
    cmd.build();
    let mut written = Vec::new();
    write_page(&cmd, cmd.get_name(), dir, &mut written)?;
    Ok(written)
}

fn write_page(
    cmd: &clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let page = cmd.clone().name(name.to_string());
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    std::fs::write(&path, buf)?;
    written.push(path);
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_page(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        clap::Command::new("tool")
            .about("a tool")
            .subcommand(
                clap::Command::new("run")
                    .about("run it")
                    .arg(clap::Arg::new("fast").long("fast").help("go fast")),
            )
            .subcommand(clap::Command::new("plan").about("plan it"))
    }

    #[test]
    fn man_pages_for_the_command_and_each_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let files = man_pages(cmd(), dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["tool.1", "tool-run.1", "tool-plan.1"]);
        let run = std::fs::read_to_string(dir.path().join("tool-run.1")).unwrap();
        assert!(run.contains(".TH tool-run 1"), "{run}");
        assert!(run.contains("go fast"), "{run}");
    }

    #[test]
    fn completion_scripts_name_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            completions(cmd(), shell, &mut out);
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.contains("run") && text.contains("plan"),
                "{shell}: {text}"
            );
            assert!(text.contains("fast"), "{shell}: {text}");
        }
    }
}

/// An error and its causes on one line (kept here, where the binaries' mains look for it).
pub use crate::client::error_chain;

#[cfg(test)]
mod chain_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("kubeconfig /x: failed to read '/x': {0}")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_already_said_are_not_repeated() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file",
        ));
        assert_eq!(
            super::error_chain(&e),
            "kubeconfig /x: failed to read '/x': No such file"
        );
    }
}

/// Every flag and subcommand of `cmd` (recursively) whose help text is missing or a word or two,
/// named by its path (`drainer run listen`): a test over each binary keeps `--help` meaningful.
pub fn undocumented(cmd: &clap::Command) -> Vec<String> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" || a.is_hide_set() {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().len() < 8) {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            if sub.get_about().is_none() {
                out.push(format!("{path} {}", sub.get_name()));
            }
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, cmd.get_name(), &mut out);
    out
}

/// `1 pod`, `3 pods`: a count with its noun as people write it.
pub fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The command-line reference of `cmd` and its subcommands as Markdown, from the same clap
/// definition as `--help` (`docs/reference/`; a test per binary fails when the committed file
/// differs). Per command: what it does, its usage, and a table of its options under `--help`'s
/// headings: the flag and its value, its environment variable, its default, what it does.
pub fn markdown(cmd: &clap::Command) -> String {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = format!(
        "# `{}` command-line reference\n\nGenerated from the code (`{}`'s clap definition): do not edit; \
         a test regenerates it and fails when this file differs (`NODEMEDIC_WRITE_DOCS=1 cargo test` \
         rewrites it).\n",
        cmd.get_name(),
        cmd.get_name()
    );
    // Contents: every command, linked.
    let mut paths = vec![cmd.get_name().to_string()];
    for sub in cmd.get_subcommands() {
        if sub.get_name() != "help" && !sub.is_hide_set() {
            paths.push(format!("{} {}", cmd.get_name(), sub.get_name()));
        }
    }
    out.push('\n');
    for p in &paths {
        out.push_str(&format!("- [`{p}`](#{})\n", anchor(p)));
    }
    let mut seen = std::collections::HashMap::new();
    command_markdown(&cmd, cmd.get_name(), &mut out, &mut seen);
    out
}

/// The anchor GitHub gives the heading `` `path` ``.
fn anchor(path: &str) -> String {
    path.replace(' ', "-")
}

/// A group of options already listed under another command: named there, not repeated.
fn listed_before<'a>(
    rows: &[String],
    seen: &'a std::collections::HashMap<String, String>,
) -> Option<&'a String> {
    let first = seen.get(rows.first()?)?;
    rows.iter()
        .all(|r| seen.get(r) == Some(first))
        .then_some(first)
}

fn command_markdown(
    cmd: &clap::Command,
    path: &str,
    out: &mut String,
    seen: &mut std::collections::HashMap<String, String>,
) {
    use std::fmt::Write as _;
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut usage = cmd.clone().render_usage().to_string();
    usage = usage.trim_start_matches("Usage: ").to_string();
    let _ = write!(out, "\n## `{path}`\n\n{about}\n\n```text\n{usage}\n```\n");
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if id == "help" || id == "version" || a.is_hide_set() {
            continue;
        }
        let name = match (a.get_long(), a.get_short()) {
            (Some(l), _) => format!("--{l}"),
            (None, Some(s)) => format!("-{s}"),
            (None, None) => format!("<{}>", id.to_uppercase()),
        };
        let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
        let value = match a.get_value_names() {
            Some(v) if takes_value && a.get_long().is_some() => format!("={}", v.join(" ")),
            _ if takes_value && a.get_long().is_some() => format!("={}", id.to_uppercase()),
            _ => String::new(),
        };
        let env = a
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let help = a
            .get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let (help, stated) = match help.rfind("[default: ") {
            Some(i) => (
                help[..i].trim_end().to_string(),
                help[i + 10..].trim_end_matches(']').to_string(),
            ),
            None => (help, String::new()),
        };
        let default = match a.get_default_values() {
            [] => stated,
            v => v
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(","),
        };
        let default = if default.is_empty() {
            String::new()
        } else {
            format!("`{default}`")
        };
        let possible: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|_| !matches!(a.get_action(), clap::ArgAction::SetTrue))
            .map(|p| format!("`{}`", p.get_name()))
            .collect();
        let mut help = help.replace('\n', " ").replace('|', "\\|");
        if !possible.is_empty() {
            let said = help.trim_end().trim_end_matches('.');
            help = format!("{said}. One of {}.", possible.join(", "));
        }
        let row = format!("| `{name}{value}` | {env} | {default} | {help} |");
        let heading = a.get_help_heading().unwrap_or("Options").to_string();
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, rows)) => rows.push(row),
            None => groups.push((heading, vec![row])),
        }
    }
    for (heading, rows) in groups {
        // Each option once: a group another command listed already is named, not repeated.
        if let Some(first) = listed_before(&rows, seen) {
            let _ = write!(
                out,
                "\n**{heading}**: as under [`{first}`](#{}).\n",
                anchor(first)
            );
            continue;
        }
        let _ = write!(
            out,
            "\n**{heading}**\n\n| option | environment | default | what it does |\n| --- | --- | --- | --- |\n"
        );
        for r in rows {
            out.push_str(&r);
            out.push('\n');
            seen.entry(r).or_insert_with(|| path.to_string());
        }
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" || sub.is_hide_set() {
            continue;
        }
        command_markdown(sub, &format!("{path} {}", sub.get_name()), out, seen);
    }
}

/// Compare `generated` with the committed reference `file` (relative to the workspace root, as
/// `root` names it); with `NODEMEDIC_WRITE_DOCS=1` write it instead. `Err` says how they differ.
pub fn check_reference(root: &Path, file: &str, generated: &str) -> Result<(), String> {
    let path = root.join(file);
    if std::env::var_os("NODEMEDIC_WRITE_DOCS").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        return std::fs::write(&path, generated).map_err(|e| e.to_string());
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return Ok(());
    }
    let first = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(committed.lines().count().min(generated.lines().count()));
    Err(format!(
        "{file} is not what the code generates (first difference at line {}: committed {:?}, generated {:?}); \
         regenerate it with NODEMEDIC_WRITE_DOCS=1 cargo test -p nodemedic-drainer -p nodemedic-detector reference",
        first + 1,
        committed.lines().nth(first).unwrap_or("(end)"),
        generated.lines().nth(first).unwrap_or("(end)")
    ))
}
