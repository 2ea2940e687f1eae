//! Checks of the docs shared by the binaries' tests: the flags a document's tables name, and which
//! of them a `--help` output lacks.

use std::path::Path;

/// Every `--flag` (and `-v`, `-d`) written in code spans of the tables of `doc` (a path from the
/// workspace root, e.g. `docs/migrating-from-draino.md`), without `=value`.
pub fn doc_table_flags(doc: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(doc);
    let section = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let end = section.len();
    let mut flags: Vec<String> = section[..end]
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .flat_map(|code| {
            code.split([' ', ','])
                .filter(|w| w.starts_with("--") || *w == "-v" || *w == "-d")
                .map(|w| w.split('=').next().unwrap_or(w).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

/// The `flags` that `help` (a `--help` output) does not show.
pub fn missing_from_help<'a>(flags: &'a [String], help: &str) -> Vec<&'a String> {
    flags
        .iter()
        .filter(|f| {
            ![" ", "=", ",", "\n", "]"]
                .iter()
                .any(|after| help.contains(&format!("{f}{after}")))
        })
        .collect()
}
