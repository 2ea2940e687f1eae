//! The two watches that fill the caches, I/O: kube's `watcher` over Nodes (decoded as
//! [`NodeLite`]s) and Pods (decoded leniently: one bad object never fails the list), retried with
//! backoff, each failure logged at most once a minute.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::Api;
use kube::Resource;
use kube::runtime::{WatchStreamExt, watcher};
use nodemedic_common::lenient::Lenient;
use nodemedic_common::throttle::Throttle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::pod_index::Pods;
use super::watch_errors::watch_failed;
use super::{NODES, NodeMap, Observed, PODS};
use crate::metrics::ObjectKind;
use crate::model::lite::NodeLite;
use crate::model::node::NodeView;
use crate::model::pod::{PodInfo, Projection};
use crate::model::pod_lite::PodLite;

impl Observed {
    /// Watch all Nodes into the cache, decoded as [`NodeLite`]s: only what a view keeps, in one pass,
    /// times that no typed Node can hold included (one such Node once failed the whole list).
    pub(crate) fn spawn_nodes(&self, api: Api<NodeLite>) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            // Retried with kube's default backoff (0.8 s doubling to 30 s, reset once healthy):
            // without it an unreachable API server made the loop spin a core.
            // Each event's decode reuses what did not change of the node's cached view.
            let stream = Reusing {
                inner: Box::pin(watcher(api, list_config()).default_backoff()),
                earlier: cache.earlier(),
            };
            futures::pin_mut!(stream);
            let mut relist: Option<NodeMap> = None;
            let mut failing = Throttle::default();
            while let Some(ev) = stream.next().await {
                cache.watch_result(NODES, answered(&ev));
                if ev.is_ok() {
                    failing.reset();
                }
                match ev {
                    Ok(watcher::Event::Apply(n)) => cache.apply_view(NodeView::from_lite(n)),
                    Ok(watcher::Event::Delete(n)) => cache.delete_node(&n.name),
                    Ok(watcher::Event::Init) => relist = Some(NodeMap::default()),
                    Ok(watcher::Event::InitApply(n)) => {
                        let v = NodeView::from_lite(n);
                        relist
                            .get_or_insert_with(NodeMap::default)
                            .insert(v.name.clone(), Arc::new(v));
                    }
                    Ok(watcher::Event::InitDone) => {
                        cache.replace_nodes(relist.take().unwrap_or_default())
                    }
                    Err(e) => watch_failed(&mut failing, "node", &e),
                }
            }
        })
    }

    /// Watch all Pods into the cache, keeping what `keep` says (the annotations the rules read, and
    /// labels or priority class names when pod policies match on them). When `keep` changes (a
    /// config reload) the pods are listed again with it, and `relisted` then carries it: a reload
    /// waits for that before deciding with the new settings.
    pub(crate) fn spawn_pods(
        &self,
        api: Api<Lenient<PodLite>>,
        mut keep: watch::Receiver<Projection>,
        relisted: watch::Sender<Projection>,
    ) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            let mut keep_open = true;
            // The first list in one pass: nothing but it is waited for (see `Lenient::optimistic`).
            Lenient::<PodLite>::optimistic(true);
            loop {
                let current = keep.borrow_and_update().clone();
                let stream = watcher(api.clone(), list_config()).default_backoff();
                futures::pin_mut!(stream);
                // A relist fills a fresh index, swapped in when complete.
                let mut relist: Option<Pods> = None;
                let mut failing = Throttle::default();
                let mut malformed = Malformed::default();
                loop {
                    let ev = tokio::select! {
                        ev = stream.next() => match ev {
                            Some(ev) => ev,
                            None => return,
                        },
                        changed = keep.changed(), if keep_open => {
                            match changed {
                                Ok(()) => break, // list again with the new set
                                Err(_) => { keep_open = false; continue; }
                            }
                        }
                    };
                    cache.watch_result(PODS, answered(&ev));
                    if ev.is_ok() {
                        failing.reset();
                    }
                    match ev {
                        Ok(watcher::Event::Apply(Lenient::Ok(p))) => {
                            malformed.fixed(&p.metadata);
                            if let Some((node, at)) = started(&p) {
                                cache.pod_started(node, at);
                            }
                            cache.apply_pod(PodInfo::project(&p, &current))
                        }
                        Ok(watcher::Event::Apply(bad @ Lenient::Malformed { .. })) => {
                            // Kept as it was last read (a drain still waits for it to go).
                            malformed.seen(&cache, ObjectKind::Pod, &bad)
                        }
                        Ok(watcher::Event::Delete(p)) => {
                            malformed.fixed(p.meta());
                            cache.delete_pod(
                                p.meta().namespace.as_deref().unwrap_or_default(),
                                p.meta().name.as_deref().unwrap_or_default(),
                            )
                        }
                        Ok(watcher::Event::Init) => relist = Some(Pods::default()),
                        Ok(watcher::Event::InitApply(Lenient::Ok(p))) => {
                            let pods = relist.get_or_insert_with(Pods::default);
                            if let Some((node, at)) = started(&p) {
                                pods.started(node, at);
                            }
                            pods.insert(Arc::new(PodInfo::project(&p, &current)));
                        }
                        Ok(watcher::Event::InitApply(bad)) => {
                            malformed.seen(&cache, ObjectKind::Pod, &bad)
                        }
                        Ok(watcher::Event::InitDone) => {
                            Lenient::<PodLite>::optimistic(false);
                            cache.swap_pods(relist.take().unwrap_or_default());
                            relisted.send_replace(current.clone());
                        }
                        Err(e) => watch_failed(&mut failing, "pod", &e),
                    }
                }
            }
        })
    }
}

/// A stream whose polls decode Nodes with `earlier` at hand ([`crate::model::lite::reusing`]).
struct Reusing<S> {
    inner: std::pin::Pin<Box<S>>,
    earlier: crate::model::lite::Earlier,
}

impl<S: futures::Stream> futures::Stream for Reusing<S> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        let this = &mut *self;
        crate::model::lite::reusing(&this.earlier, || this.inner.as_mut().poll_next(cx))
    }
}

/// Whether a watch event shows the API server answering: `Init` is emitted before each (re)list is
/// even sent, so it does not count.
fn answered<K>(ev: &Result<watcher::Event<K>, watcher::Error>) -> bool {
    matches!(ev, Ok(e) if !matches!(e, watcher::Event::Init))
}

/// Lists are read 100 objects a page: a page is a few hundred KiB of JSON and objects held at once
/// while the sync projects them (kube's default is 500). 500 pods a page cost 2.7 MiB more RSS after
/// sync at 5,000 nodes (scale bench, 2026-11-28) and more CPU, not less: a perf profile of a new
/// leader showed kube gathering each larger body into one buffer (copies, and page faults on the
/// fresh memory each time) eating what the one-pass decode saved.
fn list_config() -> watcher::Config {
    watcher::Config::default().page_size(100)
}

/// Objects the watch could not decode, by uid or name: each is logged when first seen (and counted
/// in `nodemedic_drainer_malformed_objects_total`), and again only after it was fixed and broke again.
#[derive(Default)]
struct Malformed(HashSet<String>);

impl Malformed {
    fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
        meta.uid.clone().unwrap_or_else(|| {
            format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or("")
            )
        })
    }

    fn seen<K: kube::Resource>(&mut self, cache: &Observed, kind: ObjectKind, bad: &Lenient<K>) {
        let Lenient::Malformed { meta, error } = bad else {
            return;
        };
        if self.0.len() < 10_000 && self.0.insert(Self::key(meta)) {
            if let Some(m) = cache.metrics.get() {
                m.malformed_object(kind);
            }
            tracing::error!(kind = kind.as_str(), object = %bad.id(), %error, "cannot decode this object; it is left out until it can be read (the rest of the list is fine)");
        }
    }

    fn fixed(&mut self, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
        if !self.0.is_empty() {
            self.0.remove(&Self::key(meta));
        }
    }
}

/// The pod's node and when its latest container started there, if one runs.
fn started(pod: &PodLite) -> Option<(&str, k8s_openapi::jiff::Timestamp)> {
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    Some((node, crate::model::progress::latest_start(pod)?))
}
