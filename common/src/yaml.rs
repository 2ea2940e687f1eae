//! YAML files people write (rule files, the drainer's config): every error of a file, each with its
//! position once, and for a syntax error the line itself with a caret and, when indentation is the
//! likely cause, what the lines around it use.
//!
//! serde stops at the first error. [`parse_all`] reports it, blanks the entry it is about (the line,
//! and the lines indented under it) and parses again, up to [`MAX_ERRORS`] times, so a file with an
//! unknown key in one rule and a wrong type in another gets both. A syntax error ends the search
//! (what follows it cannot be read reliably), and a "missing field" that only follows from an entry
//! blanked before is not reported.

use serde::de::DeserializeOwned;

/// At most this many errors are reported for one file.
pub const MAX_ERRORS: usize = 20;

/// One error, 1-based position (0 when unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub line: u64,
    pub column: u64,
    pub message: String,
}

/// Parse `text`, or every error found in it (see the module comment).
pub fn parse_all<T: DeserializeOwned>(text: &str) -> Result<T, Vec<YamlError>> {
    match parse_partial(text) {
        (Some(v), errors) if errors.is_empty() => Ok(v),
        (_, errors) => Err(errors),
    }
}

/// As [`parse_all`], with what parsed once the bad entries were blanked (`None` after a syntax
/// error), so the caller's own checks can report the rest of the file's errors too.
pub fn parse_partial<T: DeserializeOwned>(text: &str) -> (Option<T>, Vec<YamlError>) {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut current = text.to_string();
    let mut errors: Vec<YamlError> = Vec::new();
    let mut blanked = false;
    for _ in 0..MAX_ERRORS {
        let e = match serde_saphyr::from_str::<T>(&current) {
            Ok(v) => return (Some(v), errors),
            Err(e) => e,
        };
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        let text_msg = message(&e);
        // The YAML itself reads (the error is about what it says): go on past it.
        let schema = serde_saphyr::from_str::<serde::de::IgnoredAny>(&current).is_ok();
        // What blanking an earlier error's line leaves behind (a key without its value or its only
        // list item) is that error's consequence, not another.
        let consequence = blanked
            && (text_msg.starts_with("missing field")
                || text_msg.starts_with("expected sequence start")
                || text_msg.starts_with("invalid type: unit value"));
        if !consequence {
            let message = if schema {
                text_msg
            } else {
                match pointer(&lines, line, column) {
                    Some(p) => format!("{text_msg}\n{p}"),
                    None => text_msg,
                }
            };
            errors.push(YamlError {
                line,
                column,
                message,
            });
        }
        if !schema || line == 0 || (line == 1 && column <= 1) {
            break;
        }
        if !blank(&mut lines, line as usize) {
            break;
        }
        blanked = true;
        current = lines.join("\n");
    }
    (None, errors)
}

/// serde-saphyr's text for `e` without the position it repeats (`line 3 column 5: ...`, `... at line
/// 3, column 5`) and without its snippet: the caller puts the position first, once.
pub fn message(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid YAML").trim();
    let mut m = first.strip_prefix("error: ").unwrap_or(first);
    if let Some(rest) = m.strip_prefix("line ") {
        // "line 8 column 4: message"
        if let Some((pos, after)) = rest.split_once(": ")
            && pos
                .split(" column ")
                .all(|n| n.trim().parse::<u64>().is_ok())
        {
            m = after;
        }
    }
    let m = match m.rfind(" at line ") {
        Some(i) => &m[..i],
        None => m,
    };
    did_you_mean(m).unwrap_or_else(|| m.to_string())
}

/// serde's "unknown field `x`, expected one of a, b, ..." as "unknown field `x`: did you mean
/// `y`?" when one of the expected keys is a typo away (a case slip, or at most two edits in a key
/// long enough for that to be a typo), instead of listing every key a file may have.
fn did_you_mean(m: &str) -> Option<String> {
    let rest = m.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once("`, expected one of ")?;
    let keys = expected
        .split(", ")
        .map(|k| k.trim_matches('`'))
        .filter(|k| !k.is_empty());
    let (best, distance) = keys
        .map(|k| {
            (
                k,
                strsim::levenshtein(&field.to_ascii_lowercase(), &k.to_ascii_lowercase()),
            )
        })
        .min_by_key(|(_, d)| *d)?;
    let close = distance == 0 || (distance <= 2 && field.len().min(best.len()) >= 5);
    close.then(|| format!("unknown field `{field}`: did you mean `{best}`?"))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The offending line with a caret under `column`, and a word on indentation when the line is
/// indented unlike its neighbours.
fn pointer(lines: &[String], line: u64, column: u64) -> Option<String> {
    let idx = usize::try_from(line).ok()?.checked_sub(1)?;
    let text = lines.get(idx)?;
    let width = line.to_string().len();
    let caret = " ".repeat(
        usize::try_from(column)
            .unwrap_or(1)
            .saturating_sub(1)
            .min(text.len()),
    );
    let mut out = format!("{:>width$} | {text}\n{:>width$} | {caret}^", line, "");
    // For a list item, the item before it; otherwise the line before.
    let item = |l: &String| l.trim_start().starts_with("- ");
    let above = lines[..idx]
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .find(|l| !item(text) || item(l));
    if let Some(above) = above {
        let (here, there) = (indent(text), indent(above));
        if text.contains('\t') {
            out.push_str(" a tab: YAML indents with spaces only");
        } else if here != there && !text.trim().is_empty() {
            let what = if item(text) { "item" } else { "line" };
            out.push_str(&format!(
                " this {what} is indented {here} spaces, the {what} above {there}: check the indentation"
            ));
        }
    }
    Some(out)
}

/// Blank the entry at 1-based `line` (and the lines indented deeper under it) so parsing can go on.
/// A list item (`- key: v`) goes whole. False when there is nothing to blank.
fn blank(lines: &mut [String], line: usize) -> bool {
    let Some(idx) = line.checked_sub(1) else {
        return false;
    };
    let Some(text) = lines.get(idx) else {
        return false;
    };
    if text.trim().is_empty() {
        return false;
    }
    // The entry this line belongs to: for a key inside a list item the error points at the key; a
    // "missing field" points at the item's first line.
    let base = indent(text);
    let deeper = base + 1;
    lines[idx] = String::new();
    for l in lines.iter_mut().skip(idx + 1) {
        if l.trim().is_empty() {
            continue;
        }
        if indent(l) >= deeper && !(indent(l) == base && l.trim_start().starts_with("- ")) {
            *l = String::new();
        } else {
            break;
        }
    }
    true
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_misspelt_key_is_named_with_the_key_meant_not_every_key() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        #[allow(dead_code)]
        struct Settings {
            max_cordoned: Option<u32>,
            drain_buffer: Option<String>,
            conditions: Option<Vec<String>>,
        }
        let errors =
            super::parse_all::<Settings>("drainBuffer: 1m\nmaxCordonned: 3\n").unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            (errors[0].line, errors[0].message.as_str()),
            (
                2,
                "unknown field `maxCordonned`: did you mean `maxCordoned`?"
            )
        );
        // Nothing close: every key is listed, as before.
        let errors = super::parse_all::<Settings>("frobnicate: 3\n").unwrap_err();
        assert!(
            errors[0]
                .message
                .starts_with("unknown field `frobnicate`, expected one of"),
            "{errors:?}"
        );
        assert!(errors[0].message.contains("maxCordoned"), "{errors:?}");
    }

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        rules: Vec<Rule>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Rule {
        reason: String,
        pattern: String,
        #[serde(default)]
        size: Option<u32>,
    }

    #[test]
    fn every_schema_error_of_a_file_is_reported_once_each() {
        let text = "name: x\nrules:\n  - reason: A\n    patern: a\n  - reason: B\n    pattern: b\n    size: big\n  - reason: C\n    pattern: c\n    colour: red\n";
        let errors = parse_all::<Doc>(text).unwrap_err();
        let got: Vec<String> = errors
            .iter()
            .map(|e| format!("{}:{}: {}", e.line, e.column, e.message))
            .collect();
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(
            got[0].starts_with("4:5: unknown field `patern`"),
            "{got:#?}"
        );
        assert!(got[1].starts_with("7:11: invalid u32"), "{got:#?}");
        assert!(
            got[2].starts_with("10:5: unknown field `colour`"),
            "{got:#?}"
        );
        // No position repeated inside the message.
        assert!(
            errors.iter().all(|e| !e.message.contains("line ")),
            "{got:#?}"
        );
    }

    #[test]
    fn an_indentation_mistake_points_at_the_line() {
        let text =
            "name: x\nrules:\n  - reason: A\n    pattern: a\n   - reason: B\n    pattern: b\n";
        let errors = parse_all::<Doc>(text).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        let e = &errors[0];
        assert_eq!(e.line, 5, "{e:?}");
        assert!(e.message.contains("5 |    - reason: B"), "{}", e.message);
        assert!(
            e.message
                .contains("this item is indented 3 spaces, the item above 2"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("line 5 column"), "{}", e.message);
    }

    #[test]
    fn a_good_file_parses() {
        let d: Doc = parse_all("name: x\nrules:\n  - {reason: A, pattern: a}\n").unwrap();
        assert_eq!(d.rules.len(), 1);
    }
}
