//! One collection of NPD's system stats: a host [`Reading`] and a file's settings in, the metric
//! families its Prometheus exporter would show out. Pure; [`Collector`] keeps the one thing a
//! collection needs from the last (each disk's weighted I/O time, for the average queue length).
//!
//! Values are NPD's but for three of its bugs, not carried over: `system/cpu_stat`,
//! `system/processes_total` and `system/interrupts_total` are the kernel's counts since boot (NPD
//! adds the whole count again at every collection into a sum, so its values grow without the
//! host doing anything); `disk.includeAllAttachedBlk` counts the mounted partitions as it says
//! (NPD compares `/dev/sda1` with `sda1` and finds none); a distribution outside NPD's list of
//! twelve is named, where NPD stops at start.

use std::collections::BTreeMap;

use super::catalogue::{Kind, MetricId};
use super::settings::StatsSettings;
use crate::parse::host;
use crate::source::host::Reading;

/// The kernel's `USER_HZ`: `/proc/stat` counts in 1/100 s on every Linux architecture.
const USER_HZ: f64 = 100.0;

/// One metric as exposed.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub id: MetricId,
    /// The name Prometheus sees.
    pub name: String,
    pub kind: Kind,
    pub series: Vec<Series>,
}

/// One series: its label values, in the order of `id.labels()`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Vec<String>,
    pub value: f64,
}

/// What one collection remembers for the next.
#[derive(Debug, Clone, Default)]
pub struct Collector {
    last: Option<(f64, BTreeMap<String, u64>)>,
}

/// The families of one collection, gathered in the catalogue's order.
struct Out<'a> {
    settings: &'a StatsSettings,
    families: BTreeMap<MetricId, Vec<Series>>,
}

impl Out<'_> {
    fn add<const N: usize>(&mut self, id: MetricId, labels: [&str; N], value: f64) {
        debug_assert_eq!(N, id.labels().len(), "{id:?}");
        if self.settings.shows(id).is_some() {
            self.families.entry(id).or_default().push(Series {
                labels: labels.iter().map(|l| l.to_string()).collect(),
                value,
            });
        }
    }
}

impl Collector {
    pub fn collect(&mut self, settings: &StatsSettings, r: &Reading) -> Vec<Family> {
        let mut out = Out {
            settings,
            families: BTreeMap::new(),
        };
        cpu(&mut out, r);
        memory(&mut out, r);
        host_uptime(&mut out, r);
        os_features(&mut out, r);
        net(&mut out, settings, r);
        self.disk(&mut out, settings, r);
        out.families
            .into_iter()
            .map(|(id, series)| Family {
                id,
                name: settings.shows(id).unwrap_or(id.id()).to_string(),
                kind: id.kind(),
                series,
            })
            .collect()
    }

    fn disk(&mut self, out: &mut Out, settings: &StatsSettings, r: &Reading) {
        let Some(text) = &r.diskstats else { return };
        let stats = host::diskstats(text);
        let mut wanted: Vec<&str> = Vec::new();
        if settings.root_disks {
            wanted.extend(r.whole_disks.iter().map(String::as_str));
        }
        if settings.attached_disks {
            wanted.extend(r.filesystems.iter().map(|f| device_name(&f.mount.device)));
        }
        let every = !settings.root_disks && !settings.attached_disks;
        let mut weighted = BTreeMap::new();
        for (name, d) in stats.iter().filter(|(n, _)| every || wanted.contains(n)) {
            use MetricId::*;
            out.add(DiskIoTime, [name], d.io_ms as f64);
            out.add(DiskWeightedIo, [name], d.weighted_io_ms as f64);
            if let Some((at, last)) = &self.last
                && let Some(before) = last.get(*name)
            {
                let ms = (r.at - at) * 1000.0;
                let queued = d.weighted_io_ms.saturating_sub(*before) as f64;
                let avg = if queued > 0.0 && ms > 0.0 {
                    queued / ms
                } else {
                    0.0
                };
                out.add(DiskAvgQueueLen, [name], avg);
            }
            weighted.insert(name.to_string(), d.weighted_io_ms);
            for (direction, ops, merged, bytes, ms) in [
                ("read", d.reads, d.merged_reads, d.read_bytes, d.read_ms),
                (
                    "write",
                    d.writes,
                    d.merged_writes,
                    d.written_bytes,
                    d.write_ms,
                ),
            ] {
                out.add(DiskOperationCount, [name, direction], ops as f64);
                out.add(DiskMergedOperationCount, [name, direction], merged as f64);
                out.add(DiskOperationBytesCount, [name, direction], bytes as f64);
                out.add(DiskOperationTime, [name, direction], ms as f64);
            }
        }
        self.last = Some((r.at, weighted));
        for fs in &r.filesystems {
            let name = device_name(&fs.mount.device);
            let used = fs.size.total.saturating_sub(fs.size.free);
            let free = fs.size.available;
            let labels = |state| {
                [
                    name,
                    fs.mount.fs_type.as_str(),
                    fs.mount.options.as_str(),
                    state,
                ]
            };
            out.add(MetricId::DiskBytesUsed, labels("free"), free as f64);
            out.add(MetricId::DiskBytesUsed, labels("used"), used as f64);
            if used + free > 0 {
                let percent = used as f64 / (used + free) as f64 * 100.0;
                out.add(MetricId::DiskPercentUsed, [name], percent);
            }
        }
    }
}

fn device_name(device: &str) -> &str {
    device.strip_prefix("/dev/").unwrap_or(device)
}

fn cpu(out: &mut Out, r: &Reading) {
    use MetricId::*;
    if let Some([one, five, fifteen]) = r.loadavg.as_deref().and_then(host::loadavg) {
        out.add(CpuRunnableTaskCount, [], one);
        out.add(CpuLoad1m, [], one);
        out.add(CpuLoad5m, [], five);
        out.add(CpuLoad15m, [], fifteen);
    }
    let Some(stat) = r.stat.as_deref().map(host::proc_stat) else {
        return;
    };
    const STATES: [&str; 10] = [
        "user",
        "nice",
        "system",
        "idle",
        "iowait",
        "irq",
        "softirq",
        "steal",
        "guest",
        "guest_nice",
    ];
    if let Some(total) = stat.total {
        for (state, ticks) in STATES.iter().zip(total.states()) {
            out.add(CpuUsageTime, [state], ticks as f64);
        }
    }
    for (name, value) in [
        (SystemProcessesTotal, stat.processes),
        (SystemProcsRunning, stat.procs_running),
        (SystemProcsBlocked, stat.procs_blocked),
        (SystemInterruptsTotal, stat.interrupts),
    ] {
        if let Some(v) = value {
            out.add(name, [], v as f64);
        }
    }
    // NPD's stage names, from the procfs library's fields.
    const STAGES: [&str; 10] = [
        "user",
        "nice",
        "system",
        "idle",
        "iowait",
        "iRQ",
        "softIRQ",
        "steal",
        "guest",
        "guestNice",
    ];
    for (n, ticks) in &stat.cpus {
        let cpu = format!("cpu{n}");
        for (stage, t) in STAGES.iter().zip(ticks.states()) {
            out.add(SystemCpuStat, [&cpu, stage], t as f64 / USER_HZ);
        }
    }
}

fn memory(out: &mut Out, r: &Reading) {
    use MetricId::*;
    let Some(m) = r.meminfo.as_deref().map(host::meminfo) else {
        return;
    };
    let get = |k: &str| m.get(k).copied();
    for (state, key) in [
        ("free", "MemFree"),
        ("buffered", "Buffers"),
        ("cached", "Cached"),
        ("slab", "Slab"),
    ] {
        if let Some(v) = get(key) {
            out.add(MemoryBytesUsed, [state], v as f64);
        }
    }
    if let (Some(total), Some(free), Some(buffers), Some(cached), Some(slab)) = (
        get("MemTotal"),
        get("MemFree"),
        get("Buffers"),
        get("Cached"),
        get("Slab"),
    ) {
        let used = total.saturating_sub(free + buffers + cached + slab);
        out.add(MemoryBytesUsed, ["used"], used as f64);
        if total > 0 {
            out.add(
                MemoryPercentUsed,
                ["used"],
                used as f64 / total as f64 * 100.0,
            );
        }
    }
    for (id, state, key) in [
        (MemoryDirtyUsed, "dirty", "Dirty"),
        (MemoryDirtyUsed, "writeback", "Writeback"),
        (MemoryAnonymousUsed, "active", "Active(anon)"),
        (MemoryAnonymousUsed, "inactive", "Inactive(anon)"),
        (MemoryPageCacheUsed, "active", "Active(file)"),
        (MemoryPageCacheUsed, "inactive", "Inactive(file)"),
    ] {
        if let Some(v) = get(key) {
            out.add(id, [state], v as f64);
        }
    }
    if let Some(v) = get("Unevictable") {
        out.add(MemoryUnevictableUsed, [], v as f64);
    }
}

fn host_uptime(out: &mut Out, r: &Reading) {
    let Some(up) = r.uptime.as_deref().and_then(host::uptime) else {
        return;
    };
    let kernel = r.kernel_release.as_deref().unwrap_or("unknown").trim();
    let release = r
        .os_release
        .as_deref()
        .map(host::os_release)
        .unwrap_or_default();
    let os = host::os_version(&release).unwrap_or_else(|| "unknown".into());
    out.add(MetricId::HostUptime, [kernel, &os], up.trunc());
}

fn os_features(out: &mut Out, r: &Reading) {
    let id = MetricId::SystemOsFeature;
    if let Some(cmdline) = &r.cmdline {
        let args = host::cmdline(cmdline);
        let flag = |key: &str| {
            args.iter()
                .rev()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        out.add(id, ["KTD", ""], flag("csm.enabled"));
        out.add(
            id,
            ["UnifiedCgroupHierarchy", ""],
            flag("systemd.unified_cgroup_hierarchy"),
        );
        let integrity = flag("module.sig_enforce") == 1.0 && flag("loadpin.enabled") == 1.0;
        out.add(
            id,
            ["KernelModuleIntegrity", ""],
            f64::from(u8::from(integrity)),
        );
    }
    let Some(modules) = &r.modules else { return };
    let known = known_modules(r.known_modules.as_deref());
    let modules = host::modules(modules);
    let gpu = modules.iter().any(|m| m.name.contains("nvidia"));
    let unknown: Vec<&str> = modules
        .iter()
        .filter(|m| !m.name.contains("nvidia") && (m.out_of_tree || m.proprietary))
        .filter(|m| !known.iter().any(|k| k == m.name))
        .map(|m| m.name)
        .collect();
    if unknown.is_empty() {
        out.add(id, ["UnknownModules", ""], 0.0);
    } else {
        out.add(id, ["UnknownModules", &unknown.join(",")], 1.0);
    }
    out.add(id, ["GPUSupport", ""], f64::from(u8::from(gpu)));
}

/// The `moduleName`s of NPD's known-modules file; none when it is absent or not such a list (NPD
/// then takes every out-of-tree or proprietary module as unknown too).
fn known_modules(text: Option<&str>) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Known {
        #[serde(rename = "moduleName")]
        module_name: String,
    }
    text.and_then(|t| serde_json::from_str::<Vec<Known>>(t).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|k| k.module_name)
        .collect()
}

fn net(out: &mut Out, settings: &StatsSettings, r: &Reading) {
    let Some(text) = &r.net_dev else { return };
    for (iface, counts) in host::net_dev(text) {
        if settings
            .net_exclude
            .as_ref()
            .is_some_and(|x| x.is_match(iface))
        {
            continue;
        }
        for id in MetricId::ALL {
            if let Some(column) = id.net_column() {
                out.add(*id, [iface], counts[column] as f64);
            }
        }
    }
}

#[cfg(test)]
#[path = "collect_tests.rs"]
mod tests;
