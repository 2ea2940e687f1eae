//! draino's command line on `drainer` (and `drainer run`), pure: a draino Deployment's args work
//! unchanged.
//! Every draino flag has draino's meaning here (most are ours under the same name, in `PolicyArgs`
//! and `RunArgs`): a drop-in refuses none of them. `DRAINO_*` environment
//! variables set flags as in draino (kingpin's default envars). draino's `--node-label-expr` is
//! expr-lang: [`translate_expr`] turns what CEL cannot read into CEL.

use std::ffi::OsString;

/// draino's flags that are not ours under the same name.
#[derive(Debug, Default, Clone, clap::Args)]
#[command(next_help_heading = "draino flags (mapped onto the ones above)")]
pub(crate) struct DrainoFlags {
    /// Log at debug level (draino's --debug), unless RUST_LOG says otherwise.
    #[arg(
        help_heading = "Output and operation",
        short = 'd',
        long = "debug",
        env = "DRAINO_DEBUG"
    )]
    pub(crate) debug: bool,
    /// Kubeconfig file (draino's --kubeconfig). [default: in-cluster, else $KUBECONFIG or ~/.kube/config]
    #[arg(
        help_heading = "Cluster",
        long = "kubeconfig",
        env = "DRAINO_KUBECONFIG",
        value_name = "FILE"
    )]
    pub(crate) kubeconfig: Option<std::path::PathBuf>,
    /// API server URL, overriding the kubeconfig's or the in-cluster one (draino's --master).
    #[arg(
        help_heading = "Cluster",
        long = "master",
        env = "DRAINO_MASTER",
        value_name = "URL"
    )]
    pub(crate) master: Option<String>,
    /// draino's name for --lease-name (the leader-election lock).
    #[arg(
        help_heading = "Leader election",
        long = "leader-election-token-name",
        env = "DRAINO_LEADER_ELECTION_TOKEN_NAME",
        value_name = "NAME"
    )]
    pub(crate) leader_election_token_name: Option<String>,
}

/// A selector expression in CEL, or in draino's expr-lang when that is what it is: translated (the
/// CEL form is logged once, to put in its place), or refused with the CEL forms of expr-lang's habits.
pub(crate) fn cel_or_draino(expr: &str) -> Result<super::select::Selector, DrainoError> {
    use super::select::Selector;
    let error = match Selector::cel(expr) {
        Ok(s) => return Ok(s),
        Err(e) => e,
    };
    if let Ok(cel) = translate_expr(expr)
        && cel != expr
        && let Ok(s) = Selector::cel(&cel)
    {
        tracing::warn!(draino = %expr, cel = %cel, "--node-label-expr is draino's expr-lang; using it translated to CEL (write the CEL form to silence this)");
        return Ok(s);
    }
    let habits = [" and ", " or ", "not ", "nil", " matches "]
        .iter()
        .any(|h| expr.contains(h));
    Err(DrainoError::Expr { error, habits })
}

/// draino's boolean flags, which kingpin also takes negated (`--no-dry-run`).
pub(crate) const BOOLS: &[&str] = &[
    "debug",
    "dry-run",
    "skip-drain",
    "evict-daemonset-pods",
    "evict-statefulset-pods",
    "evict-emptydir-pods",
    "evict-unreplicated-pods",
    "allow-force-delete",
    "ignore-safe-to-evict-annotation",
];

/// kingpin's `--no-FLAG` for a draino boolean sets it to false, and the last of `--FLAG` and
/// `--no-FLAG` wins: a `--FLAG` followed later by `--no-FLAG` is dropped with it. Arguments after
/// `--`, and any that is not UTF-8, are kept as they are (clap judges them).
pub(crate) fn drop_negations<S: Into<OsString>>(
    args: impl IntoIterator<Item = S>,
) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let words = words(&args);
    fn negated(a: &str) -> Option<&str> {
        a.strip_prefix("--no-").filter(|flag| BOOLS.contains(flag))
    }
    let mut kept = Vec::with_capacity(args.len());
    for (i, (arg, word)) in args.iter().zip(&words).enumerate() {
        let drop = match word {
            Some(w) if negated(w).is_some() => true,
            Some(w) => w.strip_prefix("--").is_some_and(|flag| {
                BOOLS.contains(&flag)
                    && words[i + 1..]
                        .iter()
                        .flatten()
                        .any(|b| negated(b) == Some(flag))
            }),
            None => false,
        };
        if !drop {
            kept.push(arg.clone());
        }
    }
    kept
}

/// The arguments before `--` as text (None for one that is not UTF-8, and for everything after).
fn words(args: &[OsString]) -> Vec<Option<&str>> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.iter()
        .enumerate()
        .map(|(i, a)| if i < end { a.to_str() } else { None })
        .collect()
}

/// The draino booleans whose last word on the command line is `--no-FLAG`. kingpin lets a flag
/// override its environment variable, so `--no-dry-run` beats `DRAINO_DRY_RUN=true`: such a flag's
/// variable is not read (see [`without_env`]).
pub(crate) fn negated_last(args: &[OsString]) -> Vec<&'static str> {
    let words = words(args);
    BOOLS
        .iter()
        .copied()
        .filter(|flag| {
            let negation = format!("--no-{flag}");
            let plain = format!("--{flag}");
            words
                .iter()
                .rev()
                .flatten()
                .find(|a| **a == negation || **a == plain)
                .is_some_and(|a| *a == negation)
        })
        .collect()
}

/// `cmd` with the environment variables of `flags` (long names) unset, in every subcommand.
pub(crate) fn without_env(cmd: clap::Command, flags: &[&str]) -> clap::Command {
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    let strip = move |cmd: clap::Command| {
        cmd.mut_args(|a| match a.get_long() {
            Some(long) if flags.iter().any(|f| f == long) => a.env(None),
            _ => a,
        })
    };
    let strip_sub = strip.clone();
    strip(cmd).mut_subcommands(strip_sub)
}

/// A draino value that cannot be taken, with the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainoError {
    #[error("{input:?}: expected HOST:PORT or :PORT (e.g. :10002): {reason}")]
    Listen { input: String, reason: String },
    #[error("--node-label {0:?}: expected KEY=VALUE (e.g. draino-enabled=true)")]
    NodeLabel(String),
    #[error("a string starting at column {0} is never closed")]
    Unclosed(usize),
    #[error("{0:?} needs an operand on each side")]
    Operand(String),
    /// A selector that is neither CEL nor expr-lang CEL can take; for expr-lang habits, with their
    /// CEL forms.
    #[error("{error}{}", if *.habits { "; in CEL expr-lang's `and`, `or`, `not`, `nil` are `&&`, `||`, `!`, `null`, `a not in b` is `!(a in b)` and `a matches b` is `a.matches(b)`" } else { "" })]
    Expr {
        error: super::select::SelectError,
        habits: bool,
    },
}

/// `--listen` as draino takes it: `:10002` (every address) or `HOST:PORT`.
pub(crate) fn parse_listen(s: &str) -> Result<std::net::SocketAddr, DrainoError> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e: std::net::AddrParseError| DrainoError::Listen {
            input: s.into(),
            reason: e.to_string(),
        })
}

/// draino's deprecated `--node-label key=value` terms as one label selector (draino ANDs them).
pub(crate) fn node_labels_selector(labels: &[String]) -> Result<String, DrainoError> {
    let mut terms = Vec::new();
    for l in labels {
        match l.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                terms.push(format!("{}={}", k.trim(), v.trim()))
            }
            _ => return Err(DrainoError::NodeLabel(l.clone())),
        }
    }
    Ok(terms.join(","))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Space(String),
    Punct(String),
}

impl Tok {
    fn text(&self) -> &str {
        match self {
            Tok::Word(s) | Tok::Str(s) | Tok::Space(s) | Tok::Punct(s) => s,
        }
    }
}

fn tokens(expr: &str) -> Result<Vec<Tok>, DrainoError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c == '\'' || c == '"' || c == '`' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            if i >= chars.len() {
                return Err(DrainoError::Unclosed(start + 1));
            }
            i += 1;
            let mut s: String = chars[start..i].iter().collect();
            if c == '`' {
                // expr-lang's raw string; CEL's is r'...'.
                s = format!("r'{}'", &s[1..s.len() - 1]);
            }
            out.push(Tok::Str(s));
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        } else if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            out.push(Tok::Space(chars[start..i].iter().collect()));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if ["&&", "||", "==", "!=", "<=", ">="].contains(&two.as_str()) {
                i += 2;
                out.push(Tok::Punct(two));
            } else {
                i += 1;
                out.push(Tok::Punct(c.to_string()));
            }
        }
    }
    Ok(out)
}

/// Where the operand that ends just before `at` starts (a binary operator's left side, for the
/// operators that bind tighter than `&&` and `||`).
fn left_start(toks: &[Tok], at: usize) -> usize {
    let mut depth = 0i32;
    let mut i = at;
    while i > 0 {
        let t = toks[i - 1].text();
        match t {
            ")" | "]" | "}" => depth += 1,
            "(" | "[" | "{" if depth == 0 => return i,
            "(" | "[" | "{" => depth -= 1,
            "&&" | "||" | "," | "?" | ":" | "!" | "and" | "or" | "not" if depth == 0 => return i,
            _ => {}
        }
        i -= 1;
    }
    0
}

/// Where the operand that starts at `at` ends (exclusive).
fn right_end(toks: &[Tok], at: usize) -> usize {
    let mut depth = 0i32;
    let mut i = at;
    while i < toks.len() {
        match toks[i].text() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" if depth == 0 => return i,
            ")" | "]" | "}" => depth -= 1,
            "&&" | "||" | "," | "?" | ":" | "and" | "or" if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    toks.len()
}

fn join(toks: &[Tok]) -> String {
    toks.iter()
        .map(Tok::text)
        .collect::<String>()
        .trim()
        .to_string()
}

/// draino's expr-lang node label expression in CEL: `and`/`or`/`not` as `&&`/`||`/`!`, `a not in b`
/// as `!(a in b)`, `nil` as `null`, `a matches b` (and `contains`, `startsWith`, `endsWith`) as
/// `a.matches(b)`, backquoted raw strings as `r'...'`. Indexing (`metadata['labels']['x']`), `==`,
/// `in [...]` are the same in both. `Ok` with the expression unchanged when there is nothing to
/// translate.
pub fn translate_expr(expr: &str) -> Result<String, DrainoError> {
    let mut toks = tokens(expr)?;
    // Binary word operators, innermost first so nested ones see their operands already rewritten.
    loop {
        let found = toks.iter().enumerate().find_map(|(i, t)| match t {
            Tok::Word(w) if w == "not" => {
                let next = toks[i + 1..]
                    .iter()
                    .position(|t| !matches!(t, Tok::Space(_)))?;
                matches!(&toks[i + 1 + next], Tok::Word(w) if w == "in").then_some((
                    i,
                    i + 1 + next,
                    "notin",
                ))
            }
            Tok::Word(w)
                if ["matches", "contains", "startsWith", "endsWith"].contains(&w.as_str()) =>
            {
                // Only as an infix operator (`a matches b`), not as a method name (`a.matches(b)`).
                let prev = toks[..i]
                    .iter()
                    .rev()
                    .find(|t| !matches!(t, Tok::Space(_)))?;
                (!matches!(prev.text(), "." | "(" | "," | "&&" | "||" | "!"))
                    .then_some((i, i, "method"))
            }
            _ => None,
        });
        let Some((op_start, op_end, kind)) = found else {
            break;
        };
        let l = left_start(&toks, op_start);
        let r = right_end(&toks, op_end + 1);
        let left = join(&toks[l..op_start]);
        let right = join(&toks[op_end + 1..r]);
        if left.is_empty() || right.is_empty() {
            return Err(DrainoError::Operand(toks[op_start].text().into()));
        }
        let replaced = match kind {
            "notin" => format!("!({left} in {right})"),
            _ => format!("{left}.{}({right})", toks[op_start].text()),
        };
        let mut next = toks[..l].to_vec();
        if l > 0
            && !matches!(toks[l - 1], Tok::Space(_))
            && !matches!(toks[l - 1].text(), "(" | "[" | "!")
        {
            next.push(Tok::Space(" ".into()));
        }
        next.push(Tok::Str(replaced));
        if r < toks.len()
            && !matches!(toks[r], Tok::Space(_))
            && !matches!(toks[r].text(), ")" | "]" | ",")
        {
            next.push(Tok::Space(" ".into()));
        }
        next.extend_from_slice(&toks[r..]);
        toks = next;
    }
    let out: String = toks
        .iter()
        .map(|t| match t {
            Tok::Word(w) if w == "and" => "&&".to_string(),
            Tok::Word(w) if w == "or" => "||".to_string(),
            Tok::Word(w) if w == "not" => "!".to_string(),
            Tok::Word(w) if w == "nil" => "null".to_string(),
            t => t.text().to_string(),
        })
        .collect();
    // `not x` became `! x`; keep it as CEL writes it.
    Ok(out.replace("! ", "!"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expr_lang_becomes_cel() {
        let cases = [
            (
                "metadata['labels']['draino'] in ['master','node']",
                "metadata['labels']['draino'] in ['master','node']",
            ),
            (
                "metadata.labels.pool == 'a' and metadata.labels.zone != nil",
                "metadata.labels.pool == 'a' && metadata.labels.zone != null",
            ),
            (
                "metadata.labels.pool == 'a' or not (metadata.name == 'x')",
                "metadata.labels.pool == 'a' || !(metadata.name == 'x')",
            ),
            (
                "metadata['labels']['role'] not in ['master', 'etcd'] and metadata.name != ''",
                "!(metadata['labels']['role'] in ['master', 'etcd']) && metadata.name != ''",
            ),
            (
                "(metadata.labels.a not in ['x']) or metadata.labels.b not in ['y']",
                "(!(metadata.labels.a in ['x'])) || !(metadata.labels.b in ['y'])",
            ),
            (
                "metadata.name matches `^gpu-.*` and metadata.name startsWith 'gpu'",
                "metadata.name.matches(r'^gpu-.*') && metadata.name.startsWith('gpu')",
            ),
            // Words inside strings are left alone; CEL's own forms pass through.
            (
                "metadata.labels.x == 'a and b' && metadata.name.startsWith('n')",
                "metadata.labels.x == 'a and b' && metadata.name.startsWith('n')",
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(translate_expr(expr).unwrap(), want, "{expr}");
        }
        assert!(
            translate_expr("metadata.name == 'x")
                .unwrap_err()
                .to_string()
                .contains("never closed")
        );
        assert!(translate_expr("not in ['a']").is_err());
    }

    #[test]
    fn draino_listen_and_node_labels() {
        assert_eq!(
            parse_listen(":10002").unwrap(),
            "0.0.0.0:10002".parse().unwrap()
        );
        assert_eq!(
            parse_listen("127.0.0.1:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert!(
            parse_listen("10002")
                .unwrap_err()
                .to_string()
                .contains(":PORT")
        );
        assert_eq!(
            node_labels_selector(&["draino-enabled=true".into(), "pool = a".into()]).unwrap(),
            "draino-enabled=true,pool=a"
        );
        assert!(node_labels_selector(&["draino".into()]).is_err());
    }

    #[test]
    fn kingpin_negations_mean_the_default() {
        let args = [
            "drainer",
            "--no-dry-run",
            "--no-evict-daemonset-pods",
            "--no-such",
            "X",
        ]
        .map(String::from);
        assert_eq!(drop_negations(args), ["drainer", "--no-such", "X"]);
    }

    #[test]
    fn a_negation_that_wins_unsets_the_flags_environment_variable() {
        let args = [
            "drainer",
            "--dry-run",
            "--no-dry-run",
            "--debug",
            "--no-debug",
            "--debug",
        ]
        .map(OsString::from);
        assert_eq!(negated_last(&args), ["dry-run"]);
        let cmd = clap::Command::new("t")
            .arg(clap::Arg::new("dry_run").long("dry-run").env("X_DRY_RUN"))
            .subcommand(
                clap::Command::new("run")
                    .arg(clap::Arg::new("dry_run").long("dry-run").env("X_DRY_RUN"))
                    .arg(clap::Arg::new("debug").long("debug").env("X_DEBUG")),
            );
        let cmd = without_env(cmd, &negated_last(&args));
        assert_eq!(cmd.get_arguments().next().unwrap().get_env(), None);
        let run = cmd.find_subcommand("run").unwrap();
        let envs: Vec<_> = run.get_arguments().map(|a| a.get_env()).collect();
        assert_eq!(envs, [None, Some(std::ffi::OsStr::new("X_DEBUG"))]);
    }

    #[test]
    fn kingpin_the_last_of_flag_and_negation_wins() {
        let args = [
            "drainer",
            "--dry-run",
            "--evict-emptydir-pods",
            "--no-dry-run",
            "--no-evict-emptydir-pods",
            "--evict-emptydir-pods",
            "--",
            "--no-debug",
        ]
        .map(String::from);
        assert_eq!(
            drop_negations(args),
            ["drainer", "--evict-emptydir-pods", "--", "--no-debug"]
        );
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(b"--kubeconfig=\xff".to_vec());
        let args = [OsString::from("--no-debug"), bad.clone(), "--debug".into()];
        assert_eq!(drop_negations(args), [bad, "--debug".into()]);
    }
}
