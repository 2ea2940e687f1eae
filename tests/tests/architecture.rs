//! The shape of the code, checked: imports point one way (no cycle among the modules of
//! `drainer/src`, `detector/src` or `common/src`, tests excluded; no import up a crate's floors,
//! [`FLOORS`]), files stay readable in one sitting (at most 600
//! lines outside tests), functions at most 100 lines outside tests, every module says in its first
//! doc line what it holds and whether it is pure, and unit tests have one style in every crate
//! (where they sit, how they are named).
//!
//! A module is a file (`a/mod.rs` is `a`; each binary's `main.rs` is `main`). An edge `a -> b` is a path `crate::b::...` (or
//! `super::...`) used in `a`, resolved to the deepest module the path names; a name re-exported by a
//! parent counts as the parent, so a child that imports what its parent re-exports closes a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crate_src(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join(name)
        .join("src")
}

/// Every `.rs` file under `src` but test files, as (module path, file).
fn modules(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for p in all_files(src) {
        let rel = p.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = parts.last().cloned().unwrap_or_default();
        // The binaries' `main.rs` are checked like every other file (a few lines each: the
        // command lines are library modules).
        if last == "tests" {
            continue;
        }
        if last == "mod" || (parts.len() == 1 && last == "lib") {
            parts.pop();
        }
        out.push((parts.join("::"), p));
    }
    out.sort();
    out
}

/// The source without comments, string and char literals (their bytes blanked, lines kept), and
/// without `#[cfg(test)]` items.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let blank = |out: &mut Vec<u8>, s: &[u8]| {
            out.extend(s.iter().map(|&x| if x == b'\n' { b'\n' } else { b' ' }))
        };
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && !ident_byte(out.last().copied())
        {
            let hashes = b[i + 1..].iter().take_while(|&&x| x == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let start = i + 2 + hashes;
            let end = text[start..]
                .find(&close)
                .map_or(b.len(), |n| start + n + close.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let rest = &text[i + 1..];
            let lit = if rest.starts_with('\\') {
                rest.find('\'').map(|n| n + 2)
            } else {
                rest.chars().next().and_then(|ch| {
                    let n = ch.len_utf8();
                    (rest.as_bytes().get(n) == Some(&b'\'')).then_some(n + 2)
                })
            };
            match lit {
                Some(len) => {
                    blank(&mut out, &b[i..i + len]);
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    let code = String::from_utf8(out).unwrap();
    strip_test_items(&code)
}

fn ident_byte(b: Option<u8>) -> bool {
    b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Blank each item that follows `#[cfg(test)]` (up to its matching brace or semicolon).
fn strip_test_items(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let bytes = out.as_bytes();
        let mut j = at;
        let mut depth = 0usize;
        let mut end = out.len();
        while j < bytes.len() {
            match bytes[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let blanked: String = out[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..end, &blanked);
    }
    out
}

/// The paths a module's code names through `crate::`, `super::`, `self::` or one of its own
/// submodules (`child::`), use-groups expanded, as module paths relative to the crate root.
#[allow(dead_code)]
fn referenced_paths(module: &str, code: &str) -> Vec<Vec<String>> {
    referenced_paths_with(module, code, &[])
}

fn referenced_paths_with(module: &str, code: &str, children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let own: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        let boundary =
            !(ident_byte(i.checked_sub(1).map(|k| b[k])) || (i >= 2 && &code[i - 2..i] == "::"));
        let child = children.iter().find(|c| {
            boundary && rest.starts_with(c.as_str()) && rest[c.len()..].starts_with("::")
        });
        let (base, len): (Vec<String>, usize) = if let Some(c) = child {
            let mut base = own.clone();
            base.push(c.clone());
            (base, c.len() + 2)
        } else if boundary && rest.starts_with("self::") {
            (own.clone(), "self::".len())
        } else if boundary && rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if boundary && rest.starts_with("super::") {
            let mut parent = own.clone();
            let mut l = 0;
            while code[i + l..].starts_with("super::") {
                parent.pop();
                l += "super::".len();
            }
            (parent, l)
        } else {
            i += 1;
            continue;
        };
        let (paths, used) = use_tree(&code[i + len..]);
        for p in paths {
            let mut full = base.clone();
            full.extend(p);
            out.push(full);
        }
        i += len + used.max(1);
    }
    out
}

/// The paths of a use-tree (`a::b`, `a::{b, c::d}`) at the start of `s`, and how much of `s` it took.
fn use_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    let mut i = 0;
    let b = s.as_bytes();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            let mut depth = 0;
            let mut j = i;
            let mut items = Vec::new();
            let mut start = i + 1;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push(&s[start..j]);
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        items.push(&s[start..j]);
                        start = j + 1;
                    }
                    _ => {}
                }
                j += 1;
            }
            let mut out = Vec::new();
            for item in items {
                let (paths, _) = use_tree(item.trim());
                for p in paths {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
            }
            return (out, j + 1);
        }
        let start = i;
        while i < b.len() && ident_byte(Some(b[i])) {
            i += 1;
        }
        if i > start {
            prefix.push(s[start..i].to_string());
        }
        if s[i..].starts_with("::") {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The deepest module among `known` that `path` names (at least its first segment's).
fn resolve(path: &[String], known: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains(m))
}

/// Strongly connected components of more than one module (Tarjan, iterative enough for small graphs).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.get(v) {
            for w in ws {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let l = t.low[w].min(t.low[v]);
                    t.low.insert(v, l);
                } else if t.on.contains(w) {
                    let l = t.index[w].min(t.low[v]);
                    t.low.insert(v, l);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn import_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(&crate_src(krate));
    let known: BTreeSet<String> = mods.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (m, file) in &mods {
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        let prefix = if m.is_empty() {
            String::new()
        } else {
            format!("{m}::")
        };
        let children: Vec<String> = known
            .iter()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|rest| !rest.is_empty() && !rest.contains("::"))
            .map(String::from)
            .collect();
        let edges: BTreeSet<String> = referenced_paths_with(m, &code, &children)
            .iter()
            .filter_map(|p| resolve(p, &known))
            .filter(|t| t != m && !t.is_empty())
            .collect();
        graph.insert(m.clone(), edges);
    }
    graph
}

#[test]
fn no_import_cycle_among_the_modules() {
    let mut report = Vec::new();
    for krate in ["drainer", "detector", "common"] {
        for c in cycles(&import_graph(krate)) {
            report.push(format!("{krate}: {}", c.join(", ")));
        }
    }
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

/// Each crate's floors, lowest first: a top-level module (a folder or a file under `src/`) may
/// import from its own floor and those below it, never from one above; and no two top-level
/// modules import each other. A module not placed here fails the test until it is placed.
/// The drainer's are its data path (`model -> config -> decide -> {observe, act, record} ->
/// controller -> cli`), with the tools above the controller.
const FLOORS: &[(&str, &[&[&str]])] = &[
    (
        "drainer",
        &[
            &["model", "metrics"],
            &["config"],
            &["decide"],
            &["observe", "act", "record", "notify", "live", "leader"],
            &["controller", "error"],
            &["plan", "guard", "run"],
            &["simulate", "cli", "main"],
        ],
    ),
    (
        "detector",
        &[
            &["parse", "matcher", "probe", "sample"],
            &["config"],
            &[
                "metrics",
                "checkpoint",
                "npd_flags",
                "error",
                "evidence",
                "restart",
                "reboot",
                "replaced",
            ],
            &["source"],
            &["problem", "stats"],
            &["occurrence", "check"],
            &["monitor"],
            &["report"],
            &["supervise"],
            &["run"],
            &["cli", "main"],
        ],
    ),
    (
        "common",
        &[
            &[
                "alloc",
                "clock",
                "events",
                "evict",
                "filewatch",
                "health",
                "keys",
                "labels",
                "lenient",
                "privs",
                "rbac",
                "reboot",
                "runtime",
                "status",
                "sysclock",
                "telemetry",
                "throttle",
                "time",
                "yaml",
                "chain",
            ],
            &["conditions", "exempt", "serve", "client"],
            &["cli"],
        ],
    ),
];

/// The top-level module of `m` (`a::b` is `a`; the crate root is none).
fn top(m: &str) -> Option<&str> {
    m.split("::").next().filter(|t| !t.is_empty())
}

/// Every import between top-level modules that goes up a floor, every pair that import each other,
/// and every top-level module without a floor, in `krate` with `floors`.
fn floor_violations(
    krate: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    floors: &[&[&str]],
) -> Vec<String> {
    let floor = |t: &str| floors.iter().position(|f| f.contains(&t));
    let mut out = BTreeSet::new();
    let mut folders: BTreeSet<(String, String)> = BTreeSet::new();
    for (from, tos) in graph {
        let Some(a) = top(from) else { continue };
        if floor(a).is_none() {
            out.insert(format!("{krate}: {a} has no floor (place it in FLOORS)"));
        }
        for to in tos {
            let Some(b) = top(to) else { continue };
            if a == b {
                continue;
            }
            folders.insert((a.to_string(), b.to_string()));
            if let (Some(fa), Some(fb)) = (floor(a), floor(b))
                && fb > fa
            {
                out.insert(format!(
                    "{krate}: {from} imports {to}, a floor up ({a} -> {b})"
                ));
            }
        }
    }
    for (a, b) in &folders {
        if a < b && folders.contains(&(b.clone(), a.clone())) {
            out.insert(format!("{krate}: {a} and {b} import each other"));
        }
    }
    out.into_iter().collect()
}

#[test]
fn imports_point_down_the_floors_in_every_crate() {
    let mut report = Vec::new();
    for (krate, floors) in FLOORS {
        report.extend(floor_violations(krate, &import_graph(krate), floors));
    }
    assert!(
        report.is_empty(),
        "imports up the floors:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_floor_check_finds_an_upward_import_a_pair_and_an_unplaced_module() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("low::x", vec!["high::y"]),
        ("high::y", vec!["low::x"]),
        ("stray", vec![]),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.into_iter().map(String::from).collect()))
    .collect();
    let found = floor_violations("k", &graph, &[&["low"], &["high"]]);
    assert_eq!(
        found,
        [
            "k: high and low import each other",
            "k: low::x imports high::y, a floor up (low -> high)",
            "k: stray has no floor (place it in FLOORS)",
        ]
    );
}

/// Lines of each function outside tests that is longer than `max` (signature to closing brace).
fn long_functions(code: &str, max: usize) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(n) = code[i..].find("fn ") {
        let at = i + n;
        i = at + 3;
        if ident_byte(at.checked_sub(1).map(|k| b[k])) {
            continue;
        }
        // The body: the first `{` before a `;` at depth 0 of parentheses/brackets.
        let mut j = at;
        let mut paren = 0i32;
        let mut body = None;
        while j < b.len() {
            match b[j] {
                b'(' | b'[' | b'<' => paren += 1,
                b')' | b']' | b'>' => paren -= 1,
                b';' if paren <= 0 => break,
                b'{' if paren <= 0 => {
                    body = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let Some(open) = body else { continue };
        let mut depth = 0;
        let mut k = open;
        while k < b.len() {
            match b[k] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let first = code[..at].matches('\n').count() + 1;
        let last = code[..k.min(b.len())].matches('\n').count() + 1;
        if last - first + 1 > max {
            out.push((first, last - first + 1));
        }
    }
    out
}

#[test]
fn files_fit_in_one_sitting_and_functions_in_one_screen() {
    let mut report = Vec::new();
    for krate in ["drainer", "detector"] {
        for (m, file) in modules(&crate_src(krate)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = code_only(&text);
            let lines = code.trim_end().lines().count();
            if lines > 600 {
                report.push(format!(
                    "{}: {lines} lines outside tests (at most 600)",
                    file.display()
                ));
            }
            // A binary hands its arguments to the library's command line, where it is tested.
            let code_lines = code.lines().filter(|l| !l.trim().is_empty()).count();
            if m == "main" && code_lines > 10 {
                report.push(format!(
                    "{}: {code_lines} lines of code in a main.rs (at most 10: the command line belongs in the library's cli module)",
                    file.display()
                ));
            }
            for (line, len) in long_functions(&code, 100) {
                report.push(format!(
                    "{}:{line}: a function of {len} lines (at most 100) in {m}",
                    file.display()
                ));
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn every_module_says_what_it_holds_and_whether_it_is_pure() {
    let mut report = Vec::new();
    for krate in ["drainer", "detector"] {
        for (m, file) in modules(&crate_src(krate)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let first = text.lines().next().unwrap_or("");
            let doc: String = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .map(|l| l.trim_start_matches("//!").trim())
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            if !first.starts_with("//!") {
                report.push(format!("{}: no module doc line ({m})", file.display()));
            } else if !(doc.contains("pure") || doc.contains("i/o") || doc.contains("shell")) {
                report.push(format!(
                    "{}: its doc does not say whether it is pure (pure, or I/O / shell)",
                    file.display()
                ));
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_strips_tests_and_expands_use_groups() {
    let code = code_only(
        "use crate::{a::b, c::{d, e::f}};\nfn x() { let s = \"crate::z\"; super::y(); }\n#[cfg(test)]\nmod tests { use crate::q; }\n",
    );
    let paths = referenced_paths("m::n", &code);
    let names: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(names, ["a::b", "c::d", "c::e::f", "m::y"]);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycles(&g),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
    let long = format!(
        "fn big() {{\n{}}}\nfn small() {{ }}\n",
        "    x();\n".repeat(120)
    );
    assert_eq!(long_functions(&long, 100), vec![(1, 122)]);
}

#[test]
#[ignore]
fn print_graph() {
    let krate = std::env::var("GRAPH").unwrap_or_else(|_| "drainer".into());
    for (m, e) in import_graph(&krate) {
        println!("{m} -> {}", e.into_iter().collect::<Vec<_>>().join(", "));
    }
}

/// Every `.rs` file under `src`, test files included.
fn all_files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// What is wrong with the unit tests of one file (`name`, its text; `declared`: how its parent
/// declares it, when it is a test file): one style in every crate.
fn test_style(name: &str, text: &str, declared: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let stem = name
        .rsplit('/')
        .next()
        .unwrap_or(name)
        .trim_end_matches(".rs");
    let test_file = stem == "tests" || stem.ends_with("_tests");
    if test_file && declared.is_none_or(|d| !d.contains("#[cfg(test)]")) {
        out.push(format!(
            "{name}: a test file its parent does not declare under #[cfg(test)]"
        ));
    }
    let module = text.find("\nmod tests {");
    let lines: Vec<&str> = text.lines().collect();
    let mut at = 0;
    for (i, l) in lines.iter().enumerate() {
        let line_start = at;
        at += l.len() + 1;
        let l = l.trim();
        if !(l == "#[test]" || l.starts_with("#[tokio::test")) {
            continue;
        }
        if !test_file && module.is_none_or(|m| m > line_start) {
            out.push(format!(
                "{name}:{}: a test outside `mod tests` (or a tests.rs / <topic>_tests.rs file)",
                i + 1
            ));
        }
        let f = lines[i + 1..]
            .iter()
            .map(|l| l.trim())
            .find(|l| l.contains("fn "));
        let Some(f) = f else { continue };
        let test = f
            .split("fn ")
            .nth(1)
            .unwrap_or("")
            .split('(')
            .next()
            .unwrap_or("");
        if test.split('_').count() < 4 {
            out.push(format!(
                "{name}:{}: `{test}`: a test is named as a sentence saying what holds (four words or more)",
                i + 1
            ));
        }
    }
    out
}

/// Unit tests have one style in all three crates: in `mod tests` at the end of their module, or in
/// a `tests.rs` or `<topic>_tests.rs` beside it declared under `#[cfg(test)]`; each named as a
/// sentence saying what holds.
#[test]
fn unit_tests_have_one_style_in_every_crate() {
    let mut report = Vec::new();
    for krate in ["drainer", "detector", "common"] {
        let src = crate_src(krate);
        for file in all_files(&src) {
            let text = std::fs::read_to_string(&file).unwrap();
            let name = file.strip_prefix(&src).unwrap().display().to_string();
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            // Declared by `dir.rs` or `dir/mod.rs` beside the file (or `lib.rs`/`main.rs`).
            let dir = file.parent().unwrap();
            let parents = [
                dir.with_extension("rs"),
                dir.join("mod.rs"),
                dir.join("lib.rs"),
                dir.join("main.rs"),
            ];
            // Or, for a file's own tests kept beside it, `#[path = "x_tests.rs"] mod tests;` in
            // the sibling it tests.
            let sibling = dir.join(format!("{}.rs", stem.trim_end_matches("_tests")));
            let by_path = format!("#[path = \"{stem}.rs\"]");
            let declared = parents.iter().find_map(|p| {
                let t = std::fs::read_to_string(p).ok()?;
                let i = t.find(&format!("mod {stem};"))?;
                Some(t[i.saturating_sub(40)..i].to_string())
            });
            let declared = declared.or_else(|| {
                let t = std::fs::read_to_string(&sibling).ok()?;
                let i = t.find(&by_path)?;
                Some(t[i.saturating_sub(40)..i].to_string())
            });
            report.extend(test_style(
                &format!("{krate}/src/{name}"),
                &text,
                declared.as_deref(),
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn the_test_style_check_finds_a_stray_test_a_short_name_and_an_undeclared_file() {
    let ok = "fn f() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn a_thing_holds_as_said() {}\n}\n";
    assert!(test_style("a.rs", ok, None).is_empty());
    let stray = "#[test]\nfn a_thing_holds_as_said() {}\n";
    assert_eq!(test_style("a.rs", stray, None).len(), 1);
    let short =
        "\nmod tests {\n    #[tokio::test(start_paused = true)]\n    async fn steps() {}\n}\n";
    assert!(test_style("a.rs", short, None)[0].contains("`steps`"));
    let file = "#[test]\nfn a_thing_holds_as_said() {}\n";
    assert!(test_style("x_tests.rs", file, Some("#[cfg(test)]\n")).is_empty());
    assert_eq!(test_style("x_tests.rs", file, Some("\n")).len(), 1);
}
