//! Journal entries as printed by `journalctl --output=json --all` (one JSON object per line).
//! Field values are a string, an array of bytes (non-UTF-8 data), or null (over 4096 bytes without
//! `--all`); all three are accepted. Pure.

use serde_json::Value;

use super::{Line, Malformed};

/// One journal entry, reduced to what the detector uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub(crate) cursor: Option<String>,
    /// `SYSLOG_IDENTIFIER`: what the writing process says it is (any process may say anything).
    pub(crate) identifier: Option<String>,
    /// `_SYSTEMD_UNIT`, `_EXE`, `_UID` and `_TRANSPORT`: what journald itself recorded about the
    /// writer (fields starting with `_` cannot be set by a client). Not `_COMM`: any process may
    /// rename itself (`prctl(PR_SET_NAME)`, `exec -a`) to what it likes.
    pub(crate) unit: Option<String>,
    pub(crate) exe: Option<String>,
    pub(crate) uid: Option<String>,
    pub(crate) transport: Option<String>,
    pub line: Line,
}

/// How a journal monitor's `identifiers` are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentifierMatch {
    /// `SYSLOG_IDENTIFIER` equal, and backed by what journald recorded: its unit (`ID` or
    /// `ID.service`), an executable named `ID` run by root (`_EXE`, `_UID=0`), or the kernel
    /// transport for `kernel`. `logger -t dockerd` does not pass for dockerd, nor a user's process
    /// renamed `dockerd`. nodemedic's own rules.
    Backed,
    /// `SYSLOG_IDENTIFIER` equal, nothing more: NPD's meaning, kept for NPD's JSON configs, which
    /// any process on the node can satisfy.
    SyslogIdentifier,
}

fn malformed(why: impl Into<String>) -> Malformed {
    Malformed {
        input: "journal",
        why: why.into(),
    }
}

/// Parse one line of `journalctl -o json`.
pub fn parse(line: &str) -> Result<Entry, Malformed> {
    let v: Value = serde_json::from_str(line).map_err(|e| malformed(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| malformed("not a JSON object"))?;
    let text = obj
        .get("MESSAGE")
        .and_then(field)
        .ok_or_else(|| malformed("no MESSAGE"))?;
    let realtime_us = obj
        .get("__REALTIME_TIMESTAMP")
        .and_then(field)
        .and_then(|t| t.parse::<i64>().ok());
    Ok(Entry {
        cursor: obj.get("__CURSOR").and_then(field),
        identifier: obj.get("SYSLOG_IDENTIFIER").and_then(field),
        unit: obj.get("_SYSTEMD_UNIT").and_then(field),
        exe: obj.get("_EXE").and_then(field),
        uid: obj.get("_UID").and_then(field),
        transport: obj.get("_TRANSPORT").and_then(field),
        line: Line { text, realtime_us },
    })
}

/// Whether journald's own fields agree that `id` wrote the entry: its unit, a root process whose
/// executable is named `id`, or the kernel.
fn backed(entry: &Entry, id: &str) -> bool {
    let exe_named = |e: &String| e.rsplit('/').next() == Some(id);
    entry
        .unit
        .as_ref()
        .is_some_and(|u| u == id || u.strip_suffix(".service") == Some(id))
        || (entry.uid.as_deref() == Some("0") && entry.exe.as_ref().is_some_and(exe_named))
        || (id == "kernel" && entry.transport.as_deref() == Some("kernel"))
}

fn field(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(bytes) => {
            let raw: Option<Vec<u8>> = bytes
                .iter()
                .map(|b| b.as_u64().and_then(|n| u8::try_from(n).ok()))
                .collect();
            raw.map(|r| String::from_utf8_lossy(&r).into_owned())
        }
        _ => None,
    }
}

/// Does the entry pass the identifier/unit filter? Empty filters accept everything.
pub(crate) fn accepts(
    entry: &Entry,
    identifiers: &[String],
    units: &[String],
    how: IdentifierMatch,
) -> bool {
    if identifiers.is_empty() && units.is_empty() {
        return true;
    }
    let id_ok = entry.identifier.as_ref().is_some_and(|i| {
        identifiers
            .iter()
            .any(|x| x == i && (how == IdentifierMatch::SyslogIdentifier || backed(entry, x)))
    });
    let unit_ok = entry
        .unit
        .as_ref()
        .is_some_and(|u| units.iter().any(|x| x == u));
    id_ok || unit_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_string_byte_array_and_null_fields() {
        let e = parse(r#"{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"1763781000000000","SYSLOG_IDENTIFIER":"dockerd","MESSAGE":"hello"}"#).unwrap();
        assert_eq!(e.cursor.as_deref(), Some("s=1;i=2"));
        assert_eq!(e.identifier.as_deref(), Some("dockerd"));
        assert_eq!(e.line.text, "hello");
        assert_eq!(e.line.realtime_us, Some(1_763_781_000_000_000));
        let e = parse(r#"{"MESSAGE":[104,105,255],"_SYSTEMD_UNIT":null}"#).unwrap();
        assert_eq!(e.line.text, "hi\u{fffd}");
        assert_eq!(e.unit, None);
    }

    #[test]
    fn malformed_entries_are_errors_not_panics() {
        for bad in [
            "",
            "not json",
            "[1,2]",
            r#"{"MESSAGE":null}"#,
            r#"{"OTHER":"x"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn filters_by_identifier_or_unit() {
        let e = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"containerd","_SYSTEMD_UNIT":"containerd.service"}"#).unwrap();
        let b = IdentifierMatch::Backed;
        assert!(accepts(&e, &[], &[], b));
        assert!(accepts(&e, &["containerd".into()], &[], b));
        assert!(accepts(&e, &[], &["containerd.service".into()], b));
        assert!(!accepts(
            &e,
            &["dockerd".into()],
            &["docker.service".into()],
            b
        ));
    }

    #[test]
    fn an_identifier_any_process_can_claim_passes_only_when_journald_backs_it() {
        // `logger -t dockerd "task docker:1 blocked"` run by anyone on the node.
        let spoofed = parse(r#"{"MESSAGE":"task docker:1 blocked","SYSLOG_IDENTIFIER":"dockerd","_COMM":"logger","_SYSTEMD_UNIT":"session-3.scope","_TRANSPORT":"syslog"}"#).unwrap();
        let ids = ["dockerd".to_string()];
        assert!(!accepts(&spoofed, &ids, &[], IdentifierMatch::Backed));
        assert!(
            accepts(&spoofed, &ids, &[], IdentifierMatch::SyslogIdentifier),
            "NPD's meaning"
        );
        // The daemon itself: by its executable run as root, or by its unit.
        let real = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"dockerd","_COMM":"dockerd","_EXE":"/usr/bin/dockerd","_UID":"0","_TRANSPORT":"stdout"}"#).unwrap();
        assert!(accepts(&real, &ids, &[], IdentifierMatch::Backed));
        let by_unit = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"dockerd","_COMM":"docker-init","_SYSTEMD_UNIT":"dockerd.service"}"#).unwrap();
        assert!(accepts(&by_unit, &ids, &[], IdentifierMatch::Backed));
        // Issue 64, point 7: a user's process renamed dockerd (`_COMM`), or a copy of a binary
        // named dockerd run by a user, is not dockerd.
        let renamed = parse(r#"{"MESSAGE":"task docker:1 blocked","SYSLOG_IDENTIFIER":"dockerd","_COMM":"dockerd","_EXE":"/usr/bin/python3","_UID":"1000","_SYSTEMD_UNIT":"user@1000.service"}"#).unwrap();
        assert!(!accepts(&renamed, &ids, &[], IdentifierMatch::Backed));
        let copied = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"dockerd","_COMM":"dockerd","_EXE":"/tmp/dockerd","_UID":"1000"}"#).unwrap();
        assert!(!accepts(&copied, &ids, &[], IdentifierMatch::Backed));
        // A process name the kernel cut at 15 bytes: its executable says the whole name.
        let long = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"containerd-shim-runc","_COMM":"containerd-shim","_EXE":"/usr/bin/containerd-shim-runc","_UID":"0"}"#).unwrap();
        assert!(accepts(
            &long,
            &["containerd-shim-runc".into()],
            &[],
            IdentifierMatch::Backed
        ));
        let kernel =
            parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"kernel","_TRANSPORT":"kernel"}"#).unwrap();
        assert!(accepts(
            &kernel,
            &["kernel".into()],
            &[],
            IdentifierMatch::Backed
        ));
        let fake_kernel = parse(r#"{"MESSAGE":"m","SYSLOG_IDENTIFIER":"kernel","_TRANSPORT":"syslog","_COMM":"logger"}"#).unwrap();
        assert!(!accepts(
            &fake_kernel,
            &["kernel".into()],
            &[],
            IdentifierMatch::Backed
        ));
    }
}
