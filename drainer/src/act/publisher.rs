//! The drainer's one publisher, I/O: while leading, it keeps the drainer's own ConfigMaps equal
//! to what it is handed: the reboot requests the controller derives from its records (each signed
//! with `--reboot-signing-key`), the settings `kubectl nodemedic` reads (from the reloader), and
//! the record memory's shards (read back first for each new leadership's ask: `act::recall`). One
//! task, behind the leadership gate (`model::cluster::Gated`), through the cluster seam's one
//! ConfigMap writer (`Cluster::keep_configmap`): each written only when it differs, when it changes
//! or leadership is taken; a failed read or write is tried again [`RETRY`] later, and leadership
//! never waits on any of it. `drainer run` and `drainer simulate` run this same task.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use nodemedic_common::reboot::{Requests as Reboots, SigningKey};
use nodemedic_common::throttle::Throttle;

use crate::act::recall::{self, Link, Shards};
use crate::config::published::{self, Published};
use crate::model::cluster::{Cluster, Data, Gated, Kept};

/// How long after a failed read or write it is tried again.
pub(crate) const RETRY: Duration = Duration::from_secs(10);

/// How long a reboot or restart request is good for its detector: its `until` is at most this far
/// ahead (and never past its step's deadline), and it is signed again every [`RENEW`] while it
/// stands. A request the drainer withdrew (a pause, a gate, its problem cleared), saved by whoever
/// may read the ConfigMap and written back, is refused by the detector once this has passed: an
/// attacker's review wrote one back during a pause and the node rebooted. Wide enough for the
/// clocks of the drainer's and the detector's nodes to disagree by two minutes.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(180);

/// How often the requests are signed again and their ConfigMap read against what it must hold (a
/// write by anyone else, a written-back request among them, is undone by then). Kept on its own
/// clock: the task's other wake-ups (the memory's shards, settings) never put it off.
pub(crate) const RENEW: Duration = Duration::from_secs(30);

/// Whose ConfigMaps these are: the drainer's Lease and this replica.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    pub(crate) namespace: String,
    pub(crate) lease: String,
    pub(crate) identity: String,
    /// The record key: the record memory's shards are sealed with it too (`act::recall`).
    pub(crate) key: std::sync::Arc<crate::model::seal::SealKey>,
}

/// The ends the controller and the reloader hand things to.
pub(crate) struct Outbox {
    pub(crate) reboots: watch::Sender<Reboots>,
    /// `None` inside: nothing published (no settings given).
    pub(crate) settings: watch::Sender<Option<Published>>,
    pub(crate) memory: Link,
}

/// Start the publisher for `owner`, publishing `settings` when given.
pub(crate) fn spawn<C: Cluster>(
    cluster: Gated<C>,
    owner: Owner,
    signing: Option<SigningKey>,
    settings: Option<Published>,
) -> (Outbox, JoinHandle<()>) {
    let (reboots_tx, reboots) = watch::channel(Reboots::default());
    let (settings_tx, settings) = watch::channel(settings);
    let (link, shards) = recall::shards(&owner.namespace, &owner.lease, owner.key.clone());
    let task = Task {
        leader: cluster.leader(),
        cluster,
        reboots: RebootsOut {
            rx: reboots,
            name: nodemedic_common::reboot::configmap_name(&owner.lease),
            signing,
            due: true,
            failing: Throttle::default(),
        },
        settings: SettingsOut {
            rx: settings,
            name: published::configmap_name(&owner.lease),
            due: true,
            fixed: false,
            failing: Throttle::default(),
        },
        shards,
        owner,
        failing: Throttle::default(),
    };
    let outbox = Outbox {
        reboots: reboots_tx,
        settings: settings_tx,
        memory: link,
    };
    (outbox, tokio::spawn(task.run()))
}

struct Task<C> {
    cluster: Gated<C>,
    leader: watch::Receiver<bool>,
    owner: Owner,
    reboots: RebootsOut,
    settings: SettingsOut,
    shards: Shards,
    /// The memory's failures said at most so often (each kind has its own: one failing does not
    /// quiet another).
    failing: Throttle,
}

/// The reboot requests: the latest handed on, and whether they are to be kept again.
struct RebootsOut {
    rx: watch::Receiver<Reboots>,
    name: String,
    signing: Option<SigningKey>,
    due: bool,
    failing: Throttle,
}

/// The published settings.
struct SettingsOut {
    rx: watch::Receiver<Option<Published>>,
    name: String,
    due: bool,
    /// Their sender is gone (no config file: nothing changes them but leadership).
    fixed: bool,
    failing: Throttle,
}

impl<C: Cluster> Task<C> {
    async fn run(mut self) {
        let mut was_leading = false;
        let mut renew_at = tokio::time::Instant::now() + RENEW;
        loop {
            let leading = *self.leader.borrow_and_update();
            if leading && !was_leading {
                // A new leadership checks each against the API server once.
                self.reboots.due = true;
                self.settings.due = true;
            }
            was_leading = leading;
            let mut failed = false;
            if leading {
                match self
                    .shards
                    .keep(&self.cluster, &self.leader, &mut self.failing)
                    .await
                {
                    Err(recall::Gone) => return,
                    Ok(all) => failed |= !all,
                }
                failed |= !self.keep_reboots().await;
                failed |= !self.keep_settings().await;
            }
            let retry = async {
                if failed {
                    tokio::time::sleep(RETRY).await
                } else {
                    std::future::pending().await
                }
            };
            let renew = async {
                if leading {
                    tokio::time::sleep_until(renew_at).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                r = self.leader.changed() => if r.is_err() { return },
                r = self.reboots.rx.changed() => match r {
                    Ok(()) => self.reboots.due = true,
                    Err(_) => return,
                },
                r = self.settings.rx.changed(), if !self.settings.fixed => match r {
                    Ok(()) => self.settings.due = true,
                    Err(_) => self.settings.fixed = true,
                },
                r = self.shards.next() => if r.is_err() { return },
                () = retry => {}
                () = renew => {
                    self.reboots.due = true;
                    renew_at = tokio::time::Instant::now() + RENEW;
                }
            }
        }
    }

    /// Keep the reboot requests' ConfigMap when due; whether it is kept.
    async fn keep_reboots(&mut self) -> bool {
        if !self.reboots.due {
            return true;
        }
        let now = k8s_openapi::jiff::Timestamp::now();
        let wanted = signed(
            fresh(self.reboots.rx.borrow_and_update().clone(), now),
            self.reboots.signing.as_ref(),
        );
        let data = nodemedic_common::reboot::to_data(&wanted);
        let name = &self.reboots.name;
        match self.cluster.keep_configmap(name, &data, Data::eq).await {
            Ok(Kept::Written) => {
                tracing::info!(configmap = %name, requests = wanted.len(), "reboot requests written");
            }
            Ok(Kept::Unchanged) => {}
            Err(e) => {
                if let Some(quiet) = self.reboots.failing.allow(std::time::Instant::now()) {
                    tracing::warn!(configmap = %name, error = %e, requests = wanted.len(),
                        earlier_failures_not_logged = quiet,
                        "cannot write the reboot requests; trying again in 10s");
                }
                return false;
            }
        }
        self.reboots.due = false;
        true
    }

    /// Keep the settings ConfigMap when due (and settings are given); whether it is kept.
    async fn keep_settings(&mut self) -> bool {
        if !self.settings.due {
            return true;
        }
        let Some(p) = self.settings.rx.borrow_and_update().clone() else {
            self.settings.due = false;
            return true;
        };
        let now = nodemedic_common::time::rfc3339(k8s_openapi::jiff::Timestamp::now());
        let data = p.to_data(&self.owner.identity, &now);
        let name = &self.settings.name;
        if let Err(e) = self
            .cluster
            .keep_configmap(name, &data, published::same)
            .await
        {
            if let Some(quiet) = self.settings.failing.allow(std::time::Instant::now()) {
                tracing::warn!(configmap = %format!("{}/{name}", self.owner.namespace), error = %e,
                    earlier_failures_not_logged = quiet,
                    "cannot publish the settings for kubectl nodemedic; trying again in 10s");
            }
            return false;
        }
        self.settings.due = false;
        true
    }
}

/// The requests as good until [`FRESH_FOR`] after `now` at most (each step's deadline stays the
/// latest any of its renewals names).
fn fresh(mut requests: Reboots, now: k8s_openapi::jiff::Timestamp) -> Reboots {
    let soon = nodemedic_common::time::add(now, FRESH_FOR);
    for r in requests.values_mut() {
        let deadline = r.until.parse::<k8s_openapi::jiff::Timestamp>().ok();
        if deadline.is_none_or(|d| d > soon) {
            r.until = nodemedic_common::time::rfc3339(soon);
        }
    }
    requests
}

/// The requests, each signed with `key` (Ed25519 is deterministic: the same request, the same
/// signature, so an unchanged request writes nothing).
fn signed(requests: Reboots, key: Option<&SigningKey>) -> Reboots {
    let Some(key) = key else {
        return requests;
    };
    requests
        .into_iter()
        .map(|(n, r)| (n, r.signed(key)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use nodemedic_common::reboot::RebootRequest;

    use super::*;
    use crate::act::memory::{MemoryCluster, Write};
    use crate::act::recall::{self, Kept as Shard};
    use crate::config::flags::PolicyArgs;
    use crate::observe::Observed;

    const LEASE: &str = "nodemedic-drainer";

    fn request(node: &str) -> RebootRequest {
        RebootRequest {
            action: Default::default(),
            node: node.into(),
            uid: format!("{node}-uid"),
            boot_id: format!("{node}-boot-1"),
            requested: "2026-12-02T00:00:00Z".into(),
            until: "2026-12-02T00:10:00Z".into(),
            because: vec!["KernelDeadlock=True".into()],
            signature: String::new(),
        }
    }

    fn configmap_writes(cluster: &MemoryCluster) -> Vec<String> {
        (cluster.take_writes().into_iter())
            .filter_map(|w| match w {
                Write::ConfigMap { name } => Some(name),
                _ => None,
            })
            .collect()
    }

    /// Until the publisher has taken everything sent to it (paused time moves on only when every
    /// task waits).
    async fn settled() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn one_task_writes_all_three_only_while_leading_and_only_what_changed() {
        let cluster = MemoryCluster::new(Observed::default());
        let (lead, leader) = watch::channel(false);
        let owner = Owner {
            key: crate::model::seal::RecordTrust::process().key(),
            namespace: "kube-system".into(),
            lease: LEASE.into(),
            identity: "replica-a".into(),
        };
        let settings = Published::new(&PolicyArgs::default(), Some("maxDrains: 1\n".into()));
        let gated = Gated::new(cluster.clone(), leader);
        let (mut out, task) = spawn(gated, owner, None, Some(settings));
        // A follower is handed requests, shards and an ask: it writes and reads nothing.
        out.reboots
            .send_replace(BTreeMap::from([("n1".to_string(), request("n1"))]));
        out.memory.asks.send_replace(1);
        settled().await;
        assert_eq!(configmap_writes(&cluster), Vec::<String>::new());
        assert!(
            out.memory.answers.try_recv().is_err(),
            "no answer while following"
        );

        // Leading: the memory is read back (answered), the requests and settings written once each.
        lead.send_replace(true);
        settled().await;
        let answer = out.memory.answers.try_recv().expect("the ask is answered");
        assert_eq!(answer.ask, 1);
        let mut written = configmap_writes(&cluster);
        written.sort();
        let requests = nodemedic_common::reboot::configmap_name(LEASE);
        let published = published::configmap_name(LEASE);
        assert_eq!(written, vec![requests.clone(), published.clone()]);
        let held = cluster
            .configmap(&requests)
            .expect("the requests are written");
        assert!(held["n1"].contains("n1-boot-1"), "{held:?}");

        // A shard handed on for that ask is written; the same requests again write nothing.
        let text: Arc<str> = Arc::from("n1 2026-12-02T00:00:00Z\n");
        let shard = Shard {
            ask: 1,
            shard: 3,
            text,
        };
        out.memory.kept.send(shard).unwrap();
        out.reboots.send_modify(|_| {});
        settled().await;
        assert_eq!(
            configmap_writes(&cluster),
            vec![recall::configmap_name(LEASE, 3)]
        );

        // Leadership lost: a new request waits for the next leadership.
        lead.send_replace(false);
        out.reboots.send_modify(|r| {
            r.insert("n2".into(), request("n2"));
        });
        settled().await;
        assert_eq!(configmap_writes(&cluster), Vec::<String>::new());
        lead.send_replace(true);
        settled().await;
        assert_eq!(configmap_writes(&cluster), vec![requests.clone()]);
        assert!(cluster.configmap(&requests).unwrap().contains_key("n2"));
        task.abort();
    }

    #[test]
    fn a_request_is_good_for_minutes_never_past_its_deadline() {
        let now: k8s_openapi::jiff::Timestamp = "2026-12-02T00:00:00Z".parse().unwrap();
        let mut far = request("far");
        far.until = "2026-12-02T00:20:00Z".into();
        let mut near = request("near");
        near.until = "2026-12-02T00:01:00Z".into();
        let mut odd = request("odd");
        odd.until = "soon".into();
        let all = BTreeMap::from([
            ("far".to_string(), far),
            ("near".to_string(), near),
            ("odd".to_string(), odd),
        ]);
        let got = fresh(all, now);
        assert_eq!(got["far"].until, "2026-12-02T00:03:00Z");
        assert_eq!(
            got["near"].until, "2026-12-02T00:01:00Z",
            "its deadline is sooner"
        );
        assert_eq!(got["odd"].until, "2026-12-02T00:03:00Z");
    }

    /// A standing request is signed again every [`RENEW`] with a later `until`, and what anyone
    /// else wrote into the ConfigMap (a withdrawn request written back) is undone at the same time;
    /// the task's other wake-ups (settings handed on every few seconds) do not put it off (they
    /// once restarted its wait each time, so a busy drainer never renewed).
    #[tokio::test(start_paused = true)]
    async fn standing_requests_are_renewed_and_a_write_back_undone_on_their_own_clock() {
        let cluster = MemoryCluster::new(Observed::default());
        let (_lead, leader) = watch::channel(true);
        let owner = Owner {
            key: crate::model::seal::RecordTrust::process().key(),
            namespace: "kube-system".into(),
            lease: LEASE.into(),
            identity: "replica-a".into(),
        };
        let gated = Gated::new(cluster.clone(), leader);
        let settings = Published::new(&PolicyArgs::default(), Some("maxDrains: 1\n".into()));
        let (out, task) = spawn(gated, owner, None, Some(settings));
        let mut standing = request("n1");
        standing.until = "2999-01-01T00:00:00Z".into();
        out.reboots
            .send_replace(BTreeMap::from([("n1".to_string(), standing)]));
        settled().await;
        let name = nodemedic_common::reboot::configmap_name(LEASE);
        let until = |cluster: &MemoryCluster| {
            let held = cluster.configmap(&name).unwrap();
            let r: RebootRequest = serde_json::from_str(&held["n1"]).unwrap();
            r.until.parse::<k8s_openapi::jiff::Timestamp>().unwrap()
        };
        let first = until(&cluster);
        let soon = nodemedic_common::time::add(k8s_openapi::jiff::Timestamp::now(), FRESH_FOR);
        assert!(first <= soon, "{first} is at most {FRESH_FOR:?} ahead");
        // Someone writes a saved request for n2 back.
        let mut held = cluster.configmap(&name).unwrap();
        held.insert("n2".into(), serde_json::to_string(&request("n2")).unwrap());
        cluster.write_configmap(&name, held);
        configmap_writes(&cluster);
        let poke = Duration::from_secs(5);
        for _ in 0..(RENEW.as_secs() / poke.as_secs() + 1) {
            out.settings.send_modify(|_| {});
            tokio::time::sleep(poke).await;
        }
        settled().await;
        assert!(
            configmap_writes(&cluster).contains(&name),
            "the requests written again"
        );
        let held = cluster.configmap(&name).unwrap();
        assert!(!held.contains_key("n2"), "the write-back undone: {held:?}");
        assert!(held.contains_key("n1"));
        task.abort();
    }
}
