//! The drainer's own history for backtests (`--history-file`), I/O: the transitions it observed
//! appended as JSON lines, the file rotated to `FILE.1` (replacing the older one) once it passes
//! [`MAX_SIZE`], so it never holds more than twice that.

use std::io::Write;
use std::path::Path;

use crate::model::transition::Transition;

/// A history file is rotated past this size.
pub(crate) const MAX_SIZE: u64 = 16 << 20;

/// Append `transitions` to `path` (rotating it first when it passed `max` bytes).
pub(crate) fn append(path: &Path, transitions: &[Transition], max: u64) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= max) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(path, old)?;
    }
    let mut text = String::new();
    for t in transitions {
        text.push_str(&serde_json::to_string(t).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(node: &str) -> Transition {
        Transition {
            at: "2026-11-18T02:10:00Z".parse().unwrap(),
            node: node.into(),
            type_: "KernelDeadlock".into(),
            status: "True".into(),
            reason: Some("DockerHung".into()),
        }
    }

    #[test]
    fn lines_are_appended_and_the_file_rotates_past_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        append(&path, &[t("a"), t("b")], 250).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let back: Transition = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(back, t("a"));
        append(&path, &[t("c")], 250).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            3,
            "under the size"
        );
        append(&path, &[t("d")], 250).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            1,
            "rotated"
        );
        let old = std::fs::read_to_string(dir.path().join("history.jsonl.1")).unwrap();
        assert_eq!(old.lines().count(), 3);
    }
}
