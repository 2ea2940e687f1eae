//! Matching lines against a monitor's patterns in one pass: a neutral [`Pattern`] list compiled once,
//! then a [`Matcher`] per monitor task. Pure (it knows nothing of rule files).
//!
//! Semantics follow NPD so its rule files keep their meaning: a pattern must match *up to the end of the
//! newest line* (it may start anywhere), and a pattern that contains a newline is matched against the
//! last `bufferSize` lines joined with `\n`. Recovery patterns follow the same rule.
//!
//! Speed: all single-line patterns (rules and recoveries) are compiled into one multi-pattern regex
//! (a set), so a benign line costs one scan of a lazy DFA whatever the number of rules; the
//! individual regexes run only on the rare line the set says matched (to find captures). The window
//! of recent lines is kept only when the monitor has a multi-line pattern.

use std::collections::VecDeque;

use regex::Regex;
use regex_automata::meta;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};

/// What a pattern belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Index into the monitor's rules.
    Rule(usize),
    /// Index into the monitor's conditions (its recovery pattern).
    Recovery(usize),
}

/// One pattern to compile, and what it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) target: Target,
    /// The pattern as written.
    pub(crate) source: String,
    /// Matched against the window of recent lines joined with `\n`.
    pub(crate) multiline: bool,
    /// The message template (`$1`, `${name}`, `${lines}`); `None`: the matched line(s).
    pub(crate) template: Option<String>,
    /// The reason template (`GpuXid$2`), when the rule's reason names captures.
    pub(crate) reason: Option<String>,
}

/// One match, with the message it produces (and its reason, from a reason template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) target: Target,
    pub(crate) message: String,
    pub(crate) reason: Option<String>,
}

/// A compiled pattern's own parts: what it belongs to, its regex when a template needs captures,
/// its message template and its reason template.
struct Own {
    target: Target,
    re: Option<Regex>,
    template: Option<String>,
    reason: Option<String>,
}

/// The longest reason a template expands to.
const MAX_REASON: usize = 64;

/// A reason template's expansion, as a condition's reason may be (CamelCase letters and digits):
/// what the captures bring besides letters and digits is dropped (a log line is not trusted to
/// shape a reason), and a reason that would not start with a letter is the template's text before
/// its first capture.
pub(crate) fn reason_of(re: &Regex, haystack: &str, template: &str) -> String {
    let expanded = expand(re, haystack, Some(template), "");
    let clean: String = (expanded.chars())
        .filter(char::is_ascii_alphanumeric)
        .take(MAX_REASON)
        .collect();
    if clean.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return clean;
    }
    template.split('$').next().unwrap_or_default().to_string()
}

/// A monitor's patterns, compiled once when its rule file is loaded (the builder -> matcher split of
/// ripgrep): one multi-pattern regex over the single-line patterns (rules, then recoveries), plus an
/// individual regex only where captures are needed (a rule with a `message` template) or the
/// pattern spans lines. Building it is where an oversized set fails, so a bad file is rejected at
/// load, never at match time.
pub(crate) struct Compiled {
    /// Literals every single-line pattern needs (one of them occurs in any line that matches): a
    /// line without any skips the set. `None` when some pattern has no usable literals.
    prefilter: Option<Regex>,
    /// The single-line patterns as one multi-pattern regex: what `regex::RegexSet` builds, but
    /// without the set's own literal prefilter. Ours above already skips every line without one of
    /// the literals, so the set only sees lines that hold one, and its prefilter (an Aho-Corasick
    /// DFA per monitor) would search for them again: about 200 KiB of the detector's idle heap.
    set: meta::Regex,
    /// For each set entry: what it belongs to, its regex when its message template needs captures,
    /// and the template.
    single: Vec<Own>,
    multi: Vec<Own>,
    /// Lines kept for the multi-line patterns.
    window: usize,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("single", &self.single.len())
            .field("multi", &self.multi.len())
            .finish()
    }
}

/// The form a single-line pattern is matched in (see the module doc).
pub(crate) fn anchored(pattern: &str) -> String {
    format!("(?:{pattern})$")
}

/// The form a multi-line pattern is matched in.
pub(crate) fn anchored_multi(pattern: &str) -> String {
    format!("(?:{pattern})\\z")
}

/// `pattern` with the Perl classes `\d \w \s` (and `\D \W \S`) made ASCII, as they are in NPD's Go
/// regexps (RE2: `\d` is `[0-9]`, `\w` `[0-9A-Za-z_]`, `\s` `[\t\n\f\r ]`), where Rust's are Unicode.
/// So an NPD pattern means here what it meant there, and it compiles far smaller: Unicode `\w` alone
/// is some 700 ranges, which the set's automaton carries for every `\w+` of every rule. Each class
/// becomes a bracket class, which is also valid nested inside another (`[\w.-]` -> `[[[:word:]].-]`);
/// other escapes are kept as written. Syntax errors are reported on the pattern as written.
pub(crate) fn ascii_classes(pattern: &str) -> std::borrow::Cow<'_, str> {
    if !pattern.contains('\\') {
        return pattern.into();
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[[:digit:]]"),
            Some('D') => out.push_str("[[:^digit:]]"),
            Some('w') => out.push_str("[[:word:]]"),
            Some('W') => out.push_str("[[:^word:]]"),
            // `\x20`, not a space: under `(?x)` a space in a class is ignored.
            Some('s') => out.push_str("[\\t\\n\\f\\r\\x20]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r\\x20]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out.into()
}

impl Compiled {
    /// Compile `patterns` (single-line ones into the set, in their order); multi-line ones see the
    /// last `window` lines.
    pub(crate) fn new(patterns: &[Pattern], window: usize) -> Result<Compiled, CompileError> {
        let mut single = Vec::new();
        let mut set = Vec::new();
        let mut multi = Vec::new();
        let mut sources = Vec::new();
        for p in patterns {
            let (template, reason) = (p.template.clone(), p.reason.clone());
            let source = ascii_classes(&p.source);
            if p.multiline {
                let re = Some(Regex::new(&anchored_multi(&source))?);
                let target = p.target;
                multi.push(Own {
                    target,
                    re,
                    template,
                    reason,
                });
            } else {
                let anchored = anchored(&source);
                let captures = (template.is_some() || reason.is_some())
                    .then(|| Regex::new(&anchored))
                    .transpose()?;
                set.push(anchored);
                let target = p.target;
                single.push(Own {
                    target,
                    re: captures,
                    template,
                    reason,
                });
                sources.push(p.source.as_str());
            }
        }
        Ok(Compiled {
            prefilter: prefilter(&sources),
            set: build_set(&set)?,
            single,
            multi,
            window,
        })
    }

    /// Whether a prefilter is in use (for tests and `detector check --explain`-like output).
    #[cfg(test)]
    pub fn has_prefilter(&self) -> bool {
        self.prefilter.is_some()
    }
}

/// Why a monitor's patterns cannot be compiled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompileError {
    #[error(transparent)]
    Pattern(#[from] regex::Error),
    /// The set as a whole (e.g. over the size limit).
    #[error("{0}")]
    Set(String),
}

/// What `regex::RegexSet::new` would be (the regex crate's limits and match semantics), with no
/// prefilter of its own: see [`Compiled::set`].
fn build_set(patterns: &[String]) -> Result<meta::Regex, CompileError> {
    /// The regex crate's defaults for its compiled program and its lazy DFA's cache.
    const NFA_SIZE_LIMIT: usize = 10 << 20;
    const DFA_CACHE: usize = 2 << 20;
    let config = meta::Config::new()
        .nfa_size_limit(Some(NFA_SIZE_LIMIT))
        .hybrid_cache_capacity(DFA_CACHE)
        .match_kind(MatchKind::All)
        .utf8_empty(true)
        .which_captures(regex_automata::nfa::thompson::WhichCaptures::None)
        .auto_prefilter(false);
    meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().utf8(true))
        .build_many(patterns)
        .map_err(|e| {
            CompileError::Set(match (e.size_limit(), e.syntax_error()) {
                (Some(limit), _) => {
                    format!("Compiled regex exceeds size limit of {limit} bytes.")
                }
                (None, Some(syntax)) => syntax.to_string(),
                (None, None) => {
                    let mut text = e.to_string();
                    let mut source = std::error::Error::source(&e);
                    while let Some(s) = source {
                        text.push_str(": ");
                        text.push_str(&s.to_string());
                        source = s.source();
                    }
                    text
                }
            })
        })
}

/// Shortest literal worth prefiltering on: shorter ones occur in most lines.
const MIN_LITERAL: usize = 3;

/// A regex over literals at least one of which occurs in every line any of `patterns` matches:
/// for each pattern, the literals its matches must start with or, failing that, end with (as
/// regex-syntax extracts them). `None` if some pattern has neither (e.g. `\w+ .* \d+`).
fn prefilter(patterns: &[&str]) -> Option<Regex> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    if patterns.is_empty() {
        return None;
    }
    let mut literals: Vec<String> = Vec::new();
    for p in patterns {
        let hir = regex_syntax::ParserBuilder::new().build().parse(p).ok()?;
        let usable = [ExtractKind::Prefix, ExtractKind::Suffix]
            .into_iter()
            .find_map(|kind| {
                let seq = Extractor::new().kind(kind).extract(&hir);
                let lits = seq.literals()?;
                let ok = !lits.is_empty() && lits.iter().all(|l| l.as_bytes().len() >= MIN_LITERAL);
                ok.then(|| lits.to_vec())
            })?;
        for l in usable {
            literals.push(String::from_utf8(l.as_bytes().to_vec()).ok()?);
        }
    }
    literals.sort();
    literals.dedup();
    let alternation: Vec<String> = literals.iter().map(|l| regex::escape(l)).collect();
    Regex::new(&alternation.join("|")).ok()
}

pub(crate) struct Matcher {
    compiled: std::sync::Arc<Compiled>,
    window: Option<Window>,
}

struct Window {
    lines: VecDeque<String>,
    cap: usize,
}

impl Matcher {
    /// A matcher over patterns compiled once (when their rule file was loaded).
    pub(crate) fn new(compiled: std::sync::Arc<Compiled>) -> Self {
        let window = (!compiled.multi.is_empty()).then(|| Window {
            lines: VecDeque::new(),
            cap: compiled.window,
        });
        Matcher { compiled, window }
    }

    /// Match one line; hits are appended to `out` in rule order (rules before recoveries).
    pub(crate) fn match_line(&mut self, line: &str, out: &mut Vec<Hit>) {
        let c = &*self.compiled;
        let candidate = c.prefilter.as_ref().is_none_or(|p| p.is_match(line));
        if candidate && c.set.is_match(line) {
            let mut which = PatternSet::new(c.set.pattern_len());
            c.set
                .which_overlapping_matches(&Input::new(line), &mut which);
            for id in which.iter() {
                let own = &c.single[id.as_usize()];
                // The individual regex is only there to expand captures.
                let message = match (&own.re, &own.template) {
                    (Some(re), Some(_)) => message(re, line, own.template.as_deref(), line),
                    _ => cap(line.to_string()),
                };
                let reason = (own.re.as_ref().zip(own.reason.as_deref()))
                    .map(|(re, t)| reason_of(re, line, t));
                out.push(Hit {
                    target: own.target,
                    message,
                    reason,
                });
            }
        }
        if let Some(w) = &mut self.window {
            if w.lines.len() == w.cap {
                w.lines.pop_front();
            }
            w.lines.push_back(line.to_string());
            let joined = w
                .lines
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n");
            for own in &c.multi {
                let Some(re) = &own.re else { continue };
                if let Some(m) = re.find(&joined) {
                    // NPD reports the whole lines the match spans.
                    let start = joined[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                    let template = own.template.as_deref();
                    out.push(Hit {
                        target: own.target,
                        message: message(re, &joined, template, &joined[start..]),
                        reason: own.reason.as_deref().map(|t| reason_of(re, &joined, t)),
                    });
                }
            }
        }
    }
}

/// Hit messages (a long line, an expanded template) are capped like every message written.
pub(crate) use nodemedic_common::events::{MAX_MESSAGE, cap};

/// The message of a hit: the template with captures expanded, or the matched line(s), capped.
fn message(re: &Regex, haystack: &str, template: Option<&str>, default: &str) -> String {
    cap(expand(re, haystack, template, default))
}

fn expand(re: &Regex, haystack: &str, template: Option<&str>, default: &str) -> String {
    match template {
        None => default.to_string(),
        Some(t) => {
            // `${lines}` is the default message (the matched line(s)): NPD's
            // patternGeneratedMessageSuffix is `${lines}<suffix>`.
            let t = if t.contains("${lines}") {
                std::borrow::Cow::Owned(t.replace("${lines}", &default.replace('$', "$$")))
            } else {
                std::borrow::Cow::Borrowed(t)
            };
            match re.captures(haystack) {
                Some(caps) => {
                    let mut dst = String::new();
                    caps.expand(&t, &mut dst);
                    dst
                }
                None => t.into_owned(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Monitor, load_sources};

    fn monitor(yaml: &str) -> Monitor {
        let rs = load_sources(&[("m.yaml".into(), yaml.to_string())]).unwrap();
        rs.monitors.into_iter().next().unwrap()
    }

    const RULES: &str = r#"
source: test
input: {kind: kmsg}
bufferSize: 3
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: ok
    recovery:
      pattern: 'deadlock cleared'
rules:
  - type: temporary
    reason: OOMKilling
    pattern: '(?:Out of memory: )?Killed process (\d+) \((.+)\) total-vm:\d+kB.*'
    message: 'killed $2 (pid $1)'
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\w+ blocked for more than \w+ seconds\.'
  - type: temporary
    reason: Spanning
    pattern: 'first part\nsecond part'
"#;

    /// The set is built as `regex::RegexSet` builds it, only without its own prefilter: the same
    /// patterns match the same lines, overlapping ones all reported, and an oversized set fails
    /// with the regex crate's message.
    #[test]
    fn the_set_matches_as_a_regex_set_does() {
        let patterns: Vec<String> = [
            r"task [[:word:]]+:[[:digit:]]+ blocked for more than \d+ seconds\.",
            r"blocked for more than \d+ seconds\.",
            r"Killed process (\d+) \((.+)\)",
            r"(?i)I/O ERROR",
            r"EXT4-fs error .*",
            r"^$",
            r"\pL+é",
        ]
        .iter()
        .map(|p| anchored(p))
        .collect();
        let ours = build_set(&patterns).unwrap();
        let theirs = regex::RegexSet::new(&patterns).unwrap();
        for line in [
            "INFO: task docker:12 blocked for more than 120 seconds.",
            "INFO: task docker:12 blocked for more than 120 seconds. and after",
            "Out of memory: Killed process 42 (java)",
            "buffer i/o error on dev sda",
            "EXT4-fs error (device sda1): bad",
            "",
            "café",
            "nothing at all",
        ] {
            let mut which = PatternSet::new(ours.pattern_len());
            ours.which_overlapping_matches(&Input::new(line), &mut which);
            let got: Vec<usize> = which.iter().map(|p| p.as_usize()).collect();
            let want: Vec<usize> = theirs.matches(line).iter().collect();
            assert_eq!(got, want, "{line:?}");
            assert_eq!(ours.is_match(line), theirs.is_match(line), "{line:?}");
        }
        // Short text, huge program: over the size limit, as RegexSet says it.
        let huge = vec![r"(?:\pL{100}){100}".to_string()];
        let want = regex::RegexSet::new(&huge).unwrap_err().to_string();
        match build_set(&huge) {
            Err(CompileError::Set(got)) => assert_eq!(got, want),
            other => panic!("expected a size-limit error, got {other:?}"),
        }
    }

    #[test]
    fn perl_classes_are_ascii_as_in_npds_go_regexps() {
        for (written, compiled) in [
            (r"task \w+:\d+", r"task [[:word:]]+:[[:digit:]]+"),
            (r"[\w.-]+", r"[[[:word:]].-]+"),
            (
                r"\s\S\W\D",
                r"[\t\n\f\r\x20][^\t\n\f\r\x20][[:^word:]][[:^digit:]]",
            ),
            (r"a\\w", r"a\\w"),
            (r"\.\(\x{41}\pL\b", r"\.\(\x{41}\pL\b"),
            (r"no escapes", r"no escapes"),
        ] {
            assert_eq!(ascii_classes(written), compiled, "{written}");
            assert!(Regex::new(&ascii_classes(written)).is_ok(), "{written}");
        }
        let is_match = |pattern: &str, line: &str| {
            let set = Compiled::new(
                &[Pattern {
                    target: Target::Rule(0),
                    source: pattern.to_string(),
                    multiline: false,
                    template: None,
                    reason: None,
                }],
                1,
            )
            .unwrap();
            !hits(&mut Matcher::new(std::sync::Arc::new(set)), line).is_empty()
        };
        // What Go's regexp (and so NPD) says of these lines.
        assert!(is_match(r"task \w+:\d+", "task docker_1:42"));
        assert!(!is_match(r"task \w+:\d+", "task dockér:42"), "\\w is ASCII");
        assert!(!is_match(r"task \w+:\d+", "task docker:٤٢"), "\\d is ASCII");
        assert!(!is_match(r"a\sb", "a\u{a0}b"), "\\s is ASCII whitespace");
        assert!(is_match(r"a\Sb", "a\u{a0}b"));
        assert!(
            is_match(r"(?x) a \s b", "a b"),
            "a space stays a class member under (?x)"
        );
        assert!(is_match(r"[\w-]+ end", "dm-0 end"));
    }

    fn hits(m: &mut Matcher, line: &str) -> Vec<Hit> {
        let mut out = Vec::new();
        m.match_line(line, &mut out);
        out
    }

    #[test]
    fn table_of_lines_and_what_they_hit() {
        let mon = monitor(RULES);
        let mut m = Matcher::new(mon.compiled.clone());
        let cases: &[(&str, Option<(Target, &str)>)] = &[
            ("benign line", None),
            (
                "Killed process 42 (stress) total-vm:100kB, anon-rss:1kB",
                Some((Target::Rule(0), "killed stress (pid 42)")),
            ),
            (
                "Out of memory: Killed process 7 (java) total-vm:9kB",
                Some((Target::Rule(0), "killed java (pid 7)")),
            ),
            (
                "task docker:123 blocked for more than 120 seconds.",
                Some((
                    Target::Rule(1),
                    "task docker:123 blocked for more than 120 seconds.",
                )),
            ),
            // must reach the end of the line
            (
                "task docker:123 blocked for more than 120 seconds. and more",
                None,
            ),
            (
                "kernel: deadlock cleared",
                Some((Target::Recovery(0), "kernel: deadlock cleared")),
            ),
        ];
        for (line, want) in cases {
            let got = hits(&mut m, line);
            match want {
                None => assert!(got.is_empty(), "{line}: {got:?}"),
                Some((t, msg)) => assert_eq!(
                    got,
                    vec![Hit {
                        target: *t,
                        message: msg.to_string(),
                        reason: None,
                    }],
                    "{line}"
                ),
            }
        }
    }

    #[test]
    fn lines_without_a_required_literal_skip_the_set_and_patterns_without_literals_turn_it_off() {
        let mon = monitor(RULES);
        assert!(mon.compiled.has_prefilter());
        let with = |pattern: &str| {
            monitor(&format!(
                "source: t\ninput: {{kind: kmsg}}\nrules:\n  - type: temporary\n    reason: R\n    pattern: '{pattern}'\n"
            ))
        };
        // Suffix literals when the start is open; case variants under (?i).
        for (pattern, line) in [
            (
                r".*\[Hardware Error\]: event severity: fatal",
                "mce: [Hardware Error]: event severity: fatal",
            ),
            (
                "(?i)remounting (?:filesystem|fs) read-only.*",
                "EXT4-fs (sda1): REMOUNTING FILESYSTEM READ-ONLY",
            ),
        ] {
            let mon = with(pattern);
            assert!(mon.compiled.has_prefilter(), "{pattern}");
            let mut m = Matcher::new(mon.compiled.clone());
            assert_eq!(hits(&mut m, line).len(), 1, "{pattern} on {line}");
            assert!(hits(&mut m, "an unrelated line").is_empty());
        }
        // Every bundled monitor can skip benign lines.
        for m in crate::config::bundled_defaults().monitors {
            assert!(m.compiled.has_prefilter(), "{}", m.name);
        }
        // Nothing literal to require: no prefilter, and matching still works.
        let open = with(r"\w+ \d+");
        assert!(!open.compiled.has_prefilter());
        assert_eq!(
            hits(&mut Matcher::new(open.compiled.clone()), "abc 42").len(),
            1
        );
    }

    #[test]
    fn messages_are_capped_at_1_kib_on_a_character_boundary() {
        let mon = monitor(RULES);
        let mut m = Matcher::new(mon.compiled.clone());
        // "é" is two bytes: the cut must not split one.
        let line = format!(
            "Killed process 42 ({}) total-vm:100kB, anon-rss:1kB",
            "é".repeat(2000)
        );
        let got = hits(&mut m, &line);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].message.len() <= MAX_MESSAGE,
            "{}",
            got[0].message.len()
        );
        assert!(got[0].message.ends_with("..."));
    }

    #[test]
    fn multi_line_patterns_span_the_window() {
        let mon = monitor(RULES);
        let mut m = Matcher::new(mon.compiled.clone());
        assert!(hits(&mut m, "first part").is_empty());
        let got = hits(&mut m, "second part");
        assert_eq!(
            got,
            vec![Hit {
                target: Target::Rule(2),
                message: "first part\nsecond part".into(),
                reason: None,
            }]
        );
        // Once the first line left the window (bufferSize 3), the pair no longer matches.
        let mut m = Matcher::new(mon.compiled.clone());
        for l in ["first part", "x", "y", "z"] {
            hits(&mut m, l);
        }
        assert!(hits(&mut m, "second part").is_empty());
    }

    #[test]
    fn a_reason_template_names_the_code_captured_and_nothing_a_line_smuggles() {
        let re = Regex::new(r"^NVRM: Xid \((PCI:[0-9a-f:.]+)\): (\S+),.*$").unwrap();
        let line = "NVRM: Xid (PCI:0000:86:00): 79, pid=1, GPU has fallen off the bus.";
        assert_eq!(reason_of(&re, line, "GpuXid$2"), "GpuXid79");
        let hostile = "NVRM: Xid (PCI:0000:86:00): 79<script>;rm${IFS}-rf, pid=1";
        assert_eq!(reason_of(&re, hostile, "GpuXid$2"), "GpuXid79scriptrmIFSrf");
        // Nothing of a letter to start with: the template's text before its capture.
        assert_eq!(reason_of(&re, line, "$2"), "");
        assert_eq!(reason_of(&re, line, "Gpu$9"), "Gpu");
        let long = format!("NVRM: Xid (PCI:0000:86:00): {}, pid=1", "9".repeat(200));
        assert_eq!(reason_of(&re, &long, "GpuXid$2").len(), MAX_REASON);
    }
}
