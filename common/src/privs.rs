//! Children that cannot gain privileges: `no_new_privs` set in a command's child before it runs
//! its program, so no setuid program or file capability raises what the child holds (the
//! detector's exec checks).

/// Have `cmd`'s child set `no_new_privs` before exec.
#[allow(unsafe_code)]
pub fn no_new_privs(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec. prctl(PR_SET_NO_NEW_PRIVS) is a
    // single system call: async-signal-safe, no allocation, no lock, no memory of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_child_runs_with_no_new_privs() {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.args(["-c", "grep NoNewPrivs /proc/self/status"]);
        super::no_new_privs(&mut cmd);
        let out = cmd.output().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["NoNewPrivs:", "1"]
        );
    }
}
