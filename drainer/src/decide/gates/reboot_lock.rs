//! kured's reboot lock, pure: where kured runs, its lock says which nodes it is rebooting (issue 79,
//! point 3). kured reboots one node at a time (`--concurrency` at once) under an annotation on its
//! own DaemonSet (`weave.works/kured-node-lock` on `kube-system/kured`), holding it from before its
//! drain until the node is back. So, beside it:
//! - a node kured holds the lock for is kured's: nothing new starts on it ([`super::peer`]);
//! - a reboot or power-cycle of ours waits while the lock is full, and a standing reboot request
//!   is withdrawn: no two nodes reboot at once unless kured's own concurrency allows it.
//!
//! Settings: `--kured-daemonset NAMESPACE/NAME` (none: kured is not looked at). State: the lock as
//! last read ([`KuredLock`]); an unreadable lock, or one not read yet, holds reboots (it may say
//! kured is rebooting a node), and says why. Persists nothing. Whoever may write kured's DaemonSet
//! (kured's own token, on every node) can hold reboots back this way, never start one.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// The annotation kured keeps its lock in (its `--lock-annotation` default).
pub const KURED_LOCK_ANNOTATION: &str = "weave.works/kured-node-lock";

/// kured's lock as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KuredLock {
    /// Read: the nodes holding it now (expired holds left out), and how many may at once.
    Read { holders: Vec<String>, max: usize },
    /// Not read (yet, or the read failed, or its value is not kured's): why, in an operator's
    /// words. Reboots wait.
    Unknown(String),
}

/// One hold as kured writes it: `{"nodeID", "metadata", "created", "TTL"}` (TTL in nanoseconds,
/// 0: none).
#[derive(serde::Deserialize)]
struct Hold {
    #[serde(rename = "nodeID")]
    node: String,
    created: Option<Timestamp>,
    #[serde(default, rename = "TTL")]
    ttl: i64,
}

/// kured's multi-owner form (`--concurrency` above 1).
#[derive(serde::Deserialize)]
struct Holds {
    #[serde(default, rename = "maxOwners")]
    max: usize,
    #[serde(default)]
    locks: Vec<Hold>,
}

impl Hold {
    fn in_force(&self, now: Timestamp) -> bool {
        match (self.ttl, self.created) {
            (ttl, Some(created)) if ttl > 0 => {
                let ttl = Duration::from_nanos(ttl as u64);
                now < nodemedic_common::time::add(created, ttl)
            }
            _ => true,
        }
    }
}

/// The lock as its annotation (`None`: absent, free) says at `now`, on `at` (`NAMESPACE/NAME`).
pub(crate) fn read(annotation: Option<&str>, at: &str, now: Timestamp) -> KuredLock {
    let Some(text) = annotation.filter(|t| !t.trim().is_empty()) else {
        return KuredLock::Read {
            holders: Vec::new(),
            max: 1,
        };
    };
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return unreadable(at, &e.to_string()),
    };
    let parsed = if value.get("locks").is_some() || value.get("maxOwners").is_some() {
        serde_json::from_value::<Holds>(value).map(|h| (h.locks, h.max.max(1)))
    } else {
        serde_json::from_value::<Hold>(value).map(|h| (vec![h], 1))
    };
    match parsed {
        Ok((holds, max)) => KuredLock::Read {
            holders: holds
                .into_iter()
                .filter(|h| h.in_force(now) && !h.node.is_empty())
                .map(|h| h.node)
                .collect(),
            max,
        },
        Err(e) => unreadable(at, &e.to_string()),
    }
}

fn unreadable(at: &str, why: &str) -> KuredLock {
    KuredLock::Unknown(format!(
        "kured's lock on {at} ({KURED_LOCK_ANNOTATION}) is not kured's: {why}"
    ))
}

impl KuredLock {
    /// Whether kured holds the lock for `node` (it is rebooting it).
    pub(crate) fn holds(&self, node: &str) -> bool {
        matches!(self, KuredLock::Read { holders, .. } if holders.iter().any(|h| h == node))
    }

    /// Why a reboot of `node` waits, if it does: the lock is full with other nodes, or unknown.
    pub(crate) fn reboot_waits(&self, node: &str) -> Option<String> {
        match self {
            KuredLock::Unknown(why) => Some(why.clone()),
            KuredLock::Read { holders, max } => {
                let others: Vec<&str> = (holders.iter())
                    .filter(|h| *h != node)
                    .map(String::as_str)
                    .collect();
                (holders.len() >= *max && !others.is_empty()).then(|| {
                    format!(
                        "kured is rebooting {} under its lock ({max} at once): reboots wait for it",
                        others.join(", ")
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-12-08T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn kureds_single_and_multi_locks_name_their_holders_and_expired_holds_go() {
        let at = "kube-system/kured";
        let single = r#"{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-12-08T09:50:00Z","TTL":0}"#;
        let lock = read(Some(single), at, now());
        assert!(lock.holds("n1") && !lock.holds("n2"));
        assert_eq!(
            lock.reboot_waits("n2").unwrap(),
            "kured is rebooting n1 under its lock (1 at once): reboots wait for it"
        );
        assert_eq!(lock.reboot_waits("n1"), None, "its own hold");
        // A TTL of 5 minutes, taken 10 minutes ago: expired, free.
        let expired = single.replace(r#""TTL":0"#, r#""TTL":300000000000"#);
        let lock = read(Some(&expired), at, now());
        assert!(!lock.holds("n1"));
        assert_eq!(lock.reboot_waits("n2"), None);
        // Two at once, one taken: room for ours.
        let multi =
            r#"{"maxOwners":2,"locks":[{"nodeID":"n1","created":"2026-12-08T09:59:00Z","TTL":0}]}"#;
        let lock = read(Some(multi), at, now());
        assert!(lock.holds("n1"));
        assert_eq!(lock.reboot_waits("n2"), None);
        let full = r#"{"maxOwners":2,"locks":[{"nodeID":"n1","created":"2026-12-08T09:59:00Z","TTL":0},{"nodeID":"n3","created":"2026-12-08T09:59:00Z","TTL":0}]}"#;
        let said = read(Some(full), at, now()).reboot_waits("n2").unwrap();
        assert!(
            said.starts_with("kured is rebooting n1, n3 under its lock (2 at once)"),
            "{said}"
        );
        // Absent or empty: free.
        for free in [None, Some(""), Some(r#"{"maxOwners":1,"locks":[]}"#)] {
            assert_eq!(read(free, at, now()).reboot_waits("n2"), None, "{free:?}");
        }
    }

    #[test]
    fn a_lock_that_is_not_kureds_holds_reboots_and_says_why() {
        for bad in ["not json", r#"{"nodeID": 7}"#, r#"{"locks": "x"}"#] {
            let lock = read(Some(bad), "kube-system/kured", now());
            let why = lock.reboot_waits("n1").unwrap();
            assert!(
                why.starts_with("kured's lock on kube-system/kured (weave.works/kured-node-lock) is not kured's: "),
                "{why}"
            );
            assert!(!lock.holds("n1"));
        }
    }
}
