//! Plain-text log lines. `syslog` lines (`Nov 22 03:27:01 host tag[pid]: message`, or an RFC 3339
//! timestamp instead of the BSD one, as rsyslog writes with its default template on newer distros)
//! have their prefix stripped so patterns see only the message, as NPD's filelog plugin does with its
//! timestamp/message regexes. Pure.

/// The message part of a syslog line, or the line unchanged when it has no recognisable prefix.
/// The kernel's uptime stamp (`[   12.345678] `) is stripped too, as NPD's kernel filelog config does,
/// so a rule anchored with `^` matches the same text from kern.log as from `/dev/kmsg`.
pub fn message(line: &str) -> &str {
    split(line).map(|(_, m)| m).unwrap_or(line)
}

/// The syslog tag (`kernel`, `dockerd` without its `[pid]`) and the message, when the line has a
/// syslog prefix.
pub fn split(line: &str) -> Option<(&str, &str)> {
    let after_ts = skip_timestamp(line)?;
    // hostname
    let after_host = after_ts.trim_start_matches(' ').split_once(' ')?.1;
    // tag[pid]: or tag:
    let (tag, msg) = after_host.split_once(": ")?;
    if tag.is_empty() || tag.contains(' ') {
        return None;
    }
    let tag = tag.split_once('[').map_or(tag, |(t, _)| t);
    Some((tag, strip_uptime(msg)))
}

/// `[   12.345678] message` -> `message`.
fn strip_uptime(msg: &str) -> &str {
    let Some(rest) = msg.strip_prefix('[') else {
        return msg;
    };
    let Some((stamp, after)) = rest.split_once("] ") else {
        return msg;
    };
    let stamp = stamp.trim_start_matches(' ');
    let is_uptime = stamp.split_once('.').is_some_and(|(s, us)| {
        !s.is_empty()
            && !us.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && us.bytes().all(|b| b.is_ascii_digit())
    });
    if is_uptime { after } else { msg }
}

/// Skip `Mmm dd hh:mm:ss ` or an RFC 3339 timestamp and one space.
fn skip_timestamp(line: &str) -> Option<&str> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let b = line.as_bytes();
    if b.len() > 16 && MONTHS.iter().any(|m| line.starts_with(m)) && b[3] == b' ' {
        // "Nov 22 03:27:01 " or "Nov  2 03:27:01 "
        let rest = &line[4..];
        let rest = rest.trim_start_matches(' ');
        let (day, rest) = rest.split_once(' ')?;
        day.parse::<u8>().ok()?;
        let (time, rest) = rest.split_once(' ')?;
        (time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':')
            .then_some(rest)
    } else if b.len() > 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' {
        Some(line.split_once(' ')?.1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::message;

    #[test]
    fn strips_bsd_and_rfc3339_prefixes() {
        let cases = [
            (
                "Nov 22 03:27:01 node-1 kernel: EXT4-fs error (device sda1)",
                "EXT4-fs error (device sda1)",
            ),
            (
                "Nov  2 03:27:01 node-1 dockerd[812]: level=error msg=x",
                "level=error msg=x",
            ),
            (
                "2026-11-22T03:27:01.123456+00:00 node-1 containerd[9]: panic: boom",
                "panic: boom",
            ),
            ("no prefix at all", "no prefix at all"),
            (
                "Nov 22 03:27:01 node-1 no tag here",
                "Nov 22 03:27:01 node-1 no tag here",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(message(line), want, "{line}");
        }
    }

    #[test]
    fn the_kernel_uptime_stamp_is_stripped_and_the_tag_kept() {
        let line = "Nov 22 03:27:01 node-1 kernel: [   12.345678] Out of memory: Killed process 42";
        assert_eq!(message(line), "Out of memory: Killed process 42");
        assert_eq!(
            super::split(line),
            Some(("kernel", "Out of memory: Killed process 42"))
        );
        assert_eq!(
            super::split("Nov 22 03:27:01 node-1 dockerd[812]: [x] not an uptime"),
            Some(("dockerd", "[x] not an uptime"))
        );
        assert_eq!(
            message("Nov 22 03:27:01 node-1 kernel: [1.5]x"),
            "[1.5]x",
            "no space after the stamp: kept"
        );
    }
}
