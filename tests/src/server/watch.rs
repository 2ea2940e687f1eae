//! Watches: a history of changes with their resourceVersions and a broadcast of new ones. A watch from
//! a resourceVersion older than the kept history gets, like the real server, a 200 with one ERROR line
//! (code 410, reason Expired) and the stream closes. The history is kept per resource, as
//! kube-apiserver's watch cache is: node heartbeats do not push the pods' changes out of it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::store::{Key, field_selector, matches_fields, matches_labels};
use super::{Inner, Target, error, status_body};

/// How many changes of one resource are kept for replay.
const HISTORY: usize = 10_000;

/// One resource's kept changes, and the newest resourceVersion among those dropped or lost to a
/// restart: a watch resuming from before it may have missed a change (410 Gone).
#[derive(Default)]
struct History {
    changes: VecDeque<Change>,
    lost_up_to: u64,
}

/// The kept changes by (API, resource), and the last resourceVersion published (what a restart
/// loses up to).
#[derive(Default)]
struct Histories {
    by_resource: HashMap<(String, String), History>,
    last: u64,
    restarted_at: u64,
}
/// Bookmarks are sent this often when asked for (the real server: about a minute; shorter here so
/// tests exercise them).
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// One change as every watch sends it. Cheap to clone (each watcher's receiver clones it): the
/// object is shared and its line rendered once, for the first watcher that sends it, as
/// kube-apiserver's watch cache encodes an event once for all its watchers.
#[derive(Clone)]
pub(crate) struct Change {
    key: Key,
    rv: u64,
    type_: &'static str,
    object: Arc<Value>,
    text: Arc<OnceLock<String>>,
}

impl Change {
    fn new(key: Key, rv: u64, type_: &'static str, object: Value) -> Change {
        Change {
            key,
            rv,
            type_,
            object: Arc::new(object),
            text: Arc::default(),
        }
    }

    /// The watch line: `type` before `object`, the object's fields in kube-apiserver's order
    /// ([`super::order`]; clients read the object straight from the stream then, where the other
    /// order makes serde buffer it first).
    fn line(&self) -> String {
        self.text
            .get_or_init(|| {
                format!(
                    "{{\"type\":\"{}\",\"object\":{}}}\n",
                    self.type_,
                    super::order::to_string(&self.object)
                )
            })
            .clone()
    }
}

#[derive(Clone)]
pub(crate) struct Hub {
    tx: broadcast::Sender<Change>,
    history: Arc<Mutex<Histories>>,
    /// Bumped to cut every open watch mid-stream (the connection is aborted).
    cut: Arc<tokio::sync::watch::Sender<u64>>,
    /// Watches resuming from a resourceVersion that get 410 Gone next.
    gone: Arc<Mutex<usize>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(65_536).0,
            history: Arc::default(),
            cut: Arc::new(tokio::sync::watch::channel(0).0),
            gone: Arc::default(),
        }
    }
}

impl Hub {
    /// Abort every open watch stream mid-stream, as a dropped connection or a dying server would.
    pub(crate) fn cut_all(&self) {
        self.cut.send_modify(|g| *g += 1);
    }

    /// The next `n` watches that resume from a resourceVersion get `410 Gone` (Expired).
    pub(crate) fn gone_on_resume(&self, n: usize) {
        *self.gone.lock().unwrap() += n;
    }

    /// A restart: every watch cut and the change history lost, so resuming from any resourceVersion
    /// before now gets `410 Gone` and clients must list again.
    pub(crate) fn restart(&self) {
        let mut h = self.history.lock().unwrap();
        h.by_resource.clear();
        h.restarted_at = h.last;
        drop(h);
        self.cut_all();
    }

    pub(crate) fn publish(&self, key: &Key, type_: &'static str, obj: Value) {
        let rv = obj["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let change = Change::new(key.clone(), rv, type_, obj);
        let mut h = self.history.lock().unwrap();
        h.last = h.last.max(rv);
        let scope = (key.api.clone(), key.resource.clone());
        let kept = h.by_resource.entry(scope).or_default();
        if kept.changes.len() == HISTORY
            && let Some(dropped) = kept.changes.pop_front()
        {
            kept.lost_up_to = dropped.rv;
        }
        kept.changes.push_back(change.clone());
        drop(h);
        let _ = self.tx.send(change);
    }
}

pub(crate) fn serve(
    inner: &Mutex<Inner>,
    hub: &Hub,
    t: &Target,
    query: &HashMap<String, String>,
) -> Response {
    let terms = match field_selector(query.get("fieldSelector").map(String::as_str).unwrap_or("")) {
        Ok(t) => t,
        Err(e) => return error(400, Some("BadRequest"), &e, None),
    };
    let labels = query.get("labelSelector").cloned().unwrap_or_default();
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1800);
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let from: Option<u64> = query
        .get("resourceVersion")
        .and_then(|s| s.parse().ok())
        .filter(|rv| *rv > 0);
    let name_terms = terms.clone();
    let (api, resource, ns) = (t.api.clone(), t.resource.clone(), t.namespace.clone());
    let wanted = move |c: &Change| {
        c.key.api == api
            && c.key.resource == resource
            && ns.as_ref().is_none_or(|n| &c.key.namespace == n)
            && matches_fields(&c.object, &terms)
            && matches_labels(&c.object, &labels)
    };
    // Subscribe before reading history so nothing falls between the two.
    let rx = hub.tx.subscribe();
    let mut initial: Vec<Change> = Vec::new();
    let mut last_rv;
    {
        let guard = inner.lock().unwrap();
        last_rv = guard.store.resource_version();
        match from {
            None => {
                // No resourceVersion: the current state as ADDED, then changes.
                let objects = guard
                    .store
                    .iter(&t.api, &t.resource, t.namespace.as_deref(), None)
                    .filter(|(k, _)| super::store::key_may_match(k, &name_terms))
                    .map(|(k, o)| o.value(k));
                for o in objects {
                    let ns = o["metadata"]["namespace"].as_str().map(String::from);
                    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let key = Key::new(&t.api, &t.resource, ns.as_deref(), &name);
                    let c = Change::new(key, 0, "ADDED", o);
                    if wanted(&c) {
                        initial.push(c);
                    }
                }
            }
            Some(rv) => {
                let h = hub.history.lock().unwrap();
                let kept = h.by_resource.get(&(t.api.clone(), t.resource.clone()));
                let lost_up_to = kept.map_or(0, |k| k.lost_up_to).max(h.restarted_at);
                let forced = {
                    let mut g = hub.gone.lock().unwrap();
                    let hit = *g > 0;
                    *g = g.saturating_sub(1);
                    hit
                };
                if forced || rv < lost_up_to {
                    let line = json!({"type": "ERROR", "object": status_body(410, Some("Expired"), &format!("too old resource version: {rv} ({lost_up_to})"), None)});
                    return ndjson(Body::from(render(&line)));
                }
                initial.extend(
                    kept.into_iter()
                        .flat_map(|k| &k.changes)
                        .filter(|c| c.rv > rv && wanted(c))
                        .cloned(),
                );
                last_rv = last_rv.max(rv);
            }
        }
    }
    let kind = super::store::kind_of(&t.resource);
    ndjson(Body::from_stream(async_stream(
        initial,
        last_rv,
        rx,
        hub.cut.subscribe(),
        Box::new(wanted),
        timeout,
        bookmarks,
        kind,
    )))
}

/// A line of its own (an ERROR): rendered as [`Change::line`] renders changes.
fn render(line: &Value) -> String {
    let mut text = super::order::to_string(line);
    text.push('\n');
    text
}

fn ndjson(body: Body) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

type Filter = Box<dyn Fn(&Change) -> bool + Send>;

struct StreamState {
    init: std::vec::IntoIter<Change>,
    rx: broadcast::Receiver<Change>,
    cut: tokio::sync::watch::Receiver<u64>,
    wanted: Filter,
    last_rv: u64,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    kind: String,
}

#[allow(clippy::too_many_arguments)]
fn async_stream(
    initial: Vec<Change>,
    last_rv: u64,
    rx: broadcast::Receiver<Change>,
    cut: tokio::sync::watch::Receiver<u64>,
    wanted: Filter,
    timeout_secs: u64,
    bookmarks: bool,
    kind: String,
) -> impl futures::Stream<Item = Result<String, std::io::Error>> {
    let st = StreamState {
        init: initial.into_iter(),
        rx,
        cut,
        wanted,
        last_rv,
        deadline: tokio::time::Instant::now() + Duration::from_secs(timeout_secs),
        bookmarks,
        kind,
    };
    futures::stream::unfold(st, |mut st| async move {
        if let Some(l) = st.init.next() {
            return Some((Ok(l.line()), st));
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(st.deadline) => return None,
                _ = st.cut.changed() => {
                    // An error from the body aborts the connection mid-stream; the stream then ends.
                    st.deadline = tokio::time::Instant::now();
                    return Some((Err(std::io::Error::other("watch cut by the test")), st));
                }
                _ = tokio::time::sleep(BOOKMARK_EVERY), if st.bookmarks => {
                    let b = json!({"type": "BOOKMARK", "object": {"kind": st.kind, "apiVersion": "v1", "metadata": {"resourceVersion": st.last_rv.to_string()}}});
                    return Some((Ok(format!("{b}\n")), st));
                }
                c = st.rx.recv() => match c {
                    Ok(c) if c.rv > st.last_rv && (st.wanted)(&c) => {
                        st.last_rv = c.rv;
                        return Some((Ok(c.line()), st));
                    }
                    Ok(c) => st.last_rv = st.last_rv.max(c.rv),
                    Err(_) => return None,
                }
            }
        }
    })
}

#[cfg(test)]
mod history_tests {
    use super::{HISTORY, Hub};
    use crate::server::store::Key;
    use serde_json::json;

    fn publish(hub: &Hub, resource: &str, name: &str, rv: u64) {
        let key = Key::new("v1", resource, None, name);
        let obj = json!({"metadata": {"name": name, "resourceVersion": rv.to_string()}});
        hub.publish(&key, "MODIFIED", obj);
    }

    /// As kube-apiserver's watch cache, per resource: a flood of node changes drops old node
    /// changes only, and a pod watch resuming from before the flood misses nothing (no 410).
    #[test]
    fn one_resource_s_changes_do_not_push_another_s_out_of_the_history() {
        let hub = Hub::default();
        publish(&hub, "pods", "p", 1);
        for rv in 2..(HISTORY as u64 + 3) {
            publish(&hub, "nodes", "n", rv);
        }
        let h = hub.history.lock().unwrap();
        let pods = &h.by_resource[&("v1".to_string(), "pods".to_string())];
        let nodes = &h.by_resource[&("v1".to_string(), "nodes".to_string())];
        assert_eq!((pods.changes.len(), pods.lost_up_to), (1, 0));
        assert_eq!((nodes.changes.len(), nodes.lost_up_to), (HISTORY, 2));
        assert_eq!(h.last, HISTORY as u64 + 2);
    }
}
