//! The `/dev/kmsg` record format, parsed; pure but for `RecordReader`, which reads from a reader.
//! The format (Documentation/ABI/testing/dev-kmsg):
//!
//! ```text
//! PRI,SEQ,TS_US,FLAGS[,...];MESSAGE\n
//!  KEY=VALUE\n            (continuation lines, each starting with a space)
//! ```
//! facility = PRI >> 3, level = PRI & 7; TS_US is CLOCK_MONOTONIC microseconds; FLAGS is `-` or `c`
//! (continuation of a previous record). MESSAGE escapes non-printable bytes (and `\`) as `\xNN`.

use std::borrow::Cow;

use super::Malformed;

/// One parsed kmsg record, borrowing from the bytes it was parsed from: the message is copied only
/// when it has escapes to decode (or invalid UTF-8), so parsing allocates nothing for almost every
/// record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub(crate) facility: u8,
    pub(crate) level: u8,
    pub(crate) seq: u64,
    pub(crate) monotonic_us: u64,
    /// `c` flag: a fragment continuing an earlier record.
    pub(crate) continuation: bool,
    /// The message with `\xNN` escapes decoded (invalid UTF-8 replaced).
    pub message: Cow<'a, str>,
    /// The continuation lines, undecoded (see [`Record::dict`]).
    dict_lines: &'a [u8],
}

impl Record<'_> {
    /// Whether the record's text is a user's: written from user space (a facility other than the
    /// kernel's), or one the kernel writes with a user's words at its start ([`quotes_a_user`]).
    /// Such a record raises an Event and never sets or clears a condition, unless its monitor says
    /// `userSpace`.
    pub(crate) fn users(&self) -> bool {
        self.facility != 0 || quotes_a_user(&self.message)
    }

    /// Dictionary from continuation lines (`SUBSYSTEM=...`, `DEVICE=...`).
    pub fn dict(&self) -> Vec<(String, String)> {
        self.dict_lines
            .split(|&b| b == b'\n')
            .filter_map(|l| l.strip_prefix(b" "))
            .filter_map(|l| {
                let text = unescape(l);
                let (k, v) = text.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect()
    }
}

/// Whether a kernel record starts with words a user chose (issue 76: an attacker's review had a
/// tenant's crashing program, named `remounting fs read-only`, set ReadonlyFilesystem, and a
/// container's audit message set XfsShutdown). The kernel writes these records at its own
/// facility, each beginning with what a user task chose:
/// - a crash or a trap: `NAME[PID]: segfault at ...`, `NAME[PID] trap ...`, `traps: NAME[PID] ...`
///   (a task's name, up to 15 bytes, is whatever it set; the file it ran from follows later);
/// - `NAME (PID): ...`, `NAME(PID): ...` (a task's own sysctl write, its drop_caches, a LOCK_MAND
///   flock);
/// - `NAME invoked oom-killer: ...` (a task over its memory limit), `NAME: page allocation ...`;
/// - `audit: ...` (a process with CAP_AUDIT_WRITE, which containers get by default, sends text of
///   its own; the kernel prints it when no audit daemon listens);
/// - `process 'NAME' launched 'PATH' with NULL argv ...` (once a boot, any user).
///
/// A real kernel problem's record begins with its subsystem's own words (`EXT4-fs (sda1): `,
/// `XFS (dm-0): `, `NVRM: `), never so.
pub(crate) fn quotes_a_user(text: &str) -> bool {
    const STARTS: [&str; 3] = ["audit: ", "traps: ", "process '"];
    if STARTS.iter().any(|s| text.starts_with(s)) {
        return true;
    }
    // A task's name is at most 15 bytes, each at most one character once decoded (a byte that is
    // not UTF-8 becomes a 3-byte U+FFFD): so what follows it starts within the first 16
    // characters, whatever their bytes.
    let chars: Vec<char> = text.chars().take(48).collect();
    let after = |i: usize, s: &str| {
        let want: Vec<char> = s.chars().collect();
        chars.get(i..i + want.len()) == Some(&want[..])
    };
    (1..=16).any(|i| {
        const FOLLOWS: [&str; 2] = [" invoked oom-killer: ", ": page allocation "];
        if FOLLOWS.iter().any(|f| after(i, f)) {
            return true;
        }
        let (open, close) = match chars.get(i..) {
            Some(['[', ..]) => (i + 1, ']'),
            Some([' ', '(', ..]) => (i + 2, ')'),
            Some(['(', ..]) => (i + 1, ')'),
            _ => return false,
        };
        let digits = chars[open.min(chars.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        digits > 0 && chars.get(open + digits) == Some(&close)
    })
}

fn malformed(why: impl Into<String>) -> Malformed {
    Malformed {
        input: "kmsg",
        why: why.into(),
    }
}

/// Parse one record as returned by one `read()` of `/dev/kmsg` (or one record of a kmsg-format file,
/// including its continuation lines). A trailing newline is optional.
pub fn parse(record: &[u8]) -> Result<Record<'_>, Malformed> {
    let semi = memchr::memchr(b';', record).ok_or_else(|| malformed("no ';' after the prefix"))?;
    // The prefix is ASCII digits and commas: read as bytes, no UTF-8 or string parsing.
    let mut prefix = Some(&record[..semi]);
    let pri = num(next_field(&mut prefix), "priority")?;
    let pri = u16::try_from(pri).map_err(|_| malformed("bad priority"))?;
    let seq = num(next_field(&mut prefix), "sequence number")?;
    let monotonic_us = num(next_field(&mut prefix), "timestamp")?;
    let flags = next_field(&mut prefix).unwrap_or(b"-");
    let rest = &record[semi + 1..];
    let (msg, dict_lines) = match memchr::memchr(b'\n', rest) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    Ok(Record {
        facility: (pri >> 3) as u8,
        level: (pri & 7) as u8,
        seq,
        monotonic_us,
        continuation: flags.contains(&b'c'),
        message: unescape(msg),
        dict_lines,
    })
}

/// The next comma-separated field of what is left of the prefix (`None` once it is all read).
fn next_field<'a>(rest: &mut Option<&'a [u8]>) -> Option<&'a [u8]> {
    let r = (*rest)?;
    let mut i = 0;
    while i < r.len() && r[i] != b',' {
        i += 1;
    }
    *rest = r.get(i + 1..);
    Some(&r[..i])
}

/// A field of decimal digits (spaces around allowed), read in one pass: every record has three,
/// and this binary is built for size (`opt-level = "z"`), so a plain loop is what keeps it cheap.
/// Up to 19 digits cannot overflow; longer ones are checked.
fn num(field: Option<&[u8]>, what: &str) -> Result<u64, Malformed> {
    let bad = || malformed(format!("bad {what}"));
    let digits = field.ok_or_else(bad)?.trim_ascii();
    if digits.is_empty() {
        return Err(bad());
    }
    let mut n: u64 = 0;
    if digits.len() <= 19 {
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return Err(bad());
            }
            n = n * 10 + u64::from(d);
        }
        return Ok(n);
    }
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(bad());
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or_else(bad)?;
    }
    Ok(n)
}

/// Decode `\xNN` escapes; anything else is kept as is. Bytes that do not form UTF-8 become U+FFFD.
/// Borrowed when there is nothing to decode.
pub(crate) fn unescape(bytes: &[u8]) -> Cow<'_, str> {
    if memchr::memchr(b'\\', bytes).is_none() {
        // Valid UTF-8 (nearly always) is checked by the fast validator and borrowed.
        return match std::str::from_utf8(bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(bytes),
        };
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && bytes.get(i + 1) == Some(&b'x')
            && let (Some(h), Some(l)) = (hex(bytes.get(i + 2)), hex(bytes.get(i + 3)))
        {
            out.push(h << 4 | l);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(b: Option<&u8>) -> Option<u8> {
    match *b? {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'a'..=b'f' => Some(c - b'a' + 10),
        c @ b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Reads a kmsg-format *file* (records one per line, continuation lines starting with a space) one
/// record at a time, streaming: memory stays bounded by the longest record.
pub struct RecordReader<R> {
    input: R,
    line_no: usize,
    pending: Vec<u8>,
    pending_line: usize,
    next: Vec<u8>,
}

impl<R: std::io::BufRead> RecordReader<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            line_no: 0,
            pending: Vec::new(),
            pending_line: 0,
            next: Vec::new(),
        }
    }

    /// The next record as `(first line number (1-based), bytes without the final newline)`.
    pub fn next_record(&mut self) -> std::io::Result<Option<(usize, &[u8])>> {
        loop {
            self.next.clear();
            let n = super::read_line(&mut self.input, &mut self.next)?;
            if n == 0 {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                let rec = std::mem::take(&mut self.pending);
                self.next = rec;
                return Ok(Some((self.pending_line, trim_newline(&self.next))));
            }
            self.line_no += 1;
            if self.next.first() == Some(&b' ') && !self.pending.is_empty() {
                self.pending.extend_from_slice(&self.next);
                continue;
            }
            if trim_newline(&self.next).is_empty() {
                continue;
            }
            // A new record starts: hand out the pending one, keep this one.
            let start_line = self.line_no;
            if self.pending.is_empty() {
                std::mem::swap(&mut self.pending, &mut self.next);
                self.pending_line = start_line;
                continue;
            }
            std::mem::swap(&mut self.pending, &mut self.next);
            let line = std::mem::replace(&mut self.pending_line, start_line);
            return Ok(Some((line, trim_newline(&self.next))));
        }
    }
}

fn trim_newline(b: &[u8]) -> &[u8] {
    match b.split_last() {
        Some((b'\n', rest)) => rest,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's records that begin with a user's words are a user's; real problems' records,
    /// which begin with their subsystem's words, are the kernel's.
    #[test]
    fn a_kernel_record_starting_with_a_users_words_is_a_users() {
        for users in [
            "remounting fs r[2714]: segfault at 0 ip 000055d4c5a3d129 sp 00007ffc8e9f7a10 error 6 in remounting fs read-only[55d4c5a3d000+1000] likely on CPU 1 (core 1, socket 0)",
            "XFS (a): x[12]: segfault at 0 ip 0 sp 0 error 6 in Shutting down filesystem[55+1000]",
            "EDAC MC0: 1 UE [77]: segfault at 0 ip 0 sp 0 error 4",
            "a[1] trap invalid opcode ip:401000 sp:7ffd error:0 in a[401000+1000]",
            "traps: EXT4-fs (sda)[99] general protection fault ip:4011 sp:7ffc error:0",
            "bash (4242): drop_caches: 3",
            "audit: type=1107 audit(1765000000.123:45): pid=1 uid=0 auid=4294967295 ses=4294967295 msg='XFS (x): Metadata I/O error. Shutting down filesystem'",
            "process 'sh' launched '/tmp/Remounting filesystem read-only/x' with NULL argv: empty string added",
            "systemd[1]: Started systemd-journald.service - Journal Service.",
            // An attacker's second review: no PID after the name, or one after bytes that decode
            // wider than they were.
            "EDAC MC0: 1 UE invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=936",
            "EDAC MC0: 1 UE: page allocation failure: order:0, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), nodemask=(null),cpuset=/,mems_allowed=0",
            "EDAC MC0: 1 UE(4242): Attempt to set a LOCK_MAND lock via flock(2). This support has been removed and the request ignored.",
            "EDAC a: 1 UE \u{fffd}\u{fffd}[4242]: segfault at 0 ip 0 sp 0 error 6 in x[55+1000]",
        ] {
            assert!(quotes_a_user(users), "{users}");
        }
        for kernels in [
            "EXT4-fs (vdb1): Remounting filesystem read-only",
            "EXT4-fs error (device vdb1): ext4_find_entry:1683: inode #2: comm kubelet: reading directory lblock 0",
            "XFS (dm-4): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x1a0/0x1d0 (fs/xfs/xfs_trans.c:1097).  Shutting down filesystem.",
            "INFO: task docker:2211 blocked for more than 120 seconds.",
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=2741, name=python, GPU has fallen off the bus.",
            "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#0_DIMM#1 (channel:0 slot:1 page:0x5f00 offset:0x0 grain:32)",
            "{1}[Hardware Error]: event severity: fatal",
            "mce: [Hardware Error]: Machine check events logged",
            "sd 0:0:0:0: [sda] 2097152 512-byte logical blocks",
            "pci 0000:00:1f.2: [8086:a102] type 00 class 0x010601",
            "Memory cgroup out of memory: Killed process 40321 (stress) total-vm:531252kB",
            "nvme nvme0: I/O 123 QID 4 timeout, aborting",
            "",
            "[",
            "a[",
        ] {
            assert!(!quotes_a_user(kernels), "{kernels}");
        }
        // Written from user space at all: a user's, whatever it says.
        let r = parse(b"14,1,1,-;EXT4-fs (vdb1): Remounting filesystem read-only").unwrap();
        assert!(r.users());
        let r = parse(b"2,1,1,-;EXT4-fs (vdb1): Remounting filesystem read-only").unwrap();
        assert!(!r.users());
        let r = parse(b"6,1,1,-;a[1]: segfault at 0").unwrap();
        assert!(r.users());
    }

    #[test]
    fn parses_prefix_message_and_dict() {
        let r = parse(b"6,339,5140900,-;NET: Registered protocol family 10\n SUBSYSTEM=net\n DEVICE=+net:lo\n").unwrap();
        assert_eq!(r.facility, 0);
        assert_eq!(r.level, 6);
        assert_eq!(r.seq, 339);
        assert_eq!(r.monotonic_us, 5_140_900);
        assert!(!r.continuation);
        assert_eq!(r.message, "NET: Registered protocol family 10");
        assert!(
            matches!(r.message, Cow::Borrowed(_)),
            "nothing to decode: no copy"
        );
        assert_eq!(
            r.dict(),
            vec![
                ("SUBSYSTEM".into(), "net".into()),
                ("DEVICE".into(), "+net:lo".into())
            ]
        );
    }

    #[test]
    fn decodes_escapes_and_extra_prefix_fields() {
        let r = parse(b"30,12,99,c,caller=T1;tab\\x09here \\x5c back\\xZZ").unwrap();
        assert_eq!(r.facility, 3);
        assert_eq!(r.level, 6);
        assert!(r.continuation);
        assert_eq!(r.message, "tab\there \\ back\\xZZ");
    }

    #[test]
    fn invalid_utf8_becomes_replacement() {
        let r = parse(b"6,1,1,-;bad \\xff byte").unwrap();
        assert_eq!(r.message, "bad \u{fffd} byte");
    }

    #[test]
    fn a_malformed_kmsg_record_is_an_error() {
        for bad in [
            &b"no semicolon"[..],
            b"x,1,2,-;m",
            b"6,,2,-;m",
            b"6,1;m",
            b"6,1,notanumber,-;m",
            b"6,1,18446744073709551616,-;m",
            b"6,1,1 2,-;m",
            b"6,1,+2,-;m",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn numbers_up_to_the_largest_u64_are_read() {
        for (ts, want) in [
            ("0", 0),
            (" 42 ", 42),
            ("9999999999999999999", 9_999_999_999_999_999_999),
            ("18446744073709551615", u64::MAX),
            ("00000000000000000000000042", 42),
        ] {
            let rec = format!("6,1,{ts},-;m");
            assert_eq!(parse(rec.as_bytes()).unwrap().monotonic_us, want, "{ts}");
        }
        let r = parse(b"14,7,5,c,extra;m").unwrap();
        assert_eq!(
            (r.facility, r.level, r.seq, r.continuation),
            (1, 6, 7, true)
        );
    }

    #[test]
    fn splits_a_file_into_records_with_line_numbers() {
        let data = &b"6,1,10,-;first\n SUBSYSTEM=x\n6,2,20,-;second\n\n6,3,30,-;third"[..];
        let mut reader = RecordReader::new(data);
        let mut recs = Vec::new();
        while let Some((n, r)) = reader.next_record().unwrap() {
            recs.push((n, String::from_utf8_lossy(r).into_owned()));
        }
        assert_eq!(
            recs,
            vec![
                (1, "6,1,10,-;first\n SUBSYSTEM=x".to_string()),
                (3, "6,2,20,-;second".into()),
                (5, "6,3,30,-;third".into())
            ]
        );
    }
}
