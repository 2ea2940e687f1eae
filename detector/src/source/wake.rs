//! Waiting for a followed file to grow: inotify on its directory (writes, and a rotation's new
//! file), with the idle poll as the longest wait, so a line is read within milliseconds of being
//! written instead of up to a poll period later. Without inotify (e.g. no instances left) it falls
//! back to sleeping the poll period. I/O (inotify).

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

pub(crate) struct FileWake {
    fd: Option<OwnedFd>,
}

impl FileWake {
    /// Watch the directory holding `path` (the file itself may not exist yet or be replaced).
    pub(crate) fn new(path: &Path) -> FileWake {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .ok()
            .filter(|fd| {
                let flags = WatchFlags::MODIFY
                    | WatchFlags::CLOSE_WRITE
                    | WatchFlags::CREATE
                    | WatchFlags::MOVED_TO
                    | WatchFlags::ATTRIB;
                inotify::add_watch(fd, dir, flags).is_ok()
            });
        if fd.is_none() {
            tracing::debug!(dir = %dir.display(), "inotify unavailable; polling the file");
        }
        FileWake { fd }
    }

    /// Return when the directory changed or after `timeout`.
    pub(crate) fn wait(&self, timeout: Duration) {
        let Some(fd) = &self.fd else {
            std::thread::sleep(timeout);
            return;
        };
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let _ = rustix::event::poll(&mut fds, Some(&ts));
        // Drain what is queued: one wake-up per wait, whatever the number of writes.
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;

    #[test]
    fn a_write_wakes_the_waiter_before_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kern.log");
        std::fs::write(&path, "").unwrap();
        let wake = FileWake::new(&path);
        let p = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"line\n").unwrap();
        });
        let start = Instant::now();
        wake.wait(Duration::from_secs(20));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "woken by the write, not the timeout: {:?}",
            start.elapsed()
        );
        writer.join().unwrap();
    }
}
