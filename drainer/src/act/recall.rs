//! The record memory's ConfigMaps (`decide::fleet::seen`): `<lease>-records-00` to `-31`, shipped
//! empty by the manifests, each holding the entries of the nodes its name hashes to under
//! [`DATA_KEY`]. I/O.
//!
//! A new leadership asks for the memory (a number that grows with each ask); the publisher
//! (`act::publisher`) reads every shard and answers with the memory and that number, and only then
//! writes: the shards the controller hands it for that same ask, each only when its text differs
//! from what was read or last written (no write that changes nothing), and only while leading. A
//! read or write that fails is tried again later; leadership never waits on it (the Lease carries
//! none of this).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use nodemedic_common::throttle::Throttle;
use tokio::sync::{mpsc, watch};

use crate::decide::fleet::seen::{SHARDS, Seen};
use crate::model::cluster::{ApiError, Cluster, Data, Gated};
use crate::model::seal::SealKey;

/// The ConfigMap key that holds a shard's text.
pub(crate) const DATA_KEY: &str = "memory";
/// The ConfigMap key that holds the shard's seal: HMAC-SHA256 under the record key over the
/// lease, the shard's number and its text. The drainer's token may write these ConfigMaps (a
/// stolen one once pinned four nodes each in a domain of its own and ended their domain's outage,
/// and widened a domain's slow start): a shard whose seal does not hold is not used.
pub(crate) const SEAL_KEY: &str = "seal";

/// The seal of shard `i`'s `text` for the drainer with Lease `lease`. Its body starts with a
/// context no record's JSON can (records are sealed with the same key).
fn shard_seal(key: &SealKey, lease: &str, i: usize, text: &str) -> String {
    key.seal(&shard_body(lease, i, text))
}

fn shard_body(lease: &str, i: usize, text: &str) -> Vec<u8> {
    format!("nodemedic.io/record-memory shard v1\0{lease}\0{i}\0{text}").into_bytes()
}

/// Shard `i`'s ConfigMap for the drainer with Lease `lease`.
pub fn configmap_name(lease: &str, i: usize) -> String {
    format!("{lease}-records-{i:02}")
}

/// The memory as read for an ask.
#[derive(Debug)]
pub(crate) struct Recalled {
    pub(crate) ask: u64,
    pub(crate) memory: Seen,
}

/// A shard's text to keep, for the ask whose answer it continues.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) ask: u64,
    pub(crate) shard: usize,
    pub(crate) text: Arc<str>,
}

/// The controller's ends of the task: where it asks, hears back, and hands shards.
pub(crate) struct Link {
    pub(crate) asks: watch::Sender<u64>,
    /// Moved, not shared: the controller keeps the only copy of the memory.
    pub(crate) answers: mpsc::UnboundedReceiver<Recalled>,
    pub(crate) kept: mpsc::UnboundedSender<Kept>,
}

/// The controller's side of the memory's ConfigMaps.
pub(crate) struct Memory {
    pub(crate) link: Link,
    /// The ask this leadership still waits on (None: answered, or not asked).
    pub(crate) waiting: Option<u64>,
    /// The last ask: the shards handed on continue its answer.
    pub(crate) ask: u64,
    /// Where the Lease's annotation of earlier releases is removed (see `leader::LeaseData`).
    pub(crate) lease_out: watch::Sender<Option<Option<String>>>,
}

impl Memory {
    pub(crate) fn new(link: Link, lease_out: watch::Sender<Option<Option<String>>>) -> Memory {
        Memory {
            link,
            waiting: None,
            ask: 0,
            lease_out,
        }
    }
}

/// The next answer to an ask (never, without a memory or once its task is gone).
pub(crate) async fn answer(memory: &mut Option<Memory>) -> Recalled {
    match memory {
        Some(m) => match m.link.answers.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The controller's end and the publisher's of the memory of the drainer with Lease
/// `namespace/lease`.
pub(crate) fn shards(namespace: &str, lease: &str, key: Arc<SealKey>) -> (Link, Shards) {
    let (asks_tx, asks) = watch::channel(0);
    let (answers_tx, answers_rx) = mpsc::unbounded_channel();
    let (kept_tx, kept) = mpsc::unbounded_channel();
    let shards = Shards {
        names: (0..SHARDS).map(|i| configmap_name(lease, i)).collect(),
        namespace: namespace.to_string(),
        lease: lease.to_string(),
        key,
        asks,
        answers: answers_tx,
        kept,
        answered: 0,
        written: vec![None; SHARDS],
        pending: BTreeMap::new(),
    };
    let link = Link {
        asks: asks_tx,
        answers: answers_rx,
        kept: kept_tx,
    };
    (link, shards)
}

/// The controller is gone: nothing more to keep.
#[derive(Debug)]
pub(crate) struct Gone;

/// The publisher's side of the memory: the asks and shards the controller sends, what was read
/// and written.
pub(crate) struct Shards {
    names: Vec<String>,
    namespace: String,
    lease: String,
    key: Arc<SealKey>,
    asks: watch::Receiver<u64>,
    answers: mpsc::UnboundedSender<Recalled>,
    kept: mpsc::UnboundedReceiver<Kept>,
    /// The last ask answered: shards handed for it are written, any other dropped.
    answered: u64,
    /// Per shard, a hash of the text as last read or written.
    written: Vec<Option<u64>>,
    /// Shards to write, newest text each.
    pending: BTreeMap<usize, Arc<str>>,
}

fn hash(text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Shards {
    /// While leading: answer a new ask (every shard read), then write the shards handed for it;
    /// whether everything went.
    pub(crate) async fn keep<C: Cluster>(
        &mut self,
        cluster: &Gated<C>,
        leader: &watch::Receiver<bool>,
        failing: &mut Throttle,
    ) -> Result<bool, Gone> {
        let ask = *self.asks.borrow_and_update();
        let mut ok = true;
        if ask > self.answered {
            match self.read(cluster).await {
                Ok(memory) => {
                    self.answered = ask;
                    self.pending.clear();
                    self.answers
                        .send(Recalled { ask, memory })
                        .map_err(|_| Gone)?;
                }
                Err((name, e)) => {
                    ok = false;
                    if let Some(quiet) = failing.allow(std::time::Instant::now()) {
                        tracing::warn!(configmap = %format!("{}/{name}", self.namespace), error = %e,
                            earlier_failures_not_logged = quiet,
                            "cannot read the record memory; deciding nothing until it is read (trying again in 10s)");
                    }
                }
            }
        }
        if ask == self.answered && !self.pending.is_empty() {
            ok &= self.write_pending(cluster, leader, failing).await;
        }
        Ok(ok)
    }

    /// Until the controller asks again or hands on shards (taken).
    pub(crate) async fn next(&mut self) -> Result<(), Gone> {
        tokio::select! {
            r = self.asks.changed() => r.map_err(|_| Gone),
            k = self.kept.recv() => {
                self.take(k.ok_or(Gone)?);
                while let Ok(k) = self.kept.try_recv() {
                    self.take(k);
                }
                Ok(())
            }
        }
    }

    fn take(&mut self, k: Kept) {
        if k.ask == self.answered && k.shard < SHARDS {
            self.pending.insert(k.shard, k.text);
        }
    }

    /// Every shard, read now (a missing one, or one without the key, holds nothing: as shipped).
    async fn read<C: Cluster>(&mut self, cluster: &Gated<C>) -> Result<Seen, (String, ApiError)> {
        let mut texts = Vec::with_capacity(SHARDS);
        let empty = Seen::default();
        for (i, name) in self.names.iter().enumerate() {
            let data = cluster
                .read_configmap(name)
                .await
                .map_err(|e| (name.clone(), e))?;
            let mut data = data.unwrap_or_default();
            let text = data.remove(DATA_KEY);
            let seal = data.remove(SEAL_KEY).unwrap_or_default();
            let as_written = text.clone().unwrap_or_else(|| empty.shard_text(i));
            let text = match text {
                Some(t) if !self.key.verify(&shard_body(&self.lease, i, &t), &seal) => {
                    tracing::warn!(configmap = %format!("{}/{name}", self.namespace),
                        sealed = !seal.is_empty(),
                        "part of the record memory is not sealed with the drainer's key (written by someone else, or by a release before memory shards were sealed): not used, and written again; its nodes' day of reboots, their pinned failure domains and, in the first, the slow start's widths start afresh");
                    // Written again whatever the controller hands on.
                    self.written[i] = None;
                    texts.push(None);
                    continue;
                }
                t => t,
            };
            self.written[i] = Some(hash(&as_written));
            texts.push(text);
        }
        let (memory, unreadable) =
            Seen::from_shards(texts.iter().enumerate().map(|(i, t)| (i, t.as_deref())));
        for (i, e) in unreadable {
            tracing::warn!(configmap = %format!("{}/{}", self.namespace, self.names[i]), error = %e,
                "part of the record memory is unreadable: its nodes' older records written back before now are taken once");
        }
        Ok(memory)
    }

    /// Write the pending shards that differ from what the API server holds; whether all went.
    async fn write_pending<C: Cluster>(
        &mut self,
        cluster: &Gated<C>,
        leader: &watch::Receiver<bool>,
        failing: &mut Throttle,
    ) -> bool {
        let pending = std::mem::take(&mut self.pending);
        let mut all = true;
        for (i, text) in pending {
            let h = hash(&text);
            if self.written[i] == Some(h) {
                continue;
            }
            if !*leader.borrow() {
                self.pending.insert(i, text);
                all = false;
                continue;
            }
            let seal = shard_seal(&self.key, &self.lease, i, &text);
            let data = Data::from([
                (DATA_KEY.to_string(), text.to_string()),
                (SEAL_KEY.to_string(), seal),
            ]);
            match cluster
                .keep_configmap(&self.names[i], &data, same_text)
                .await
            {
                Ok(_) => self.written[i] = Some(h),
                Err(e) => {
                    all = false;
                    if let Some(quiet) = failing.allow(std::time::Instant::now()) {
                        tracing::warn!(configmap = %format!("{}/{}", self.namespace, self.names[i]), error = %e,
                            earlier_failures_not_logged = quiet, bytes = text.len(),
                            "cannot write the record memory; trying again in 10s (leadership goes on)");
                    }
                    self.pending.insert(i, text);
                }
            }
        }
        all
    }
}

/// Whether two shards' data hold the same text and seal (anything else in them aside).
fn same_text(a: &Data, b: &Data) -> bool {
    a.get(DATA_KEY) == b.get(DATA_KEY) && a.get(SEAL_KEY) == b.get(SEAL_KEY)
}
