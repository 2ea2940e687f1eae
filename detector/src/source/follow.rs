//! A regular file followed like `tail -f`, shared by the file input and kmsg's file mode: complete
//! lines only (a writer's half-written line waits for its newline), across rename rotation (the path
//! points at a new inode: the old file is read to its end, then the new one from its start) and
//! copytruncate (the file shrinks below our offset: read again from the start). I/O (files).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where to start in the file found at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartAt {
    Beginning,
    End,
    /// This offset if the file is still (dev, ino) and that long; else the beginning.
    Resume {
        dev: u64,
        ino: u64,
        offset: u64,
    },
}

/// What [`Follower::next_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A complete line is in the buffer (without its newline).
    Line,
    /// A line longer than the limit: its first `limit` bytes are in the buffer, the rest was skipped.
    TooLong,
    /// Nothing complete to read now (rotation and truncation were checked).
    Idle,
}

pub(crate) struct Follower {
    path: PathBuf,
    reader: BufReader<File>,
    dev: u64,
    ino: u64,
    offset: u64,
}

impl Follower {
    pub(crate) fn open(path: &Path, start: StartAt) -> std::io::Result<Follower> {
        let mut f = File::open(path)?;
        let meta = f.metadata()?;
        let (dev, ino) = (meta.dev(), meta.ino());
        let offset = match start {
            StartAt::Resume {
                dev: d,
                ino: i,
                offset,
            } if d == dev && i == ino && offset <= meta.len() => offset,
            StartAt::End => meta.len(),
            _ => 0,
        };
        f.seek(SeekFrom::Start(offset))?;
        Ok(Follower {
            path: path.to_path_buf(),
            reader: BufReader::new(f),
            dev,
            ino,
            offset,
        })
    }

    /// (device, inode, offset after the last complete line read).
    pub(crate) fn position(&self) -> (u64, u64, u64) {
        (self.dev, self.ino, self.offset)
    }

    /// Read the next complete line (at most `limit` bytes kept) into `buf`.
    pub(crate) fn next_line(&mut self, buf: &mut Vec<u8>, limit: usize) -> std::io::Result<Next> {
        buf.clear();
        let n = crate::parse::read_line(&mut self.reader.by_ref().take(limit as u64), buf)?;
        if n > 0 && buf.last() == Some(&b'\n') {
            self.offset += n as u64;
            buf.pop();
            return Ok(Next::Line);
        }
        if n >= limit {
            // An over-long line: keep its start, skip to its end without holding the rest (a line
            // of any length costs no more memory than `limit`).
            let (skipped, ended) = crate::parse::skip_line(&mut self.reader)?;
            if ended {
                self.offset += (n + skipped) as u64;
                return Ok(Next::TooLong);
            }
            // Still being written: come back for it.
            self.reader.seek(SeekFrom::Start(self.offset))?;
            buf.clear();
            return Ok(Next::Idle);
        }
        // A partial line (writer mid-line) or the end: back to its start, then look for rotation.
        if n > 0 {
            self.reader.seek(SeekFrom::Start(self.offset))?;
        }
        buf.clear();
        match std::fs::metadata(&self.path) {
            Ok(m) if m.dev() != self.dev || m.ino() != self.ino => {
                // Rotated by rename: we are at the old file's end; switch to the new one.
                let path = self.path.clone();
                *self = Follower::open(&path, StartAt::Beginning)?;
                tracing::info!(path = %self.path.display(), "log file rotated; following the new one");
            }
            Ok(m) if m.len() < self.offset => {
                tracing::info!(path = %self.path.display(), "log file truncated (copytruncate); reading from the start");
                self.offset = 0;
                self.reader.seek(SeekFrom::Start(0))?;
            }
            _ => {}
        }
        Ok(Next::Idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(f: &mut Follower) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while f.next_line(&mut buf, 1024).unwrap() == Next::Line {
            out.push(String::from_utf8_lossy(&buf).into_owned());
        }
        out
    }

    #[test]
    fn complete_lines_only_across_rotation_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "before\n").unwrap();
        let mut f = Follower::open(&path, StartAt::End).unwrap();
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(w, "half").unwrap();
        assert!(lines(&mut f).is_empty(), "a half-written line waits");
        writeln!(w, " done").unwrap();
        assert_eq!(lines(&mut f), ["half done"]);
        std::fs::rename(&path, dir.path().join("x.log.1")).unwrap();
        std::fs::write(&path, "new\n").unwrap();
        assert!(lines(&mut f).is_empty(), "the switch happens when idle");
        assert_eq!(lines(&mut f), ["new"]);
        std::fs::write(&path, "").unwrap();
        assert!(lines(&mut f).is_empty());
        std::fs::write(&path, "after\n").unwrap();
        assert_eq!(lines(&mut f), ["after"]);
    }
}
