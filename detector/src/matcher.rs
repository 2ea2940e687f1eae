//! Matching lines against a monitor's patterns in one pass.
//!
//! Semantics follow NPD so its rule files keep their meaning: a pattern must match *up to the end of the
//! newest line* (it may start anywhere), and a pattern that contains a newline is matched against the
//! last `bufferSize` lines joined with `\n`. Recovery patterns follow the same rule.
//!
//! Speed: all single-line patterns (rules and recoveries) are compiled into one `RegexSet`, so a benign
//! line costs one scan of a lazy DFA whatever the number of rules; the individual regexes run only on
//! the rare line the set says matched (to find captures). The window of recent lines is kept only when
//! the monitor has a multi-line pattern.

use std::collections::VecDeque;

use regex::{Regex, RegexSet};

use crate::config::{Monitor, RuleKind};

/// What a pattern belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Index into the monitor's rules.
    Rule(usize),
    /// Index into the monitor's conditions (its recovery pattern).
    Recovery(usize),
}

/// One match, with the message it produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub target: Target,
    pub message: String,
}

pub struct Matcher {
    set: RegexSet,
    /// For each set entry: what it belongs to, and its end-anchored regex, compiled on its first hit
    /// (only needed for captures; most rules never match on a healthy node, so this saves memory).
    single: Vec<(Target, Lazy, Option<String>)>,
    multi: Vec<(Target, Regex, Option<String>)>,
    window: Option<Window>,
}

struct Window {
    lines: VecDeque<String>,
    cap: usize,
}

/// A regex compiled on first use.
struct Lazy {
    pattern: String,
    regex: std::sync::OnceLock<Regex>,
}

impl Lazy {
    fn new(pattern: String) -> Lazy {
        Lazy {
            pattern,
            regex: std::sync::OnceLock::new(),
        }
    }
    fn get(&self) -> &Regex {
        self.regex.get_or_init(|| compile(&self.pattern))
    }
}

fn anchored(pattern: &str) -> String {
    format!("(?:{pattern})$")
}

fn anchored_multi(pattern: &str) -> String {
    format!("(?:{pattern})\\z")
}

impl Matcher {
    /// Compile a monitor's patterns. The patterns were validated when the rule file was loaded; adding
    /// the end anchor cannot make them invalid.
    pub fn new(monitor: &Monitor) -> Self {
        let mut single = Vec::new();
        let mut multi = Vec::new();
        for (i, r) in monitor.rules.iter().enumerate() {
            let template = r.message.clone();
            if r.multiline {
                multi.push((
                    Target::Rule(i),
                    compile(&anchored_multi(&r.source_pattern)),
                    template,
                ));
            } else {
                single.push((
                    Target::Rule(i),
                    Lazy::new(anchored(&r.source_pattern)),
                    template,
                ));
            }
        }
        for (i, c) in monitor.conditions.iter().enumerate() {
            if let Some(p) = &c.recovery_pattern {
                single.push((Target::Recovery(i), Lazy::new(anchored(p)), None));
            }
        }
        let set = RegexSet::new(single.iter().map(|(_, r, _)| r.pattern.as_str()))
            .expect("validated patterns form a set");
        let window = (!multi.is_empty()).then(|| Window {
            lines: VecDeque::new(),
            cap: monitor.buffer_size,
        });
        Matcher {
            set,
            single,
            multi,
            window,
        }
    }

    /// Match one line; hits are appended to `out` in rule order (rules before recoveries).
    pub fn match_line(&mut self, line: &str, out: &mut Vec<Hit>) {
        if self.set.is_match(line) {
            for idx in self.set.matches(line).iter() {
                let (target, re, template) = &self.single[idx];
                // The individual regex is only needed to expand captures.
                let message = match template {
                    None => line.to_string(),
                    Some(_) => message(re.get(), line, template.as_deref(), line),
                };
                out.push(Hit {
                    target: *target,
                    message,
                });
            }
        }
        if let Some(w) = &mut self.window {
            if w.lines.len() == w.cap {
                w.lines.pop_front();
            }
            w.lines.push_back(line.to_string());
            if self.multi.is_empty() {
                return;
            }
            let joined = w
                .lines
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n");
            for (target, re, template) in &self.multi {
                if let Some(m) = re.find(&joined) {
                    // NPD reports the whole lines the match spans.
                    let start = joined[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                    out.push(Hit {
                        target: *target,
                        message: message(re, &joined, template.as_deref(), &joined[start..]),
                    });
                }
            }
        }
    }

    /// Rule kind of a hit's target (convenience for callers holding the monitor).
    pub fn is_permanent(monitor: &Monitor, target: Target) -> bool {
        matches!(target, Target::Rule(i) if matches!(monitor.rules[i].kind, RuleKind::Permanent { .. }))
    }
}

fn compile(p: &str) -> Regex {
    Regex::new(p).expect("validated pattern")
}

/// The message of a hit: the template with captures expanded, or the matched line(s).
fn message(re: &Regex, haystack: &str, template: Option<&str>, default: &str) -> String {
    match template {
        None => default.to_string(),
        Some(t) => match re.captures(haystack) {
            Some(caps) => {
                let mut dst = String::new();
                caps.expand(t, &mut dst);
                dst
            }
            None => t.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_sources;

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

    fn hits(m: &mut Matcher, line: &str) -> Vec<Hit> {
        let mut out = Vec::new();
        m.match_line(line, &mut out);
        out
    }

    #[test]
    fn table_of_lines_and_what_they_hit() {
        let mon = monitor(RULES);
        let mut m = Matcher::new(&mon);
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
                        message: msg.to_string()
                    }],
                    "{line}"
                ),
            }
        }
    }

    #[test]
    fn multi_line_patterns_span_the_window() {
        let mon = monitor(RULES);
        let mut m = Matcher::new(&mon);
        assert!(hits(&mut m, "first part").is_empty());
        let got = hits(&mut m, "second part");
        assert_eq!(
            got,
            vec![Hit {
                target: Target::Rule(2),
                message: "first part\nsecond part".into()
            }]
        );
        // Once the first line left the window (bufferSize 3), the pair no longer matches.
        let mut m = Matcher::new(&mon);
        for l in ["first part", "x", "y", "z"] {
            hits(&mut m, l);
        }
        assert!(hits(&mut m, "second part").is_empty());
    }
}
