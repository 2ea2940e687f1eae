//! Shared strings for the caches. Across 50,000 pods and 5,000 nodes the same few hundred strings
//! recur (namespaces, node names, phases, owner kinds, label keys and values, condition types): each
//! is stored once and shared, which is most of what keeps the caches small. Pure in what it returns
//! (a process-wide table behind a lock).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use foldhash::fast::RandomState;

/// Every node update looks up each of its labels and annotations here, so the hasher is a fast one
/// (foldhash, seeded per process) rather than SipHash.
fn table() -> &'static Mutex<HashSet<Arc<str>, RandomState>> {
    static TABLE: OnceLock<Mutex<HashSet<Arc<str>, RandomState>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The shared copy of `s`.
pub fn intern(s: &str) -> Arc<str> {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = t.get(s) {
        return a.clone();
    }
    let a: Arc<str> = Arc::from(s);
    t.insert(a.clone());
    a
}

/// Drop strings and pairs no cache holds any more (called at each resync); returns how many went.
pub fn purge() -> usize {
    // Pairs first: a pair dropped here may hold the last other reference to its strings.
    let mut p = pairs().lock().unwrap_or_else(|e| e.into_inner());
    let before = p.len();
    p.retain(|_, a| Arc::strong_count(a) > 1);
    let gone = before - p.len();
    drop(p);
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let before = t.len();
    t.retain(|a| Arc::strong_count(a) > 1);
    gone + before - t.len()
}

/// A key and its value, shared: most label pairs (`kubernetes.io/os=linux`, a zone, an instance
/// type) are the same on thousands of nodes, so a node's map holds one pointer per entry instead of
/// two wide ones.
type Pair = Arc<(Arc<str>, Arc<str>)>;

/// Pairs by the addresses of their two strings: both are interned, so the same text is the same
/// address, and a lookup hashes two words instead of two strings. An address cannot be reused while
/// its entry lives, since the entry's pair holds the string.
type Pairs = HashMap<(usize, usize), Pair, RandomState>;

fn pairs() -> &'static Mutex<Pairs> {
    static PAIRS: OnceLock<Mutex<Pairs>> = OnceLock::new();
    PAIRS.get_or_init(Default::default)
}

fn address(s: &Arc<str>) -> usize {
    Arc::as_ptr(s).cast::<u8>() as usize
}

/// The shared pairs of these pairs of interned strings (one lock for a whole map).
fn shared_pairs(kvs: Vec<(Arc<str>, Arc<str>)>) -> Box<[Pair]> {
    let mut t = pairs().lock().unwrap_or_else(|e| e.into_inner());
    kvs.into_iter()
        .map(|kv| {
            t.entry((address(&kv.0), address(&kv.1)))
                .or_insert_with(|| Arc::new(kv))
                .clone()
        })
        .collect()
}

/// A shared string read straight from a decoder: the text is looked up in the table as it is read,
/// so a string already shared (a label, a condition type) costs no allocation at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared(pub Arc<str>);

impl Default for Shared {
    fn default() -> Shared {
        Shared(intern(""))
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Shared, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| Shared(intern(s))))
    }
}

/// Reads a string (borrowed from the input or not) through `f`, allocating nothing itself: what
/// the watch's decoding uses for every string it looks up or parses instead of keeping.
pub struct TextVisitor<F>(pub F);

impl<'de, T, F: FnOnce(&str) -> T> serde::de::Visitor<'de> for TextVisitor<F> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        Ok((self.0)(s))
    }
}

/// A small string map kept as a sorted boxed slice of shared pairs of shared strings: node labels
/// and annotations (a dozen entries, mostly the same on every node) in a fraction of a
/// `BTreeMap<String, String>`, 8 bytes an entry.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Map(Box<[Pair]>);

impl Map {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|p| (*p.0).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|p| (&*p.0, &*p.1))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A copy with `key` set to `value` (None: removed).
    pub fn with(&self, key: &str, value: Option<&str>) -> Map {
        self.iter()
            .filter(|(k, _)| *k != key)
            .chain(value.map(|v| (key, v)))
            .collect()
    }

    /// Sorted by key, the first of equal keys kept.
    fn of_pairs(mut v: Vec<(Arc<str>, Arc<str>)>) -> Map {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        Map(shared_pairs(v))
    }

    pub fn to_btree(&self) -> std::collections::BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Map {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Map {
        let v: Vec<(Arc<str>, Arc<str>)> = iter
            .into_iter()
            .map(|(k, v)| (intern(k), intern(v)))
            .collect();
        Map::of_pairs(v)
    }
}

/// A JSON object of strings read into a map of shared strings, with no allocation per entry.
impl<'de> serde::Deserialize<'de> for Map {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Map;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Map, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(16).min(64));
                while let Some((Shared(k), Shared(v2))) = m.next_entry()? {
                    v.push((k, v2));
                }
                Ok(Map::of_pairs(v))
            }
        }
        d.deserialize_map(Entries)
    }
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_strings_are_shared_and_purged_when_unused() {
        let a = intern("nodemedic-intern-test-a");
        let b = intern("nodemedic-intern-test-a");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        purge();
        let t = table().lock().unwrap();
        assert!(!t.contains("nodemedic-intern-test-a"));
    }

    #[test]
    fn a_map_finds_keys_and_edits_by_copy() {
        let m: Map = [("zone", "a"), ("pool", "blue"), ("arch", "amd64")]
            .into_iter()
            .collect();
        assert_eq!(m.get("pool"), Some("blue"));
        assert_eq!(m.get("gpu"), None);
        let m2 = m.with("pool", Some("red")).with("arch", None);
        assert_eq!(m2.get("pool"), Some("red"));
        assert!(!m2.contains_key("arch"));
        assert_eq!(m.get("pool"), Some("blue"), "the original is unchanged");
        assert_eq!(m2.len(), 2);
    }

    #[test]
    fn maps_share_their_pairs_and_unused_pairs_are_purged_with_their_strings() {
        let a: Map = [("nodemedic-pair-test", "x"), ("host", "nodemedic-pair-a")]
            .into_iter()
            .collect();
        let b: Map = [("host", "nodemedic-pair-b"), ("nodemedic-pair-test", "x")]
            .into_iter()
            .collect();
        let shared = |m: &Map| m.0.iter().find(|p| &*p.0 == "nodemedic-pair-test").cloned();
        assert!(Arc::ptr_eq(&shared(&a).unwrap(), &shared(&b).unwrap()));
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            [("host", "nodemedic-pair-b"), ("nodemedic-pair-test", "x")]
        );
        drop(a);
        purge();
        let held = |k: &str, v: &str| {
            let t = pairs().lock().unwrap();
            t.values().any(|p| &*p.0 == k && &*p.1 == v)
        };
        assert!(!held("host", "nodemedic-pair-a"), "no map holds it");
        assert!(!table().lock().unwrap().contains("nodemedic-pair-a"));
        assert!(held("host", "nodemedic-pair-b") && held("nodemedic-pair-test", "x"));
        drop(b);
        purge();
        assert!(!held("nodemedic-pair-test", "x"));
        assert!(!table().lock().unwrap().contains("nodemedic-pair-test"));
        // The same text again, at new addresses: a new pair, found by its new strings.
        let c: Map = [("nodemedic-pair-test", "x")].into_iter().collect();
        let d: Map = [("nodemedic-pair-test", "x")].into_iter().collect();
        assert_eq!(c.get("nodemedic-pair-test"), Some("x"));
        assert!(Arc::ptr_eq(&shared(&c).unwrap(), &shared(&d).unwrap()));
        assert!(held("nodemedic-pair-test", "x"));
    }
}
