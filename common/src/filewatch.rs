//! Watching configuration files for *content* changes: the rules directory of the detector and the
//! guard's certificate.
//!
//! inotify reports far more than changes: reading a file (open, access, close-nowrite) is an event
//! too, including the reads a reload itself makes. Reloading on every event made the detector reload
//! three times a second forever after one `cat` of a rule file (and PATCH its node every second). So
//! access events are ignored, bursts are debounced, and a change is reported only when a fingerprint
//! of the watched files' names and bytes differs from the last one reported.
//!
//! The watched paths are directories watched non-recursively (a ConfigMap volume swaps its `..data`
//! symlink, which a watch on the file would not survive) or single files (their parent is watched).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// A watch that wakes only when the content of its paths changed.
pub struct ContentWatch {
    paths: Vec<PathBuf>,
    rx: mpsc::Receiver<()>,
    last: u64,
    debounce: Duration,
    /// Told each time the files were looked at after an event (changed or not).
    on_check: Option<Box<dyn Fn() + Send + Sync>>,
    _watcher: notify::RecommendedWatcher,
}

/// Errors starting a watch.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {path}: {source}")]
pub struct WatchError {
    path: String,
    #[source]
    source: notify::Error,
}

impl ContentWatch {
    /// Watch `paths` (directories or files); the current content is the baseline.
    pub fn new(paths: &[PathBuf], debounce: Duration) -> Result<ContentWatch, WatchError> {
        let (tx, rx) = mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
                // Reads (ours included) are not changes.
                Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => {}
                _ => {
                    let _ = tx.try_send(());
                }
            })
            .map_err(|source| WatchError {
                path: String::new(),
                source,
            })?;
        for p in paths {
            let dir = if p.is_dir() {
                p.clone()
            } else {
                p.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| ".".into())
            };
            watcher
                .watch(&dir, RecursiveMode::NonRecursive)
                .map_err(|source| WatchError {
                    path: dir.display().to_string(),
                    source,
                })?;
        }
        Ok(ContentWatch {
            last: fingerprint(paths),
            paths: paths.to_vec(),
            rx,
            debounce,
            on_check: None,
            _watcher: watcher,
        })
    }

    /// Call `f` each time the files are looked at after an event, whether they changed or not (a
    /// metric of it shows an operator that a touch was noticed and judged; tests wait on it).
    pub fn on_check(mut self, f: impl Fn() + Send + Sync + 'static) -> ContentWatch {
        self.on_check = Some(Box::new(f));
        self
    }

    /// Wait until the content changed (after a quiet `debounce`); `None` when the watch ended.
    pub async fn changed(&mut self) -> Option<()> {
        loop {
            self.rx.recv().await?;
            // Let a burst (an editor's save, a symlink swap) settle, then drain what it queued.
            loop {
                tokio::time::sleep(self.debounce).await;
                if self.rx.try_recv().is_err() {
                    break;
                }
            }
            let now = fingerprint(&self.paths);
            if let Some(f) = &self.on_check {
                f();
            }
            if now != self.last {
                self.last = now;
                return Some(());
            }
        }
    }
}

/// A hash of the names and bytes of the files under `paths`: for a directory, its entries not
/// starting with `.` (a ConfigMap's `..data` links are followed through the visible names), sorted;
/// for a file, its bytes. Missing or unreadable files hash as such, so their return is a change.
pub fn fingerprint(paths: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    for p in paths {
        p.hash(&mut h);
        if p.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(p)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|e| {
                            !e.file_name()
                                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                        })
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            for n in names {
                n.hash(&mut h);
                hash_file(&n, &mut h);
            }
        } else {
            hash_file(p, &mut h);
        }
    }
    h.finish()
}

fn hash_file(path: &Path, h: &mut DefaultHasher) {
    match std::fs::read(path) {
        Ok(bytes) => {
            0u8.hash(h);
            bytes.hash(h);
        }
        Err(e) => {
            1u8.hash(h);
            e.kind().hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_changes_with_content_and_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let paths = vec![dir.path().to_path_buf()];
        std::fs::write(dir.path().join("a.yaml"), "x: 1").unwrap();
        let first = fingerprint(&paths);
        let _ = std::fs::read(dir.path().join("a.yaml")).unwrap();
        assert_eq!(fingerprint(&paths), first, "a read is no change");
        std::fs::write(dir.path().join("..hidden"), "whatever").unwrap();
        assert_eq!(fingerprint(&paths), first, "dot files are not read");
        std::fs::write(dir.path().join("a.yaml"), "x: 2").unwrap();
        let second = fingerprint(&paths);
        assert_ne!(second, first);
        std::fs::rename(dir.path().join("a.yaml"), dir.path().join("b.yaml")).unwrap();
        assert_ne!(fingerprint(&paths), second, "a rename is a change");
    }

    #[tokio::test]
    async fn reads_do_not_wake_the_watch_and_edits_do() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "x: 1").unwrap();
        let checks = Arc::new(AtomicU64::new(0));
        let counted = checks.clone();
        let mut w = ContentWatch::new(&[dir.path().to_path_buf()], Duration::from_millis(50))
            .unwrap()
            .on_check(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            });
        let (tx, mut woke) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while w.changed().await.is_some() {
                let _ = tx.send(());
            }
        });
        let checked = |n: u64| {
            let checks = checks.clone();
            async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                while checks.load(Ordering::SeqCst) < n {
                    assert!(tokio::time::Instant::now() < deadline, "no check {n}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        for _ in 0..5 {
            let _ = std::fs::read_to_string(&file).unwrap();
        }
        // Rewriting the same bytes is an inotify event but no change: looked at, no wake (the reads
        // before it were no event at all, or they would have been looked at first).
        std::fs::write(&file, "x: 1").unwrap();
        checked(1).await;
        assert!(woke.try_recv().is_err(), "woke without a content change");
        std::fs::write(&file, "x: 2").unwrap();
        tokio::time::timeout(Duration::from_secs(30), woke.recv())
            .await
            .expect("an edit wakes it");
        // It does not wake again after the change (its own reads are no event): the next event it
        // looks at (the same bytes again) finds the same content.
        let after_edit = checks.load(Ordering::SeqCst);
        std::fs::write(&file, "x: 2").unwrap();
        checked(after_edit + 1).await;
        assert!(woke.try_recv().is_err(), "woke again without a change");
    }
}
