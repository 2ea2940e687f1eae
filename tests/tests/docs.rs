//! The README and `docs/` (issue 42, point 9): a README a newcomer reads in ten minutes, nothing
//! pointing outside the repository, links that resolve, and every command shown run by a test.
//!
//! - A ```` ```console ```` block is run here: each `$ COMMAND` (a line ending in `\` goes on) runs
//!   with `bash` in the repository, the workspace's `drainer`, `detector` and `kubectl-nodemedic`
//!   first on the PATH (`cargo run [--release] -p PACKAGE [--bin NAME] --` and
//!   `target/release/NAME` are run as that binary), and its stdout must be the lines shown under
//!   it, `...` standing for any number of lines.
//! - Any other command block (```` ```sh ````, ```` ```bash ````) needs the cluster, a node or a
//!   long build: the line before it names what runs it, `<!-- run by: PATH[::TEST], ... -->`, and
//!   each named file (or folder) must exist and hold the named test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The documents: README.md and docs/**/*.md but the generated reference (its own tests).
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out.retain(|p| !p.starts_with(root().join("docs/reference")));
    out.sort();
    out
}

fn relative(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// A fenced block: where, its language, the `run by:` note before it, its lines.
struct Block {
    at: String,
    lang: String,
    run_by: Option<String>,
    lines: Vec<String>,
}

fn blocks(doc: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(doc).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("{}:{}: a block never closed", relative(doc), i + 1));
        let run_by = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- run by:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(|l| l.trim().to_string());
        out.push(Block {
            at: format!("{}:{}", relative(doc), start + 1),
            lang: lang.trim().to_string(),
            run_by,
            lines: lines[start + 1..end]
                .iter()
                .map(|l| l.to_string())
                .collect(),
        });
        i = end + 1;
    }
    out
}

/// The commands of a console block, each with the output shown under it.
fn commands(block: &Block) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut continued = false;
    for line in &block.lines {
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.trim_end_matches('\\').to_string(), Vec::new()));
            continued = line.ends_with('\\');
        } else if continued {
            let last = out.last_mut().unwrap();
            last.0.push(' ');
            last.0.push_str(line.trim().trim_end_matches('\\'));
            continued = line.ends_with('\\');
        } else if let Some(last) = out.last_mut() {
            last.1.push(line.clone());
        } else {
            panic!("{}: output before any `$ command`", block.at);
        }
    }
    out
}

/// A folder with the workspace's binaries under the names the docs use.
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let drainer = nodemedic_tests::bins::debug_bin("nodemedic-drainer", "drainer");
    let detector = nodemedic_tests::bins::debug_bin("nodemedic-detector", "detector");
    for (name, target) in [
        ("drainer", &drainer),
        ("kubectl-nodemedic", &drainer),
        ("detector", &detector),
    ] {
        std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
    }
    dir
}

/// `command` as run here: a `cargo run` or a release build's path is the binary on the PATH.
fn as_run(command: &str) -> String {
    let mut c = command.trim().to_string();
    for (package, bin) in [
        ("nodemedic-drainer", "drainer"),
        ("nodemedic-detector", "detector"),
    ] {
        for form in [
            format!("cargo run --release -p {package} --bin {bin} --"),
            format!("cargo run -p {package} --bin {bin} --"),
            format!("cargo run --release -p {package} --"),
            format!("cargo run -p {package} --"),
            format!("target/release/{bin}"),
        ] {
            if let Some(rest) = c.strip_prefix(&form) {
                c = format!("{bin}{rest}");
            }
        }
    }
    c
}

/// Whether `got` is what `shown` shows (`...` for any lines; trailing spaces aside).
fn shows(shown: &[String], got: &[&str]) -> bool {
    match shown.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=got.len()).any(|skip| shows(rest, &got[skip..]))
        }
        Some((first, rest)) => got
            .split_first()
            .is_some_and(|(g, more)| g.trim_end() == first.trim_end() && shows(rest, more)),
    }
}

#[test]
fn every_console_block_prints_what_it_shows() {
    let bins = bin_dir();
    let path = format!(
        "{}:{}",
        bins.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut wrong = Vec::new();
    for doc in documents() {
        for block in blocks(&doc).into_iter().filter(|b| b.lang == "console") {
            for (command, shown) in commands(&block) {
                let out = Command::new("bash")
                    .arg("-c")
                    .arg(as_run(&command))
                    .current_dir(root())
                    .env("PATH", &path)
                    .env("NO_COLOR", "1")
                    .env_remove("KUBECONFIG")
                    .env_remove("RUST_LOG")
                    .output()
                    .unwrap();
                ran += 1;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let got: Vec<&str> = stdout.lines().collect();
                if !shows(&shown, &got) {
                    wrong.push(format!(
                        "{}: `{command}` printed\n{stdout}{}\nnot what is shown:\n{}",
                        block.at,
                        String::from_utf8_lossy(&out.stderr),
                        shown.join("\n")
                    ));
                }
            }
        }
    }
    assert!(ran >= 5, "only {ran} commands found in console blocks");
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn every_other_command_block_names_the_tests_that_run_it() {
    let mut wrong = Vec::new();
    for doc in documents() {
        for block in blocks(&doc) {
            if !matches!(block.lang.as_str(), "sh" | "bash" | "shell") {
                continue;
            }
            let Some(run_by) = &block.run_by else {
                wrong.push(format!("{}: no `<!-- run by: ... -->` before it", block.at));
                continue;
            };
            for what in run_by.split(',').map(str::trim) {
                let (file, test) = match what.split_once("::") {
                    Some((f, t)) => (f, Some(t)),
                    None => (what, None),
                };
                let path = root().join(file);
                if !path.exists() {
                    wrong.push(format!("{}: run by {file}, which does not exist", block.at));
                    continue;
                }
                if let Some(test) = test {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !text.contains(&format!("fn {test}(")) {
                        wrong.push(format!("{}: no test {test} in {file}", block.at));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// About ten minutes at 200 words a minute, code blocks included.
#[test]
fn the_readme_reads_in_ten_minutes() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let words = readme.split_whitespace().count();
    assert!(words <= 2000, "README.md has {words} words");
}

#[test]
fn nothing_points_outside_the_repository_and_every_link_resolves() {
    let mut wrong = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        if text.contains("../shared") {
            wrong.push(format!(
                "{}: points at ../shared, outside the repository",
                relative(&doc)
            ));
        }
        for link in text.split("](").skip(1).filter_map(|t| t.split(')').next()) {
            if link.starts_with("http") || link.starts_with('#') || link.contains(' ') {
                continue;
            }
            let file = link.split('#').next().unwrap_or(link);
            let target = doc.parent().unwrap().join(file);
            if !target.exists() {
                wrong.push(format!(
                    "{}: link to {link}, which does not exist",
                    relative(&doc)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_docs_tree_has_what_a_newcomer_looks_for() {
    for doc in [
        "docs/install.md",
        "docs/operator-guide.md",
        "docs/migrating-from-npd.md",
        "docs/migrating-from-draino.md",
        "docs/reference/drainer.md",
        "docs/reference/drainer-config.md",
        "docs/reference/detector.md",
        "docs/reference/kubectl-nodemedic.md",
        "docs/metrics-and-alerts.md",
        "docs/troubleshooting.md",
        "docs/architecture.md",
        "docs/benchmarks.md",
    ] {
        assert!(root().join(doc).exists(), "{doc}");
        assert!(
            std::fs::read_to_string(root().join("README.md"))
                .unwrap()
                .contains(&format!("]({doc})"))
                || doc.starts_with("docs/reference/"),
            "the README does not point at {doc}"
        );
    }
}

#[test]
fn wildcards_match_any_lines_and_nothing_else() {
    let shown = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(shows(&shown(&["a", "...", "d"]), &["a", "b", "c", "d"]));
    assert!(shows(&shown(&["a", "..."]), &["a"]));
    assert!(!shows(&shown(&["a", "d"]), &["a", "b", "d"]));
    assert!(!shows(&shown(&["a"]), &["a", "b"]));
    assert_eq!(
        as_run("cargo run --release -p nodemedic-detector --bin detector -- check --input x"),
        "detector check --input x"
    );
    assert_eq!(as_run("target/release/drainer plan"), "drainer plan");
}

/// The cells of a Markdown table row, trimmed.
fn table_cells(line: &str) -> Vec<&str> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

/// `docs/benchmarks.md` is read at a glance: one row per figure, each cell short, each row naming a
/// bench its command list runs, and every bench in the repository listed there.
#[test]
fn the_benchmarks_page_is_one_short_row_per_figure_and_names_every_bench() {
    let whole = std::fs::read_to_string(root().join("docs/benchmarks.md")).unwrap();
    // The headline: one figure a row, each taken from the tables below it (it cannot drift from them).
    let (before, glance) = whole
        .split_once("## At a glance")
        .expect("a headline table");
    let (glance, after) = glance.split_once("\n## ").expect("tables after it");
    let text = format!("{before}## {after}");
    let headline: Vec<&str> = glance
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what") && !l.starts_with("| ---"))
        .collect();
    assert!(headline.len() >= 8, "{glance}");
    for line in &headline {
        let cells = table_cells(line);
        assert_eq!(cells.len(), 3, "{line}");
        assert!(
            text.contains(cells[1]),
            "the headline's {:?} ({}) is in no table below",
            cells[1],
            cells[0]
        );
    }
    let commands: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("cargo bench ") || l.starts_with("NPD_BIN=") || l.starts_with("fuzz/run")
        })
        .collect();
    let listed = |name: &str| {
        commands.iter().any(|c| {
            c.split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w == ["--bench", name])
                || (name == "fuzz/run" && c.starts_with("fuzz/run"))
        })
    };
    let mut problems = Vec::new();
    let mut rows = 0;
    for line in text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| figure") && !l.starts_with("| ---"))
    {
        rows += 1;
        let cells = table_cells(line);
        if cells.len() != 5 {
            problems.push(format!("not five cells: {line}"));
            continue;
        }
        for c in &cells {
            if c.len() > 240 {
                problems.push(format!("a cell of {} characters: {c}", c.len()));
            }
        }
        let bench = cells[4].trim_matches('`');
        if !listed(bench) {
            problems.push(format!("{bench}: not in the command list"));
        }
    }
    assert!(rows >= 30, "{rows} rows");
    for dir in ["detector/benches", "drainer/benches", "tests/benches"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rs") {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                if !listed(&name) {
                    problems.push(format!("{dir}/{name}.rs: no command in docs/benchmarks.md"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
