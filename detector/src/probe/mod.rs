//! `detector probe`: health checks built into the binary, for exec rule files that must not depend on
//! tools the node or the image may lack (config/checks/). Each prints one line and exits as a custom
//! plugin does: 0 healthy, 1 a problem, 2 unknown (could not tell).
//! I/O (reads the probed files); the verdicts are pure.
//!
//! - `http URL`: GET over plain HTTP (the kubelet's `http://127.0.0.1:10248/healthz`); 2xx is healthy.
//!   Written on a `TcpStream` because a loopback health endpoint needs nothing more, and the
//!   detector links no HTTP client (kube's is async and TLS-oriented).
//! - `conntrack`: the conntrack table's fill from `/proc/sys/net/netfilter` (the node's with
//!   `hostNetwork: true`).
//! - `readonly-root`: whether `/` is mounted read-only, from a mounts file (`/proc/1/mounts` is the
//!   host's with `hostPID: true`).
//! - `clock`: whether the kernel's clock is synchronised ([`clock`]).
//! - `container-runtime`: the CRI runtime's own status over its socket ([`cri`]).
//! - `cloud-maintenance`: what the cloud's instance metadata announces for this machine
//!   ([`maintenance`], read by [`notices`]).
//!
//! With these, no shipped check needs a shell or a host tool, and the detector's image has none.

pub(crate) mod clock;
pub(crate) mod cri;
pub(crate) mod maintenance;
pub(crate) mod notices;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// What a probe found: its exit code and its one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) code: u8,
    pub(crate) message: String,
}

pub(crate) fn healthy(m: impl Into<String>) -> Found {
    Found {
        code: 0,
        message: m.into(),
    }
}
pub(crate) fn problem(m: impl Into<String>) -> Found {
    Found {
        code: 1,
        message: m.into(),
    }
}
pub(crate) fn unknown(m: impl Into<String>) -> Found {
    Found {
        code: 2,
        message: m.into(),
    }
}

/// GET `url` (http only), within `timeout`. Connection refused is a problem (nothing listens where
/// the component should); a bad URL is unknown.
pub(crate) fn http(url: &str, timeout: Duration) -> Found {
    let Some(rest) = url.strip_prefix("http://") else {
        return unknown(format!("{url}: only http:// URLs are probed"));
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = match hostport.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        _ => return unknown(format!("{url}: cannot resolve {hostport}")),
    };
    let mut stream = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) => return problem(format!("{url}: {e}")),
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {hostport}\r\nUser-Agent: nodemedic-detector\r\n\r\n"
    );
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return problem(format!("{url}: {e}"));
    }
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    // The status line and a little of the body are all that is needed.
    while head.len() < 4096 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return problem(format!("{url}: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let status = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok());
    // The status only: the body is never said (a condition's message is readable cluster-wide, and
    // an endpoint may answer with a credential).
    match status {
        Some(s) if (200..300).contains(&s) => healthy(format!("{url}: {s}")),
        Some(s) => problem(format!("{url}: {s}")),
        None => problem(format!("{url}: not an HTTP answer")),
    }
}

/// A file of a probe that cannot be read as what it should hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {error}")]
pub(crate) struct Unreadable {
    path: String,
    error: String,
}

impl Unreadable {
    fn new(path: &Path, error: impl std::fmt::Display) -> Unreadable {
        Unreadable {
            path: path.display().to_string(),
            error: error.to_string(),
        }
    }
}

/// The conntrack table under `netfilter` (`/proc/sys/net/netfilter`): a problem at `threshold`
/// percent full or more.
pub(crate) fn conntrack(netfilter: &Path, threshold: u8) -> Found {
    let read = |name: &str| -> Result<u64, Unreadable> {
        let p = netfilter.join(name);
        let text = std::fs::read_to_string(&p).map_err(|e| Unreadable::new(&p, e))?;
        text.trim()
            .parse::<u64>()
            .map_err(|e| Unreadable::new(&p, e))
    };
    let (count, max) = match (read("nf_conntrack_count"), read("nf_conntrack_max")) {
        (Ok(c), Ok(m)) => (c, m),
        (Err(e), _) | (_, Err(e)) => {
            return unknown(format!("conntrack not readable (module not loaded?): {e}"));
        }
    };
    if max == 0 {
        return unknown("nf_conntrack_max is 0");
    }
    let percent = count.saturating_mul(100) / max;
    let text = format!("conntrack table {percent}% full ({count} of {max})");
    if percent >= u64::from(threshold) {
        problem(text)
    } else {
        healthy(text)
    }
}

/// Whether `/` is mounted read-only according to `mounts` (a `/proc/<pid>/mounts` file). The last
/// entry for `/` is the one in effect.
pub(crate) fn readonly_root(mounts: &Path) -> Found {
    let text = match std::fs::read_to_string(mounts) {
        Ok(t) => t,
        Err(e) => return unknown(format!("{}: {e}", mounts.display())),
    };
    let mut root = text.lines().filter_map(|l| {
        let mut f = l.split_whitespace();
        let (_dev, point, fstype, options) = (f.next()?, f.next()?, f.next()?, f.next()?);
        (point == "/" && fstype != "rootfs").then(|| options.to_string())
    });
    match root.next_back() {
        None => unknown(format!("{}: no entry for /", mounts.display())),
        Some(o) if o.split(',').any(|x| x == "ro") => {
            problem("root filesystem is mounted read-only")
        }
        Some(_) => healthy("root filesystem is writable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_answers_become_exit_codes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                "HTTP/1.1 200 OK\r\n\r\nok",
                "HTTP/1.1 500 Internal Server Error\r\n\r\n[-]syncloop failed",
            ] {
                let (mut s, _) = listener.accept().unwrap();
                let mut req = [0u8; 1024];
                let n = s.read(&mut req).unwrap();
                assert!(
                    String::from_utf8_lossy(&req[..n]).starts_with("GET /healthz HTTP/1.0\r\n")
                );
                s.write_all(answer.as_bytes()).unwrap();
            }
        });
        let url = format!("http://{addr}/healthz");
        let t = Duration::from_secs(5);
        // The status, never the body (issue 76: a body may hold a credential, and the line
        // becomes a condition's message).
        assert_eq!(http(&url, t), healthy(format!("{url}: 200")));
        assert_eq!(http(&url, t), problem(format!("{url}: 500")));
        server.join().unwrap();
        // Nothing listening: a problem. Not http: unknown.
        assert_eq!(http(&url, t).code, 1);
        assert_eq!(http("https://x/healthz", t).code, 2);
    }

    #[test]
    fn conntrack_fill_against_the_threshold() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nf_conntrack_max"), "1000\n").unwrap();
        std::fs::write(dir.path().join("nf_conntrack_count"), "899\n").unwrap();
        assert_eq!(
            conntrack(dir.path(), 90),
            healthy("conntrack table 89% full (899 of 1000)")
        );
        std::fs::write(dir.path().join("nf_conntrack_count"), "950\n").unwrap();
        assert_eq!(
            conntrack(dir.path(), 90),
            problem("conntrack table 95% full (950 of 1000)")
        );
        assert_eq!(conntrack(&dir.path().join("none"), 90).code, 2);
    }

    #[test]
    fn readonly_root_from_a_mounts_file() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("mounts");
        std::fs::write(
            &m,
            "rootfs / rootfs rw 0 0\n/dev/sda1 / ext4 rw,relatime 0 0\nproc /proc proc rw 0 0\n",
        )
        .unwrap();
        assert_eq!(readonly_root(&m).code, 0);
        std::fs::write(
            &m,
            "/dev/sda1 / ext4 rw,relatime 0 0\n/dev/sda1 / ext4 ro,relatime 0 0\n",
        )
        .unwrap();
        assert_eq!(
            readonly_root(&m),
            problem("root filesystem is mounted read-only")
        );
        std::fs::write(&m, "proc /proc proc rw 0 0\n").unwrap();
        assert_eq!(readonly_root(&m).code, 2);
    }
}
