//! Process plumbing both binaries share.

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Wait for SIGTERM (what the kubelet sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// A reflector store fed by a watcher of `api` (with `config`'s selectors), each object passed through
/// `modify` before it is stored; `changed` is notified after every event. Watch errors are logged and
/// retried by the watcher.
pub fn watch_store<K>(
    api: kube::Api<K>,
    config: watcher::Config,
    changed: Arc<Notify>,
    modify: fn(&mut K),
) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream =
        reflector::reflector(writer, watcher(api, config).modify(modify)).applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                tracing::warn!(error = %e, "watch error; the watcher retries");
            }
            changed.notify_one();
        }
    });
    (reader, task)
}
