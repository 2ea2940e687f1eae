//! `/dev/kmsg`, or a regular file in kmsg record format followed like `tail -f` (for tests and demos).
//! I/O (a thread reading the device).
//!
//! Start position: records after the checkpointed sequence number when the checkpoint is from this
//! boot; otherwise only records within the lookback window (by their monotonic timestamp). The device
//! gives one record per read(); EPIPE means the ring buffer overwrote records we had not read: counted,
//! and reading goes on. A regular file that shrinks was truncated and is re-read from the start.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::sync::{mpsc, watch};

use super::event::{IDLE_POLL, SourceEvent};
use super::follow::{Follower, Next, StartAt};
use crate::checkpoint::Position;
use crate::parse::kmsg;

/// Read buffer: a kmsg record is at most ~8 KiB (a smaller buffer makes read() fail with EINVAL).
const RECORD_BUF: usize = 16 * 1024;

/// Where to start.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    pub(crate) boot_id: String,
    /// Checkpointed position of this monitor, if any.
    pub(crate) checkpoint: Option<Position>,
    pub(crate) lookback: Duration,
}

impl Start {
    /// Should a record with `seq`/`ts` be skipped? `now_mono_us` is the current monotonic clock.
    pub(crate) fn skip(&self, seq: u64, ts_us: u64, now_mono_us: u64) -> bool {
        match &self.checkpoint {
            Some(Position::Kmsg { boot_id, seq: last }) if *boot_id == self.boot_id => seq <= *last,
            _ => ts_us.saturating_add(self.lookback.as_micros() as u64) < now_mono_us,
        }
    }
}

/// CLOCK_MONOTONIC in microseconds (the clock of kmsg timestamps).
pub fn monotonic_now_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

/// The current boot id.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// When this machine booted (`btime` of `/proc/stat`), if the kernel says.
pub(crate) fn booted_at() -> Option<Timestamp> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs = stat.lines().find_map(|l| l.strip_prefix("btime "))?;
    Timestamp::from_second(secs.trim().parse().ok()?).ok()
}

/// Wall-clock time of a record with monotonic timestamp `ts_us`.
fn wall_time(ts_us: u64) -> Timestamp {
    let now = Timestamp::now();
    let age = monotonic_now_us().saturating_sub(ts_us);
    nodemedic_common::time::sub(now, Duration::from_micros(age))
}

/// Follow `path` until `stop` turns true or the receiver is gone. Runs on a dedicated thread.
pub(crate) fn follow(
    path: PathBuf,
    start: Start,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    stop: watch::Receiver<bool>,
) {
    let mut state = Reader {
        start,
        tx,
        beat,
        stop,
        past_start: false,
    };
    loop {
        let result = match std::fs::metadata(&path) {
            Ok(m) if m.file_type().is_char_device() => state.device(&path),
            Ok(_) => state.file(&path),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "kmsg input failed; retrying in 5s");
                if state.sleep(Duration::from_secs(5)) {
                    return;
                }
            }
        }
    }
}

struct Reader {
    start: Start,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    stop: watch::Receiver<bool>,
    /// Once a record passed the start filter, later ones are not filtered again.
    past_start: bool,
}

impl Reader {
    fn stopped(&self) -> bool {
        *self.stop.borrow() || self.tx.is_closed()
    }

    /// Sleep in small steps; true when asked to stop.
    fn sleep(&self, d: Duration) -> bool {
        let mut left = d;
        while !left.is_zero() {
            if self.stopped() {
                return true;
            }
            let step = left.min(IDLE_POLL);
            std::thread::sleep(step);
            left -= step;
            self.beat.beat();
        }
        self.stopped()
    }

    /// Handle one record; false when the receiver is gone.
    fn record(&mut self, rec: &[u8]) -> bool {
        let event = match kmsg::parse(rec) {
            Err(e) => SourceEvent::Malformed { why: e.to_string() },
            Ok(r) => {
                if !self.past_start && self.start.skip(r.seq, r.monotonic_us, monotonic_now_us()) {
                    return true;
                }
                self.past_start = true;
                let user = r.users();
                SourceEvent::Line {
                    text: r.message.into_owned(),
                    at: wall_time(r.monotonic_us),
                    position: Position::Kmsg {
                        boot_id: self.start.boot_id.clone(),
                        seq: r.seq,
                    },
                    user,
                }
            }
        };
        self.tx.blocking_send(event).is_ok()
    }

    fn device(&mut self, path: &Path) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)?;
        let mut buf = vec![0u8; RECORD_BUF];
        loop {
            if self.stopped() {
                return Ok(());
            }
            self.beat.beat();
            let mut fds = [rustix::event::PollFd::new(&f, rustix::event::PollFlags::IN)];
            let timeout = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: IDLE_POLL.as_nanos() as i64,
            };
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            if !self.drain(&mut f, &mut buf)? {
                return Ok(());
            }
        }
    }

    /// Read every record available now (one per read()); EPIPE (records overwritten before we read
    /// them) is counted and reading goes on. Returns false when the receiver is gone.
    fn drain(&mut self, f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
        loop {
            match f.read(buf) {
                Ok(0) => return Ok(true),
                Ok(n) => {
                    if !self.record(&buf[..n]) {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PIPE.raw_os_error()) => {
                    if self.tx.blocking_send(SourceEvent::Overrun).is_err() {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// A regular file in kmsg record format, followed like `tail -f` from its start (records are
    /// filtered by the start position): a record line and its continuation lines (` KEY=VALUE`)
    /// make one record, handed on once the next record starts or the file is idle.
    fn file(&mut self, path: &Path) -> std::io::Result<()> {
        let mut f = Follower::open(path, StartAt::Beginning)?;
        let wake = super::wake::FileWake::new(path);
        let mut line = Vec::new();
        let mut record: Vec<u8> = Vec::new();
        loop {
            if self.stopped() {
                return Ok(());
            }
            self.beat.beat();
            match f.next_line(&mut line, RECORD_BUF)? {
                Next::Line if line.first() == Some(&b' ') && !record.is_empty() => {
                    record.push(b'\n');
                    record.extend_from_slice(&line);
                }
                Next::Line if line.is_empty() => {}
                Next::Line => {
                    if !record.is_empty() && !self.record(&std::mem::take(&mut record)) {
                        return Ok(());
                    }
                    record.extend_from_slice(&line);
                }
                Next::TooLong => {
                    if self
                        .tx
                        .blocking_send(SourceEvent::Malformed {
                            why: format!("kmsg record longer than {RECORD_BUF} bytes skipped"),
                        })
                        .is_err()
                    {
                        return Ok(());
                    }
                }
                Next::Idle => {
                    if !record.is_empty() && !self.record(&std::mem::take(&mut record)) {
                        return Ok(());
                    }
                    // Until the file is written (inotify), at most the idle poll.
                    wake.wait(IDLE_POLL);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(checkpoint: Option<Position>) -> Start {
        Start {
            boot_id: "boot-a".into(),
            checkpoint,
            lookback: Duration::from_secs(300),
        }
    }

    /// Replays read() results as the device would return them.
    struct FakeDevice(std::collections::VecDeque<std::io::Result<Vec<u8>>>);

    impl Read for FakeDevice {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                None => Err(std::io::ErrorKind::WouldBlock.into()),
                Some(Err(e)) => Err(e),
                Some(Ok(rec)) => {
                    buf[..rec.len()].copy_from_slice(&rec);
                    Ok(rec.len())
                }
            }
        }
    }

    #[test]
    fn epipe_is_counted_and_reading_goes_on() {
        let now = monotonic_now_us();
        let epipe = || {
            Err(std::io::Error::from_raw_os_error(
                rustix::io::Errno::PIPE.raw_os_error(),
            ))
        };
        let mut dev = FakeDevice(
            vec![
                Ok(format!("6,1,{now},-;before").into_bytes()),
                epipe(),
                Err(std::io::ErrorKind::Interrupted.into()),
                Ok(format!("6,9,{now},-;after the overrun").into_bytes()),
                Ok(b"garbage".to_vec()),
            ]
            .into(),
        );
        let (tx, mut rx) = mpsc::channel(16);
        let (_stop_tx, stop) = watch::channel(false);
        let health = nodemedic_common::health::Health::default();
        let mut reader = Reader {
            start: Start {
                boot_id: "b".into(),
                checkpoint: None,
                lookback: Duration::from_secs(300),
            },
            tx,
            beat: health.register("k", Duration::from_secs(5)),
            stop,
            past_start: false,
        };
        let mut buf = vec![0u8; RECORD_BUF];
        assert!(
            reader.drain(&mut dev, &mut buf).unwrap(),
            "EAGAIN ends a drain, not the reader"
        );
        let got: Vec<SourceEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(matches!(&got[0], SourceEvent::Line { text, .. } if text == "before"));
        assert_eq!(got[1], SourceEvent::Overrun);
        assert!(
            matches!(&got[2], SourceEvent::Line { text, position: Position::Kmsg { seq: 9, .. }, .. } if text == "after the overrun")
        );
        assert!(matches!(&got[3], SourceEvent::Malformed { .. }));
        // a real error ends the drain with that error
        let mut broken = FakeDevice(vec![Err(std::io::Error::other("boom"))].into());
        assert!(reader.drain(&mut broken, &mut buf).is_err());
    }

    #[test]
    fn same_boot_checkpoint_skips_what_was_reported() {
        let s = start(Some(Position::Kmsg {
            boot_id: "boot-a".into(),
            seq: 10,
        }));
        assert!(s.skip(10, 0, 1_000_000_000));
        assert!(
            !s.skip(11, 0, 1_000_000_000),
            "newer records are read even if old by timestamp"
        );
    }

    #[test]
    fn other_boot_or_no_checkpoint_uses_the_lookback_window() {
        let now = 1_000_000_000u64;
        for s in [
            start(None),
            start(Some(Position::Kmsg {
                boot_id: "boot-b".into(),
                seq: 10,
            })),
        ] {
            assert!(s.skip(1, now - 301_000_000, now));
            assert!(!s.skip(1, now - 299_000_000, now));
        }
    }

    #[test]
    fn follows_a_file_and_resumes_after_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        let now = monotonic_now_us();
        std::fs::write(
            &path,
            format!("6,1,{now},-;one\n6,2,{now},-;two\nbad record\n"),
        )
        .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let (stop_tx, stop) = watch::channel(false);
        let health = nodemedic_common::health::Health::default();
        let beat = health.register("kmsg", Duration::from_secs(5));
        let s = Start {
            boot_id: boot_id(),
            checkpoint: Some(Position::Kmsg {
                boot_id: boot_id(),
                seq: 1,
            }),
            lookback: Duration::from_secs(300),
        };
        let p = path.clone();
        let t = std::thread::spawn(move || follow(p, s, tx, beat, stop));
        let first = rx.blocking_recv().unwrap();
        assert!(
            matches!(&first, SourceEvent::Line { text, position: Position::Kmsg { seq: 2, .. }, .. } if text == "two"),
            "{first:?}"
        );
        assert!(matches!(
            rx.blocking_recv().unwrap(),
            SourceEvent::Malformed { .. }
        ));
        // appended later: seen like tail -f
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "6,3,{now},-;three").unwrap();
        let third = rx.blocking_recv().unwrap();
        assert!(
            matches!(&third, SourceEvent::Line { text, .. } if text == "three"),
            "{third:?}"
        );
        stop_tx.send(true).unwrap();
        t.join().unwrap();
    }

    /// Issue 76: a record any root process on the node writes to /dev/kmsg (here the user
    /// facility, PRI 14, claiming a GPU's Xid) is passed on marked as written from user space; the
    /// kernel's own records are not (the problem state decides what each may do).
    #[test]
    fn a_record_written_from_user_space_is_marked_as_such() {
        let (tx, mut rx) = mpsc::channel(16);
        let (_stop_tx, stop) = watch::channel(false);
        let health = nodemedic_common::health::Health::default();
        let mut reader = Reader {
            start: Start {
                boot_id: "b".into(),
                checkpoint: None,
                lookback: Duration::from_secs(u64::MAX / 4_000_000),
            },
            tx,
            beat: health.register("k", Duration::from_secs(5)),
            stop,
            past_start: false,
        };
        assert!(reader.record(b"14,1,100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1"));
        assert!(reader.record(b"4,2,200,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=2"));
        let got: Vec<(String, bool)> = std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|e| match e {
                SourceEvent::Line { text, user, .. } => Some((text, user)),
                _ => None,
            })
            .collect();
        assert_eq!(
            got,
            [
                ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1".to_string(), true),
                ("NVRM: Xid (PCI:0000:3b:00): 13, pid=2".to_string(), false)
            ]
        );
    }
}
