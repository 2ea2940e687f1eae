//! Exec checks (NPD's custom plugin monitor): each check of a monitor runs on its own interval, at most
//! `concurrency` of them at once, and reports what it said as a [`CheckResult`]. I/O (processes).
//!
//! A check runs in a process group of its own, with no stdin. When it exits, or when its timeout is
//! reached, the whole group is killed, so a check's leftover background processes never pile up
//! (NPD kills the group on timeout only, and reads the output until every holder of the pipe has
//! closed it, so a background child that keeps stdout open stalls NPD's check until the timeout). The
//! check itself is reaped (tokio waits for it), and so are members of its group that became our
//! children (when the detector is PID 1 of its container, orphans are reparented to it). At most 4 KiB
//! of stdout and of stderr are kept, as in NPD; the rest is read and dropped.
//!
//! A check that does not finish within its timeout plus [`KILL_GRACE`] stops beating its health entry
//! `check:<monitor>/<reason>`, which `/healthz` then names; the other checks and inputs go on.
//!
//! A check holds no more than it needs: it runs from `/` with an environment of `PATH` and
//! [`PASSED_ENV`] only, under `no_new_privs` (no setuid program or file capability raises it), and
//! unless its rule says `runAs: root`, as uid and gid 65534 with no supplementary groups, which
//! leaves it no capabilities either; it cannot read what only root may, the detector's credential
//! among it. Each check runs in a Landlock domain of its own where the kernel has Landlock
//! (`nodemedic_common::privs`): one check cannot follow another's `/proc/PID/root`, open its
//! memory or signal it, though all run as one uid under `hostPID`. Only programs in the allowed
//! directories ([`CheckDirs`]) or the detector itself run.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::health::Health;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{Semaphore, mpsc, watch};

pub(crate) use super::event::CheckResult;
pub use super::event::Exit;
use super::event::SourceEvent;
use crate::checkpoint::Position;
use crate::config::{Check, ExecSettings, Monitor, RunAs};

/// The uid and gid of an unprivileged check (nobody).
pub(crate) const NOBODY: u32 = 65534;

/// The detector's variables a check sees (none is a credential): the node's name, crictl's endpoints,
/// the time zone and language.
pub(crate) const PASSED_ENV: [&str; 5] = [
    "NODE_NAME",
    "CONTAINER_RUNTIME_ENDPOINT",
    "IMAGE_SERVICE_ENDPOINT",
    "TZ",
    "LANG",
];

/// The `PATH` a check runs with.
const CHECK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The places checks may run from: programs under these directories, and the detector's own
/// executable (its built-in probes). Symbolic links are followed before comparing.
#[derive(Debug, Clone)]
pub struct CheckDirs {
    dirs: Arc<[std::path::PathBuf]>,
    own: Option<std::path::PathBuf>,
    /// Checks that ask for root (`runAs: root`, NPD custom plugins) may have it: the detector's
    /// own `--allow-root-checks`, on its DaemonSet. Never the rules' say alone: whoever edits the
    /// rules ConfigMap would otherwise be root on every node.
    allow_root: bool,
}

/// Where shipped checks live (the image's `config/checks`, and packages' checks).
pub(crate) const DEFAULT_CHECK_DIRS: [&str; 2] =
    ["/usr/lib/nodemedic/checks", "/etc/nodemedic/checks"];

impl CheckDirs {
    /// `dirs` (those that exist) and the running executable.
    pub fn new(dirs: impl IntoIterator<Item = std::path::PathBuf>) -> CheckDirs {
        let dirs: Vec<_> = dirs
            .into_iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        let own = std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok());
        CheckDirs {
            dirs: dirs.into(),
            own,
            allow_root: false,
        }
    }

    /// These directories, with checks that ask for root allowed it when `allow`.
    pub fn allowing_root(mut self, allow: bool) -> CheckDirs {
        self.allow_root = allow;
        self
    }

    /// Whether `program` (relative: to the working directory, as in NPD) may run; the path it
    /// runs as.
    pub(crate) fn permits(&self, program: &std::path::Path) -> Result<std::path::PathBuf, String> {
        let real = std::fs::canonicalize(program)
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        if self.own.as_ref() == Some(&real) || self.dirs.iter().any(|d| real.starts_with(d)) {
            return Ok(real);
        }
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        Err(format!(
            "not run: {} is outside the directories checks may run from ({}; --check-dir adds one)",
            program.display(),
            dirs.join(", ")
        ))
    }
}

/// Output kept from each stream (NPD's maxCustomPluginBufferBytes).
pub(crate) const MAX_CAPTURE: usize = 4096;
/// How long a killed check may take to be reaped before its run is given up.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(10);
/// How long the output may take to reach end of file once the check's group is gone.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// The health entry of a check: `check:<monitor>/<reason>`, with `#n` when a monitor has several
/// checks with one reason (NPD's sample has a temporary and a permanent `NTPIsDown`).
pub(crate) fn health_names(monitor: &Monitor) -> Vec<String> {
    let mut names = Vec::with_capacity(monitor.checks.len());
    for (i, c) in monitor.checks.iter().enumerate() {
        let same = monitor.checks[..i]
            .iter()
            .filter(|o| o.reason == c.reason)
            .count();
        let mut name = format!("check:{}/{}", monitor.name, c.reason);
        if same > 0 {
            name.push_str(&format!("#{}", same + 1));
        }
        names.push(name);
    }
    names
}

/// Start every check of `monitor`; their results come out of the returned receiver until `stop` or
/// until it is dropped.
pub(crate) fn start(
    monitor: &Monitor,
    settings: &ExecSettings,
    health: &Health,
    dirs: &CheckDirs,
    stop: watch::Receiver<bool>,
) -> mpsc::Receiver<CheckResult> {
    let (tx, rx) = mpsc::channel(64);
    let slots = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    // A check may wait for a slot behind the others of its monitor, each up to its timeout.
    let rounds = monitor.checks.len().div_ceil(settings.concurrency.max(1)) as u32;
    if !monitor.checks.is_empty() {
        say_isolation();
    }
    for c in monitor.checks.iter().filter(|c| c.run_as == RunAs::Root) {
        if dirs.allow_root {
            tracing::warn!(monitor = %monitor.name, reason = %c.reason, program = %c.program.display(), "this check runs as root (runAs: root, or an NPD custom plugin file; --allow-root-checks)");
        } else {
            tracing::warn!(monitor = %monitor.name, reason = %c.reason, program = %c.program.display(), "this check asks for root (runAs: root, or an NPD custom plugin file) and is not run: the DaemonSet does not pass --allow-root-checks");
        }
    }
    for ((index, check), name) in monitor.checks.iter().enumerate().zip(health_names(monitor)) {
        let max_silence = check
            .interval
            .saturating_add(settings.timeout.saturating_mul(rounds.max(1)))
            .saturating_add(KILL_GRACE)
            .saturating_add(Duration::from_secs(30));
        let beat = health.register(name, max_silence);
        let (check, slots, tx, mut stop) = (check.clone(), slots.clone(), tx.clone(), stop.clone());
        let dirs = dirs.clone();
        let max_output = settings.max_output;
        tokio::spawn(async move {
            let mut every = tokio::time::interval(check.interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = every.tick() => {}
                }
                let slot = tokio::select! {
                    _ = stop.changed() => return,
                    s = slots.acquire() => s,
                };
                let Ok(_slot) = slot else { return };
                let Some(result) = run_once(index, &check, max_output, &dirs, &mut stop).await
                else {
                    return;
                };
                beat.beat();
                if tx.send(result).await.is_err() {
                    return;
                }
            }
        });
    }
    rx
}

/// How checks are kept from one another, said once per process (at the first monitor with checks).
fn say_isolation() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| match nodemedic_common::privs::isolation() {
        i @ nodemedic_common::privs::Isolation::Landlock { .. } => tracing::info!("{i}"),
        i => tracing::warn!("{i}"),
    });
}

/// Number the results of `checks` from `runs` (the runs counted before a restart) and pass them on
/// as events, until either side is gone.
pub(crate) async fn number(
    mut checks: mpsc::Receiver<CheckResult>,
    mut runs: u64,
    tx: mpsc::Sender<SourceEvent>,
) {
    while let Some(result) = checks.recv().await {
        runs = runs.saturating_add(1);
        let position = Position::Exec { runs };
        if tx
            .send(SourceEvent::Check { result, position })
            .await
            .is_err()
        {
            return;
        }
    }
}

/// The process of `check` (at `program`, its resolved path): see the module's documentation.
fn command(program: &std::path::Path, check: &Check) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&check.args)
        .env_clear()
        .env("PATH", CHECK_PATH)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in PASSED_ENV {
        if let Ok(v) = std::env::var(name) {
            cmd.env(name, v);
        }
    }
    // Dropping to nobody takes root to do; a detector run by another user is unprivileged already.
    if check.run_as == RunAs::Nobody && rustix::process::geteuid().is_root() {
        // std drops the supplementary groups (setgroups) before setgid and setuid.
        cmd.uid(NOBODY).gid(NOBODY);
    }
    nodemedic_common::privs::no_new_privs(&mut cmd);
    cmd
}

/// Run `check` once. `None` when `stop` came first (the check was killed).
pub async fn run_once(
    index: usize,
    check: &Check,
    max_output: usize,
    dirs: &CheckDirs,
    stop: &mut watch::Receiver<bool>,
) -> Option<CheckResult> {
    let root_refused = (check.run_as == RunAs::Root && !dirs.allow_root).then(|| {
        format!(
            "not run: {} asks for root (runAs: root, or an NPD custom plugin file), which this detector allows only with --allow-root-checks on its DaemonSet",
            check.program.display()
        )
    });
    let spawned = root_refused
        .map_or(Ok(()), Err)
        .and_then(|()| dirs.permits(&check.program))
        .and_then(|program| {
            command(&program, check)
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", check.program.display()))
        });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let message = cut(&e, max_output);
            return Some(CheckResult {
                check: index,
                exit: Exit::Unknown,
                message,
                code: None,
                timed_out: false,
                stderr: String::new(),
                at: Timestamp::now(),
            });
        }
    };
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let stdout = tokio::spawn(read_capped(child.stdout.take()));
    let stderr = tokio::spawn(read_capped(child.stderr.take()));
    let timed_out = tokio::select! {
        _ = exited(group) => false,
        _ = tokio::time::sleep(check.timeout) => true,
        _ = stop.changed() => {
            kill_group(group);
            let _ = tokio::time::timeout(KILL_GRACE, child.wait()).await;
            reap_group(group).await;
            return None;
        }
    };
    // Whatever is left of the group goes: the check on a timeout, its background children otherwise.
    // The check is not reaped yet, so its pid, the group's id, cannot have been given to another group.
    kill_group(group);
    let status = tokio::time::timeout(KILL_GRACE, child.wait())
        .await
        .ok()
        .and_then(|s| s.ok());
    reap_group(group).await;
    let at = Timestamp::now();
    let out = join_capped(stdout).await;
    let err = join_capped(stderr).await;
    let output = String::from_utf8_lossy(&out).trim().to_string();
    let code = if timed_out {
        None
    } else {
        status.and_then(|s| s.code())
    };
    let message = if timed_out {
        format!(
            "timed out after {} and was killed; output: {output:?}",
            humantime::format_duration(check.timeout)
        )
    } else {
        output
    };
    Some(CheckResult {
        check: index,
        exit: if timed_out {
            Exit::Unknown
        } else {
            Exit::of_code(code)
        },
        message: cut(&message, max_output),
        code,
        timed_out,
        stderr: String::from_utf8_lossy(&err)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect(),
        at,
    })
}

/// Resolves when the check `pid` has exited, leaving it unreaped (`waitid` with `WNOWAIT`, on a
/// blocking thread): until it is reaped its pid cannot be reused, so killing its group afterwards
/// cannot hit an unrelated group that was given the same number.
async fn exited(pid: Option<rustix::process::Pid>) {
    let Some(pid) = pid else { return };
    let _ = tokio::task::spawn_blocking(move || {
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        loop {
            match waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                _ => return,
            }
        }
    })
    .await;
}

/// At most [`MAX_CAPTURE`] bytes of a stream; the rest is read and dropped so the writer never blocks.
async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_CAPTURE.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// The reader's bytes, or nothing if a process outside the group still holds the pipe.
async fn join_capped(reader: tokio::task::JoinHandle<Vec<u8>>) -> Vec<u8> {
    let abort = reader.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, reader).await {
        Ok(Ok(bytes)) => bytes,
        _ => {
            abort.abort();
            Vec::new()
        }
    }
}

fn kill_group(group: Option<rustix::process::Pid>) {
    if let Some(g) = group {
        // ESRCH (nothing left) is the usual answer.
        let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
    }
}

/// Reap members of the group that are our children (reparented orphans when we are PID 1); the check
/// itself was waited for by tokio.
/// Members just killed may take a moment to exit: wait up to a second for them.
async fn reap_group(group: Option<rustix::process::Pid>) {
    let Some(g) = group else { return };
    for _ in 0..64 {
        match rustix::process::waitpgid(g, rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            // Children of ours in the group, not exited yet.
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            // ECHILD: none left.
            Err(_) => return,
        }
    }
}

/// `s` cut to at most `max` bytes, on a character boundary (NPD cuts at max_output_length bytes).
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RuleKind;

    fn sh(script: &str, timeout_ms: u64) -> Check {
        Check {
            kind: RuleKind::Temporary,
            reason: "Test".into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            timeout: Duration::from_millis(timeout_ms),
            interval: Duration::from_secs(60),
            run_as: RunAs::Nobody,
        }
    }

    /// Where the tests' programs are (the shell, its utilities); the tests that run a check as
    /// root for what it can do there are allowed to.
    fn dirs() -> CheckDirs {
        CheckDirs::new(["/bin".into(), "/usr/bin".into()]).allowing_root(true)
    }

    async fn run(check: &Check, max_output: usize) -> CheckResult {
        let (_tx, mut stop) = watch::channel(false);
        run_once(0, check, max_output, &dirs(), &mut stop)
            .await
            .unwrap()
    }

    /// The process is gone: no /proc entry (a zombie would still have one, in state Z).
    fn gone(pid: &str) -> bool {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    async fn eventually_gone(pid: &str) -> bool {
        for _ in 0..100 {
            if gone(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn exit_status_and_output_become_the_result() {
        let r = run(
            &sh("echo '  ntp is down  '; echo oops >&2; exit 1", 5000),
            80,
        )
        .await;
        assert_eq!(
            (r.exit, r.code, r.timed_out),
            (Exit::Problem, Some(1), false)
        );
        assert_eq!(r.message, "ntp is down");
        assert_eq!(r.stderr, "oops");
        assert_eq!(run(&sh("exit 0", 5000), 80).await.exit, Exit::Healthy);
        let r = run(&sh("exit 3", 5000), 80).await;
        assert_eq!((r.exit, r.code), (Exit::Unknown, Some(3)));
        let r = run(&sh("kill -9 $$", 5000), 80).await;
        assert_eq!((r.exit, r.code), (Exit::Unknown, None));
    }

    #[tokio::test]
    async fn output_is_cut_and_a_flood_does_not_block_the_check() {
        // 1 MB of output: the check must not block on a full pipe (the rest is read and dropped).
        let r = run(
            &sh("head -c 1000000 /dev/zero | tr '\\0' x; exit 1", 10_000),
            10,
        )
        .await;
        assert_eq!((r.exit, r.timed_out), (Exit::Problem, false));
        assert_eq!(r.message, "xxxxxxxxxx");
        // Cut on a character boundary.
        assert_eq!(cut("ééé", 3), "é");
    }

    #[tokio::test]
    async fn a_missing_program_is_unknown_with_the_reason() {
        let mut check = sh("", 1000);
        check.program = "/nonexistent/check_ntp.sh".into();
        let r = run(&check, 200).await;
        assert_eq!(r.exit, Exit::Unknown);
        assert!(
            r.message
                .starts_with("cannot run /nonexistent/check_ntp.sh: "),
            "{}",
            r.message
        );
    }

    /// A check that tries to read a root-only credential, to see the detector's environment, and to
    /// gain root through a setuid-root program: it gets none of them (as root, the detector's user in
    /// the DaemonSet; elsewhere the test says it is skipped).
    #[tokio::test]
    async fn a_check_runs_as_nobody_without_the_credential_or_a_way_back_to_root() {
        use std::os::unix::fs::PermissionsExt;
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: dropping privileges needs the test to run as root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "secret-token-value").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A setuid-root program in an allowed directory: without no_new_privs it would run as root.
        let suid = dir.path().join("id");
        std::fs::copy("/usr/bin/id", &suid).unwrap();
        std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let script = format!(
            "cat {t} 2>&1; echo uid=$(id -u) gid=$(id -g) groups=$(id -G); echo suid=$({s} -u); \
             grep -E '^(NoNewPrivs|CapEff|CapPrm):' /proc/self/status | tr -s '\t ' ' '; \
             echo pwd=$(pwd); env | cut -d= -f1 | grep -cvxE '{keep}'",
            keep = "PATH|PWD|OLDPWD|SHLVL|_|".to_string() + &PASSED_ENV.join("|"),
            t = token.display(),
            s = suid.display()
        );
        let check = sh(&script, 10_000);
        let dirs = CheckDirs::new(["/bin".into(), "/usr/bin".into(), dir.path().to_path_buf()]);
        let (_tx, mut stop) = watch::channel(false);
        let r = run_once(0, &check, 1024, &dirs, &mut stop).await.unwrap();
        let out = r.message;
        assert!(!out.contains("secret-token-value"), "{out}");
        assert!(out.contains("Permission denied"), "{out}");
        assert!(out.contains("uid=65534 gid=65534 groups=65534"), "{out}");
        assert!(
            out.contains("suid=65534"),
            "the setuid bit raised it: {out}"
        );
        assert!(out.contains("NoNewPrivs: 1"), "{out}");
        assert!(out.contains("CapEff: 0000000000000000"), "{out}");
        assert!(out.contains("CapPrm: 0000000000000000"), "{out}");
        assert!(out.contains("pwd=/"), "{out}");
        // The test's own environment (CARGO_*, HOME, ...) stays out.
        assert!(
            out.trim_end().ends_with("\n0") || out.trim_end().ends_with(" 0"),
            "the detector's environment leaked: {out}"
        );
        // A rule that says `runAs: root` is not run on the rules' say alone (whoever edits the
        // rules ConfigMap would be root on every node); with the DaemonSet's --allow-root-checks
        // it keeps root (and still no new privileges).
        let root = Check {
            run_as: RunAs::Root,
            ..sh(&format!("cat {}; echo; id -u", token.display()), 10_000)
        };
        let r = run_once(0, &root, 1024, &dirs, &mut stop).await.unwrap();
        assert_eq!(r.exit, Exit::Unknown);
        assert!(
            r.message.starts_with("not run: ") && r.message.contains("--allow-root-checks"),
            "{}",
            r.message
        );
        let allowed = dirs.clone().allowing_root(true);
        let r = run_once(0, &root, 1024, &allowed, &mut stop).await.unwrap();
        assert!(
            r.message.contains("secret-token-value") && r.message.ends_with('0'),
            "{}",
            r.message
        );
        // A program outside the allowed directories does not run at all.
        let outside = Check {
            program: "/bin/true".into(),
            args: vec![],
            ..sh("", 10_000)
        };
        let only_tmp = CheckDirs::new([dir.path().to_path_buf()]);
        let r = run_once(0, &outside, 200, &only_tmp, &mut stop)
            .await
            .unwrap();
        assert_eq!(r.exit, Exit::Unknown);
        assert!(
            r.message.starts_with("not run: /bin/true is outside"),
            "{}",
            r.message
        );
    }

    /// Two checks, both as nobody: the second cannot follow the first's root or working
    /// directory through /proc, open its memory, or kill it (run as root, the detector's user).
    #[tokio::test]
    async fn one_check_cannot_reach_another() {
        use std::os::unix::fs::PermissionsExt;
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: dropping privileges needs the test to run as root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let pid_file = dir.path().join("victim.pid");
        let victim = sh(
            &format!("echo $$ > {}; exec sleep 60", pid_file.display()),
            60_000,
        );
        let (stop_tx, mut stop) = watch::channel(false);
        let running = tokio::spawn(async move {
            run_once(0, &victim, 100, &dirs(), &mut stop).await;
        });
        let pid = loop {
            match std::fs::read_to_string(&pid_file) {
                Ok(p) if p.ends_with('\n') => break p.trim().to_string(),
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let spy = sh(
            &format!(
                "for l in root cwd; do readlink /proc/{pid}/$l >/dev/null 2>&1 && echo $l; done; \
                 (exec 3</proc/{pid}/mem) 2>/dev/null && echo mem; \
                 kill -9 {pid} 2>/dev/null && echo killed; echo uid=$(id -u)"
            ),
            10_000,
        );
        let r = run(&spy, 200).await;
        assert_eq!(r.message, "uid=65534", "one check reached another");
        assert!(!gone(&pid), "the victim was killed");
        stop_tx.send(true).unwrap();
        running.await.unwrap();
    }

    #[tokio::test]
    async fn a_hung_check_is_killed_with_its_whole_group() {
        // Orphans come to us (as to PID 1 of a container), so "gone" also means reaped by us.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let script = format!(
            "sleep 300 & echo $! > {p}; sh -c 'sleep 300' & echo $! >> {p}; echo started; sleep 300",
            p = pids.display()
        );
        // As root: it writes its children's pids into the test's private directory.
        let check = Check {
            run_as: RunAs::Root,
            ..sh(&script, 300)
        };
        let r = run(&check, 200).await;
        assert_eq!((r.exit, r.timed_out, r.code), (Exit::Unknown, true, None));
        assert!(
            r.message
                .starts_with("timed out after 300ms and was killed; output: \"started\""),
            "{}",
            r.message
        );
        for pid in std::fs::read_to_string(&pids).unwrap().lines() {
            assert!(
                eventually_gone(pid).await,
                "process {pid} of the check's group is still there"
            );
        }
    }

    #[tokio::test]
    async fn leftovers_of_a_finished_check_are_killed_and_reaped() {
        // As PID 1 of a container would: orphans of the check become our children. They must be
        // killed and reaped, not left as zombies.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
        // The background child keeps stdout open: NPD would wait for it until the timeout.
        let r = run(&sh("sleep 300 & echo $!; exit 0", 30_000), 80).await;
        assert_eq!((r.exit, r.timed_out), (Exit::Healthy, false));
        let pid = r.message.clone();
        assert!(pid.parse::<u32>().is_ok(), "{pid}");
        assert!(
            eventually_gone(&pid).await,
            "the check's background child {pid} was left (or left a zombie)"
        );
    }

    #[tokio::test]
    async fn stop_kills_a_running_check() {
        let (tx, mut stop) = watch::channel(false);
        let check = sh("sleep 300", 60_000);
        let run = tokio::spawn(async move { run_once(0, &check, 80, &dirs(), &mut stop).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        tx.send(true).unwrap();
        assert_eq!(run.await.unwrap(), None);
    }

    #[test]
    fn health_names_tell_checks_with_one_reason_apart() {
        let set = crate::config::load_sources(&[(
            "ntp.yaml".into(),
            "source: ntp\ninput: {kind: exec}\nconditions: [{type: NTPProblem, reason: NTPIsUp, message: up}]\nrules:\n  - {type: temporary, reason: NTPIsDown, exec: {path: /bin/true}}\n  - {type: permanent, condition: NTPProblem, reason: NTPIsDown, exec: {path: /bin/true}}\n".to_string(),
        )])
        .unwrap();
        assert_eq!(
            health_names(&set.monitors[0]),
            ["check:ntp/NTPIsDown", "check:ntp/NTPIsDown#2"]
        );
    }
}
