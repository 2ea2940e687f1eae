//! One malformed object must not blind a watcher. The API server accepts values our types cannot hold
//! (times past 9999-12-30T22:00Z, jiff's and so k8s-openapi's limit, for instance), and a typed list
//! or watch fails as a whole on one such object: the drainer never synced and the guard failed open
//! for every pod. [`Lenient<K>`] decodes each object on its own: a good one as `K`, a bad one as
//! [`Lenient::Malformed`] with what could still be read of its metadata and the decode error, so the
//! caller skips that object only (and says so).

use std::any::TypeId;
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;

// `Ok` is the variant nearly every object takes: boxing it would cost an allocation per object to
// save memory only on the rare malformed one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Lenient<K> {
    Ok(K),
    /// An object `K` cannot hold: its name, namespace and resourceVersion when readable, and why.
    Malformed {
        meta: ObjectMeta,
        error: String,
    },
}

/// The identifying fields, read as plain strings (they decode whatever else is wrong).
#[derive(serde::Deserialize, Default)]
struct Ids {
    #[serde(default)]
    metadata: IdMeta,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct IdMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// The object types whose lists are decoded in one pass for now ([`Lenient::optimistic`]).
static OPTIMISTIC: std::sync::RwLock<Vec<TypeId>> = std::sync::RwLock::new(Vec::new());
/// How many there are: the common case (none) costs one atomic read per object, not a lock.
static OPTIMISTIC_COUNT: AtomicUsize = AtomicUsize::new(0);

impl<K: 'static> Lenient<K> {
    /// Decode `K`s in one pass (`on`), or each on its own again. Taking each object's text before
    /// decoding it is a second pass over every byte (a sixth of a new leader's CPU at 650,000
    /// pods, issue 39): a watch turns this on for its first list, while nothing but that list is
    /// waited for, and off when the list is in. The first object that does not decode turns it off
    /// for good and fails its page; the watch lists again, object by object, and that object alone
    /// is left out. Never on for watch events: one bad update must not fail the others.
    pub fn optimistic(on: bool) {
        let mut types = OPTIMISTIC.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|t| *t != TypeId::of::<K>());
        if on {
            types.push(TypeId::of::<K>());
        }
        OPTIMISTIC_COUNT.store(types.len(), Ordering::Release);
    }

    fn is_optimistic() -> bool {
        OPTIMISTIC_COUNT.load(Ordering::Acquire) > 0
            && OPTIMISTIC
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&TypeId::of::<K>())
    }
}

impl<'de, K: DeserializeOwned + 'static> serde::Deserialize<'de> for Lenient<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // From serde_json itself (a list's items; a watch event whose "type" comes before its
        // "object", as kube-apiserver writes them) the object's own text is taken as it stands and
        // decoded on its own, unless the list is read in one pass (`optimistic`). Borrowed when
        // the whole text is in memory (kube decodes lists and watch lines from a `str`): copying
        // each object's text first was a copy of every list's gigabytes at 650,000 pods (issue
        // 39). From anything else (serde's buffered content: an event with "object" first)
        // through a transient JSON tree.
        let de = std::any::type_name::<D>();
        if de.contains("serde_json::de::Deserializer") {
            if Self::is_optimistic() {
                return K::deserialize(d).map(Lenient::Ok).inspect_err(|e| {
                    Self::optimistic(false);
                    tracing::info!(
                        kind = std::any::type_name::<K>(),
                        error = %e,
                        "an object in the list does not decode; listing again, each object on its own"
                    );
                });
            }
            if de.contains("StrRead") || de.contains("SliceRead") {
                let raw = <&serde_json::value::RawValue>::deserialize(d)?;
                return Ok(from_text(raw.get()));
            }
            let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
            return Ok(from_text(raw.get()));
        }
        let v = serde_json::Value::deserialize(d)?;
        Ok(match K::deserialize(&v) {
            Ok(k) => Lenient::Ok(k),
            Err(e) => malformed(Ids::deserialize(&v).unwrap_or_default(), e),
        })
    }
}

/// One object's JSON text decoded as `K`, or what can be read of it.
fn from_text<K: DeserializeOwned>(text: &str) -> Lenient<K> {
    match serde_json::from_str::<K>(text) {
        Ok(k) => Lenient::Ok(k),
        Err(e) => malformed(serde_json::from_str(text).unwrap_or_default(), e),
    }
}

fn malformed<K>(ids: Ids, e: serde_json::Error) -> Lenient<K> {
    Lenient::Malformed {
        meta: ObjectMeta {
            name: ids.metadata.name,
            namespace: ids.metadata.namespace,
            resource_version: ids.metadata.resource_version,
            uid: ids.metadata.uid,
            ..Default::default()
        },
        error: e.to_string(),
    }
}

impl<K: serde::Serialize> serde::Serialize for Lenient<K> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Lenient::Ok(k) => k.serialize(s),
            Lenient::Malformed { meta, .. } => {
                serde::Serialize::serialize(&serde_json::json!({ "metadata": meta }), s)
            }
        }
    }
}

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Ok(k) => k.meta(),
            Lenient::Malformed { meta, .. } => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Ok(k) => k.meta_mut(),
            Lenient::Malformed { meta, .. } => meta,
        }
    }
}

impl<K> Lenient<K> {
    /// `"namespace/name"` or `"name"` of the object, for logs.
    pub fn id(&self) -> String
    where
        K: Resource,
    {
        let m = self.meta();
        match (&m.namespace, &m.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "(unnamed)".into(),
        }
    }
}

/// Clamp every time in `v` past what our types hold (9999-12-30T22:00Z .. 9999-12-31T23:59:59Z, which
/// the API server accepts) to the latest time they hold, so one object read on its own (the
/// detector's own Node) decodes with its far-future times kept as far-future times.
pub fn clamp_times(v: &mut serde_json::Value) {
    use k8s_openapi::jiff::Timestamp;
    match v {
        serde_json::Value::String(s)
            if s.starts_with("9999-12-3")
                && s.len() <= 35
                && s.as_bytes().get(10) == Some(&b'T')
                && s.parse::<Timestamp>().is_err() =>
        {
            *s = Timestamp::MAX.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(clamp_times),
        serde_json::Value::Object(o) => o.values_mut().for_each(clamp_times),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn one_object_past_the_year_9999_limit_spoils_only_itself() {
        let list = r#"{"items": [
            {"metadata": {"name": "good", "resourceVersion": "7"}},
            {"metadata": {"name": "bad", "resourceVersion": "8"},
             "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "9999-12-31T23:59:59Z"}]}},
            {"metadata": {"name": "worse", "creationTimestamp": "9999-12-31T23:00:00Z"}}
        ]}"#;
        // The typed list fails as a whole...
        #[derive(serde::Deserialize)]
        struct List<T> {
            #[allow(dead_code)]
            items: Vec<T>,
        }
        assert!(serde_json::from_str::<List<Node>>(list).is_err());
        // ... a lenient one keeps the good node and names the bad ones.
        let items = serde_json::from_str::<List<Lenient<Node>>>(list)
            .unwrap()
            .items;
        assert!(matches!(&items[0], Lenient::Ok(n) if n.metadata.name.as_deref() == Some("good")));
        match &items[1] {
            Lenient::Malformed { meta, error } => {
                assert_eq!(meta.name.as_deref(), Some("bad"));
                assert_eq!(meta.resource_version.as_deref(), Some("8"));
                assert!(!error.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(items[2].id(), "worse");
        // In a watch event too, "type" first (read straight from serde_json) or "object" first
        // (buffered by serde before it reaches us).
        let ev = r#"{"type": "MODIFIED", "object": {"metadata": {"name": "bad"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "9999-12-31T23:59:59Z"}]}}}"#;
        let ev: kube::core::WatchEvent<Lenient<Node>> = serde_json::from_str(ev).unwrap();
        assert!(matches!(
            ev,
            kube::core::WatchEvent::Modified(Lenient::Malformed { .. })
        ));
        let ok = r#"{"type": "ADDED", "object": {"metadata": {"name": "fine"}}}"#;
        let ok: kube::core::WatchEvent<Lenient<Node>> = serde_json::from_str(ok).unwrap();
        assert!(matches!(ok, kube::core::WatchEvent::Added(Lenient::Ok(_))));
        let later = r#"{"object": {"metadata": {"name": "bad", "resourceVersion": "9"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "9999-12-31T23:59:59Z"}]}}, "type": "MODIFIED"}"#;
        let later: kube::core::WatchEvent<Lenient<Node>> = serde_json::from_str(later).unwrap();
        match later {
            kube::core::WatchEvent::Modified(bad) => {
                assert_eq!(bad.meta().resource_version.as_deref(), Some("9"))
            }
            other => panic!("{other:?}"),
        }
        let ok = r#"{"object": {"metadata": {"name": "fine"}}, "type": "ADDED"}"#;
        let ok: kube::core::WatchEvent<Lenient<Node>> = serde_json::from_str(ok).unwrap();
        assert!(matches!(ok, kube::core::WatchEvent::Added(Lenient::Ok(_))));
    }

    /// The same list read from a `str` and a byte slice (the object's text borrowed), from a reader
    /// (copied) and from a JSON tree (buffered): the same objects, good and malformed.
    #[test]
    fn every_way_in_decodes_the_same() {
        let list = r#"{"items": [
            {"metadata": {"name": "good", "resourceVersion": "7", "labels": {"a": "b\"c"}}},
            {"metadata": {"name": "bad", "resourceVersion": "8"}, "spec": {"unschedulable": "yes"}}
        ]}"#;
        #[derive(serde::Deserialize)]
        struct List {
            items: Vec<Lenient<Node>>,
        }
        let seen = |l: List| -> Vec<(String, Option<String>, bool)> {
            l.items
                .iter()
                .map(|o| {
                    let labels = o.meta().labels.as_ref().map(|l| format!("{l:?}"));
                    (o.id(), labels, matches!(o, Lenient::Ok(_)))
                })
                .collect()
        };
        let from_str = seen(serde_json::from_str(list).unwrap());
        assert_eq!(
            from_str,
            vec![
                ("good".into(), Some(r#"{"a": "b\"c"}"#.into()), true),
                ("bad".into(), None, false)
            ]
        );
        let from_slice = seen(serde_json::from_slice(list.as_bytes()).unwrap());
        let from_reader = seen(serde_json::from_reader(list.as_bytes()).unwrap());
        let tree: serde_json::Value = serde_json::from_str(list).unwrap();
        let from_tree = seen(serde_json::from_value(tree).unwrap());
        assert_eq!(from_slice, from_str);
        assert_eq!(from_reader, from_str);
        assert_eq!(from_tree, from_str);
    }

    /// A type of this test's own: the switch is per type, and other tests run beside this one.
    #[derive(serde::Deserialize, Debug, Clone)]
    struct Thing {
        #[allow(dead_code)]
        metadata: ObjectMeta,
        #[allow(dead_code)]
        count: u8,
    }

    #[test]
    fn a_list_read_in_one_pass_fails_on_a_bad_object_then_is_read_object_by_object() {
        #[derive(serde::Deserialize)]
        struct List {
            items: Vec<Lenient<Thing>>,
        }
        let good = r#"{"items": [{"metadata": {"name": "a"}, "count": 1},
            {"metadata": {"name": "b"}, "count": 2}]}"#;
        let bad = r#"{"items": [{"metadata": {"name": "a"}, "count": 1},
            {"metadata": {"name": "b"}, "count": 300}]}"#;
        Lenient::<Thing>::optimistic(true);
        assert!(Lenient::<Thing>::is_optimistic());
        assert!(!Lenient::<Node>::is_optimistic(), "only the type named");
        let list: List = serde_json::from_str(good).unwrap();
        assert_eq!(list.items.len(), 2);
        assert!(
            Lenient::<Thing>::is_optimistic(),
            "still on after a good list"
        );
        // One object out of range fails the list read in one pass, and turns it off...
        assert!(serde_json::from_str::<List>(bad).is_err());
        assert!(!Lenient::<Thing>::is_optimistic());
        // ... so the list read again keeps the good object and names the bad one.
        let again: List = serde_json::from_str(bad).unwrap();
        assert!(matches!(&again.items[0], Lenient::Ok(_)));
        assert!(
            matches!(&again.items[1], Lenient::Malformed { meta, .. } if meta.name.as_deref() == Some("b"))
        );
        // Turned off by the caller as well (the watch, once its list is in).
        Lenient::<Thing>::optimistic(true);
        Lenient::<Thing>::optimistic(false);
        assert!(!Lenient::<Thing>::is_optimistic());
        assert!(serde_json::from_str::<List>(bad).is_ok());
    }

    #[test]
    fn clamped_far_future_times_decode_as_the_latest_time() {
        let mut v = serde_json::json!({"metadata": {"name": "n", "creationTimestamp": "9999-12-31T23:00:00Z"},
            "status": {"conditions": [{"type": "A", "status": "True", "lastTransitionTime": "9999-12-31T23:59:59Z", "message": "9999-12-31 is a date"}]}});
        assert!(serde_json::from_value::<Node>(v.clone()).is_err());
        clamp_times(&mut v);
        let n: Node = serde_json::from_value(v).unwrap();
        let c = &n.status.unwrap().conditions.unwrap()[0];
        assert_eq!(
            c.last_transition_time
                .as_ref()
                .unwrap()
                .0
                .strftime("%Y")
                .to_string(),
            "9999"
        );
        assert_eq!(
            c.message.as_deref(),
            Some("9999-12-31 is a date"),
            "only times are touched"
        );
    }
}
