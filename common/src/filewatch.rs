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
            _watcher: watcher,
        })
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
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "x: 1").unwrap();
        let mut w =
            ContentWatch::new(&[dir.path().to_path_buf()], Duration::from_millis(50)).unwrap();
        for _ in 0..5 {
            let _ = std::fs::read_to_string(&file).unwrap();
        }
        // Rewriting the same bytes is an inotify event but no change.
        std::fs::write(&file, "x: 1").unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(500), w.changed()).await;
        assert!(quiet.is_err(), "woke without a content change");
        std::fs::write(&file, "x: 2").unwrap();
        let woke = tokio::time::timeout(Duration::from_secs(5), w.changed()).await;
        assert_eq!(woke, Ok(Some(())));
        // and it does not wake again for its own reads after the change
        let again = tokio::time::timeout(Duration::from_millis(500), w.changed()).await;
        assert!(again.is_err());
    }
}
