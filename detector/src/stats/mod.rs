//! NPD's system stats monitor: `--config.system-stats-monitor` files read as they are
//! ([`settings`]), the host read every `invokeInterval` through the one host reader
//! (`source::host`), collected ([`collect`], pure) into NPD's metrics ([`catalogue`]), and shown on
//! `/metrics` under NPD's names and labels ([`Exposition`]). Shell: the collection loop and the
//! exposition; the decisions are in the pure modules.
//!
//! Counts since boot are exposed with `# TYPE ... unknown` and no `_total` suffix, as the
//! detector's `problem_counter` is: NPD's names unchanged, and an OpenMetrics scrape accepts them.

pub mod catalogue;
pub mod collect;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector as PromCollector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use tokio::sync::watch;

use crate::source::host::{self, Needs, Places};
use catalogue::{Component, Kind};
use collect::{Collector, Family};
pub use settings::{StatsError, StatsSettings, load};

/// The last collection of each file, as `/metrics` shows it.
#[derive(Debug, Clone, Default)]
pub struct Exposition(Arc<RwLock<Vec<Vec<Family>>>>);

impl Exposition {
    /// A slot for each of `files` files, empty until its first collection.
    pub fn new(files: usize) -> Exposition {
        Exposition(Arc::new(RwLock::new(vec![Vec::new(); files])))
    }

    fn set(&self, slot: usize, families: Vec<Family>) {
        let mut all = self.0.write().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = all.get_mut(slot) {
            *s = families;
        }
    }

    /// The exposition as Prometheus text, for `detector stats` and tests.
    pub fn text(&self) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &registry);
        out
    }
}

impl PromCollector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let all = self.0.read().unwrap_or_else(|p| p.into_inner());
        for f in all.iter().flatten() {
            let kind = match f.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Unknown,
            };
            let mut metric = encoder.encode_descriptor(&f.name, f.id.help(), None, kind)?;
            for s in &f.series {
                let labels: Vec<(&str, &str)> = (f.id.labels().iter().copied())
                    .zip(s.labels.iter().map(String::as_str))
                    .collect();
                metric.encode_family(&labels)?.encode_gauge(&s.value)?;
            }
        }
        Ok(())
    }
}

/// What a file's collections read.
fn needs(s: &StatsSettings) -> Needs {
    Needs {
        cpu: s.wants(Component::Cpu),
        disk: s.wants(Component::Disk),
        host: s.wants(Component::Host),
        memory: s.wants(Component::Memory),
        os_feature: s.wants(Component::OsFeature),
        net: s.wants(Component::Net),
    }
}

fn places(s: &StatsSettings) -> Places {
    Places {
        sys_dir: s
            .proc_dir
            .parent()
            .unwrap_or(std::path::Path::new("/"))
            .join("sys"),
        proc_dir: s.proc_dir.clone(),
        known_modules: s.known_modules.clone(),
    }
}

/// `count` collections of every file, `every` apart, and the exposition of the last: what
/// `detector stats` prints. What cannot be read is returned, path -> why.
pub fn collect_now(
    files: &[StatsSettings],
    count: u32,
    every: Duration,
) -> (Exposition, BTreeMap<String, String>) {
    let exposition = Exposition::new(files.len());
    let mut collectors = vec![Collector::default(); files.len()];
    let mut missing = BTreeMap::new();
    let start = Instant::now();
    for n in 0..count.max(1) {
        if n > 0 {
            std::thread::sleep(every);
        }
        for (slot, s) in files.iter().enumerate() {
            let reading = host::read(needs(s), &places(s), start, &mut missing);
            exposition.set(slot, collectors[slot].collect(s, &reading));
        }
    }
    (exposition, missing)
}

/// Collect `settings` into `slot` every `invokeInterval` until `stop` turns true. Each reading
/// runs on the blocking pool; what cannot be read is said once.
pub async fn run(
    settings: StatsSettings,
    slot: usize,
    exposition: Exposition,
    mut stop: watch::Receiver<bool>,
) {
    for note in &settings.notes {
        tracing::warn!(file = %settings.file.display(), %note, "system stats monitor");
    }
    tracing::info!(file = %settings.file.display(), metrics = settings.shown.len(),
        every = ?settings.interval, "system stats monitor collecting");
    let settings = Arc::new(settings);
    let mut collector = Collector::default();
    let mut said = BTreeSet::new();
    let start = Instant::now();
    loop {
        let s = settings.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut missing = BTreeMap::new();
            (
                host::read(needs(&s), &places(&s), start, &mut missing),
                missing,
            )
        });
        let Ok((reading, missing)) = read.await else {
            return;
        };
        for (what, why) in missing {
            if said.insert(what.clone()) {
                tracing::warn!(file = %settings.file.display(), %what, %why,
                    "system stats monitor: cannot read; its metrics are left out");
            }
        }
        exposition.set(slot, collector.collect(&settings, &reading));
        tokio::select! {
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
            _ = tokio::time::sleep(settings.interval) => {}
        }
    }
}
