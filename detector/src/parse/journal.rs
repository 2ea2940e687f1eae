//! Journal entries as printed by `journalctl --output=json --all` (one JSON object per line).
//! Field values are a string, an array of bytes (non-UTF-8 data), or null (over 4096 bytes without
//! `--all`); all three are accepted. Pure.

use serde_json::Value;

use super::{Line, Malformed};

/// One journal entry, reduced to what the detector uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub cursor: Option<String>,
    pub identifier: Option<String>,
    pub unit: Option<String>,
    pub line: Line,
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
        line: Line { text, realtime_us },
    })
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
pub fn accepts(entry: &Entry, identifiers: &[String], units: &[String]) -> bool {
    if identifiers.is_empty() && units.is_empty() {
        return true;
    }
    let id_ok = entry
        .identifier
        .as_ref()
        .is_some_and(|i| identifiers.iter().any(|x| x == i));
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
        assert!(accepts(&e, &[], &[]));
        assert!(accepts(&e, &["containerd".into()], &[]));
        assert!(accepts(&e, &[], &["containerd.service".into()]));
        assert!(!accepts(
            &e,
            &["dockerd".into()],
            &["docker.service".into()]
        ));
    }
}
