//! Evidence kept before a reboot (`--evidence-dir`): what the reboot erases, saved on the node
//! first, in one folder per reboot: the kernel log since boot (`kmsg.txt`, read from the kmsg the
//! detector watches), the journal of this boot for each named unit (`journal-UNIT.txt`, through
//! the detector's journalctl), the Node's conditions and nodeInfo (`node.json`), and what was
//! collected or not (`manifest.json`). Each file keeps its last [`MAX_FILE`] bytes, the oldest
//! folders beyond `--evidence-keep` go, and the whole collection is bounded by [`DEADLINE`]: the
//! reboot never waits longer for it, and never fails for it. An operator's collector
//! (`--evidence-command`) is then run with the folder's path, to ship it elsewhere. I/O, with the
//! pure choices (names, what to prune, tails) unit-tested.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// What `detector run` is told about evidence.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the folders go (a hostPath: they must outlive the pod and the reboot).
    pub dir: PathBuf,
    /// The units whose journal is kept (`--evidence-units`).
    pub units: Vec<String>,
    /// How many folders are kept (`--evidence-keep`).
    pub keep: usize,
    /// The operator's collector, run with the folder's path as its last argument.
    pub command: Vec<String>,
    /// The journalctl and the kernel log the detector reads.
    pub journalctl: PathBuf,
    pub kmsg: PathBuf,
}

/// Each file keeps at most this much, its end (the last moments before the reboot matter most).
pub(crate) const MAX_FILE: usize = 4 << 20;
/// The whole collection, and the collector, each within this.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// What was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Saved {
    pub(crate) path: PathBuf,
    /// The files written.
    pub(crate) files: Vec<String>,
    /// What could not be collected, in words.
    pub(crate) missing: Vec<String>,
    /// What the collector said, if one ran and failed.
    pub(crate) collector: Option<String>,
}

impl Saved {
    /// The Event's message, before `what` (a reboot, a replacement).
    pub(crate) fn said(&self, what: &str) -> String {
        let mut s = format!(
            "Diagnostics kept before the {what} in {} on the node ({})",
            self.path.display(),
            self.files.join(", ")
        );
        if !self.missing.is_empty() {
            s.push_str(&format!("; not collected: {}", self.missing.join("; ")));
        }
        if let Some(c) = &self.collector {
            s.push_str(&format!("; the collector failed: {c}"));
        }
        s
    }
}

/// The folder's name for a reboot of `node` from boot `boot_id` at `at` (sortable by time).
pub(crate) fn folder_name(node: &str, boot_id: &str, at: Timestamp) -> String {
    let when = at.strftime("%Y%m%dT%H%M%SZ").to_string();
    let boot: String = boot_id.chars().filter(|c| *c != '-').take(8).collect();
    format!("{when}-{node}-boot-{boot}")
}

/// Of the folders `names` (ours: named by [`folder_name`]), those to delete so that `keep` are left
/// with the one about to be made: the oldest.
pub(crate) fn to_prune(mut names: Vec<String>, keep: usize) -> Vec<String> {
    names.sort();
    let room = keep.saturating_sub(1);
    let n = names.len().saturating_sub(room);
    names.truncate(n);
    names
}

/// The last `max` bytes of `bytes`, from a line's start where one is near, marked as cut.
pub(crate) fn tail(bytes: &[u8], max: usize) -> Vec<u8> {
    if bytes.len() <= max {
        return bytes.to_vec();
    }
    let from = bytes.len() - max;
    let start = (bytes[from..].iter().position(|b| *b == b'\n')).map_or(from, |i| from + i + 1);
    let mut out = format!("[... {start} earlier bytes not kept ...]\n").into_bytes();
    out.extend_from_slice(&bytes[start..]);
    out
}

/// Save the evidence of `node` (its Node as read, `node_json`) before the reboot from `boot_id`,
/// within [`DEADLINE`]; then the collector. Err: the folder could not be made.
pub(crate) async fn save(
    opts: &Options,
    node: &str,
    boot_id: &str,
    node_json: Option<serde_json::Value>,
) -> Result<Saved, String> {
    let path = opts.dir.join(folder_name(node, boot_id, Timestamp::now()));
    prune(&opts.dir, opts.keep);
    std::fs::create_dir_all(&path).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
    let mut saved = Saved {
        path: path.clone(),
        files: Vec::new(),
        missing: Vec::new(),
        collector: None,
    };
    let collect = collect(opts, &path, node_json, &mut saved);
    if tokio::time::timeout(DEADLINE, collect).await.is_err() {
        saved
            .missing
            .push(format!("the rest, past {}s", DEADLINE.as_secs()));
    }
    let manifest = serde_json::json!({"node": node, "bootID": boot_id,
        "files": saved.files, "notCollected": saved.missing});
    let _ = std::fs::write(path.join("manifest.json"), manifest.to_string());
    if !opts.command.is_empty() {
        saved.collector = collector(&opts.command, &path).await.err();
    }
    Ok(saved)
}

/// Write the kernel log, each unit's journal and the Node into `path`, noting each in `saved`.
async fn collect(
    opts: &Options,
    path: &Path,
    node_json: Option<serde_json::Value>,
    saved: &mut Saved,
) {
    let mut put = |name: String, got: Result<Vec<u8>, String>| match got.and_then(|b| {
        std::fs::write(path.join(&name), tail(&b, MAX_FILE)).map_err(|e| e.to_string())
    }) {
        Ok(()) => saved.files.push(name),
        Err(e) => saved.missing.push(format!("{name} ({e})")),
    };
    put(
        "node.json".into(),
        match node_json {
            Some(n) => Ok(serde_json::to_vec_pretty(&n).unwrap_or_default()),
            None => Err("the Node could not be read".into()),
        },
    );
    put("kmsg.txt".into(), kernel_log(&opts.kmsg));
    for unit in &opts.units {
        let args = [
            "-b",
            "-u",
            unit.as_str(),
            "--no-pager",
            "-o",
            "short-iso-precise",
        ];
        let got = run(&opts.journalctl, &args).await;
        put(format!("journal-{unit}.txt"), got);
    }
}

/// The kernel's log buffer as `/dev/kmsg` gives it (every record still in it, to its end; a plain
/// file, as tests give, read whole).
fn kernel_log(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut out, mut buf) = (Vec::new(), vec![0u8; 16 << 10]);
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // The end of the buffer (/dev/kmsg), or a record overwritten while read: go on.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PIPE.raw_os_error()) => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        if out.len() > 4 * MAX_FILE {
            out = tail(&out, MAX_FILE);
        }
    }
    Ok(out)
}

/// `program args`'s output (Err: it could not run or failed, in words).
async fn run(program: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    Err(format!(
        "{} {} ended with {}: {}",
        program.display(),
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// Run the collector with the folder's path, within [`DEADLINE`].
async fn collector(command: &[String], path: &Path) -> Result<(), String> {
    let (program, args) = command.split_first().ok_or("no command")?;
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = path.display().to_string();
    all.push(&p);
    match tokio::time::timeout(DEADLINE, run(Path::new(program), &all)).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => Err(format!(
            "{program} did not finish within {}s",
            DEADLINE.as_secs()
        )),
    }
}

/// Delete the oldest folders in `dir` so that `keep` are left with the next.
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let names = (entries.flatten())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("-boot-"))
        .collect();
    for old in to_prune(names, keep) {
        if let Err(e) = std::fs::remove_dir_all(dir.join(&old)) {
            tracing::warn!(folder = %old, error = %e, "cannot remove old evidence");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_sort_by_time_and_the_oldest_go() {
        let at = |s| Timestamp::from_second(s).unwrap();
        let a = folder_name("n1", "0f6a1d43-8e0b-4c7e", at(1_800_000_000));
        let b = folder_name("n1", "7c1e2d3f-4a5b", at(1_800_003_600));
        assert_eq!(a, "20270115T080000Z-n1-boot-0f6a1d43");
        assert!(a < b);
        let names = vec![b.clone(), a.clone(), "20270101T000000Z-n1-boot-x".into()];
        assert_eq!(
            to_prune(names.clone(), 2),
            ["20270101T000000Z-n1-boot-x".to_string(), a]
        );
        assert!(to_prune(names.clone(), 4).is_empty());
        assert_eq!(to_prune(names, 0).len(), 3);
    }

    #[test]
    fn a_long_log_keeps_its_end_from_a_line_start() {
        let text = b"first line\nsecond line\nthird line\n";
        assert_eq!(tail(text, 100), text.to_vec());
        let t = String::from_utf8(tail(text, 15)).unwrap();
        assert_eq!(t, "[... 23 earlier bytes not kept ...]\nthird line\n");
    }
}
