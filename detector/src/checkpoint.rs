//! Where each monitor's input stopped, persisted so that a restart neither re-reports what was already
//! reported nor skips what was not. Written as temp file -> fsync -> rename (-> fsync of the directory),
//! so a crash leaves either the old or the new file, never half of one. The on-disk format is versioned.
//! I/O (the state file).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Format version written by this build.
pub(crate) const VERSION: u32 = 1;

/// An aggregated Event as the checkpoint stores it (`report::aggregate` keeps them): its name,
/// whether it was created, its count as written and as far as the checkpointed positions go.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Saved {
    pub(crate) name: String,
    pub(crate) created: bool,
    pub(crate) written: i32,
    /// The count as far as the checkpointed positions go.
    pub(crate) event: nodemedic_common::events::NodeEvent,
    pub(crate) last_write: Option<k8s_openapi::jiff::Timestamp>,
}

/// A position in one input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "input", rename_all = "lowercase")]
pub enum Position {
    /// Last kmsg sequence number reported, valid only within the same boot.
    Kmsg { boot_id: String, seq: u64 },
    /// journald cursor of the last entry reported.
    Journal { cursor: String },
    /// Byte offset in the file identified by device and inode (not by path: rotation renames files).
    File { dev: u64, ino: u64, offset: u64 },
    /// Check results handled by an exec monitor (nothing to resume; it confirms their Events).
    Exec { runs: u64 },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    pub(crate) version: u32,
    /// Monitor name -> position.
    pub monitors: BTreeMap<String, Position>,
    /// Event counts as far as these positions go (added in place in format 1: older files have none).
    #[serde(default)]
    pub(crate) events: Vec<Saved>,
}

impl Checkpoint {
    /// Read the state file. A missing file is an empty checkpoint; an unreadable, corrupt or
    /// newer-format file is logged and treated as empty (the lookback window applies then), because a
    /// bad state file must not keep the detector from starting.
    pub fn load(path: &Path) -> Checkpoint {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Checkpoint {
                    version: VERSION,
                    ..Default::default()
                };
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read state file; starting from the lookback window");
                return Checkpoint {
                    version: VERSION,
                    ..Default::default()
                };
            }
        };
        match serde_json::from_str::<Checkpoint>(&text) {
            Ok(c) if c.version <= VERSION => c,
            Ok(c) => {
                tracing::warn!(path = %path.display(), version = c.version, "state file has a newer format; ignoring it");
                Checkpoint {
                    version: VERSION,
                    ..Default::default()
                }
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "state file is corrupt; ignoring it");
                Checkpoint {
                    version: VERSION,
                    ..Default::default()
                }
            }
        }
    }

    /// Write atomically.
    pub(crate) fn save(&self, path: &Path) -> std::io::Result<()> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile_in(dir, path)?;
        let body = serde_json::to_vec_pretty(&Checkpoint {
            version: VERSION,
            monitors: self.monitors.clone(),
            events: self.events.clone(),
        })
        .map_err(std::io::Error::other)?;
        tmp.1.write_all(&body)?;
        tmp.1.sync_all()?;
        std::fs::rename(&tmp.0, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

fn tempfile_in(dir: &Path, target: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let name = format!(
        ".{}.tmp",
        target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("state")
    );
    let p = dir.join(name);
    let f = std::fs::File::create(&p)?;
    Ok((p, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_missing_or_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        assert!(Checkpoint::load(&path).monitors.is_empty());
        let mut c = Checkpoint::default();
        c.monitors.insert(
            "kernel-monitor".into(),
            Position::Kmsg {
                boot_id: "b".into(),
                seq: 42,
            },
        );
        c.monitors.insert(
            "docker-monitor".into(),
            Position::Journal {
                cursor: "s=1;i=2".into(),
            },
        );
        c.monitors.insert(
            "app".into(),
            Position::File {
                dev: 1,
                ino: 2,
                offset: 3,
            },
        );
        let at = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        c.events.push(Saved {
            name: "node-1.18e".into(),
            created: true,
            written: 7,
            event: nodemedic_common::events::NodeEvent {
                source: "kernel-monitor".into(),
                severity: nodemedic_common::events::Severity::Warning,
                reason: "OOMKilling".into(),
                message: "m".into(),
                count: 5,
                first_seen: at,
                last_seen: at,
            },
            last_write: Some(at),
        });
        c.save(&path).unwrap();
        let back = Checkpoint::load(&path);
        assert_eq!(back.monitors, c.monitors);
        assert_eq!(back.events, c.events);
        // A file from before Event counts were kept still loads.
        std::fs::write(&path, r#"{"version": 1, "monitors": {}}"#).unwrap();
        assert!(Checkpoint::load(&path).events.is_empty());
        assert_eq!(back.version, VERSION);
        std::fs::write(&path, "{not json").unwrap();
        assert!(Checkpoint::load(&path).monitors.is_empty());
        std::fs::write(&path, r#"{"version": 99, "monitors": {}}"#).unwrap();
        assert_eq!(Checkpoint::load(&path).version, VERSION);
    }
}
