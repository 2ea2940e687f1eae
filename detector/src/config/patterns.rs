//! Patterns checked before they are compiled: their syntax in the form the matcher compiles, and the
//! memory budget all rule files share. Pure.

use serde_saphyr::Spanned;

use super::errors::Errors;

/// The most pattern text all rule files together may hold (rules' and recoveries' patterns added up).
/// Parsing and compiling regexes takes memory in proportion to their text (measured on the release
/// binary: one 2.5 MB alternation peaked at 381 MB, sixty 16 KiB patterns at 177 MB, both over the
/// detector's 128 Mi limit, so one bad ConfigMap would OOM-kill the detector on every node, and again
/// at each restart). 64 KiB compiles within ~40 MB and is still hundreds of ordinary rules (the
/// bundled rules have 1.5 KiB, NPD's shipped monitor files 1.7 KiB in all).
pub(crate) const MAX_PATTERN_BYTES: usize = 64 * 1024;
/// The most rules, over all rule files, whose pattern is compiled on its own besides the monitor's
/// set: those with a `message` template (to expand captures) and multi-line ones. Each takes ~90 KB
/// (900 such rules peaked at 90 MB); the bundled and opt-in rule files have four.
pub(crate) const MAX_OWN_REGEXES: usize = 128;

/// What is left of [`MAX_PATTERN_BYTES`] and [`MAX_OWN_REGEXES`] while rule files are loaded (one
/// budget for all files: memory is what it bounds). Once spent, the pattern that went over is named
/// once, and nothing more is parsed or compiled.
pub(crate) struct PatternBudget {
    bytes: usize,
    own: usize,
    spent: bool,
}

impl PatternBudget {
    pub(crate) fn new() -> Self {
        Self {
            bytes: MAX_PATTERN_BYTES,
            own: MAX_OWN_REGEXES,
            spent: false,
        }
    }

    /// Takes `pattern` (compiled on its own too when `own`) from the budget; false, and one error,
    /// when it does not fit.
    fn take(
        &mut self,
        pattern: &Spanned<String>,
        own: bool,
        what: &str,
        errors: &mut Errors,
    ) -> bool {
        if self.spent {
            return false;
        }
        let bytes = self.bytes.checked_sub(pattern.value.len());
        let left = if own {
            self.own.checked_sub(1)
        } else {
            Some(self.own)
        };
        let message = match (bytes, left) {
            (Some(bytes), Some(own)) => {
                self.bytes = bytes;
                self.own = own;
                return true;
            }
            (None, _) => format!(
                "{what}: the rule files' patterns add up to more than {} KiB, the most the detector loads (regexes take memory to compile in proportion to their text); shorten or remove patterns",
                MAX_PATTERN_BYTES / 1024
            ),
            (_, None) => format!(
                "{what}: more than {MAX_OWN_REGEXES} rules in the rule files have a message template or a multi-line pattern, the most the detector loads (each is compiled on its own, ~90 KB); use the matched line as the message for some"
            ),
        };
        self.spent = true;
        errors.at(&pattern.referenced, message);
        false
    }
}

/// What is wrong with regex `p`, and at which character (1-based), as the regex parser says it;
/// `None` when it parses.
pub(crate) fn regex_error(p: &str) -> Option<String> {
    let ast = match regex_syntax::ast::parse::Parser::new().parse(p) {
        Ok(ast) => ast,
        Err(e) => {
            return Some(format!(
                "{} at character {}",
                e.kind(),
                e.span().start.column
            ));
        }
    };
    match regex_syntax::hir::translate::Translator::new().translate(p, &ast) {
        Ok(_) => None,
        Err(e) => Some(format!(
            "{} at character {}",
            e.kind(),
            e.span().start.column
        )),
    }
}

/// Check a pattern's syntax in the form the matcher will compile (`anchor` wraps it: the end anchor
/// is part of what must parse, e.g. a trailing `# comment` under `(?x)` would swallow it). Parsing
/// only: the patterns are compiled once, together, by [`crate::matcher::Compiled`]. The pattern is
/// charged to the `budget` first (`own`: it will be compiled on its own too), so an oversized one is
/// never parsed.
pub(super) fn check_pattern(
    pattern: &Spanned<String>,
    anchor: fn(&str) -> String,
    what: &str,
    own: bool,
    budget: &mut PatternBudget,
    errors: &mut Errors,
) -> Option<String> {
    if !budget.take(pattern, own, what, errors) {
        return None;
    }
    // The user's pattern alone first, so an error points into what they wrote; then as it is
    // matched (anchored), whose own errors only a `# comment` under `(?x)` can cause.
    let anchored = anchor(&pattern.value);
    let found = regex_error(&pattern.value).or_else(|| {
        regex_error(&anchored).map(|e| {
            format!(
                "{e} of {anchored:?} (patterns are matched as {:?}: under (?x) end a # comment with a newline)",
                anchor("PATTERN")
            )
        })
    });
    match found {
        None => Some(pattern.value.clone()),
        Some(detail) => {
            errors.at(
                &pattern.referenced,
                format!("{what}: invalid regex {:?}: {detail}", pattern.value),
            );
            None
        }
    }
}
