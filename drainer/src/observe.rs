//! Observe: the drainer's view of the cluster. Nodes come from a reflector store (kube's), pods from
//! a compact cache ([`PodCache`]); both wake the controller through one `Notify` on every change.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::decide::PodInfo;

/// The pod cache: compact [`PodInfo`]s by (namespace, name), fed by a watcher. A full `Pod` is
/// several KiB even when empty fields are dropped; 50,000 of them dominate the controller's memory.
#[derive(Clone, Default)]
pub struct PodCache {
    pub pods: Arc<std::sync::RwLock<HashMap<(String, String), Arc<PodInfo>>>>,
    pub ready: Arc<std::sync::atomic::AtomicBool>,
}

impl PodCache {
    pub fn snapshot(&self) -> Vec<Arc<PodInfo>> {
        self.pods.read().unwrap().values().cloned().collect()
    }

    pub fn spawn(&self, api: Api<Pod>, keep: Vec<String>, changed: Arc<Notify>) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            // Retried with backoff (see common::runtime::watch_store).
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            let mut relist: Option<HashMap<(String, String), Arc<PodInfo>>> = None;
            while let Some(ev) = stream.next().await {
                let key = |p: &Pod| {
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    )
                };
                match ev {
                    Ok(watcher::Event::Apply(p)) => {
                        cache
                            .pods
                            .write()
                            .unwrap()
                            .insert(key(&p), Arc::new(PodInfo::from_pod(&p, Some(&keep))));
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        cache.pods.write().unwrap().remove(&key(&p));
                    }
                    Ok(watcher::Event::Init) => relist = Some(HashMap::new()),
                    Ok(watcher::Event::InitApply(p)) => {
                        relist
                            .get_or_insert_with(HashMap::new)
                            .insert(key(&p), Arc::new(PodInfo::from_pod(&p, Some(&keep))));
                    }
                    Ok(watcher::Event::InitDone) => {
                        *cache.pods.write().unwrap() = relist.take().unwrap_or_default();
                        cache
                            .ready
                            .store(true, std::sync::atomic::Ordering::Release);
                    }
                    Err(e) => tracing::warn!(error = %e, "pod watch error; the watcher retries"),
                }
                changed.notify_one();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn the_pod_watch_backs_off_when_the_api_server_is_unreachable() {
        // Accept and drop every connection: each watch attempt fails at once.
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
        let client = nodemedic_common::client::from_config(
            kube::Config::new(url.parse().unwrap()),
            "nodemedic-test",
        )
        .unwrap();
        let task = PodCache::default().spawn(Api::all(client), vec![], Arc::new(Notify::new()));
        tokio::time::sleep(Duration::from_secs(3)).await;
        task.abort();
        let n = attempts.load(Ordering::Relaxed);
        assert!((1..=10).contains(&n), "{n} connection attempts in 3 s");
    }
}
