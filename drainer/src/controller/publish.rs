//! What the controller keeps outside itself, the shell: the breaker on the Lease (through the
//! election, which writes the Lease), the record memory and the reboot requests in the drainer's
//! own ConfigMaps (through the one publisher, `act::publisher`), each handed on only when it
//! changed; and what a new leadership reads back first. Channels to the tasks that write, no
//! decisions.
//!
//! The record memory's round trip (`decide::fleet::seen`): a new leadership asks for it and decides
//! nothing until the answer is in, so a record written back while no replica led is refused from the
//! first round; then each round hands on the shards that changed. An earlier release kept the memory
//! on the Lease (`nodemedic.io/records`): read back once, when the ConfigMaps hold nothing yet, and
//! then removed from the Lease by the next renewal.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::reboot::Requests as Reboots;
use tokio::sync::watch;

use super::Controller;
use crate::act::recall::{Kept, Link, Memory, Recalled};
use crate::decide::fleet::seen::{SHARDS, Seen};
use crate::decide::gates::breaker;
use crate::decide::gates::reboot_lock::{self, KuredLock};
use crate::model::cluster::Cluster;

impl<C: Cluster> Controller<C> {
    /// Read the pause and the breaker from the Lease, and keep the breaker's state there.
    pub(crate) fn with_lease(
        mut self,
        lease: watch::Receiver<Option<Lease>>,
        breaker_out: watch::Sender<Option<Option<String>>>,
    ) -> Controller<C> {
        self.publish.lease = Some(lease);
        self.publish.breaker_out = Some(breaker_out);
        self
    }

    /// Hand the reboot requests the records stand for to `out` whenever they change.
    pub(crate) fn with_reboot_requests(mut self, out: watch::Sender<Reboots>) -> Controller<C> {
        self.publish.reboots_out = Some(out);
        self
    }

    /// Read kured's lock (its DaemonSet `at`) from `rx` each round.
    pub(crate) fn with_kured(
        mut self,
        at: String,
        rx: watch::Receiver<crate::observe::reboot_lock::LockText>,
    ) -> Controller<C> {
        self.publish.kured = Some((at, rx));
        self
    }

    /// kured's lock as last read, at `now`.
    pub(super) fn kured_lock(&self, now: Timestamp) -> Option<(String, KuredLock)> {
        use crate::observe::reboot_lock::LockText;
        let (at, rx) = self.publish.kured.as_ref()?;
        let lock = match &*rx.borrow() {
            LockText::NotRead => KuredLock::Unknown(format!(
                "kured's lock on {at} is not read yet: reboots wait"
            )),
            LockText::Read(text) => reboot_lock::read(text.as_deref(), at, now),
            LockText::Failed(why) => KuredLock::Unknown(why.clone()),
        };
        Some((at.clone(), lock))
    }

    /// Hand the reboot requests on when they changed.
    pub(super) fn publish_reboots(&mut self) {
        // A dry run writes nothing: the requests wait until it ends.
        if self.cfg.dry_run {
            return;
        }
        let Some(reboots) = self.fleet.reboots_changed() else {
            return;
        };
        if let Some(tx) = &self.publish.reboots_out {
            tx.send_if_modified(|old| {
                let changed = *old != reboots;
                *old = reboots;
                changed
            });
        }
    }

    /// What `f` reads of the Lease as last seen, without copying it (a round reads it every time).
    pub(super) fn read_lease<T>(&self, f: impl FnOnce(&Lease) -> T) -> Option<T> {
        self.publish
            .lease
            .as_ref()
            .and_then(|l| l.borrow().as_ref().map(f))
    }

    /// The annotation `key` of the Lease as last seen.
    pub(super) fn lease_annotation(&self, key: &str) -> Option<String> {
        self.read_lease(|l| l.metadata.annotations.as_ref()?.get(key).cloned())
            .flatten()
    }

    /// A new leadership continues the breaker the previous leader kept on the Lease.
    pub(super) fn restore_breaker(&mut self) {
        let raw = self.lease_annotation(breaker::BREAKER_ANNOTATION);
        let breaker = match raw.as_deref().map(breaker::Breaker::from_annotation) {
            None => breaker::Breaker::default(),
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "unreadable breaker state on the Lease; starting closed");
                breaker::Breaker::default()
            }
        };
        if breaker.is_open() {
            let reason = breaker.trip.as_ref().map(ToString::to_string);
            let reason = reason.unwrap_or_default();
            tracing::warn!(%reason, "the circuit breaker was open: it stays open");
        }
        self.fleet.restore_breaker(breaker);
        self.publish.published_breaker = None;
        self.publish_breaker();
    }

    pub(super) fn publish_breaker(&mut self) {
        let b = self.fleet.breaker();
        let state = b.is_open().then(|| b.to_annotation());
        if self.publish.published_breaker.as_ref() != Some(&state) {
            if let Some(tx) = &self.publish.breaker_out {
                tx.send_replace(Some(state.clone()));
            }
            self.publish.published_breaker = Some(state);
        }
    }

    /// Keep the record memory in its ConfigMaps through `link`; `lease_out` removes what an
    /// earlier release kept on the Lease.
    pub(crate) fn with_record_memory(
        mut self,
        link: Link,
        lease_out: watch::Sender<Option<Option<String>>>,
    ) -> Controller<C> {
        self.publish.memory = Some(Memory::new(link, lease_out));
        self
    }

    /// A new leadership asks for the memory, and decides nothing until it is in.
    pub(super) fn ask_memory(&mut self) {
        if let Some(m) = &mut self.publish.memory {
            m.ask += 1;
            m.waiting = Some(m.ask);
            m.link.asks.send_replace(m.ask);
        }
    }

    /// Whether rounds wait for the memory still.
    pub(super) fn waiting_for_memory(&self) -> bool {
        self.publish
            .memory
            .as_ref()
            .is_some_and(|m| m.waiting.is_some())
    }

    /// The memory came back: the fleet continues it when it answers the ask this leadership made
    /// (an answer to an earlier one is dropped).
    pub(super) fn memory_answered(&mut self, answer: Recalled) {
        let Some(m) = &mut self.publish.memory else {
            return;
        };
        if Some(answer.ask) != m.waiting {
            return;
        }
        m.waiting = None;
        let mut seen = answer.memory;
        let key = crate::model::keys::RECORDS_ANNOTATION;
        if let Some(raw) = self.lease_annotation(key) {
            if seen == Seen::default() {
                match Seen::from_annotation(&raw) {
                    Ok(old) => {
                        tracing::info!(
                            nodes = old.nodes.len(),
                            "the record memory an earlier release kept on the Lease moves to its ConfigMaps"
                        );
                        seen = old;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the record memory an earlier release kept on the Lease is unreadable: an older record written back before now is taken once")
                    }
                }
            }
            if let Some(m) = &self.publish.memory {
                m.lease_out.send_replace(Some(None));
            }
        }
        tracing::info!(
            nodes = seen.nodes.len(),
            "record memory read back: deciding"
        );
        self.fleet.restore_seen(seen);
    }

    /// Hand on the shards of the memory that changed (none before it is read back).
    pub(super) fn publish_records(&mut self, now: Timestamp) {
        let Some(m) = &self.publish.memory else {
            return;
        };
        if m.waiting.is_some() {
            return;
        }
        let Some((dirty, seen)) = self.fleet.memory_changed(now) else {
            return;
        };
        for shard in (0..SHARDS).filter(|i| dirty & (1 << i) != 0) {
            let text = seen.shard_text(shard).into();
            let _ = m.link.kept.send(Kept {
                ask: m.ask,
                shard,
                text,
            });
        }
    }
}
