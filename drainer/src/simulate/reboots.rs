//! The simulated machines' side of the remediation ladder: a reboot the drainer asks for (its
//! requests, read from their ConfigMap as the detectors read them, written by the drainer's own
//! publisher) comes back after `rebootTakes` with a new bootID
//! and, as the node's group says, its problem gone (`heals`), still there (`survives`), or never
//! comes back (`never`: too hung to reboot itself). A power-cycle (asked of the provider, from
//! outside) brings back even a node that never reboots itself, its problem gone unless it
//! `survives`. I/O-free: it changes the cluster in memory.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::reboot::Requests;
use nodemedic_common::status::Status;
use serde::Deserialize;
use tokio::sync::watch;

use crate::act::memory::MemoryCluster;

/// What a reboot does to a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Outcome {
    /// Back with a new bootID, its problem gone.
    #[default]
    Heals,
    /// Back with a new bootID, its problem still there.
    Survives,
    /// It never comes back.
    Never,
}

/// What a power-cycle from outside does to a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Outside {
    /// The provider reboots the machine.
    #[default]
    Works,
    /// The provider gives up (a medik8s remediation's `Succeeded=False`; another provider's
    /// error).
    Fails,
}

/// What restarting a component (a ladder's `restart kubelet`) does to a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Restart {
    /// The component comes back healthy: the problem clears.
    #[default]
    Helps,
    /// It comes back, the problem still there.
    Fails,
}

/// What the remediations from inside and outside do to one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Machine {
    pub(crate) reboot: Outcome,
    pub(crate) power_cycle: Outside,
    pub(crate) restart: Restart,
}

/// How long a restarted component takes to be healthy again.
const RESTART_TAKES: std::time::Duration = std::time::Duration::from_secs(30);

/// The bootID a simulated node starts with.
pub(crate) fn first_boot(node: &str) -> String {
    format!("{node}-boot-1")
}

/// The reboots asked for and when each machine comes back.
pub(crate) struct Reboots {
    /// Changes with each write of the drainer's ConfigMaps.
    writes: watch::Receiver<u64>,
    /// The requests' ConfigMap.
    configmap: String,
    /// The requests seen (node and the bootID it was made for).
    seen: BTreeSet<(String, String)>,
    /// What comes back when: a machine with its boot number, or (None) a restarted component.
    back: BTreeMap<Timestamp, Vec<(String, Option<u32>)>>,
    /// Boots so far, by node.
    boots: BTreeMap<String, u32>,
    /// What a reboot and a restart do, by node.
    outcomes: BTreeMap<String, Machine>,
    /// Nodes rebooted from outside: back even when they never reboot themselves.
    power_cycled: BTreeSet<String>,
    /// The problem conditions a healed node reports healthy: (type, healthy status).
    healthy: Vec<(String, Status)>,
}

impl Reboots {
    /// Carrying out the requests the drainer with Lease `lease` writes in `cluster`, with what a
    /// reboot does to each node (by name).
    pub(crate) fn new(
        cluster: &MemoryCluster,
        lease: &str,
        outcomes: BTreeMap<String, Machine>,
        cfg: &crate::config::Config,
    ) -> Reboots {
        let healthy = (cfg.conditions.iter())
            .filter(|c| c.type_ != "Ready")
            .map(|c| {
                let ok = match c.status {
                    Status::True => Status::False,
                    _ => Status::True,
                };
                (c.type_.clone(), ok)
            })
            .collect();
        Reboots {
            writes: cluster.configmap_writes(),
            configmap: nodemedic_common::reboot::configmap_name(lease),
            seen: BTreeSet::new(),
            back: BTreeMap::new(),
            boots: BTreeMap::new(),
            outcomes,
            power_cycled: BTreeSet::new(),
            healthy,
        }
    }

    fn outcome(&self, node: &str) -> Outcome {
        self.machine(node).reboot
    }

    fn machine(&self, node: &str) -> Machine {
        self.outcomes.get(node).copied().unwrap_or_default()
    }

    /// Until the drainer writes its ConfigMaps (or forever, once the cluster is gone).
    pub(crate) async fn changed(&mut self) {
        if self.writes.changed().await.is_err() {
            std::future::pending::<()>().await
        }
    }

    /// The new requests at `now` are carried out: each machine comes back `plan.reboot_takes`
    /// later (a restarted component [`RESTART_TAKES`] later), unless it never does. What happened
    /// (the node, `rebooted` or `restarted`, the detail), for the report.
    pub(crate) fn take(
        &mut self,
        cluster: &MemoryCluster,
        now: Timestamp,
        takes: std::time::Duration,
    ) -> Vec<(String, &'static str, String)> {
        self.writes.borrow_and_update();
        let requests = self.requests(cluster);
        let mut said = Vec::new();
        for (node, r) in requests.iter().filter(|(_, r)| !r.action.is_reboot()) {
            if self.seen.insert((node.clone(), r.id())) {
                let at = nodemedic_common::time::add(now, RESTART_TAKES);
                self.back.entry(at).or_default().push((node.clone(), None));
                let takes = humantime::format_duration(RESTART_TAKES);
                let detail = format!("{}; back in {takes}", r.action);
                said.push((node.clone(), "restarted", detail));
            }
        }
        let asked = (requests.into_iter())
            .filter(|(_, r)| r.action.is_reboot())
            .map(|(node, r)| (node, r.boot_id, false))
            .chain((cluster.power_cycles().into_iter()).map(|(n, b)| (n, b, true)));
        for (node, boot_id, outside) in asked {
            // A power-cycle follows a reboot asked for the same boot: each is carried out once.
            let key = if outside {
                format!("{boot_id} power-cycle")
            } else {
                boot_id
            };
            if !self.seen.insert((node.clone(), key)) {
                continue;
            }
            if outside {
                self.power_cycled.insert(node.clone());
            } else if self.outcome(&node) == Outcome::Never {
                said.push((node, "rebooted", "rebooting; it never comes back".into()));
                continue;
            }
            let boot = self.boots.entry(node.clone()).or_insert(1);
            *boot += 1;
            let at = nodemedic_common::time::add(now, takes);
            self.back
                .entry(at)
                .or_default()
                .push((node.clone(), Some(*boot)));
            let takes = humantime::format_duration(takes);
            said.push((node, "rebooted", format!("rebooting; back in {takes}")));
        }
        said
    }

    /// The requests in their ConfigMap, as a detector reads its own entry (one that does not
    /// parse is no request).
    fn requests(&self, cluster: &MemoryCluster) -> Requests {
        let data = cluster.configmap(&self.configmap).unwrap_or_default();
        (data.into_iter())
            .filter_map(|(node, text)| Some((node, serde_json::from_str(&text).ok()?)))
            .collect()
    }

    /// When the next machine comes back.
    pub(crate) fn next(&self) -> Option<Timestamp> {
        self.back.keys().next().copied()
    }

    /// The machines due by `now` come back: a new bootID, Ready, and what their group says of
    /// the problem. What happened, for the report.
    pub(crate) fn come_back(
        &mut self,
        now: Timestamp,
        cluster: &MemoryCluster,
    ) -> Vec<(String, String)> {
        let mut said = Vec::new();
        while let Some(entry) = self.back.first_entry() {
            if *entry.key() > now {
                break;
            }
            for (node, boot) in entry.remove() {
                let Some(boot) = boot else {
                    let helps = self.machine(&node).restart == Restart::Helps;
                    if helps {
                        for (type_, ok) in &self.healthy {
                            cluster.set_condition(&node, type_, *ok, now);
                        }
                    }
                    let detail = match helps {
                        true => "restarted component healthy, its problem gone",
                        false => "restarted component back, its problem still there",
                    };
                    said.push((node, detail.to_string()));
                    continue;
                };
                cluster.set_boot_id(&node, &format!("{node}-boot-{boot}"));
                cluster.set_condition(&node, "Ready", Status::True, now);
                let heals = match self.outcome(&node) {
                    Outcome::Heals => true,
                    // Too hung to reboot itself: a power-cycle clears what hung it.
                    Outcome::Never => self.power_cycled.contains(&node),
                    Outcome::Survives => false,
                };
                let detail = if heals {
                    for (type_, ok) in &self.healthy {
                        cluster.set_condition(&node, type_, *ok, now);
                    }
                    "back with a new bootID, its problem gone"
                } else {
                    "back with a new bootID, its problem still there"
                };
                said.push((node, detail.to_string()));
            }
        }
        said
    }
}

/// What a scenario expects of its ladders.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Expect {
    /// Reboots proven (a new bootID, Ready and the problem clear), exactly.
    #[serde(default)]
    pub(crate) reboots_proven: Option<usize>,
    /// The nodes whose ladder ends with a person, exactly.
    #[serde(default)]
    pub(crate) needs_person: Option<Vec<String>>,
    /// The nodes replaced (their Node deleted), exactly.
    #[serde(default)]
    pub(crate) replaced: Option<Vec<String>>,
    /// Every slow-start change, in order: the width it went to (1: fell back).
    #[serde(default)]
    pub(crate) slow_start_widths: Option<Vec<u32>>,
}
