//! The `resources` input: every `interval`, one [`Sample`] of the node's pressure stall averages,
//! available memory, filesystems (`statvfs`) and tasks against the kernel's limits. I/O: a handful
//! of small reads of `/proc` and one `statvfs` per filesystem, through the host reader the system
//! stats monitor uses too (`super::host`), on tokio's blocking pool (a hung
//! network filesystem stalls only this input, and /healthz then names it).
//!
//! What the node does not have is left out of the sample, and said once in the log: a kernel
//! without PSI, a filesystem path that does not exist in the detector's mount namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Beater;
use tokio::sync::{mpsc, watch};

use super::event::SourceEvent;
use super::host::{ProcFiles, statvfs};
use crate::config::ResourceSettings;
use crate::parse::resources::{self, PSI_RESOURCES, Sample};

/// One reading, now. `missing` collects what could not be read, with why.
pub fn read(settings: &ResourceSettings, missing: &mut BTreeMap<String, String>) -> Sample {
    let mut values = BTreeMap::new();
    let mut files = ProcFiles {
        dir: settings.proc_dir.as_path(),
        missing,
    };
    for r in PSI_RESOURCES {
        if let Some(t) = files.text(&format!("pressure/{r}"))
            && let Err(e) = resources::pressure(r, &t, &mut values)
        {
            files.missing.insert(format!("pressure/{r}"), e.to_string());
        }
    }
    if let Some(t) = files.text("meminfo") {
        resources::meminfo(&t, &mut values);
    }
    let number = |t: Option<String>| t.and_then(|t| t.trim().parse::<f64>().ok());
    let tasks = files.text("loadavg").and_then(|t| resources::tasks(&t));
    let pid_max = number(files.text("sys/kernel/pid_max"));
    let threads_max = number(files.text("sys/kernel/threads-max"));
    if let Some((available, capacity)) =
        tasks.and_then(|n| resources::pids(n, pid_max, threads_max))
    {
        values.insert("pid.available".into(), available);
        values.insert("pid.capacity".into(), capacity);
    }
    for (name, path) in &settings.filesystems {
        match statvfs(path) {
            Ok(fs) => {
                values.insert(format!("{name}.available"), fs.available as f64);
                values.insert(format!("{name}.capacity"), fs.total as f64);
                if fs.inodes > 0 {
                    values.insert(format!("{name}.inodesFree"), fs.inodes_free as f64);
                    values.insert(format!("{name}.inodes"), fs.inodes as f64);
                }
            }
            Err(e) => {
                files
                    .missing
                    .insert(format!("{name} ({})", path.display()), e.to_string());
            }
        }
    }
    Sample {
        at: Timestamp::now(),
        values,
    }
}

/// Read every `settings.interval` until `stop` turns true or the receiver is gone, beating `beat`
/// after each reading. A task that sleeps between readings (no polling: an idle thread waking
/// every 250 ms cost more than the readings); each reading runs on the blocking pool, so a hung
/// filesystem stalls only this input, and its silence shows in /healthz.
pub(crate) async fn follow(
    monitor: String,
    settings: ResourceSettings,
    tx: mpsc::Sender<SourceEvent>,
    beat: Beater,
    mut stop: watch::Receiver<bool>,
) {
    let mut said = BTreeSet::new();
    let settings = std::sync::Arc::new(settings);
    loop {
        let s = settings.clone();
        let Ok((sample, missing)) = tokio::task::spawn_blocking(move || {
            let mut missing = BTreeMap::new();
            (read(&s, &mut missing), missing)
        })
        .await
        else {
            return;
        };
        for (what, why) in missing {
            if said.insert(what.clone()) {
                tracing::warn!(%monitor, %what, %why, "a resource cannot be read; rules on it never fire");
            }
        }
        beat.beat();
        if tx.send(SourceEvent::Sample(sample)).await.is_err() {
            return;
        }
        if wait(&mut stop, settings.interval, &beat).await {
            return;
        }
    }
}

/// Sleep `d`, beating at least every [`BEAT`] (an interval longer than the health limit is not
/// silence); true when told to stop.
async fn wait(stop: &mut watch::Receiver<bool>, d: Duration, beat: &Beater) -> bool {
    let until = tokio::time::Instant::now() + d;
    loop {
        let step = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(BEAT);
        if step.is_zero() {
            return false;
        }
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return true;
                }
            }
            _ = tokio::time::sleep(step) => beat.beat(),
        }
    }
}

/// The longest a waiting input goes without beating.
const BEAT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's own /proc and root filesystem, read as the daemon reads them.
    #[test]
    fn a_reading_of_this_machine_has_every_signal_it_has() {
        let settings = ResourceSettings {
            filesystems: vec![
                ("root".into(), "/".into()),
                ("gone".into(), "/nonexistent/x".into()),
            ],
            ..ResourceSettings::default()
        };
        let mut missing = BTreeMap::new();
        let s = read(&settings, &mut missing);
        let (avail, cap) = (s.values["root.available"], s.values["root.capacity"]);
        assert!(avail > 0.0 && avail <= cap, "{avail} of {cap}");
        assert!(s.values["pid.available"] < s.values["pid.capacity"]);
        assert!(s.values["memory.available"] > 0.0);
        assert!(missing.contains_key("gone (/nonexistent/x)"), "{missing:?}");
        assert!(!s.values.contains_key("gone.available"));
        if std::path::Path::new("/proc/pressure/io").exists() {
            assert!(
                s.values.contains_key("psi.io.some.avg60"),
                "{:?}",
                s.values.keys()
            );
        }
    }
}
