//! A file read once, start to end (`detector check`): the same [`SourceEvent`]s the following inputs
//! send, each with where it came from (line, syslog tag, journal entry), so the offline check feeds
//! the monitors exactly as the daemon does. I/O (it reads the given reader), no threads, no clock.

use std::io::BufRead;

use k8s_openapi::jiff::Timestamp;

use super::event::SourceEvent;
use crate::checkpoint::Position;
use crate::config::Input;
use crate::parse::{journal, kmsg, syslog};

/// How the input file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// /dev/kmsg records (`PRI,SEQ,TS,FLAGS;MESSAGE`).
    Kmsg,
    /// syslog lines; the `Mmm dd hh:mm:ss host tag:` prefix is stripped.
    Syslog,
    /// Each line is a message.
    Plain,
    /// `journalctl -o json` output.
    JournalJson,
    /// Readings of a node's resources, one JSON object per line (`detector sample`'s output).
    Samples,
}

impl InputFormat {
    /// Guess from the first non-empty line.
    pub(crate) fn detect(first_line: &str) -> InputFormat {
        let l = first_line.trim_start();
        if crate::parse::resources::looks_like_sample(l) {
            InputFormat::Samples
        } else if l.starts_with('{') {
            InputFormat::JournalJson
        } else if kmsg::parse(l.as_bytes()).is_ok() {
            InputFormat::Kmsg
        } else if syslog::message(l) != l {
            InputFormat::Syslog
        } else {
            InputFormat::Plain
        }
    }

    /// Whether a monitor reading `input` sees this format's records: kmsg records go to kmsg
    /// monitors and journal entries to journal monitors; plain and syslog files go to every line
    /// monitor.
    pub(crate) fn feeds(self, input: &Input) -> bool {
        match self {
            InputFormat::Kmsg => matches!(input, Input::Kmsg { .. }),
            InputFormat::JournalJson => matches!(input, Input::Journal { .. }),
            InputFormat::Samples => matches!(input, Input::Resources(_)),
            InputFormat::Syslog | InputFormat::Plain => {
                !matches!(input, Input::Exec(_) | Input::Resources(_))
            }
        }
    }
}

/// Where a record came from, for journal monitors' identifiers and units.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    Journal(&'a journal::Entry),
    /// A syslog line with this tag.
    Syslog(&'a str),
    Other,
}

impl Origin<'_> {
    /// Whether a monitor reading `input` reads this record: the daemon's journalctl filter
    /// (identifiers OR units) applied to a journal entry, or to a syslog line's tag (`kubelet` for
    /// `kubelet.service`); every other monitor reads every record.
    pub(crate) fn reaches(&self, input: &Input) -> bool {
        let Input::Journal {
            identifiers,
            units,
            how,
            ..
        } = input
        else {
            return true;
        };
        match self {
            Origin::Journal(entry) => journal::accepts(entry, identifiers, units, *how),
            Origin::Syslog(tag) => {
                (identifiers.is_empty() && units.is_empty())
                    || identifiers.iter().any(|i| i == tag)
                    || units
                        .iter()
                        .any(|u| u.strip_suffix(".service").unwrap_or(u) == *tag)
            }
            Origin::Other => true,
        }
    }
}

/// One record read.
pub(crate) struct Record<'a> {
    /// 1-based line of the input where the record starts.
    pub(crate) line: usize,
    /// Records (or lines, blank ones included) and bytes read so far, this record included.
    pub(crate) read: u64,
    pub(crate) offset: u64,
    pub(crate) origin: Origin<'a>,
    /// A [`SourceEvent::Line`] (at the record's own time, else the reader's `now`), a
    /// [`SourceEvent::Sample`] or a [`SourceEvent::Malformed`]. The position of a line is its end's byte offset in the input
    /// (`dev`/`ino` 0: the input may not be a file).
    pub(crate) event: &'a SourceEvent,
}

/// Reads records one at a time, reusing its buffers (no allocation per line but a journal entry's).
pub(crate) struct Once<R> {
    format: InputFormat,
    now: Timestamp,
    kmsg: Option<kmsg::RecordReader<R>>,
    reader: Option<R>,
    bytes: Vec<u8>,
    line: String,
    tag: String,
    line_no: usize,
    read: u64,
    offset: u64,
    entry: Option<journal::Entry>,
    event: SourceEvent,
}

impl<R: BufRead> Once<R> {
    /// A reader of `format` records; undated lines are dated `now`.
    pub(crate) fn new(reader: R, format: InputFormat, now: Timestamp) -> Self {
        let (kmsg, reader) = match format {
            InputFormat::Kmsg => (Some(kmsg::RecordReader::new(reader)), None),
            _ => (None, Some(reader)),
        };
        Once {
            format,
            now,
            kmsg,
            reader,
            bytes: Vec::new(),
            line: String::new(),
            tag: String::new(),
            line_no: 0,
            read: 0,
            offset: 0,
            entry: None,
            event: SourceEvent::Overrun,
        }
    }

    /// Records (or lines) and bytes read so far.
    pub(crate) fn read(&self) -> (u64, u64) {
        (self.read, self.offset)
    }

    /// The next record; `None` at the end of the input (blank lines of a journal export are
    /// skipped).
    pub(crate) fn next_record(&mut self) -> std::io::Result<Option<Record<'_>>> {
        if let Some(records) = &mut self.kmsg {
            let Some((line, rec)) = records.next_record()? else {
                return Ok(None);
            };
            self.read += 1;
            self.offset += rec.len() as u64 + 1;
            let position = Position::File {
                dev: 0,
                ino: 0,
                offset: self.offset,
            };
            let origin = Origin::Other;
            match kmsg::parse(rec) {
                Ok(r) => {
                    // Microseconds since boot; a file does not say when the machine booted, so
                    // offline the boot is taken to be `now` (`--now`): reproducible, and never
                    // a time in 1970. Saturating.
                    let at = i64::try_from(r.monotonic_us)
                        .ok()
                        .and_then(|us| {
                            self.now
                                .checked_add(k8s_openapi::jiff::SignedDuration::from_micros(us))
                                .ok()
                        })
                        .unwrap_or(Timestamp::MAX);
                    set_line(&mut self.event, &r.message, at, position, r.users());
                }
                Err(e) => self.event = malformed(e.to_string()),
            }
            let event = &self.event;
            return Ok(Some(Record {
                line,
                read: self.read,
                offset: self.offset,
                origin,
                event,
            }));
        }
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let position = self.position();
            let line = self.line.trim_end_matches(['\n', '\r']);
            let origin = match self.format {
                InputFormat::JournalJson | InputFormat::Samples if line.trim().is_empty() => {
                    continue;
                }
                InputFormat::Samples => {
                    self.event = sample(line);
                    Kind::Other
                }
                InputFormat::JournalJson => match journal::parse(line) {
                    Ok(entry) => {
                        let at = entry
                            .line
                            .realtime_us
                            .and_then(|us| Timestamp::from_microsecond(us).ok())
                            .unwrap_or(self.now);
                        set_line(&mut self.event, &entry.line.text, at, position, false);
                        self.entry = Some(entry);
                        Kind::Journal
                    }
                    Err(e) => {
                        self.event = malformed(e.to_string());
                        Kind::Other
                    }
                },
                InputFormat::Syslog => match syslog::split(line) {
                    Some((tag, message)) => {
                        self.tag.clear();
                        self.tag.push_str(tag);
                        set_line(&mut self.event, message, self.now, position, false);
                        Kind::Syslog
                    }
                    None => {
                        set_line(&mut self.event, line, self.now, position, false);
                        Kind::Other
                    }
                },
                InputFormat::Plain | InputFormat::Kmsg => {
                    set_line(&mut self.event, line, self.now, position, false);
                    Kind::Other
                }
            };
            let origin = match (origin, &self.entry) {
                (Kind::Journal, Some(entry)) => Origin::Journal(entry),
                (Kind::Syslog, _) => Origin::Syslog(&self.tag),
                _ => Origin::Other,
            };
            return Ok(Some(Record {
                line: self.line_no,
                read: self.read,
                offset: self.offset,
                origin,
                event: &self.event,
            }));
        }
    }

    /// Read one line into `self.line`; invalid UTF-8 is replaced instead of failing the run.
    fn read_line(&mut self) -> std::io::Result<bool> {
        let Some(reader) = &mut self.reader else {
            return Ok(false);
        };
        self.bytes.clear();
        self.line.clear();
        // At most MAX_LINE bytes of a line are kept (as the follower does); the rest is skipped.
        let limit = super::file::MAX_LINE;
        let mut n = crate::parse::read_line(
            &mut std::io::Read::take(&mut *reader, limit as u64),
            &mut self.bytes,
        )?;
        if n == 0 {
            return Ok(false);
        }
        if n >= limit && self.bytes.last() != Some(&b'\n') {
            n += crate::parse::skip_line(reader)?.0;
        }
        self.line_no += 1;
        self.read += 1;
        self.offset += n as u64;
        match std::str::from_utf8(&self.bytes) {
            Ok(s) => self.line.push_str(s),
            Err(_) => self.line.push_str(&String::from_utf8_lossy(&self.bytes)),
        }
        Ok(true)
    }

    fn position(&self) -> Position {
        Position::File {
            dev: 0,
            ino: 0,
            offset: self.offset,
        }
    }
}

/// What kind of origin the current line has (the borrow is taken once the line is set).
enum Kind {
    Journal,
    /// A syslog line (its tag in `tag`).
    Syslog,
    Other,
}

/// Make `event` the line `text` (its buffer reused when it is a line already).
fn set_line(event: &mut SourceEvent, text: &str, at: Timestamp, position: Position, user: bool) {
    if let SourceEvent::Line {
        text: t,
        at: a,
        position: p,
        user: u,
    } = event
    {
        t.clear();
        t.push_str(text);
        *a = at;
        *p = position;
        *u = user;
    } else {
        *event = SourceEvent::Line {
            text: text.to_string(),
            at,
            position,
            user,
        };
    }
}

/// A line of readings (`detector sample`'s output).
fn sample(line: &str) -> SourceEvent {
    match crate::parse::resources::Sample::from_json_line(line) {
        Ok(sample) => SourceEvent::Sample(sample),
        Err(e) => malformed(e.to_string()),
    }
}

fn malformed(why: String) -> SourceEvent {
    SourceEvent::Malformed { why }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str, format: InputFormat) -> Vec<(usize, String, String, u64)> {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let mut once = Once::new(input.as_bytes(), format, now);
        let mut out = Vec::new();
        while let Some(r) = once.next_record().unwrap() {
            let origin = match r.origin {
                Origin::Journal(e) => {
                    format!("journal:{}", e.identifier.clone().unwrap_or_default())
                }
                Origin::Syslog(tag) => format!("syslog:{tag}"),
                Origin::Other => "other".into(),
            };
            let text = match r.event {
                SourceEvent::Line { text, position, .. } => {
                    assert_eq!(
                        *position,
                        Position::File {
                            dev: 0,
                            ino: 0,
                            offset: r.offset
                        }
                    );
                    text.clone()
                }
                SourceEvent::Malformed { .. } => "MALFORMED".into(),
                other => panic!("unexpected {other:?}"),
            };
            out.push((r.line, origin, text, r.read));
        }
        assert_eq!(once.read().1, input.len() as u64);
        out
    }

    #[test]
    fn syslog_lines_carry_their_tag_and_lose_their_prefix() {
        let got = read(
            "Nov 22 03:27:01 node-1 kubelet[12]: PLEG is not healthy\nno prefix here\n",
            InputFormat::Syslog,
        );
        assert_eq!(
            got,
            [
                (1, "syslog:kubelet".into(), "PLEG is not healthy".into(), 1),
                (2, "other".into(), "no prefix here".into(), 2),
            ]
        );
    }

    #[test]
    fn journal_exports_skip_blank_lines_and_count_bad_records() {
        let got = read(
            "{\"MESSAGE\":\"a\",\"SYSLOG_IDENTIFIER\":\"containerd\"}\n\nnot json\n",
            InputFormat::JournalJson,
        );
        assert_eq!(
            got,
            [
                (1, "journal:containerd".into(), "a".into(), 1),
                (3, "other".into(), "MALFORMED".into(), 3),
            ]
        );
    }

    #[test]
    /// A file does not say when the machine booted: offline it is taken to have booted at `now`.
    fn kmsg_records_are_dated_by_their_monotonic_stamp_after_now() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let mut once = Once::new("6,1,2000000,-;hello\n".as_bytes(), InputFormat::Kmsg, now);
        let r = once.next_record().unwrap().unwrap();
        match r.event {
            SourceEvent::Line { text, at, .. } => {
                assert_eq!((text.as_str(), at.as_second()), ("hello", 1_700_000_002));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(once.next_record().unwrap().is_none());
    }

    #[test]
    fn a_journal_monitor_reads_only_its_identifiers_and_units() {
        let input = Input::Journal {
            identifiers: vec!["containerd".into()],
            how: journal::IdentifierMatch::Backed,
            units: vec!["kubelet.service".into()],
            directory: None,
        };
        assert!(Origin::Syslog("containerd").reaches(&input));
        assert!(Origin::Syslog("kubelet").reaches(&input));
        assert!(!Origin::Syslog("sshd").reaches(&input));
        assert!(Origin::Other.reaches(&input));
        let kernel_only = Input::Kmsg { user_space: false };
        assert!(Origin::Syslog("sshd").reaches(&kernel_only));
        assert!(InputFormat::Plain.feeds(&kernel_only));
        assert!(!InputFormat::Kmsg.feeds(&input));
    }
}
