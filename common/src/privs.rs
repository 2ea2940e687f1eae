//! Children that cannot gain privileges nor reach one another: `no_new_privs` set in a command's
//! child before it runs its program, so no setuid program or file capability raises what the child
//! holds, and a Landlock domain of the child's own, so that no other check (nor any process outside
//! it) can be traced by it, followed through `/proc/PID/{root,cwd,exe,fd}`, have its memory opened
//! or, from Landlock ABI 6 on, be signalled (the detector's exec checks, which all run as one uid
//! under `hostPID`).
//!
//! Landlock is called through its system calls rather than the `landlock` crate: the domain
//! is entered in the forked child before exec, where only async-signal-safe calls may run (no
//! allocation, no lock), and the crate does not promise that of its `restrict_self`. The ruleset is
//! made once, in the parent; each child entering it gets a domain of its own, so two checks are
//! never in one another's domain.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// `struct landlock_ruleset_attr` (linux/landlock.h, ABI 6). An older kernel takes the longer
/// struct as long as the fields it does not know are zero.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

const CREATE_RULESET_VERSION: u32 = 1;
/// `LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK` (ABI 1): what the domain
/// handles, and with no rule allowing it, forbids. A domain must handle something; a check makes
/// no device nodes (it holds no CAP_MKNOD either), so nothing a check does is taken away.
const FS_MAKE_DEVICES: u64 = (1 << 6) | (1 << 11);
/// `LANDLOCK_SCOPE_SIGNAL` (ABI 6): no signal to a process outside the domain.
const SCOPE_SIGNAL: u64 = 1 << 1;

/// How children are kept from one another, said once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Each child in a Landlock domain of its own (`abi`: the kernel's Landlock version; signals
    /// are scoped from 6 on).
    Landlock { abi: u32 },
    /// Not possible here: why, in an operator's words.
    Unavailable(String),
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Isolation::Landlock { abi } if *abi >= 6 => write!(
                f,
                "each exec check in a Landlock domain of its own (ABI {abi}): no check can trace, read the /proc entries of, or signal another check or any process outside it"
            ),
            Isolation::Landlock { abi } => write!(
                f,
                "each exec check in a Landlock domain of its own (ABI {abi}): no check can trace or read the /proc entries of another check or any process outside it (signals are scoped from Landlock ABI 6, Linux 6.12)"
            ),
            Isolation::Unavailable(why) => write!(
                f,
                "exec checks are NOT kept from one another ({why}): running as one uid, a check can read another's /proc/PID/root and environment and signal it; Landlock needs Linux 5.13 with landlock in the kernel's lsm= list"
            ),
        }
    }
}

/// The ruleset every child enters, made on first use.
fn ruleset() -> &'static Result<(OwnedFd, u32), String> {
    static RULESET: OnceLock<Result<(OwnedFd, u32), String>> = OnceLock::new();
    RULESET.get_or_init(make_ruleset)
}

#[allow(unsafe_code)]
fn make_ruleset() -> Result<(OwnedFd, u32), String> {
    // SAFETY: landlock_create_ruleset with a null attr, size 0 and the VERSION flag only returns
    // the ABI version (or -1 and errno); it reads no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => "this kernel has no Landlock (before Linux 5.13)".into(),
            Some(libc::EOPNOTSUPP) => "Landlock is built in but not enabled (lsm=)".into(),
            _ => format!("Landlock cannot be asked for its version: {e}"),
        });
    }
    let abi = abi as u32;
    let attr = RulesetAttr {
        handled_access_fs: FS_MAKE_DEVICES,
        handled_access_net: 0,
        scoped: if abi >= 6 { SCOPE_SIGNAL } else { 0 },
    };
    // SAFETY: attr is a live, initialised struct of the size given; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(format!(
            "a Landlock ruleset cannot be made: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the kernel returned a new file descriptor (close-on-exec) that nothing else owns.
    Ok((unsafe { OwnedFd::from_raw_fd(fd as i32) }, abi))
}

/// How this process's children are kept from one another (made on first call).
pub fn isolation() -> Isolation {
    match ruleset() {
        Ok((_, abi)) => Isolation::Landlock { abi: *abi },
        Err(why) => Isolation::Unavailable(why.clone()),
    }
}

/// Have `cmd`'s child set `no_new_privs` and, where the kernel has Landlock, enter a domain of its
/// own before exec ([`isolation`] says which).
#[allow(unsafe_code)]
pub fn no_new_privs(cmd: &mut tokio::process::Command) {
    let ruleset = ruleset().as_ref().ok().map(|(fd, _)| fd.as_raw_fd());
    // SAFETY: the closure runs in the forked child before exec. It makes two system calls,
    // prctl(PR_SET_NO_NEW_PRIVS) and landlock_restrict_self on a descriptor the parent keeps open
    // for the life of the process (a static): async-signal-safe, no allocation, no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(script: &str, confined: bool) -> String {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.args(["-c", script]);
        if confined {
            no_new_privs(&mut cmd);
        }
        let out = cmd.output().await.unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    #[tokio::test]
    async fn the_child_runs_with_no_new_privs() {
        let out = run("grep NoNewPrivs /proc/self/status", true).await;
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            ["NoNewPrivs:", "1"]
        );
    }

    /// Two children as the same user: one cannot follow the other's root, working directory,
    /// executable or open files through /proc, open its memory, nor signal it, while an unconfined
    /// process can (so it is the domain that refuses, not the user). `environ`, `maps` and
    /// `status` stay readable as for any process of the user (a check's environment is `PATH`
    /// and named, non-secret variables). The machines we test on have Landlock (Linux 5.13+).
    #[tokio::test]
    async fn a_confined_child_cannot_reach_another_through_proc_or_signals() {
        let abi = match isolation() {
            Isolation::Landlock { abi } => abi,
            Isolation::Unavailable(why) => panic!("this machine should have Landlock: {why}"),
        };
        let mut victim = tokio::process::Command::new("/bin/sh");
        victim.args(["-c", "exec sleep 60"]).kill_on_drop(true);
        no_new_privs(&mut victim);
        let victim = victim.spawn().unwrap();
        let pid = victim.id().unwrap();
        let unconfined = run(&spy(pid), false).await;
        assert_eq!(
            unconfined.lines().collect::<Vec<_>>(),
            ["root", "cwd", "exe", "fd/0", "mem", "signal", "done"],
            "the unconfined control should reach it all"
        );
        let confined = run(&spy(pid), true).await;
        assert_eq!(
            confined.lines().collect::<Vec<_>>(),
            if abi >= 6 {
                vec!["done"]
            } else {
                vec!["signal", "done"]
            },
            "a confined check reached another"
        );
    }

    /// What one check tries on another (`pid`): each line names what it reached.
    fn spy(pid: u32) -> String {
        format!(
            "for l in root cwd exe fd/0; do readlink /proc/{pid}/$l >/dev/null 2>&1 && echo $l; done; \
             (exec 3</proc/{pid}/mem) 2>/dev/null && echo mem; \
             kill -0 {pid} 2>/dev/null && echo signal; echo done"
        )
    }

    #[test]
    fn what_is_said_at_start_names_the_isolation_or_its_absence() {
        let off = Isolation::Unavailable("this kernel has no Landlock (before Linux 5.13)".into());
        assert!(off.to_string().starts_with("exec checks are NOT kept"));
        assert!(
            Isolation::Landlock { abi: 7 }
                .to_string()
                .contains("or signal another check")
        );
    }
}
