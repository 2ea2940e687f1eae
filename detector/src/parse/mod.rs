//! Turning raw input into [`Line`]s: pure functions, no I/O. A record that cannot be parsed is a
//! [`Malformed`] value for the caller to count and skip, never an error that stops a source. The
//! one reader here, [`read_line`], reads from whatever `BufRead` the caller holds (the sources and
//! [`kmsg::RecordReader`] share it); it opens nothing.

pub mod host;
pub mod journal;
pub mod kmsg;
pub mod resources;
pub mod syslog;

/// One log message ready for matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// Wall-clock time of the message when the input says it (journal), else `None` (the caller uses
    /// its clock).
    pub(crate) realtime_us: Option<i64>,
}

/// Why a record was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {input} record: {why}")]
pub struct Malformed {
    pub(crate) input: &'static str,
    pub(crate) why: String,
}

/// `BufRead::read_until(b'\n', buf)` with the memchr crate finding the line's end: std's searches
/// with core's word-at-a-time memchr, where `detector check` spent 9% of its time on the 1M-line
/// kmsg file (perf); memchr's is vectorised. Same contract: appends through the newline (kept),
/// returns the bytes read, 0 at the end of the input; `Interrupted` is retried.
pub(crate) fn read_line(
    input: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut read = 0;
    loop {
        let (done, used) = {
            let available = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            match memchr::memchr(b'\n', available) {
                Some(i) => {
                    buf.extend_from_slice(&available[..=i]);
                    (true, i + 1)
                }
                None => {
                    buf.extend_from_slice(available);
                    (available.is_empty(), available.len())
                }
            }
        };
        input.consume(used);
        read += used;
        if done {
            return Ok(read);
        }
    }
}

/// Consume input through the next newline without keeping it (the rest of an over-long line):
/// the bytes consumed, and whether the newline was found (else the input ended first). Memory does
/// not grow with the line.
pub(crate) fn skip_line(input: &mut impl std::io::BufRead) -> std::io::Result<(usize, bool)> {
    let mut skipped = 0;
    loop {
        let (found, used) = {
            let available = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok((skipped, false));
            }
            match memchr::memchr(b'\n', available) {
                Some(i) => (true, i + 1),
                None => (false, available.len()),
            }
        };
        input.consume(used);
        skipped += used;
        if found {
            return Ok((skipped, true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read_line;
    use std::io::BufReader;

    #[test]
    fn the_rest_of_a_long_line_is_skipped_through_its_newline_only() {
        use std::io::Read;
        let long = std::io::repeat(b'x').take(3_000_000);
        let mut input = BufReader::with_capacity(4096, long.chain(&b"\nnext\n"[..]));
        assert_eq!(super::skip_line(&mut input).unwrap(), (3_000_001, true));
        let mut next = Vec::new();
        read_line(&mut input, &mut next).unwrap();
        assert_eq!(next, b"next\n");
        let mut unended = BufReader::new(&b"no newline"[..]);
        assert_eq!(super::skip_line(&mut unended).unwrap(), (10, false));
    }

    #[test]
    fn reads_as_std_read_until_does_across_buffer_ends() {
        let text = b"first\n\nthird line that is longer than the buffer\nno newline at the end";
        for capacity in [1, 2, 7, 64] {
            let (mut ours, mut std_) = (
                BufReader::with_capacity(capacity, &text[..]),
                BufReader::with_capacity(capacity, &text[..]),
            );
            loop {
                let (mut a, mut b) = (b"kept:".to_vec(), b"kept:".to_vec());
                let n = read_line(&mut ours, &mut a).unwrap();
                let m = std::io::BufRead::read_until(&mut std_, b'\n', &mut b).unwrap();
                assert_eq!((n, &a), (m, &b), "buffer of {capacity}");
                if n == 0 {
                    break;
                }
            }
        }
    }
}
