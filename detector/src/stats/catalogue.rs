//! Every metric of NPD's system stats monitor: its ID (the key of a `metricsConfigs` entry), the
//! component whose section may ask for it, its help text, whether it is a gauge or a count since
//! boot, and its labels, as NPD declares them (`pkg/util/metrics/metric.go` and the collectors of
//! `pkg/systemstatsmonitor`, NPD master 6632ca6). Pure data.

/// A section of a system-stats-monitor file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    Cpu,
    Disk,
    Host,
    Memory,
    OsFeature,
    Net,
}

impl Component {
    pub const ALL: [Component; 6] = [
        Component::Cpu,
        Component::Disk,
        Component::Host,
        Component::Memory,
        Component::OsFeature,
        Component::Net,
    ];

    /// The section's key in the file.
    pub fn key(self) -> &'static str {
        match self {
            Component::Cpu => "cpu",
            Component::Disk => "disk",
            Component::Host => "host",
            Component::Memory => "memory",
            Component::OsFeature => "osFeature",
            Component::Net => "net",
        }
    }
}

/// How a value moves: NPD's `LastValue` views are gauges, its `Sum` views counts since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

macro_rules! catalogue {
    ($($variant:ident => $id:literal, $component:ident, $kind:ident, [$($label:literal),*], $help:literal;)*) => {
        /// One of NPD's system stats metrics.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum MetricId { $($variant),* }

        impl MetricId {
            pub const ALL: &'static [MetricId] = &[$(MetricId::$variant),*];

            /// NPD's ID, as a `metricsConfigs` key names it.
            pub fn id(self) -> &'static str {
                match self { $(MetricId::$variant => $id),* }
            }
            pub fn component(self) -> Component {
                match self { $(MetricId::$variant => Component::$component),* }
            }
            pub fn kind(self) -> Kind {
                match self { $(MetricId::$variant => Kind::$kind),* }
            }
            /// The label names, in NPD's order.
            pub fn labels(self) -> &'static [&'static str] {
                match self { $(MetricId::$variant => &[$($label),*]),* }
            }
            pub fn help(self) -> &'static str {
                match self { $(MetricId::$variant => $help),* }
            }
        }
    };
}

catalogue! {
    CpuRunnableTaskCount => "cpu/runnable_task_count", Cpu, Gauge, [], "The average number of runnable tasks in the run-queue during the last minute";
    CpuUsageTime => "cpu/usage_time", Cpu, Counter, ["state"], "CPU usage, in clock ticks (USER_HZ, 1/100 s on Linux) as NPD reports it";
    CpuLoad1m => "cpu/load_1m", Cpu, Gauge, [], "CPU average load (1m)";
    CpuLoad5m => "cpu/load_5m", Cpu, Gauge, [], "CPU average load (5m)";
    CpuLoad15m => "cpu/load_15m", Cpu, Gauge, [], "CPU average load (15m)";
    SystemProcessesTotal => "system/processes_total", Cpu, Counter, [], "Number of forks since boot.";
    SystemProcsRunning => "system/procs_running", Cpu, Gauge, [], "Number of processes currently running.";
    SystemProcsBlocked => "system/procs_blocked", Cpu, Gauge, [], "Number of processes currently blocked.";
    SystemInterruptsTotal => "system/interrupts_total", Cpu, Counter, [], "Total number of interrupts serviced (cumulative).";
    SystemCpuStat => "system/cpu_stat", Cpu, Counter, ["cpu", "stage"], "Cumulative time each cpu spent in various stages, in seconds.";
    DiskIoTime => "disk/io_time", Disk, Counter, ["device_name"], "The IO time spent on the disk, in ms";
    DiskWeightedIo => "disk/weighted_io", Disk, Counter, ["device_name"], "The weighted IO on the disk, in ms";
    DiskAvgQueueLen => "disk/avg_queue_len", Disk, Gauge, ["device_name"], "The average queue length on the disk";
    DiskOperationCount => "disk/operation_count", Disk, Counter, ["device_name", "direction"], "Disk operations count";
    DiskMergedOperationCount => "disk/merged_operation_count", Disk, Counter, ["device_name", "direction"], "Disk merged operations count";
    DiskOperationBytesCount => "disk/operation_bytes_count", Disk, Counter, ["device_name", "direction"], "Bytes transferred in disk operations";
    DiskOperationTime => "disk/operation_time", Disk, Counter, ["device_name", "direction"], "Time spent in disk operations, in ms";
    DiskBytesUsed => "disk/bytes_used", Disk, Gauge, ["device_name", "fs_type", "mount_option", "state"], "Disk bytes used, in Bytes";
    DiskPercentUsed => "disk/percent_used", Disk, Gauge, ["device_name"], "Disk usage in percentage of total space";
    HostUptime => "host/uptime", Host, Gauge, ["kernel_version", "os_version"], "The uptime of the operating system";
    MemoryBytesUsed => "memory/bytes_used", Memory, Gauge, ["state"], "Memory usage by each memory state, in Bytes. Summing values of all states yields the total memory on the node.";
    MemoryPercentUsed => "memory/percent_used", Memory, Gauge, ["state"], "Memory usage in percentage of total memory.";
    MemoryAnonymousUsed => "memory/anonymous_used", Memory, Gauge, ["state"], "Anonymous memory usage, in Bytes. Summing values of all states yields the total anonymous memory used.";
    MemoryPageCacheUsed => "memory/page_cache_used", Memory, Gauge, ["state"], "Page cache memory usage, in Bytes. Summing values of all states yields the total page cache memory used.";
    MemoryUnevictableUsed => "memory/unevictable_used", Memory, Gauge, [], "Unevictable memory usage, in Bytes";
    MemoryDirtyUsed => "memory/dirty_used", Memory, Gauge, ["state"], "Dirty pages usage, in Bytes. Dirty means the memory is waiting to be written back to disk, and writeback means the memory is actively being written back to disk.";
    SystemOsFeature => "system/os_feature", OsFeature, Gauge, ["os_feature", "value"], "OS Features like GPU support, KTD kernel, third party modules as unknown modules. 1 if the feature is enabled and 0, if disabled.";
    NetRxBytes => "net/rx_bytes", Net, Counter, ["interface_name"], "Cumulative count of bytes received.";
    NetRxPackets => "net/rx_packets", Net, Counter, ["interface_name"], "Cumulative count of packets received.";
    NetRxErrors => "net/rx_errors", Net, Counter, ["interface_name"], "Cumulative count of receive errors encountered.";
    NetRxDropped => "net/rx_dropped", Net, Counter, ["interface_name"], "Cumulative count of packets dropped while receiving.";
    NetRxFifo => "net/rx_fifo", Net, Counter, ["interface_name"], "Cumulative count of FIFO buffer errors.";
    NetRxFrame => "net/rx_frame", Net, Counter, ["interface_name"], "Cumulative count of packet framing errors.";
    NetRxCompressed => "net/rx_compressed", Net, Counter, ["interface_name"], "Cumulative count of compressed packets received by the device driver.";
    NetRxMulticast => "net/rx_multicast", Net, Counter, ["interface_name"], "Cumulative count of multicast frames received by the device driver.";
    NetTxBytes => "net/tx_bytes", Net, Counter, ["interface_name"], "Cumulative count of bytes transmitted.";
    NetTxPackets => "net/tx_packets", Net, Counter, ["interface_name"], "Cumulative count of packets transmitted.";
    NetTxErrors => "net/tx_errors", Net, Counter, ["interface_name"], "Cumulative count of transmit errors encountered.";
    NetTxDropped => "net/tx_dropped", Net, Counter, ["interface_name"], "Cumulative count of packets dropped while transmitting.";
    NetTxFifo => "net/tx_fifo", Net, Counter, ["interface_name"], "Cumulative count of FIFO buffer errors.";
    NetTxCollisions => "net/tx_collisions", Net, Counter, ["interface_name"], "Cumulative count of collisions detected on the interface.";
    NetTxCarrier => "net/tx_carrier", Net, Counter, ["interface_name"], "Cumulative count of carrier losses detected by the device driver.";
    NetTxCompressed => "net/tx_compressed", Net, Counter, ["interface_name"], "Cumulative count of compressed packets transmitted by the device driver.";
}

impl MetricId {
    /// The metric an ID names.
    pub fn parse(id: &str) -> Option<MetricId> {
        MetricId::ALL.iter().copied().find(|m| m.id() == id)
    }

    /// For the `net/` metrics, the column of `/proc/net/dev` (receive 0-7, transmit 8-15).
    pub fn net_column(self) -> Option<usize> {
        let first = MetricId::ALL
            .iter()
            .position(|m| *m == MetricId::NetRxBytes)?;
        let me = MetricId::ALL.iter().position(|m| *m == self)?;
        (self.component() == Component::Net).then(|| me - first)
    }
}

/// The name Prometheus sees for a display name, as NPD's OpenCensus exporter makes it: every
/// character but ASCII letters, digits and `_` becomes `_` (`cpu/load_1m` is `cpu_load_1m`), a
/// leading digit gets `key_` before it, a leading `_` gets `key`, and at most 100 characters.
pub fn prometheus_name(display: &str) -> String {
    let mut s: String = display
        .chars()
        .take(100)
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "key_");
    } else if s.starts_with('_') {
        s.insert_str(0, "key");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_read_back() {
        for m in MetricId::ALL {
            assert_eq!(MetricId::parse(m.id()), Some(*m));
            assert!(m.id().starts_with(match m.component() {
                Component::Cpu if m.id().starts_with("system/") => "system/",
                Component::OsFeature => "system/",
                c => c.key(),
            }));
        }
        assert_eq!(MetricId::ALL.len(), 43);
        assert_eq!(MetricId::NetRxBytes.net_column(), Some(0));
        assert_eq!(MetricId::NetTxCompressed.net_column(), Some(15));
        assert_eq!(MetricId::CpuLoad1m.net_column(), None);
    }

    #[test]
    fn display_names_become_npds_prometheus_names() {
        assert_eq!(prometheus_name("cpu/load_1m"), "cpu_load_1m");
        assert_eq!(prometheus_name("my-host.uptime"), "my_host_uptime");
        assert_eq!(prometheus_name("1m_load"), "key_1m_load");
        assert_eq!(prometheus_name("/x"), "key_x");
        assert_eq!(prometheus_name(&"a".repeat(150)).len(), 100);
    }
}
