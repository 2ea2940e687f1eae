//! Which nodes the drainer may act on: a CEL expression over the Node, or a label selector.
//!
//! CEL sees the node's compact view ([`NodeView`]), not the whole Node: `metadata` (name, labels,
//! annotations: always maps, empty when the Node has none), `spec.unschedulable` and
//! `status.conditions` (type, status, reason, lastTransitionTime). The expression is compiled, its
//! CEL environment built and the fields it reads found ([`Fields`]) once, when the configuration
//! loads; the controller evaluates it only when a field it reads changed. A bad expression is
//! rejected at start with its position. Pure.

use std::sync::Arc;

use crate::model::node::NodeView;

mod answers;
mod fields;
pub(crate) use fields::Fields;

/// The longest CEL selector accepted, in bytes.
pub(crate) const MAX_CEL_BYTES: usize = 4096;
/// Brackets (calls, lists, maps, parentheses) nested at most this deep: the parser and the evaluator
/// recurse per level (21 nested calls in 218 bytes overflowed a 2 MiB thread stack, found by fuzzing).
pub(crate) const MAX_CEL_NESTING: usize = 12;
/// Operators (`&&`, `||`, `in`, comparisons, arithmetic, `?:`) at most: a chain of them is as deep a
/// tree as nested brackets (680 chained `in` in 3.4 KB overflowed a 2 MiB stack, found by fuzzing).
pub(crate) const MAX_CEL_OPERATORS: usize = 32;
/// Comprehension macros allowed in one selector (each can loop over a node's labels, annotations
/// or conditions: a few dozen items).
pub(crate) const MAX_CEL_COMPREHENSIONS: usize = 3;

/// How deep `(`, `[` and `{` nest in `expr`, and how many operators it has, outside string literals.
fn nesting(expr: &str) -> (usize, usize, bool) {
    let (mut depth, mut max, mut operators) = (0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut raw = false;
    let mut prev = ' ';
    let mut word = String::new();
    for c in expr.chars() {
        // Words and two-character operators count inside strings too: what the parser takes for a
        // string is not always what this scan does (a lexer error ends a string early), and a
        // label value rarely holds them.
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            if word == "in" {
                operators += 1;
            }
            word.clear();
        }
        if matches!((prev, c), ('&', '&') | ('|', '|') | ('=', '=') | ('!', '=')) {
            operators += 1;
        }
        if quote.is_none()
            && matches!(c, '<' | '>' | '+' | '-' | '*' | '/' | '%' | '?')
            && prev != c
        {
            operators += 1;
        }
        // A quoted string cannot span lines in CEL: the parser ends it there, this scan refuses it.
        if quote.is_some() && c == '\n' {
            return (max, operators, true);
        }
        let before = prev;
        prev = c;
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && !raw {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => {
                    // r'...' and R"...": backslashes are not escapes there.
                    raw = matches!(before, 'r' | 'R');
                    quote = Some(c);
                }
                '(' | '[' | '{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    if word == "in" {
        operators += 1;
    }
    // An unterminated string hides what follows it from these counts, but not from the parser,
    // which recovers and recurses (found by fuzzing: 1.7 KB overflowed a 16 MiB debug stack).
    (max, operators, quote.is_some())
}

const NOT_A_BOOL: &str = "the expression returns a value that is not true or false";

/// A selector that cannot be used, or a node it cannot be evaluated on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error(
        "CEL expression of {0} bytes: at most {MAX_CEL_BYTES} (a node selector needs far less)"
    )]
    TooLong(usize),
    #[error("CEL expression {0:?} has a string that is never closed (a ' or \" without its pair)")]
    Unterminated(String),
    #[error("CEL expression {expr:?} nests brackets {depth} deep: at most {MAX_CEL_NESTING}")]
    TooDeep { expr: String, depth: usize },
    #[error(
        "CEL expression {expr:?} has {operators} operators: at most {MAX_CEL_OPERATORS} (a node selector needs a few)"
    )]
    TooManyOperators { expr: String, operators: usize },
    #[error(
        "CEL expression {expr:?} uses {count} comprehension macros (all, exists, exists_one, map, filter): at most {MAX_CEL_COMPREHENSIONS}, so an evaluation stays bounded"
    )]
    TooManyComprehensions { expr: String, count: usize },
    #[error(
        "CEL expression {expr:?}: {detail}; a node selector must be true or false (e.g. metadata.labels['pool'] == 'blue')"
    )]
    NotABool { expr: String, detail: String },
    #[error("invalid CEL expression {expr:?}: {detail}")]
    Parse { expr: String, detail: String },
    #[error(
        "invalid label selector term {0:?} (expected k=v, k!=v, k in (a,b), k notin (a,b), k or !k)"
    )]
    LabelTerm(String),
    /// Evaluating on a node failed (a missing key, a type error): that node is not selected.
    #[error("{0}")]
    Eval(String),
}

/// A labelled, annotated node with a condition: what selectors usually look at.
fn sample_node() -> NodeView {
    let mut n = NodeView {
        name: "sample".into(),
        ..NodeView::default()
    };
    n.labels = [("kubernetes.io/hostname", "sample"), ("pool", "a")]
        .into_iter()
        .collect();
    n.annotations = [("a", "b")].into_iter().collect();
    n
}

/// What an evaluation found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Selected,
    NotSelected,
    /// Not selected: the expression reads a key the node does not have.
    MissingKey(String),
}

/// The number the next CEL selector built takes (one per configuration loaded; a drainer does not
/// build 2^32 of them).
static NEXT_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

#[cfg(test)]
thread_local! {
    /// CEL evaluations on this thread, for the tests that count them.
    pub(crate) static CEL_EVALUATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

pub enum Selector {
    All,
    Cel {
        source: String,
        program: cel::Program,
        /// CEL's standard library, built once: building it per evaluation was 28% of the drainer's
        /// CPU on a node's state change (issue 39's profile).
        env: Arc<cel::Env>,
        /// What the expression reads of a node.
        reads: Fields,
        /// This selector's number: its answers are kept with the views it was given
        /// ([`crate::model::selection`]), one evaluation per view.
        id: u32,
        /// Its answers by the values it reads, when it reads few ([`answers`]): a new view
        /// showing values already seen is not evaluated again.
        answers: Option<Box<answers::Answers>>,
    },
    Labels {
        selector: kube::core::Selector,
        /// The labels its terms name.
        reads: Fields,
    },
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::All => write!(f, "All"),
            Selector::Cel { source, .. } => write!(f, "Cel({source:?})"),
            Selector::Labels { selector, .. } => write!(f, "Labels({selector:?})"),
        }
    }
}

/// Split at the commas that are not inside a `( )` value set.
pub(crate) fn split_terms(sel: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in sel.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&sel[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&sel[start..]);
    out
}

impl Selector {
    /// Compile a CEL expression; errors name the position (`line:column`) and what is wrong.
    pub fn cel(expr: &str) -> Result<Selector, SelectError> {
        // Bounds before compiling: the parser recurses (a 10,000-term sum overflowed the stack) and
        // nested comprehensions multiply (four nested `.all` over 60-element lists ran > 60 s).
        if expr.len() > MAX_CEL_BYTES {
            return Err(SelectError::TooLong(expr.len()));
        }
        let (depth, operators, unterminated) = nesting(expr);
        if unterminated {
            return Err(SelectError::Unterminated(expr.into()));
        }
        if depth > MAX_CEL_NESTING {
            return Err(SelectError::TooDeep {
                expr: expr.into(),
                depth,
            });
        }
        if operators > MAX_CEL_OPERATORS {
            return Err(SelectError::TooManyOperators {
                expr: expr.into(),
                operators,
            });
        }
        let comprehensions = ["all(", "exists(", "exists_one(", "map(", "filter("]
            .iter()
            .map(|m| expr.matches(&format!(".{m}")).count())
            .sum::<usize>();
        if comprehensions > MAX_CEL_COMPREHENSIONS {
            return Err(SelectError::TooManyComprehensions {
                expr: expr.into(),
                count: comprehensions,
            });
        }
        match cel::Program::compile(expr) {
            Ok(program) => {
                let reads = Fields::read_by(program.expression());
                let selector = Selector::Cel {
                    id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    source: expr.to_string(),
                    answers: answers::kept_for(&reads).then(Box::default),
                    reads,
                    program,
                    env: Arc::new(cel::Env::stdlib()),
                };
                // A selector must say yes or no: found at start, not as "not selected" on every node.
                // Two sample nodes (bare, and labelled) catch most non-boolean results; the rest are
                // caught per node at evaluation.
                for sample in [NodeView::default(), sample_node()] {
                    if let Err(SelectError::Eval(e)) = selector.matches(&sample)
                        && e.starts_with(NOT_A_BOOL)
                    {
                        return Err(SelectError::NotABool {
                            expr: expr.into(),
                            detail: e,
                        });
                    }
                }
                Ok(selector)
            }
            Err(errors) => {
                let detail: Vec<String> = errors
                    .errors
                    .iter()
                    // cel reports a 1-based line and a 0-based column.
                    .map(|e| format!("{}:{}: {}", e.pos.0.max(1), e.pos.1.max(0) + 1, e.msg))
                    .collect();
                Err(SelectError::Parse {
                    expr: expr.into(),
                    detail: detail.join("; "),
                })
            }
        }
    }

    /// Parse a Kubernetes label selector string, as kubectl takes it: `k=v`, `k==v`, `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, separated by commas. The terms become kube's own
    /// [`kube::core::Selector`] expressions, which do the matching.
    pub fn labels(sel: &str) -> Result<Selector, SelectError> {
        use kube::core::{Expression, Selector as KubeSelector};
        let mut exprs: Vec<Expression> = Vec::new();
        for term in split_terms(sel) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let bad = || SelectError::LabelTerm(term.into());
            let key_ok = |k: &str| {
                !k.is_empty()
                    && !k.contains([' ', '(', ')', '=', '!', ','])
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
            };
            let words: Vec<&str> = term.split_whitespace().collect();
            let set = |rest: &str| -> Option<std::collections::BTreeSet<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(
                    inner
                        .split(',')
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                        .collect(),
                )
            };
            let e = if words.len() >= 2 && (words[1] == "in" || words[1] == "notin") {
                let key = words[0];
                let rest = term[key.len()..].trim_start()[words[1].len()..].to_string();
                let values = set(&rest).ok_or_else(bad)?;
                if !key_ok(key) || values.is_empty() {
                    return Err(bad());
                }
                if words[1] == "in" {
                    Expression::In(key.to_string(), values)
                } else {
                    Expression::NotIn(key.to_string(), values)
                }
            } else if let Some((k, v)) = term.split_once("!=") {
                let (k, v) = (k.trim(), v.trim());
                if !key_ok(k) {
                    return Err(bad());
                }
                Expression::NotEqual(k.to_string(), v.to_string())
            } else if let Some((k, v)) = term.split_once('=') {
                let (k, v) = (k.trim(), v.trim_start_matches('=').trim());
                if !key_ok(k) {
                    return Err(bad());
                }
                Expression::Equal(k.to_string(), v.to_string())
            } else if let Some(k) = term.strip_prefix('!') {
                let k = k.trim();
                if !key_ok(k) {
                    return Err(bad());
                }
                Expression::DoesNotExist(k.to_string())
            } else {
                if !key_ok(term) {
                    return Err(bad());
                }
                Expression::Exists(term.to_string())
            };
            exprs.push(e);
        }
        let keys = exprs.iter().map(|e| match e {
            Expression::In(k, _)
            | Expression::NotIn(k, _)
            | Expression::Equal(k, _)
            | Expression::NotEqual(k, _)
            | Expression::Exists(k)
            | Expression::DoesNotExist(k) => k.as_str(),
        });
        Ok(Selector::Labels {
            reads: Fields::labels(keys),
            selector: KubeSelector::from_iter(exprs),
        })
    }

    /// The fields of a node's view this selector reads: a change to any other leaves its answer
    /// as it was.
    pub(crate) fn reads(&self) -> &Fields {
        match self {
            Selector::All => &fields::NONE,
            Selector::Labels { reads, .. } => reads,
            Selector::Cel { reads, .. } => reads,
        }
    }

    /// Does `node` match? A CEL evaluation error (e.g. a missing key) counts as no match and is returned
    /// as the reason.
    ///
    /// A CEL selector asks once per view: the answer is kept with it (an error is not, and is
    /// returned again).
    pub fn matches(&self, node: &NodeView) -> Result<bool, SelectError> {
        let Selector::Cel {
            id, answers, reads, ..
        } = self
        else {
            return self.evaluate(node).map(|o| o == Outcome::Selected);
        };
        if let Some(answer) = node.selection.get(*id) {
            return Ok(answer);
        }
        let kept = answers.as_ref().and_then(|a| a.get(reads, node));
        let answer = match kept {
            Some(a) => a,
            None => {
                let a = self.evaluate(node)? == Outcome::Selected;
                if let Some(answers) = answers {
                    answers.put(reads, node, a);
                }
                a
            }
        };
        node.selection.set(*id, answer);
        Ok(answer)
    }

    /// Keep this selector's answer for `from` with `to` when `to` differs from it in nothing the
    /// selector reads (a heartbeat, a change of something else): the next change of a field it
    /// reads is then evaluated on the new view only.
    pub(crate) fn carry(&self, from: &NodeView, to: &NodeView) {
        if let Selector::Cel { id, reads, .. } = self
            && let Some(answer) = from.selection.get(*id)
            && reads.same(from, to)
        {
            to.selection.set(*id, answer);
        }
    }

    /// The key a CEL selector looked for on `node` and did not find (the node is then not
    /// selected), if that is why it is not.
    pub(crate) fn missing_key(&self, node: &NodeView) -> Option<String> {
        match self.evaluate(node) {
            Ok(Outcome::MissingKey(k)) => Some(k),
            _ => None,
        }
    }

    /// The selector as its flag gives it, for logs.
    pub(crate) fn describe(&self) -> String {
        match self {
            Selector::All => "every node (no --node-label-expr or --node-selector)".into(),
            Selector::Cel { source, .. } => format!("--node-label-expr {source:?}"),
            Selector::Labels { selector, .. } => {
                format!("--node-selector {:?}", selector.to_string())
            }
        }
    }

    fn evaluate(&self, node: &NodeView) -> Result<Outcome, SelectError> {
        let yes = |b: bool| {
            if b {
                Outcome::Selected
            } else {
                Outcome::NotSelected
            }
        };
        match self {
            Selector::All => Ok(Outcome::Selected),
            Selector::Labels { selector, reads } => {
                use kube::core::SelectorExt;
                // The labels its terms name, and only those: a node's other labels cannot change
                // its answer, and copying them all was the evaluation's cost.
                let labels: std::collections::BTreeMap<String, String> = match &reads.labels {
                    fields::Keys::Some(keys) => (keys.iter())
                        .filter_map(|k| node.labels.get(k).map(|v| (k.clone(), v.to_string())))
                        .collect(),
                    _ => std::collections::BTreeMap::new(),
                };
                Ok(yes(selector.matches(&labels)))
            }
            Selector::Cel {
                program,
                env,
                reads,
                ..
            } => {
                #[cfg(test)]
                CEL_EVALUATIONS.with(|n| n.set(n.get() + 1));
                let mut ctx = cel::Context::with_env(Arc::clone(env));
                for (name, value) in fields::variables(node, reads) {
                    ctx.add_variable_as_val(name, value);
                }
                match program.execute(&ctx) {
                    Ok(cel::Value::Bool(b)) => Ok(yes(b)),
                    Ok(other) => Err(SelectError::Eval(format!("{NOT_A_BOOL} ({other:?})"))),
                    // A label or annotation the node does not have: not selected, as draino's
                    // expr-lang (where it is nil) and kubectl's selectors have it; no warning per
                    // node (the start-up summary says it once).
                    Err(cel::ExecutionError::NoSuchKey(k)) => {
                        Ok(Outcome::MissingKey(k.to_string()))
                    }
                    Err(e) => Err(SelectError::Eval(e.to_string())),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_take_kubectls_equality_and_set_based_forms() {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": {"draino": "node", "zone": "b", "gpu": ""}}}))
        .unwrap();
        let v = NodeView::of(&node);
        let m = |s: &str| Selector::labels(s).unwrap().matches(&v).unwrap();
        assert!(m("draino=node"));
        assert!(m("draino==node"));
        assert!(m("draino = node, zone in (a, b)"));
        assert!(!m("zone notin (a,b)"));
        assert!(m("zone notin (a,c),gpu,!kosmos.io/node"));
        assert!(
            m("other!=x"),
            "!= matches a missing label, as in Kubernetes"
        );
        assert!(
            m("missing notin (x)"),
            "notin matches a missing label, as in Kubernetes"
        );
        assert!(!m("missing in (x)"));
        assert!(!m("!gpu"));
        assert!(m(""), "the empty selector selects everything");
        for bad in [
            "zone in a,b",
            "zone in ()",
            "bad key=x",
            "=x",
            "!",
            "a in (b",
        ] {
            assert!(Selector::labels(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_the_parser_recurses() {
        // Found by fuzzing: 21 nested calls overflowed a 2 MiB stack.
        let deep = format!(
            "metadata.labels.all(k, {}k.size() < 64{})",
            "k.s(k, ".repeat(21),
            ")".repeat(21)
        );
        let e = Selector::cel(&deep).unwrap_err().to_string();
        assert!(e.contains("nests brackets"), "{e}");
        // Brackets inside strings do not count.
        let quoted = format!("metadata.name == '{}'", "(".repeat(40));
        assert!(Selector::cel(&quoted).is_ok());
        assert!(Selector::cel("(((metadata.labels['a'] == 'b')))").is_ok());
        // Found by fuzzing: a long chain of `in` overflowed the stack as well.
        let chain = format!(
            "metadata.name in [] {}",
            "|| metadata.name in [] ".repeat(60)
        );
        let e = Selector::cel(&chain).unwrap_err().to_string();
        assert!(e.contains("operators"), "{e}");
        assert!(Selector::cel("metadata.labels['a'] == 'b' && !('c' in metadata.labels) || size(metadata.name) > 3").is_ok());
        // Found by fuzzing: an unterminated quote hid 200 `in` from the counts, not from the parser.
        let hidden = format!("metadata.name == 'x {}", "in () ".repeat(200));
        let e = Selector::cel(&hidden).unwrap_err().to_string();
        assert!(e.contains("never closed"), "{e}");
        // A lexer error ends a string early (here at a line break); what follows is counted anyway.
        let split = format!("metadata.name == 'x\n{}'", "in () ".repeat(200));
        assert!(Selector::cel(&split).is_err());
        let quoted_ins = format!("metadata.name == '{}'", "in ".repeat(40));
        assert!(
            Selector::cel(&quoted_ins)
                .unwrap_err()
                .to_string()
                .contains("operators")
        );
        // Raw strings end at their quote even after a backslash.
        assert!(Selector::cel(r"metadata.name == r'a\' && metadata.name != 'b'").is_ok());
    }

    fn node(labels: &[(&str, &str)]) -> NodeView {
        NodeView {
            name: "n1".into(),
            labels: labels.iter().copied().collect(),
            ..Default::default()
        }
    }

    /// A view's kept answer is its own selector's, and goes only to a view the selector reads the
    /// same: a node whose label changed is asked again, and another configuration's selector asks
    /// for itself.
    #[test]
    fn a_kept_answer_is_the_selectors_own_and_is_carried_only_where_it_holds() {
        let s = Selector::cel("metadata.labels['pool'] == 'blue'").unwrap();
        let a = node(&[("pool", "blue")]);
        count();
        assert!(s.matches(&a).unwrap());
        assert!(s.matches(&a).unwrap());
        assert_eq!(count(), 1, "asked once for one view");
        let zoned = node(&[("pool", "blue"), ("zone", "1")]);
        s.carry(&a, &zoned);
        assert!(s.matches(&zoned).unwrap());
        assert_eq!(count(), 0, "a label it does not read: carried");
        let moved = node(&[("pool", "green")]);
        s.carry(&a, &moved);
        assert!(!s.matches(&moved).unwrap(), "a label it reads: asked again");
        assert_eq!(count(), 1);
        let other = Selector::cel("metadata.labels['pool'] == 'green'").unwrap();
        assert!(
            !other.matches(&a).unwrap(),
            "another selector asks for itself"
        );
        let mut copy = a.clone();
        copy.labels = [("pool", "c")].into_iter().collect();
        count();
        assert!(
            !s.matches(&copy).unwrap(),
            "a copy of a view may be changed: its own answer"
        );
        assert_eq!(count(), 1);
    }

    fn count() -> usize {
        CEL_EVALUATIONS.with(|n| n.replace(0))
    }

    fn view(name: &str, pool: Option<&str>, skip: bool, unschedulable: bool) -> NodeView {
        let mut v = NodeView {
            name: name.into(),
            unschedulable,
            ..Default::default()
        };
        v.labels = (pool.map(|p| ("pool", p)).into_iter())
            .chain([("kubernetes.io/hostname", name)])
            .collect();
        if skip {
            v.annotations = [("skip", "yes")].into_iter().collect();
        }
        v
    }

    /// Views that show a selector the same values share its answer: one evaluation for a pool's
    /// nodes, one for each other combination of what it reads, and each answer the expression's.
    #[test]
    fn views_that_show_a_selector_the_same_values_are_answered_by_one_evaluation() {
        let s = Selector::cel(
            "metadata.labels['pool'] == 'gpu' && !has(metadata.annotations.skip) && !spec.unschedulable",
        )
        .unwrap();
        count();
        for i in 0..100 {
            let v = view(&format!("n{i}"), Some("gpu"), false, false);
            assert!(s.matches(&v).unwrap());
        }
        assert_eq!(count(), 1, "one pool's nodes: one evaluation");
        assert!(!s.matches(&view("x1", Some("cpu"), false, false)).unwrap());
        assert!(
            !s.matches(&view("x2", None, false, false)).unwrap(),
            "no pool label"
        );
        assert!(
            !s.matches(&view("x3", Some("gpu"), true, false)).unwrap(),
            "an annotation it reads"
        );
        assert!(
            !s.matches(&view("x4", Some("gpu"), false, true)).unwrap(),
            "cordoned"
        );
        // x2 shows what the bare node checked at load showed: answered already.
        assert_eq!(count(), 3, "each other combination once");
        assert!(!s.matches(&view("y1", Some("gpu"), false, true)).unwrap());
        assert!(!s.matches(&view("y2", None, false, false)).unwrap());
        assert!(s.matches(&view("y3", Some("gpu"), false, false)).unwrap());
        assert_eq!(count(), 0, "combinations seen before");
    }

    /// What is unique per node (its name, its conditions' times) or unbounded (every label) is not
    /// kept: such a selector is asked for each view.
    #[test]
    fn a_selector_reading_the_name_the_conditions_or_every_label_is_asked_for_each_view() {
        for expr in [
            "metadata.name.startsWith('n')",
            "status.conditions.exists(c, c.type == 'Ready')",
            "size(metadata.labels) > 1",
            "metadata.labels.exists(k, k == 'pool')",
        ] {
            let s = Selector::cel(expr).unwrap();
            count();
            for i in 0..3 {
                s.matches(&view(&format!("n{i}"), Some("a"), false, false))
                    .unwrap();
            }
            assert_eq!(count(), 3, "{expr}");
        }
    }

    /// A node's kubelet may write its own labels and cordon itself: one node cycling through every
    /// value it likes fills the selector's room, and every other node still gets the answer the
    /// expression gives it, as a selector that never kept one does.
    #[test]
    fn a_node_writing_its_own_labels_cannot_change_another_nodes_answer() {
        let expr = "metadata.labels['pool'] == 'gpu' && !has(metadata.annotations.skip) && !spec.unschedulable";
        let s = Selector::cel(expr).unwrap();
        // First what the others show, with the other answer where it can (cordoned, skipped),
        // then values of its own until the room is full and past it.
        for cordoned in [true, false] {
            for skip in [true, false] {
                for pool in [Some("gpu"), Some("cpu"), None] {
                    s.matches(&view("attacker", pool, skip, cordoned)).unwrap();
                }
            }
        }
        for i in 0..(2 * answers::MAX) {
            let pool = format!("gpu{i}");
            s.matches(&view("attacker", Some(&pool), i % 2 == 0, i % 3 == 0))
                .unwrap();
        }
        for (pool, skip, cordoned) in [
            (Some("gpu"), false, false),
            (Some("gpu"), true, false),
            (Some("gpu"), false, true),
            (Some("cpu"), false, false),
            (None, false, false),
        ] {
            let victim = view("victim", pool, skip, cordoned);
            let fresh = Selector::cel(expr).unwrap().evaluate(&victim).unwrap();
            assert_eq!(
                s.matches(&victim).unwrap(),
                fresh == Outcome::Selected,
                "{pool:?} skip={skip} cordoned={cordoned}"
            );
        }
    }

    /// Past its room (a selector reading a label with a value per node) every new view is asked,
    /// and the answers kept before still answer.
    #[test]
    fn past_its_room_a_selector_asks_each_new_view_and_keeps_what_it_kept() {
        let s = Selector::cel("metadata.labels['pool'] == 'p7'").unwrap();
        let Selector::Cel {
            answers: Some(kept),
            ..
        } = &s
        else {
            panic!("a selector reading one label keeps its answers");
        };
        let before = kept.len(); // the sample nodes' answers, from the checks at load
        count();
        let n = answers::MAX + 20;
        for i in 0..n {
            let v = view("n", Some(&format!("p{i}")), false, false);
            assert_eq!(s.matches(&v).unwrap(), i == 7, "p{i}");
        }
        assert_eq!(count(), n);
        assert_eq!(kept.len(), answers::MAX);
        let first = answers::MAX - before - 1;
        assert_eq!(
            s.matches(&view("n", Some(&format!("p{first}")), false, false)),
            Ok(false)
        );
        assert_eq!(count(), 0, "kept");
        assert_eq!(
            s.matches(&view("n", Some(&format!("p{}", first + 1)), false, false)),
            Ok(false)
        );
        assert_eq!(count(), 1, "past the room: asked");
    }

    #[test]
    fn draino_style_expression_and_empty_labels_are_an_empty_map() {
        let s = Selector::cel("metadata.labels['draino'] in ['master','node']").unwrap();
        assert!(s.matches(&node(&[("draino", "node")])).unwrap());
        assert!(!s.matches(&node(&[("draino", "other")])).unwrap());
        let s = Selector::cel("'draino' in metadata.labels").unwrap();
        assert!(
            !s.matches(&node(&[])).unwrap(),
            "a node with no labels is not an error"
        );
        let s = Selector::cel("size(metadata.annotations) == 0 && metadata.name == 'n1'").unwrap();
        assert!(s.matches(&node(&[])).unwrap());
        let s =
            Selector::cel("status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')")
                .unwrap();
        assert!(!s.matches(&node(&[])).unwrap());
    }

    #[test]
    fn expressions_too_big_or_too_nested_to_evaluate_quickly_are_rejected() {
        let sum = (0..10_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" + ");
        let e = Selector::cel(&format!("{sum} > 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 4096"), "{e}");
        let nested = "[1,2].all(a, [1,2].all(b, [1,2].all(c, [1,2].all(d, a+b+c+d > 0))))";
        let e = Selector::cel(nested).unwrap_err().to_string();
        assert!(e.contains("4 comprehension macros"), "{e}");
        assert!(
            Selector::cel("status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')")
                .is_ok()
        );
    }

    #[test]
    fn bad_expressions_are_rejected_with_a_position() {
        for bad in ["metadata.labels['a'] ==", "a &&", "!", "'x' in"] {
            let e = Selector::cel(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid CEL expression"), "{e}");
            assert!(e.contains("\": 1:"), "position on line 1: {e}");
        }
    }

    #[test]
    fn a_label_selector_matches_as_kubectl_reads_it_and_refuses_a_bad_key() {
        let s = Selector::labels("pool=blue,!gpu,zone").unwrap();
        assert!(
            s.matches(&node(&[("pool", "blue"), ("zone", "a")]))
                .unwrap()
        );
        assert!(
            !s.matches(&node(&[("pool", "blue"), ("zone", "a"), ("gpu", "x")]))
                .unwrap()
        );
        assert!(!s.matches(&node(&[("pool", "red"), ("zone", "a")])).unwrap());
        assert!(Selector::labels("bad key=x").is_err());
    }

    /// A label selector reads the labels its terms name and no other: a change of another label
    /// leaves its answer (the fleet and the watch then skip it), and its answer on a node with many
    /// labels is the one kubectl's rules give.
    #[test]
    fn a_label_selector_reads_the_labels_its_terms_name_and_no_other() {
        let s = Selector::labels("pool=blue, zone in (a, b), !gpu, tier!=db, ssd").unwrap();
        let sorted = ["gpu", "pool", "ssd", "tier", "zone"].map(String::from);
        assert_eq!(s.reads().labels, fields::Keys::Some(sorted.to_vec()));
        let many = |extra: &str, zone: &str| {
            node(&[
                ("pool", "blue"),
                ("zone", zone),
                ("ssd", ""),
                ("tier", "web"),
                ("kubernetes.io/hostname", extra),
                ("node.kubernetes.io/instance-type", "m5.large"),
            ])
        };
        let (a, b) = (many("n1", "a"), many("n2", "a"));
        assert!(s.reads().same(&a, &b), "only the hostname differs");
        assert!(s.matches(&a).unwrap() && s.matches(&b).unwrap());
        let c = many("n1", "c");
        assert!(!s.reads().same(&a, &c), "the zone is read");
        assert!(!s.matches(&c).unwrap(), "zone c is not in (a, b)");
        let mut gpu = many("n1", "b");
        gpu.labels = gpu.labels.with("gpu", Some("t4"));
        assert!(!s.reads().same(&many("n1", "b"), &gpu));
        assert!(!s.matches(&gpu).unwrap(), "!gpu");
        let everything = Selector::labels("").unwrap();
        assert!(everything.reads().same(&a, &c) && everything.matches(&c).unwrap());
    }
}
