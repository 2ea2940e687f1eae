//! Object storage with resourceVersions, and the CRUD verbs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::watch::Hub;
use super::{Caller, Inner, Target, error, json_response};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub api: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(api: &str, resource: &str, namespace: Option<&str>, name: &str) -> Key {
        Key {
            api: api.into(),
            resource: resource.into(),
            namespace: namespace.unwrap_or("").into(),
            name: name.into(),
        }
    }

    /// What a list counts it under: its API, resource and namespace.
    fn scope(&self) -> (String, String, String) {
        let Key {
            api,
            resource,
            namespace,
            ..
        } = self;
        (api.clone(), resource.clone(), namespace.clone())
    }

    pub(crate) fn of(t: &Target) -> Key {
        Key::new(
            &t.api,
            &t.resource,
            t.namespace.as_deref(),
            t.name.as_deref().unwrap_or(""),
        )
    }
}

/// The objects, each kept as its JSON text and read back when asked for. A `serde_json::Value`
/// takes about ten times its text (a 4 KB pod held some 40 KB): the benches' largest fixture,
/// 65,000 kubelet-shaped nodes and 650,000 pods, did not fit in 24 GiB as values, and fits in a
/// few as text.
#[derive(Default)]
pub struct Store {
    objects: BTreeMap<Key, Stored>,
    rv: u64,
    uid: u64,
    /// Objects per (api, resource, namespace): a page's `remainingItemCount` without counting the
    /// rest of the list (at 650,000 pods in pages of 100, counting made listing quadratic).
    counts: HashMap<(String, String, String), usize>,
}

/// One object's JSON text, as a list item: without its kind and apiVersion, in kube-apiserver's
/// field order ([`super::order`]), so a list page is the items' texts put together.
pub struct Stored(Box<str>);

impl Stored {
    fn of(obj: &Value) -> Stored {
        Stored(super::order::to_item_string(obj).into_boxed_str())
    }

    /// The object stored under `k`, with its kind and apiVersion, read back from its text
    /// (written by [`Stored::of`], so it reads).
    pub fn value(&self, k: &Key) -> Value {
        let mut v: Value =
            serde_json::from_str(&self.0).expect("the store keeps only JSON it wrote");
        v["kind"] = json!(kind_of(&k.resource));
        v["apiVersion"] = json!(api_version(&k.api));
        v
    }

    /// As a list item (no kind, no apiVersion).
    pub(crate) fn item(&self) -> &str {
        &self.0
    }
}

/// Kind of a resource (lists are `<Kind>List`).
pub fn kind_of(resource: &str) -> String {
    match resource {
        "nodes" => "Node",
        "pods" => "Pod",
        "events" => "Event",
        "leases" => "Lease",
        "poddisruptionbudgets" => "PodDisruptionBudget",
        "namespaces" => "Namespace",
        "replicasets" => "ReplicaSet",
        "deployments" => "Deployment",
        "daemonsets" => "DaemonSet",
        "statefulsets" => "StatefulSet",
        "jobs" => "Job",
        "cronjobs" => "CronJob",
        "configmaps" => "ConfigMap",
        "services" => "Service",
        "serviceaccounts" => "ServiceAccount",
        "customresourcedefinitions" => "CustomResourceDefinition",
        // Anything else: singular, capitalised (the resources above are the ones scenarios use).
        other => {
            let one = other.strip_suffix('s').unwrap_or(other);
            let mut c = one.chars();
            return c
                .next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default();
        }
    }
    .to_string()
}

pub(crate) fn api_version(api: &str) -> String {
    api.to_string()
}

impl Store {
    pub fn get(&self, k: &Key) -> Option<Value> {
        self.objects.get(k).map(|o| o.value(k))
    }

    pub fn contains(&self, k: &Key) -> bool {
        self.objects.contains_key(k)
    }

    /// Objects of a resource in key order, by reference, starting after `after` (a namespace and
    /// name) when given: a range scan over the resource's keys, so a page costs what it returns and
    /// not the whole store.
    pub fn iter<'a>(
        &'a self,
        api: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<(&str, &str)>,
    ) -> impl Iterator<Item = (&'a Key, &'a Stored)> + 'a {
        use std::ops::Bound;
        let from = match after {
            Some((ns, name)) => Bound::Excluded(Key::new(api, resource, Some(ns), name)),
            None => Bound::Included(Key::new(api, resource, namespace, "")),
        };
        self.objects
            .range((from, Bound::Unbounded))
            .take_while(move |(k, _)| {
                k.api == api
                    && k.resource == resource
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
    }

    /// Every object of a resource (in a namespace, when given), in key order: a range scan, so
    /// each write's admission (which lists the policy bindings) does not cost the whole store.
    pub fn list(&self, api: &str, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        self.iter(api, resource, namespace, None)
            .map(|(k, v)| v.value(k))
            .collect()
    }

    /// How many objects a resource has (in a namespace, when given).
    pub fn count(&self, api: &str, resource: &str, namespace: Option<&str>) -> usize {
        self.counts
            .iter()
            .filter(|((a, r, ns), _)| {
                a == api && r == resource && namespace.is_none_or(|n| n == ns)
            })
            .map(|(_, n)| n)
            .sum()
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Store `obj` under `k` with a new resourceVersion; returns the stored object.
    pub fn put(&mut self, k: &Key, mut obj: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        self.shape(k, &mut obj, rv);
        if self.objects.insert(k.clone(), Stored::of(&obj)).is_none() {
            *self.counts.entry(k.scope()).or_default() += 1;
        }
        obj
    }

    /// `obj` as `put` would store it, at resourceVersion `rv`.
    fn shape(&mut self, k: &Key, obj: &mut Value, rv: u64) {
        let meta = obj
            .as_object_mut()
            .unwrap()
            .entry("metadata")
            .or_insert_with(|| json!({}));
        meta["resourceVersion"] = json!(rv.to_string());
        if meta.get("uid").is_none() {
            self.uid += 1;
            meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012x}", self.uid));
        }
        if meta.get("creationTimestamp").is_none() {
            meta["creationTimestamp"] = json!(now_rfc3339());
        }
        obj["kind"] = json!(kind_of(&k.resource));
        obj["apiVersion"] = json!(api_version(&k.api));
        drop_empty(obj);
    }

    /// Store `obj` over `old` (as stored) unless it would store the same object: kube-apiserver
    /// writes nothing then (etcd3 storage's `GuaranteedUpdate` compares the encoded object with
    /// the stored one and returns the stored one, after the field manager put back the
    /// managedFields times of a write that changed nothing: `IgnoreManagedFieldsTimestampsTransformer`),
    /// so the resourceVersion stays and no watch hears of it. The stored object, and whether it
    /// was written.
    pub fn update(&mut self, k: &Key, old: &Value, mut obj: Value) -> (Value, bool) {
        let old_rv = old["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok());
        if let Some(rv) = old_rv {
            self.shape(k, &mut obj, rv);
            if obj == *old {
                return (obj, false);
            }
        }
        (self.put(k, obj), true)
    }

    pub fn remove(&mut self, k: &Key) -> Option<Value> {
        self.rv += 1;
        let mut v = self.objects.remove(k)?.value(k);
        if let Some(n) = self.counts.get_mut(&k.scope()) {
            *n -= 1;
        }
        v["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        Some(v)
    }
}

/// What the real server's typed round trip does to empty fields: every list of the objects the tests
/// store is `omitempty` in k8s.io/api, so an empty one is not printed (recording 57: `spec.taints: []`
/// comes back as `spec: {}`), and neither are empty label, annotation or selector maps. Structs stay
/// (`spec: {}`), so only these maps are dropped, not every empty object.
fn drop_empty(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, field| match field {
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) if o.is_empty() => {
                    !matches!(k.as_str(), "labels" | "annotations" | "nodeSelector")
                }
                _ => true,
            });
            m.values_mut().for_each(drop_empty);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub(crate) fn not_found(t: &Target) -> Response {
    let name = t.name.clone().unwrap_or_default();
    let group = t.api.split_once('/').map(|(g, _)| g.to_string());
    let mut details = json!({"name": name, "kind": t.resource});
    if let Some(g) = group {
        details["group"] = json!(g);
    }
    let what = match t.api.split_once('/') {
        Some((g, _)) => format!("{}.{}", t.resource, g),
        None => t.resource.clone(),
    };
    error(
        404,
        Some("NotFound"),
        &format!("{what} \"{name}\" not found"),
        Some(details),
    )
}

/// A supported field selector: `a.b=c` (and `a.b==c`, `a.b!=c`), comma-separated.
pub(crate) fn field_selector(sel: &str) -> Result<Vec<(String, bool, String)>, String> {
    const SUPPORTED: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "status.phase",
        "involvedObject.name",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
        "source",
    ];
    sel.split(',')
        .filter(|s| !s.is_empty())
        .map(|term| {
            let (field, neg, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            if !SUPPORTED.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            Ok((field.to_string(), neg, value.to_string()))
        })
        .collect()
}

/// Whether an object under `k` may match `terms`, from its key alone (its name and namespace):
/// a selector naming one object is answered without reading the others.
pub(crate) fn key_may_match(k: &Key, terms: &[(String, bool, String)]) -> bool {
    terms
        .iter()
        .all(|(field, neg, value)| match field.as_str() {
            "metadata.name" => (k.name == *value) != *neg,
            "metadata.namespace" => (k.namespace == *value) != *neg,
            _ => true,
        })
}

pub(crate) fn matches_fields(obj: &Value, terms: &[(String, bool, String)]) -> bool {
    terms.iter().all(|(field, neg, value)| {
        let mut v = obj;
        for part in field.split('.') {
            v = v.get(part).unwrap_or(&Value::Null);
        }
        let actual = v.as_str().unwrap_or("");
        (actual == value) != *neg
    })
}

/// `key=value,key2` label selectors (equality and existence only).
pub(crate) fn matches_labels(obj: &Value, sel: &str) -> bool {
    let labels = obj["metadata"]["labels"].as_object();
    sel.split(',').filter(|s| !s.is_empty()).all(|term| {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(|v| v.as_str());
        if let Some((k, v)) = term.split_once("!=") {
            get(k) != Some(v)
        } else if let Some((k, v)) = term.split_once('=') {
            get(k.trim_end_matches('=')) == Some(v)
        } else if let Some(k) = term.strip_prefix('!') {
            get(k).is_none()
        } else {
            get(term).is_some()
        }
    })
}

pub(crate) fn list(inner: &Mutex<Inner>, t: &Target, query: &HashMap<String, String>) -> Response {
    let terms = match field_selector(query.get("fieldSelector").map(String::as_str).unwrap_or("")) {
        Ok(t) => t,
        Err(e) => return error(400, Some("BadRequest"), &e, None),
    };
    let labels = query.get("labelSelector").cloned().unwrap_or_default();
    let inner = inner.lock().unwrap();
    // Paging as the real server does: `limit` items from after the key the `continue` token names
    // (`<rv>:<namespace>/<name>`; the real token is opaque too), resuming by a range scan, so a
    // page costs what it returns. Only the page's items are cloned.
    let rv = inner.store.resource_version().to_string();
    // The token: `<rv>:<items listed before>:<namespace>/<name>`.
    let token = query.get("continue").and_then(|c| {
        let (_, rest) = c.split_once(':')?;
        let (before, key) = rest.split_once(':')?;
        Some((before.parse::<usize>().ok()?, key.split_once('/')?))
    });
    let (before, after) = match token {
        Some((before, key)) => (before, Some(key)),
        None => (0, None),
    };
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    // Without selectors a page is the stored items' texts; with them each object is read to be
    // matched, and written back as an item.
    let unselective = terms.is_empty() && labels.is_empty();
    let mut selected = inner
        .store
        .iter(&t.api, &t.resource, t.namespace.as_deref(), after)
        .filter(|(k, _)| key_may_match(k, &terms))
        .filter_map(|(k, o)| {
            if unselective {
                return Some((k, o.item().to_string()));
            }
            let v = o.value(k);
            if !(matches_fields(&v, &terms) && matches_labels(&v, &labels)) {
                return None;
            }
            Some((k, o.item().to_string()))
        });
    let mut page = Vec::new();
    let mut last = None;
    for (k, item) in selected.by_ref().take(limit) {
        page.push(item);
        last = Some(k);
    }
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(k) = last.filter(|_| page.len() == limit) {
        // kube-apiserver counts the remaining items only for a list without selectors (ListMeta's
        // `remainingItemCount`: "if the list request contained label or field selectors, then the
        // number of remaining items is unknown and the field will be left unset"), and sets
        // `continue` only when there is more.
        let more = if unselective {
            let next = inner.store.iter(
                &t.api,
                &t.resource,
                t.namespace.as_deref(),
                Some((&k.namespace, &k.name)),
            );
            let total = inner
                .store
                .count(&t.api, &t.resource, t.namespace.as_deref());
            let listed = before + page.len();
            (next.take(1).count() > 0).then(|| Some(total.saturating_sub(listed).max(1)))
        } else {
            selected.next().map(|_| None)
        };
        if let Some(remaining) = more {
            let listed = before + page.len();
            metadata["continue"] = json!(format!("{rv}:{listed}:{}/{}", k.namespace, k.name));
            if let Some(n) = remaining {
                metadata["remainingItemCount"] = json!(n);
            }
        }
    }
    // The list in kube-apiserver's order: kind, apiVersion, metadata, items.
    let meta = super::order::to_string(&json!({ "metadata": metadata }));
    let meta = &meta[r#"{"metadata":"#.len()..meta.len() - 1];
    let body = format!(
        r#"{{"kind":{},"apiVersion":{},"metadata":{meta},"items":[{}]}}"#,
        json!(format!("{}List", kind_of(&t.resource))),
        json!(api_version(&t.api)),
        page.join(",")
    );
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

pub(crate) fn get(inner: &Mutex<Inner>, t: &Target) -> Response {
    match inner.lock().unwrap().store.get(&Key::of(t)) {
        Some(o) => json_response(StatusCode::OK, &o),
        None => not_found(t),
    }
}

/// 409 for a write whose resourceVersion is not the stored one (recordings 14, 43).
pub(crate) fn conflict(t: &Target) -> Response {
    let name = t.name.clone().unwrap_or_default();
    let mut details = json!({"name": name, "kind": t.resource});
    if let Some((g, _)) = t.api.split_once('/') {
        details["group"] = json!(g);
    }
    let what = match t.api.split_once('/') {
        Some((g, _)) => format!("{}.{}", t.resource, g),
        None => t.resource.clone(),
    };
    error(
        409,
        Some("Conflict"),
        &format!(
            "Operation cannot be fulfilled on {what} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        Some(details),
    )
}

pub(crate) fn create(
    inner: &Mutex<Inner>,
    hub: &Hub,
    t: &Target,
    mut obj: Value,
    caller: &Caller,
) -> Response {
    let Some(name) = obj["metadata"]["name"]
        .as_str()
        .map(String::from)
        .or_else(|| {
            obj["metadata"]["generateName"].as_str().map(|g| {
                format!(
                    "{g}{:05x}",
                    inner.lock().unwrap().store.resource_version() + 1
                )
            })
        })
    else {
        return error(
            422,
            Some("Invalid"),
            &format!(
                "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                kind_of(&t.resource)
            ),
            None,
        );
    };
    obj["metadata"]["name"] = json!(name);
    if let Some(ns) = &t.namespace {
        obj["metadata"]["namespace"] = json!(ns);
    }
    if let Err(r) = super::admit::decode(&t.resource, &kind_of(&t.resource), &obj) {
        return r;
    }
    if t.resource == "pods"
        && let Err(r) = super::admit::default_pod(&mut obj)
    {
        return r;
    }
    let target = Target {
        name: Some(name.clone()),
        ..t.clone()
    };
    let key = Key::of(&target);
    let mut guard = inner.lock().unwrap();
    if guard.store.contains(&key) {
        return error(
            409,
            Some("AlreadyExists"),
            &format!("{} \"{name}\" already exists", t.resource),
            Some(json!({"name": name, "kind": t.resource})),
        );
    }
    caller.commit(&mut guard.store, hub, &target, &key, None, obj)
}

pub(crate) fn replace(
    inner: &Mutex<Inner>,
    hub: &Hub,
    t: &Target,
    obj: Value,
    caller: &Caller,
) -> Response {
    let key = Key::of(t);
    let mut guard = inner.lock().unwrap();
    let Some(old) = guard.store.get(&key) else {
        return not_found(t);
    };
    let sent_rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if !sent_rv.is_empty() && sent_rv != old["metadata"]["resourceVersion"].as_str().unwrap_or("") {
        return conflict(t);
    }
    if let Err(r) = super::admit::decode(&t.resource, &kind_of(&t.resource), &obj) {
        return r;
    }
    let mut obj = obj;
    keep_other_half(t, &old, &mut obj);
    obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
    obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
    caller.commit(&mut guard.store, hub, t, &key, Some(&old), obj)
}

/// A write to the main resource keeps the old status; a write to `/status` keeps the old spec.
pub(crate) fn keep_other_half(t: &Target, old: &Value, new: &mut Value) {
    match t.sub.as_deref() {
        Some("status") => {
            if let Some(spec) = old.get("spec") {
                new["spec"] = spec.clone();
            }
        }
        _ => {
            if let Some(status) = old.get("status") {
                new["status"] = status.clone();
            }
        }
    }
}

/// DELETE: a pod bound to a node starts terminating (see `terminate`); anything else goes at once.
/// `preconditions` in the DeleteOptions are checked as the real server checks them (409).
pub(crate) fn delete(
    inner: &std::sync::Arc<Mutex<Inner>>,
    hub: &Hub,
    t: &Target,
    options: &Value,
) -> Response {
    let key = Key::of(t);
    let old = {
        let guard = inner.lock().unwrap();
        match guard.store.get(&key) {
            Some(o) => o.clone(),
            None => return not_found(t),
        }
    };
    let pre = &options["preconditions"];
    for field in ["uid", "resourceVersion"] {
        if let Some(want) = pre[field].as_str()
            && old["metadata"][field].as_str() != Some(want)
        {
            let name = t.name.clone().unwrap_or_default();
            return error(
                409,
                Some("Conflict"),
                &format!(
                    "Precondition failed: {field} in precondition: {want}, {field} in object meta: {}",
                    old["metadata"][field].as_str().unwrap_or("")
                ),
                Some(json!({"name": name, "kind": t.resource})),
            );
        }
    }
    let removed = if t.resource == "pods" {
        let grace = super::terminate::grace_for(&old, options["gracePeriodSeconds"].as_i64());
        super::terminate::delete_pod(inner, hub, &key, grace)
    } else {
        let mut guard = inner.lock().unwrap();
        let removed = guard.store.remove(&key);
        if let Some(o) = &removed {
            hub.publish(&key, "DELETED", o.clone());
        }
        removed
    };
    match removed {
        Some(o) => json_response(StatusCode::OK, &o),
        None => not_found(t),
    }
}

#[cfg(test)]
mod kind_tests {
    use super::kind_of;

    /// The API server answers with the object's Kind (as on every create and get), never the
    /// resource's name: a typed client refuses `"kind": "replicaset"`.
    #[test]
    fn objects_carry_their_kind_not_their_resource_name() {
        assert_eq!(kind_of("replicasets"), "ReplicaSet");
        assert_eq!(kind_of("daemonsets"), "DaemonSet");
        assert_eq!(kind_of("nodes"), "Node");
        assert_eq!(kind_of("widgets"), "Widget");
    }
}

#[cfg(test)]
mod list_tests {
    use super::{Key, Store};
    use serde_json::json;

    /// A list is a range over one resource's keys: its neighbours in key order (another resource
    /// whose name starts the same, another API version, another namespace) are not in it.
    #[test]
    fn a_list_holds_its_resource_and_namespace_and_nothing_next_to_them() {
        let mut s = Store::default();
        let put = |s: &mut Store, api: &str, resource: &str, ns: Option<&str>, name: &str| {
            let obj = json!({"metadata": {"name": name}});
            s.put(&Key::new(api, resource, ns, name), obj);
        };
        put(&mut s, "v1", "pods", Some("a"), "p1");
        put(&mut s, "v1", "pods", Some("b"), "p2");
        put(&mut s, "v1", "podtemplates", Some("a"), "t1");
        put(&mut s, "v1", "nodes", None, "n1");
        put(&mut s, "v1beta1", "pods", Some("a"), "old");
        let names = |v: Vec<serde_json::Value>| -> Vec<String> {
            v.iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(s.list("v1", "pods", None)), ["p1", "p2"]);
        assert_eq!(names(s.list("v1", "pods", Some("b"))), ["p2"]);
        assert_eq!(names(s.list("v1", "nodes", None)), ["n1"]);
        assert!(s.list("v1", "secrets", None).is_empty());
    }
}
