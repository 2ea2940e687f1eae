//! What benchmarks read of another process from /proc: CPU time and memory.

/// User + system CPU seconds of `pid` (0 when it is gone).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields after the command: state is 0, utime 11, stime 12; clock ticks are 100 Hz on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU time of a process to the nanosecond, for figures of a few milliseconds per second, where
/// [`cpu_seconds`] (whole clock ticks of 10 ms) would be all rounding. Linux keeps each thread's exact
/// run time (`/proc/PID/task/TID/schedstat`) but forgets it when the thread exits (the drainer's
/// blocking-pool threads come and go), so a meter polls every thread every 100 ms and keeps the last
/// figure of each: a thread that exits loses at most its last 100 ms, and a pool thread exits only
/// after 10 s idle.
pub struct CpuMeter {
    seen: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u64, u64>>>,
    pid: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CpuMeter {
    pub fn start(pid: u32) -> CpuMeter {
        let meter = CpuMeter {
            seen: Default::default(),
            pid,
            stop: Default::default(),
        };
        let (seen, stop) = (meter.seen.clone(), meter.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                poll_threads(pid, &seen);
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        meter
    }

    /// CPU seconds the process used since it started (its threads, exited ones included).
    pub fn seconds(&self) -> f64 {
        poll_threads(self.pid, &self.seen);
        self.seen.lock().unwrap().values().sum::<u64>() as f64 / 1e9
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn poll_threads(pid: u32, seen: &std::sync::Mutex<std::collections::HashMap<u64, u64>>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    let mut seen = seen.lock().unwrap();
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u64>().ok())
        else {
            continue;
        };
        let ns = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        if let Some(ns) = ns {
            let e = seen.entry(tid).or_default();
            *e = (*e).max(ns);
        }
    }
}

/// A `kB` field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`, `RssAnon:` ...) in MiB (0 when absent).
pub fn status_mib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// A drainer (or detector) process started with `--listen=127.0.0.1:0`, its address read from its
/// own log line (`serving /metrics ... addr=HOST:PORT`), so no other process can hold the port in
/// between (a port picked beforehand can be taken by a test running beside: then the test read
/// the other process's metrics). Its log lines stay readable; killed when dropped, and then a line
/// it logged at INFO or above with a Rust `Debug` dump in it fails the test (`debug_dump`).
pub struct Logged {
    pub child: std::process::Child,
    pub addr: String,
    pub lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    dumps: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dumps = std::mem::take(&mut *self.dumps.lock().unwrap_or_else(|e| e.into_inner()));
        if !dumps.is_empty() && !std::thread::panicking() {
            panic!(
                "the process logged Rust Debug dumps where operators read:\n{}",
                dumps.join("\n")
            );
        }
    }
}

impl Logged {
    /// Spawn `cmd` (which must log at INFO to stderr and listen on port 0) and wait, at most
    /// `timeout`, for its address; panics with what it logged otherwise.
    pub async fn spawn(mut cmd: std::process::Command, timeout: std::time::Duration) -> Logged {
        use std::io::BufRead;
        let mut child = cmd
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the process");
        let stderr = child.stderr.take().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let dumps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let found = dumps.clone();
        // Read on a thread of its own: a test's runtime may be serving the test API server. Every
        // line is scanned, whether or not the test reads it.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let dump = crate::debug_dump::in_log([line.as_str()]);
                found.lock().unwrap_or_else(|e| e.into_inner()).extend(dump);
                // The test may stop reading; the scan goes on.
                let _ = tx.send(line);
            }
        });
        let (early_tx, lines) = tokio::sync::mpsc::unbounded_channel();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        let addr = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, rx.recv()).await {
                Ok(Some(line)) => {
                    let addr = line
                        .contains("serving /metrics")
                        .then(|| line.split_once("addr=").map(|(_, a)| a.trim().to_string()))
                        .flatten();
                    seen.push(line.clone());
                    let _ = early_tx.send(line);
                    if let Some(a) = addr {
                        break a;
                    }
                }
                _ => panic!(
                    "no address logged within {timeout:?}; the process logged:\n{}",
                    seen.join("\n")
                ),
            }
        };
        // The rest of its lines follow the ones read so far.
        tokio::spawn(async move {
            while let Some(l) = rx.recv().await {
                if early_tx.send(l).is_err() {
                    return;
                }
            }
        });
        Logged {
            child,
            addr,
            lines,
            dumps,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(super::status_mib(me, "VmRSS:") > 0.0);
        assert!(super::cpu_seconds(me) >= 0.0);
        let meter = super::CpuMeter::start(me);
        let before = meter.seconds();
        // Busy until the meter sees at least 20 ms more (it reads exact times, not ticks).
        let start = std::time::Instant::now();
        while meter.seconds() - before < 0.02 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "the meter never moved"
            );
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        // A thread that works and exits still counts.
        let mid = meter.seconds();
        std::thread::spawn(|| {
            // 300 ms of its own CPU time, however busy the machine is.
            let own = || {
                std::fs::read_to_string("/proc/thread-self/schedstat")
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(u64::MAX)
            };
            let start = own();
            while own().saturating_sub(start) < 300_000_000 {
                std::hint::black_box((0..10_000u64).sum::<u64>());
            }
        })
        .join()
        .unwrap();
        // The meter may miss the last 100 ms of wall time before the thread exited, not more.
        assert!(
            meter.seconds() - mid >= 0.15,
            "the exited thread's time is kept"
        );
        assert_eq!(super::status_mib(me, "NoSuchField:"), 0.0);
    }
}
