//! The one reader of the host's `/proc` and `/sys` figures: the `resources` input and the system
//! stats monitor both read through [`ProcFiles`] and [`statvfs`], and the stats monitor's whole
//! reading is [`read`]. I/O: small file reads and `statvfs`, run by the callers on tokio's
//! blocking pool (a hung network filesystem stalls only its reader).
//!
//! What cannot be read is collected in `missing` (path -> why) for the caller to say once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::parse::host;

/// Files under one `/proc`, each failure noted in `missing`.
pub(crate) struct ProcFiles<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) missing: &'a mut BTreeMap<String, String>,
}

impl ProcFiles<'_> {
    /// `dir/rel`'s text, or `None` with why noted.
    pub(crate) fn text(&mut self, rel: &str) -> Option<String> {
        self.file(&self.dir.join(rel))
    }

    /// Any file's text, noted in the same way.
    pub(crate) fn file(&mut self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path)
            .map_err(|e| {
                self.missing
                    .insert(path.display().to_string(), e.to_string());
            })
            .ok()
    }
}

/// A filesystem's size as `statvfs` gives it, in bytes and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FsSize {
    /// All blocks.
    pub total: u64,
    /// Free blocks, the root-reserved ones included.
    pub free: u64,
    /// Free blocks an unprivileged user may take (what the kubelet and `df` call available).
    pub available: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

pub(crate) fn statvfs(path: &Path) -> std::io::Result<FsSize> {
    let s = rustix::fs::statvfs(path)?;
    let block = s.f_frsize;
    Ok(FsSize {
        total: s.f_blocks.saturating_mul(block),
        free: s.f_bfree.saturating_mul(block),
        available: s.f_bavail.saturating_mul(block),
        inodes: s.f_files,
        inodes_free: s.f_ffree,
    })
}

/// Which of the host's files one collection needs (a section a file does not ask for is not read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub cpu: bool,
    pub disk: bool,
    pub host: bool,
    pub memory: bool,
    pub os_feature: bool,
    pub net: bool,
}

/// A mounted block filesystem and its size.
#[derive(Debug, Clone, PartialEq)]
pub struct Filesystem {
    pub mount: host::Mount,
    pub size: FsSize,
}

/// The text of every file one collection read (`None`: not needed, or not readable), and what
/// listing `/sys/block` and `statvfs` found.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// When it was read, in seconds on a monotonic clock.
    pub at: f64,
    pub stat: Option<String>,
    pub loadavg: Option<String>,
    pub meminfo: Option<String>,
    pub diskstats: Option<String>,
    pub net_dev: Option<String>,
    pub uptime: Option<String>,
    pub kernel_release: Option<String>,
    pub os_release: Option<String>,
    pub cmdline: Option<String>,
    pub modules: Option<String>,
    pub known_modules: Option<String>,
    /// Whole disks (`/sys/block`, what `lsblk -d` lists): not empty, not RAM disks.
    pub whole_disks: Vec<String>,
    /// Mounted block-device filesystems, one per device.
    pub filesystems: Vec<Filesystem>,
}

/// Where the host's files are.
#[derive(Debug, Clone)]
pub struct Places {
    pub proc_dir: PathBuf,
    pub sys_dir: PathBuf,
    pub known_modules: PathBuf,
}

/// One collection's reading of what `needs` asks for.
pub fn read(
    needs: Needs,
    places: &Places,
    start: std::time::Instant,
    missing: &mut BTreeMap<String, String>,
) -> Reading {
    let mut f = ProcFiles {
        dir: &places.proc_dir,
        missing,
    };
    let mut r = Reading {
        at: start.elapsed().as_secs_f64(),
        ..Reading::default()
    };
    if needs.cpu {
        r.stat = f.text("stat");
        r.loadavg = f.text("loadavg");
    }
    if needs.memory {
        r.meminfo = f.text("meminfo");
    }
    if needs.net {
        r.net_dev = f.text("net/dev");
    }
    if needs.host {
        r.uptime = f.text("uptime");
        r.kernel_release = f.text("sys/kernel/osrelease");
        // The host's own release through PID 1's root when the pod shares the host's PIDs, else
        // the file the detector sees.
        r.os_release = std::fs::read_to_string(places.proc_dir.join("1/root/etc/os-release"))
            .ok()
            .or_else(|| f.file(Path::new("/etc/os-release")));
    }
    if needs.os_feature {
        r.cmdline = f.text("cmdline");
        r.modules = f.text("modules");
        r.known_modules = f.file(&places.known_modules);
    }
    if needs.disk {
        r.diskstats = f.text("diskstats");
        r.whole_disks = whole_disks(&places.sys_dir.join("block"), f.missing);
        let mounts = f.text("self/mountinfo").unwrap_or_default();
        let types = f.text("filesystems").unwrap_or_default();
        for mount in host::block_mounts(&mounts, &types) {
            match statvfs(Path::new(&mount.mount_point)) {
                Ok(size) => r.filesystems.push(Filesystem { mount, size }),
                Err(e) => {
                    f.missing.insert(mount.mount_point.clone(), e.to_string());
                }
            }
        }
    }
    r
}

/// `/sys/block`'s devices that have a size, RAM disks left out, as `lsblk -d` lists them.
fn whole_disks(dir: &Path, missing: &mut BTreeMap<String, String>) -> Vec<String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            missing.insert(dir.display().to_string(), e.to_string());
            return Vec::new();
        }
    };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("ram"))
        .filter(|name| {
            std::fs::read_to_string(dir.join(name).join("size"))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .is_some_and(|sectors| sectors > 0)
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's own files, read as the daemon reads them.
    #[test]
    fn a_reading_of_this_machine_has_what_it_was_asked_for() {
        let places = Places {
            proc_dir: "/proc".into(),
            sys_dir: "/sys".into(),
            known_modules: "/nonexistent/known-modules.json".into(),
        };
        let all = Needs {
            cpu: true,
            disk: true,
            host: true,
            memory: true,
            os_feature: true,
            net: true,
        };
        let mut missing = BTreeMap::new();
        let r = read(all, &places, std::time::Instant::now(), &mut missing);
        assert!(r.stat.as_deref().is_some_and(|s| s.starts_with("cpu ")));
        assert!(r.meminfo.is_some() && r.net_dev.is_some() && r.uptime.is_some());
        assert!(r.diskstats.is_some() && r.kernel_release.is_some());
        assert!(
            missing.contains_key("/nonexistent/known-modules.json"),
            "{missing:?}"
        );
        let mut missing = BTreeMap::new();
        let only_net = Needs {
            net: true,
            ..Needs::default()
        };
        let r = read(only_net, &places, std::time::Instant::now(), &mut missing);
        assert!(r.net_dev.is_some());
        assert!(r.stat.is_none() && r.meminfo.is_none() && r.filesystems.is_empty());
    }
}
