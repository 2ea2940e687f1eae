//! kured's DaemonSet, watched for its reboot lock (`--kured-daemonset`): I/O, one object by name
//! (its Role may name it), its lock annotation's text handed on as it changes. What the lock says
//! is decided in `decide::gates::reboot_lock`.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use nodemedic_common::throttle::Throttle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::decide::gates::reboot_lock::KURED_LOCK_ANNOTATION;

/// kured's lock annotation as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockText {
    /// Not read yet.
    NotRead,
    /// The DaemonSet read: its annotation, if it has one; `None` too when there is no such
    /// DaemonSet (kured is not running: no lock).
    Read(Option<String>),
    /// The watch fails: why, in an operator's words.
    Failed(String),
}

/// Watch kured's DaemonSet `name` in `namespace`, sending its lock's text on every change.
pub(crate) fn spawn(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> (watch::Receiver<LockText>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(LockText::NotRead);
    let api: Api<DaemonSet> = Api::namespaced(client, namespace);
    let at = format!("{namespace}/{name}");
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn(async move {
        let stream = watcher(api, cfg).default_backoff();
        futures::pin_mut!(stream);
        let mut failing = Throttle::default();
        let mut seen = false;
        while let Some(ev) = stream.next().await {
            let text = match ev {
                Ok(watcher::Event::Apply(ds) | watcher::Event::InitApply(ds)) => {
                    seen = true;
                    LockText::Read(lock_of(&ds))
                }
                Ok(watcher::Event::Delete(_)) => LockText::Read(None),
                Ok(watcher::Event::Init) => {
                    seen = false;
                    continue;
                }
                Ok(watcher::Event::InitDone) if seen => continue,
                Ok(watcher::Event::InitDone) => {
                    tracing::warn!(daemonset = %at, "kured's DaemonSet is not there: its reboot lock is taken as free (is --kured-daemonset right?)");
                    LockText::Read(None)
                }
                Err(e) => {
                    super::watch_errors::watch_failed(&mut failing, "kured's DaemonSet", &e);
                    let why = super::watch_errors::watch_error(&e);
                    LockText::Failed(format!(
                        "kured's DaemonSet {at} cannot be read ({why}): reboots wait"
                    ))
                }
            };
            failing.reset();
            tx.send_if_modified(|old| {
                let changed = *old != text;
                *old = text;
                changed
            });
        }
    });
    (rx, task)
}

fn lock_of(ds: &DaemonSet) -> Option<String> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(KURED_LOCK_ANNOTATION)
        .cloned()
}
