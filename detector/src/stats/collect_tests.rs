//! Tests of the collection (`super`): NPD's shipped files over a host written by hand, value by
//! value. Pure.

use std::path::Path;

use super::*;
use crate::source::host::{Filesystem, FsSize};
use crate::stats::settings;

const NPD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/npd");

fn npd(name: &str) -> StatsSettings {
    let path = Path::new(NPD).join(name);
    settings::parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A host as its files say it, at `at` seconds, with `weighted` ms of weighted I/O on sda.
fn reading(at: f64, weighted: u64, forks: u64) -> Reading {
    Reading {
        at,
        stat: Some(format!(
            "cpu  100 2 30 4000 5 6 7 8 0 0\ncpu0 50 1 15 2000 2 3 3 4 0 0\ncpu1 50 1 15 2000 3 3 4 4 0 0\n\
             intr 9000 1 2\nprocesses {forks}\nprocs_running 2\nprocs_blocked 1\n"
        )),
        loadavg: Some("0.50 0.40 0.30 2/300 999\n".into()),
        meminfo: Some(
            "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\nSlab: 100 kB\n\
             Dirty: 3 kB\nWriteback: 1 kB\nActive(anon): 200 kB\nInactive(anon): 20 kB\n\
             Active(file): 120 kB\nInactive(file): 130 kB\nUnevictable: 4 kB\n"
                .into(),
        ),
        diskstats: Some(format!(
            "8 0 sda 10 1 200 30 20 2 400 60 0 70 {weighted}\n\
             8 1 sda1 5 0 100 10 10 1 200 20 0 30 40\n\
             7 0 loop0 1 0 2 0 0 0 0 0 0 0 0\n"
        )),
        net_dev: Some(
            "Inter-| Receive | Transmit\n face |bytes ...\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n  \
             eth0: 100 2 3 4 5 6 7 8 900 10 11 12 13 14 15 16\ncali42: 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n"
                .into(),
        ),
        uptime: Some("3600.75 100.0\n".into()),
        kernel_release: Some("6.1.0-17-amd64\n".into()),
        os_release: Some("ID=debian\nVERSION=\"12 (bookworm)\"\n".into()),
        cmdline: Some("ro csm.enabled=1 module.sig_enforce=1 loadpin.enabled=1\n".into()),
        modules: Some("nvidia 1 0 - Live 0x0 (POE)\nzfs 1 0 - Live 0x0 (PO)\nnf_nat 1 0 - Live 0x0 (O)\next4 1 1 - Live 0x0\n".into()),
        known_modules: Some(r#"[{"moduleName": "nf_nat"}]"#.into()),
        whole_disks: vec!["sda".into()],
        filesystems: vec![Filesystem {
            mount: host::Mount {
                device: "/dev/sda1".into(),
                mount_point: "/".into(),
                fs_type: "ext4".into(),
                options: "rw,relatime".into(),
            },
            size: FsSize {
                total: 1000,
                free: 300,
                available: 200,
                inodes: 10,
                inodes_free: 5,
            },
        }],
    }
}

fn value(families: &[Family], name: &str, labels: &[&str]) -> Option<f64> {
    let f = families.iter().find(|f| f.name == name)?;
    f.series
        .iter()
        .find(|s| {
            s.labels
                .iter()
                .map(String::as_str)
                .eq(labels.iter().copied())
        })
        .map(|s| s.value)
}

#[test]
fn npds_file_shows_every_metric_it_asks_for_under_npds_names() {
    let s = npd("system-stats-monitor.json");
    let mut c = Collector::default();
    c.collect(&s, &reading(0.0, 100, 4000));
    let families = c.collect(&s, &reading(60.0, 100, 4000));
    let names: Vec<&str> = families.iter().map(|f| f.name.as_str()).collect();
    let mut asked: Vec<&str> = s.shown.values().map(String::as_str).collect();
    asked.sort();
    let mut got = names.clone();
    got.sort();
    assert_eq!(got, asked, "every metric the file shows, no other");
    for f in &families {
        for series in &f.series {
            assert_eq!(series.labels.len(), f.id.labels().len(), "{}", f.name);
        }
    }
    assert_eq!(value(&families, "cpu_load_5m", &[]), Some(0.4));
    assert_eq!(value(&families, "cpu_runnable_task_count", &[]), Some(0.5));
    assert_eq!(value(&families, "cpu_usage_time", &["user"]), Some(100.0));
    assert_eq!(
        value(&families, "system_cpu_stat", &["cpu1", "iowait"]),
        Some(0.03)
    );
    assert_eq!(
        value(&families, "system_cpu_stat", &["cpu0", "softIRQ"]),
        Some(0.03)
    );
    assert_eq!(value(&families, "system_procs_blocked", &[]), Some(1.0));
    assert_eq!(
        value(&families, "system_interrupts_total", &[]),
        Some(9000.0)
    );
    assert_eq!(
        value(
            &families,
            "host_uptime",
            &["6.1.0-17-amd64", "debian 12 (bookworm)"]
        ),
        Some(3600.0)
    );
    // used = total - free - buffers - cached - slab = 500 kB of 1000.
    assert_eq!(
        value(&families, "memory_bytes_used", &["used"]),
        Some(500.0 * 1024.0)
    );
    assert_eq!(
        value(&families, "memory_percent_used", &["used"]),
        Some(50.0)
    );
    assert_eq!(
        value(&families, "memory_page_cache_used", &["inactive"]),
        Some(130.0 * 1024.0)
    );
    assert_eq!(
        value(&families, "memory_unevictable_used", &[]),
        Some(4.0 * 1024.0)
    );
    assert_eq!(
        value(&families, "disk_operation_bytes_count", &["sda", "write"]),
        Some(400.0 * 512.0)
    );
    assert_eq!(
        value(
            &families,
            "disk_bytes_used",
            &["sda1", "ext4", "rw,relatime", "used"]
        ),
        Some(700.0)
    );
    assert_eq!(
        value(
            &families,
            "disk_bytes_used",
            &["sda1", "ext4", "rw,relatime", "free"]
        ),
        Some(200.0)
    );
    let percent = value(&families, "disk_percent_used", &["sda1"]).unwrap();
    assert!((percent - 700.0 / 900.0 * 100.0).abs() < 1e-9, "{percent}");
}

#[test]
fn counts_since_boot_stay_the_kernels_counts_from_one_collection_to_the_next() {
    let s = npd("system-stats-monitor.json");
    let mut c = Collector::default();
    let first = c.collect(&s, &reading(0.0, 100, 4000));
    let again = c.collect(&s, &reading(60.0, 100, 4000));
    // NPD adds the whole count into a sum at each collection: 4000, then 8000 with no fork.
    assert_eq!(value(&first, "system_processes_total", &[]), Some(4000.0));
    assert_eq!(value(&again, "system_processes_total", &[]), Some(4000.0));
    assert_eq!(
        value(&again, "system_cpu_stat", &["cpu0", "user"]),
        Some(0.5)
    );
    let later = c.collect(&s, &reading(120.0, 100, 4100));
    assert_eq!(value(&later, "system_processes_total", &[]), Some(4100.0));
}

#[test]
fn the_average_queue_length_is_the_weighted_io_over_the_time_between_collections() {
    let s = npd("system-stats-monitor.json");
    let mut c = Collector::default();
    let first = c.collect(&s, &reading(10.0, 1_000, 1));
    assert_eq!(
        value(&first, "disk_avg_queue_len", &["sda"]),
        None,
        "no history yet"
    );
    // 30,000 ms of weighted I/O over 60 s: half a request queued on average.
    let second = c.collect(&s, &reading(70.0, 31_000, 1));
    assert_eq!(value(&second, "disk_avg_queue_len", &["sda"]), Some(0.5));
    let idle = c.collect(&s, &reading(130.0, 31_000, 1));
    assert_eq!(value(&idle, "disk_avg_queue_len", &["sda"]), Some(0.0));
}

#[test]
fn disks_are_the_whole_disks_the_mounted_ones_or_all() {
    let mut s = npd("system-stats-monitor.json");
    let disks = |s: &StatsSettings| {
        let families = Collector::default().collect(s, &reading(0.0, 1, 1));
        let f = families.iter().find(|f| f.name == "disk_io_time").unwrap();
        f.series
            .iter()
            .map(|x| x.labels[0].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(disks(&s), ["sda", "sda1"]);
    s.attached_disks = false;
    assert_eq!(disks(&s), ["sda"]);
    s.root_disks = false;
    assert_eq!(disks(&s), ["loop0", "sda", "sda1"], "neither: every device");
}

#[test]
fn net_counts_every_interface_but_the_excluded() {
    let s = npd("net-cgroup-system-stats-monitor.json");
    let families = Collector::default().collect(&s, &reading(0.0, 1, 1));
    assert_eq!(families.len(), 16);
    assert!(families.iter().all(|f| f.kind == Kind::Counter));
    assert_eq!(value(&families, "net_rx_bytes", &["eth0"]), Some(100.0));
    assert_eq!(value(&families, "net_rx_multicast", &["eth0"]), Some(8.0));
    assert_eq!(value(&families, "net_tx_bytes", &["eth0"]), Some(900.0));
    assert_eq!(value(&families, "net_tx_compressed", &["eth0"]), Some(16.0));
    assert_eq!(
        value(&families, "net_rx_bytes", &["cali42"]),
        None,
        "^(cali|tunl|veth) is excluded"
    );
    assert_eq!(value(&families, "net_rx_bytes", &["lo"]), Some(1.0));
}

#[test]
fn what_could_not_be_read_is_left_out_not_zero() {
    let s = npd("system-stats-monitor.json");
    let r = Reading {
        meminfo: Some("MemTotal: 1000 kB\n".into()),
        ..Reading::default()
    };
    let families = Collector::default().collect(&s, &r);
    assert!(families.is_empty(), "{families:?}");
}

#[test]
fn os_features_come_from_the_command_line_and_the_modules() {
    let s = npd("system-stats-monitor.json");
    let families = Collector::default().collect(&s, &reading(0.0, 1, 1));
    let feature = |f: &[Family], name: &str, value_label: &str| {
        value(f, "system_os_feature", &[name, value_label])
    };
    assert_eq!(feature(&families, "KTD", ""), Some(1.0));
    assert_eq!(feature(&families, "UnifiedCgroupHierarchy", ""), Some(0.0));
    assert_eq!(feature(&families, "KernelModuleIntegrity", ""), Some(1.0));
    assert_eq!(feature(&families, "GPUSupport", ""), Some(1.0));
    // nvidia is the GPU, nf_nat is known, ext4 is in the tree: zfs alone is unknown.
    assert_eq!(feature(&families, "UnknownModules", "zfs"), Some(1.0));
    let mut none_known = reading(0.0, 1, 1);
    none_known.known_modules = None;
    let families = Collector::default().collect(&s, &none_known);
    assert_eq!(
        feature(&families, "UnknownModules", "zfs,nf_nat"),
        Some(1.0)
    );
}
