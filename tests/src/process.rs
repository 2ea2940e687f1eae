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

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(super::status_mib(me, "VmRSS:") > 0.0);
        assert!(super::cpu_seconds(me) >= 0.0);
        assert_eq!(super::status_mib(me, "NoSuchField:"), 0.0);
    }
}
