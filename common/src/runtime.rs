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
/// retried with kube's default exponential backoff (0.8 s doubling to 30 s, reset once the watch is
/// healthy): without it an unreachable API server made the loop spin a core and log ~100k lines/s.
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
    let stream = reflector::reflector(
        writer,
        watcher(api, config).default_backoff().modify(modify),
    )
    .applied_objects();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A "server" that accepts and drops every connection: every watch attempt fails at once.
    async fn refusing() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let attempts = Arc::new(AtomicUsize::new(0));
        let a = attempts.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::Relaxed);
                drop(conn);
            }
        });
        (url, attempts)
    }

    #[tokio::test]
    async fn an_unreachable_api_server_is_retried_with_backoff_not_in_a_spin() {
        let (url, attempts) = refusing().await;
        let client =
            crate::client::from_config(kube::Config::new(url.parse().unwrap()), "nodemedic-test")
                .unwrap();
        let (_store, task) = watch_store(
            kube::Api::<k8s_openapi::api::core::v1::Node>::all(client),
            watcher::Config::default(),
            Arc::new(Notify::new()),
            |_| {},
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        task.abort();
        let n = attempts.load(Ordering::Relaxed);
        // Backoff: about 0 s, 0.8 s, 2.4 s (with jitter). A spinning watcher makes thousands.
        assert!((1..=10).contains(&n), "{n} connection attempts in 3 s");
    }
}
