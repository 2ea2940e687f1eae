//! The kernel's host figures as numbers: `/proc/stat`, `/proc/loadavg`, `/proc/meminfo`,
//! `/proc/diskstats`, `/proc/net/dev`, `/proc/uptime`, a mount table (`mountinfo`),
//! `/proc/filesystems`, `/proc/cmdline`, `/proc/modules` and `os-release`. Pure: each function
//! takes a file's text. The system stats monitor reads them all, the `resources` input
//! `meminfo` and `loadavg`, through these same functions.
//!
//! A line a newer kernel adds, or one cut short, is skipped; a file with nothing known in it gives
//! an empty value, which the caller reports as missing.

use std::collections::BTreeMap;

/// CPU time by state, in the kernel's clock ticks (`USER_HZ`), as `/proc/stat` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTicks {
    /// The states in `/proc/stat`'s order.
    pub fn states(&self) -> [u64; 10] {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
            self.guest,
            self.guest_nice,
        ]
    }

    fn from_fields<'a>(fields: impl Iterator<Item = &'a str>) -> CpuTicks {
        let mut v = [0u64; 10];
        for (slot, f) in v.iter_mut().zip(fields) {
            *slot = f.parse().unwrap_or(0);
        }
        let [
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        ] = v;
        CpuTicks {
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        }
    }
}

/// What `/proc/stat` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcStat {
    /// The `cpu` line: every CPU together.
    pub total: Option<CpuTicks>,
    /// The `cpuN` lines, by N.
    pub cpus: Vec<(u32, CpuTicks)>,
    /// Interrupts serviced since boot (`intr`'s first number).
    pub interrupts: Option<u64>,
    /// Forks since boot.
    pub processes: Option<u64>,
    pub procs_running: Option<u64>,
    pub procs_blocked: Option<u64>,
}

pub fn proc_stat(text: &str) -> ProcStat {
    let mut s = ProcStat::default();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(key) = fields.next() else { continue };
        let first = |mut f: std::str::SplitAsciiWhitespace| f.next().and_then(|n| n.parse().ok());
        match key {
            "cpu" => s.total = Some(CpuTicks::from_fields(fields)),
            "intr" => s.interrupts = first(fields),
            "processes" => s.processes = first(fields),
            "procs_running" => s.procs_running = first(fields),
            "procs_blocked" => s.procs_blocked = first(fields),
            _ => {
                if let Some(n) = key.strip_prefix("cpu").and_then(|n| n.parse().ok()) {
                    s.cpus.push((n, CpuTicks::from_fields(fields)));
                }
            }
        }
    }
    s
}

/// The 1, 5 and 15 minute load averages of `/proc/loadavg`.
pub fn loadavg(text: &str) -> Option<[f64; 3]> {
    let mut f = text.split_ascii_whitespace().map(|n| n.parse::<f64>().ok());
    Some([f.next()??, f.next()??, f.next()??])
}

/// `/proc/meminfo` in bytes, by its own keys (`MemTotal`, `Active(anon)`, ...). A value without
/// the `kB` unit (the `HugePages_*` counts) is kept as it is.
pub fn meminfo(text: &str) -> BTreeMap<&str, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_ascii_whitespace();
        let Some(n) = words.next().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let scale = if words.next() == Some("kB") { 1024 } else { 1 };
        out.insert(key.trim(), n.saturating_mul(scale));
    }
    out
}

/// One device's line of `/proc/diskstats` (the kernel's iostats.rst), sectors made bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskCounters {
    pub reads: u64,
    pub merged_reads: u64,
    pub read_bytes: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub merged_writes: u64,
    pub written_bytes: u64,
    pub write_ms: u64,
    pub io_ms: u64,
    pub weighted_io_ms: u64,
}

/// The kernel counts sectors of 512 bytes whatever the device's own sector size.
const SECTOR: u64 = 512;

pub fn diskstats(text: &str) -> BTreeMap<&str, DiskCounters> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        if fields.len() < 14 {
            continue;
        }
        let n = |i: usize| fields[i].parse::<u64>().unwrap_or(0);
        out.insert(
            fields[2],
            DiskCounters {
                reads: n(3),
                merged_reads: n(4),
                read_bytes: n(5).saturating_mul(SECTOR),
                read_ms: n(6),
                writes: n(7),
                merged_writes: n(8),
                written_bytes: n(9).saturating_mul(SECTOR),
                write_ms: n(10),
                io_ms: n(12),
                weighted_io_ms: n(13),
            },
        );
    }
    out
}

/// One interface's line of `/proc/net/dev`: the 8 receive then the 8 transmit counters, in the
/// file's order (bytes, packets, errs, drop, fifo, frame/colls, compressed/carrier,
/// multicast/compressed).
pub fn net_dev(text: &str) -> BTreeMap<&str, [u64; 16]> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let mut v = [0u64; 16];
        let mut count = 0;
        for (slot, f) in v.iter_mut().zip(rest.split_ascii_whitespace()) {
            let Ok(n) = f.parse() else { break };
            *slot = n;
            count += 1;
        }
        if count == 16 {
            out.insert(name.trim(), v);
        }
    }
    out
}

/// Seconds since boot, `/proc/uptime`'s first number.
pub fn uptime(text: &str) -> Option<f64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// A mounted filesystem, from a line of `mountinfo` (proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// What is mounted (`/dev/sda1`), the "mount source".
    pub device: String,
    pub mount_point: String,
    pub fs_type: String,
    /// The mount's own options, comma separated as the kernel writes them.
    pub options: String,
}

pub fn mountinfo(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (Some(mount_point), Some(options), Some(fs_type), Some(device)) =
            (left.get(4), left.get(5), right.next(), right.next())
        else {
            continue;
        };
        out.push(Mount {
            device: unescape(device),
            mount_point: unescape(mount_point),
            fs_type: fs_type.to_string(),
            options: options.to_string(),
        });
    }
    out
}

/// The kernel writes a space, tab, newline and backslash in a mount table as `\040`, `\011`,
/// `\012` and `\134`.
fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The filesystem types `/proc/filesystems` marks `nodev` (needing no block device: proc, tmpfs,
/// overlay, ...).
pub fn nodev_filesystems(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("nodev"))
        .map(str::trim)
        .collect()
}

/// The filesystems on block devices (`fs_type` not `nodev` in `filesystems`), one per device (the
/// first mount of each), as NPD lists its disks' partitions.
pub fn block_mounts(mountinfo_text: &str, filesystems: &str) -> Vec<Mount> {
    let nodev = nodev_filesystems(filesystems);
    let mut seen = std::collections::BTreeSet::new();
    mountinfo(mountinfo_text)
        .into_iter()
        .filter(|m| !nodev.contains(&m.fs_type.as_str()))
        .filter(|m| seen.insert(m.device.clone()))
        .collect()
}

/// `/proc/cmdline`'s `key=value` arguments (a bare word is a key with an empty value).
pub fn cmdline(text: &str) -> Vec<(&str, &str)> {
    text.split_ascii_whitespace()
        .map(|a| a.split_once('=').unwrap_or((a, "")))
        .collect()
}

/// A loaded kernel module, from `/proc/modules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module<'a> {
    pub name: &'a str,
    /// Taint flag `P`.
    pub proprietary: bool,
    /// Taint flag `O`.
    pub out_of_tree: bool,
}

pub fn modules(text: &str) -> Vec<Module<'_>> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let taint = fields.get(6).copied().unwrap_or("");
            Some(Module {
                name: fields.first()?,
                proprietary: taint.contains('P'),
                out_of_tree: taint.contains('O'),
            })
        })
        .collect()
}

/// `os-release`'s fields, quotes removed.
pub fn os_release(text: &str) -> BTreeMap<&str, &str> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches(|c| c == '"' || c == '\'')))
        .collect()
}

/// The OS as NPD's host collector names it: `ID VERSION` (Container-Optimized OS: `cos
/// VERSION-BUILD_ID`). NPD stops at start on any distribution outside its list of twelve; here
/// every one is named, by `VERSION_ID` when it has no `VERSION`.
pub fn os_version(release: &BTreeMap<&str, &str>) -> Option<String> {
    let id = release.get("ID")?;
    let version = release.get("VERSION").or(release.get("VERSION_ID"));
    Some(match (*id, version) {
        ("cos", Some(v)) => format!("cos {v}-{}", release.get("BUILD_ID").unwrap_or(&"")),
        (id, Some(v)) => format!("{id} {v}"),
        (id, None) => id.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_every_cpu_and_the_counts() {
        let text = "cpu  10 2 30 400 5 6 7 8 9 1\n\
                    cpu0 5 1 15 200 2 3 3 4 4 0\n\
                    cpu1 5 1 15 200 3 3 4 4 5 1\n\
                    intr 123456 0 9 0\n\
                    ctxt 99\n\
                    btime 1700000000\n\
                    processes 4242\n\
                    procs_running 3\n\
                    procs_blocked 1\n\
                    softirq 5 1 1\n";
        let s = proc_stat(text);
        assert_eq!(
            s.total.unwrap().states(),
            [10, 2, 30, 400, 5, 6, 7, 8, 9, 1]
        );
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[1].0, 1);
        assert_eq!(s.cpus[1].1.guest_nice, 1);
        assert_eq!(
            (s.interrupts, s.processes, s.procs_running, s.procs_blocked),
            (Some(123456), Some(4242), Some(3), Some(1))
        );
        // An old kernel's line without steal and guest: the missing states are 0.
        let old = proc_stat("cpu 1 2 3 4\n");
        assert_eq!(old.total.unwrap().states(), [1, 2, 3, 4, 0, 0, 0, 0, 0, 0]);
        assert_eq!(old.processes, None);
    }

    #[test]
    fn meminfo_is_bytes_by_key() {
        let m = meminfo(
            "MemTotal:       16384 kB\nActive(anon):     100 kB\nHugePages_Total:       4\nbad line\n",
        );
        assert_eq!(m["MemTotal"], 16384 * 1024);
        assert_eq!(m["Active(anon)"], 100 * 1024);
        assert_eq!(m["HugePages_Total"], 4);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn diskstats_counts_bytes_from_sectors() {
        // Linux 5.5+ has 20 fields; 4.18 had 18; both read the same first 14.
        let text = "   8       0 sda 100 10 2000 300 50 5 1000 200 0 400 500 0 0 0 0 0 0 0\n\
                       8       1 sda1 1 0 8 1 0 0 0 0\n\
                     259 0 nvme0n1 short\n";
        let d = diskstats(text);
        let sda = d["sda"];
        assert_eq!(
            (sda.reads, sda.merged_reads, sda.read_bytes, sda.read_ms),
            (100, 10, 2000 * 512, 300)
        );
        assert_eq!(
            (
                sda.writes,
                sda.merged_writes,
                sda.written_bytes,
                sda.write_ms
            ),
            (50, 5, 1000 * 512, 200)
        );
        assert_eq!((sda.io_ms, sda.weighted_io_ms), (400, 500));
        assert!(!d.contains_key("sda1"), "10 fields are too few");
        assert!(!d.contains_key("nvme0n1"));
    }

    #[test]
    fn net_dev_reads_both_directions_and_skips_the_headers() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
                    face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                    lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n  \
                    eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
        let n = net_dev(text);
        assert_eq!(n.len(), 2);
        assert_eq!(
            n["eth0"],
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
        );
    }

    #[test]
    fn mountinfo_unescapes_and_keeps_what_npd_labels() {
        let text = "36 35 98:0 / /mnt/my\\040disk rw,noatime master:1 - ext4 /dev/sdb1 rw,errors=continue\n\
                    22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n";
        let m = mountinfo(text);
        assert_eq!(m[0].mount_point, "/mnt/my disk");
        assert_eq!(
            (
                m[0].device.as_str(),
                m[0].fs_type.as_str(),
                m[0].options.as_str()
            ),
            ("/dev/sdb1", "ext4", "rw,noatime")
        );
        assert_eq!(m[1].fs_type, "proc");
        assert_eq!(
            nodev_filesystems("nodev\tproc\n\text4\nnodev\toverlay\n"),
            ["proc", "overlay"]
        );
        let twice = format!("{text}37 35 98:0 /x /var/lib rw - ext4 /dev/sdb1 rw\n");
        let block = block_mounts(&twice, "nodev\tproc\n\text4\n");
        assert_eq!(
            block.len(),
            1,
            "proc is nodev, the second mount of sdb1 is the same disk"
        );
        assert_eq!(block[0].mount_point, "/mnt/my disk");
    }

    #[test]
    fn modules_cmdline_and_os_release() {
        let m = modules(
            "nvidia 100 0 - Live 0x0 (POE)\next4 200 1 - Live 0x0\nzfs 1 0 - Live 0x0 (O)\n",
        );
        assert!(m[0].proprietary && m[0].out_of_tree);
        assert!(!m[1].proprietary && !m[1].out_of_tree);
        assert!(m[2].out_of_tree);
        assert_eq!(
            cmdline("BOOT_IMAGE=/vmlinuz ro csm.enabled=1 quiet\n"),
            [
                ("BOOT_IMAGE", "/vmlinuz"),
                ("ro", ""),
                ("csm.enabled", "1"),
                ("quiet", "")
            ]
        );
        let cos = os_release("ID=cos\nVERSION=73\nBUILD_ID=11647.217.0\n");
        assert_eq!(os_version(&cos).unwrap(), "cos 73-11647.217.0");
        let ubuntu = os_release("ID=ubuntu\nVERSION=\"22.04.3 LTS (Jammy Jellyfish)\"\n");
        assert_eq!(
            os_version(&ubuntu).unwrap(),
            "ubuntu 22.04.3 LTS (Jammy Jellyfish)"
        );
        // Outside NPD's list, where NPD stops: named all the same.
        let talos = os_release("ID=talos\nVERSION_ID=v1.8.0\n");
        assert_eq!(os_version(&talos).unwrap(), "talos v1.8.0");
        assert_eq!(
            loadavg("0.50 1.25 2.00 3/400 1234\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(uptime("12345.67 100.00\n"), Some(12345.67));
    }
}
