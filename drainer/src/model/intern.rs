//! Shared strings for the caches. Across 50,000 pods and 5,000 nodes the same few hundred strings
//! recur (namespaces, node names, owner kinds, label keys and values, condition types): each is
//! stored once and shared, which is most of what keeps the caches small. A shared string is an
//! [`ArcStr`]: one 8-byte pointer where `Arc<str>` takes 16, held several times by every node and
//! pod. Pure in what it returns (a process-wide table behind a lock).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) use arcstr::ArcStr;
use foldhash::fast::RandomState;

/// Every new label or annotation is looked up here, so the hasher is a fast one (foldhash, seeded
/// per process) rather than SipHash.
fn table() -> &'static Mutex<HashSet<ArcStr, RandomState>> {
    static TABLE: OnceLock<Mutex<HashSet<ArcStr, RandomState>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The shared copy of `s`.
pub(crate) fn intern(s: &str) -> ArcStr {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = t.get(s) {
        return a.clone();
    }
    let a = ArcStr::from(s);
    t.insert(a.clone());
    a
}

/// Held by nothing but its table: a static string (never counted) is always held.
fn unused(s: &ArcStr) -> bool {
    ArcStr::strong_count(s) == Some(1)
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
    t.retain(|a| !unused(a));
    gone + before - t.len()
}

/// A key and its value, shared: most label pairs (`kubernetes.io/os=linux`, a zone, an instance
/// type) are the same on thousands of nodes, so a node's map holds one pointer per entry instead of
/// two.
type Pair = Arc<(ArcStr, ArcStr)>;

/// Pairs by the addresses of their two strings: both are interned, so the same text is the same
/// address, and a lookup hashes two words instead of two strings. An address cannot be reused while
/// its entry lives, since the entry's pair holds the string.
type Pairs = HashMap<(usize, usize), Pair, RandomState>;

fn pairs() -> &'static Mutex<Pairs> {
    static PAIRS: OnceLock<Mutex<Pairs>> = OnceLock::new();
    PAIRS.get_or_init(Default::default)
}

fn address(s: &ArcStr) -> usize {
    s.as_ptr() as usize
}

/// The shared pairs of these pairs of interned strings (one lock for a whole map).
fn shared_pairs(kvs: Vec<(ArcStr, ArcStr)>) -> Arc<[Pair]> {
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
pub(crate) struct Shared(pub ArcStr);

impl Default for Shared {
    fn default() -> Shared {
        Shared(ArcStr::new())
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Shared, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| Shared(intern(s))))
    }
}

/// Reads a string (borrowed from the input or not) through `f`, allocating nothing itself: what
/// the watch's decoding uses for every string it looks up or parses instead of keeping.
pub(crate) struct TextVisitor<F>(pub F);

impl<'de, T, F: FnOnce(&str) -> T> serde::de::Visitor<'de> for TextVisitor<F> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        Ok((self.0)(s))
    }
}

/// A string as read against the one expected in its place: the same text, or the text shared anew.
pub(crate) enum Text {
    Same,
    New(ArcStr),
}

/// Reads a string and compares it with `expected` (the same field of the object as last read)
/// before looking it up: an unchanged string costs one comparison, not a hash and a table lookup.
pub(crate) struct Expect<'a>(pub Option<&'a ArcStr>);

impl<'de> serde::de::DeserializeSeed<'de> for Expect<'_> {
    type Value = Text;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Text, D::Error> {
        d.deserialize_str(TextVisitor(|s: &str| match self.0 {
            Some(e) if e.as_str() == s => Text::Same,
            _ => Text::New(intern(s)),
        }))
    }
}

impl Text {
    /// The string read, given the one expected.
    pub(crate) fn or(self, expected: Option<&ArcStr>) -> ArcStr {
        match (self, expected) {
            (Text::Same, Some(e)) => e.clone(),
            (Text::New(s), _) => s,
            (Text::Same, None) => ArcStr::new(),
        }
    }
}

/// A map by node (or other object) name: every watch event and every decision looks nodes up in
/// such maps, so the hasher is a fast one (foldhash, seeded per process, as the caches' own maps).
pub(crate) type ByName<V> = std::collections::HashMap<ArcStr, V, foldhash::fast::RandomState>;

/// A small string map kept as a sorted slice of shared pairs of shared strings: node labels and
/// annotations (a dozen entries, mostly the same on every node) in a fraction of a
/// `BTreeMap<String, String>`, 8 bytes an entry. The slice is behind one `Arc`: a heartbeat reuses
/// the node's map as last read with one count, not a new list and a count on each of its pairs
/// (each on its own cache line, all cold when an event arrives alone).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Map(Arc<[Pair]>);

impl Map {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|p| p.0.as_str().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|p| (p.0.as_str(), p.1.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same entries held in the same places (a map reused whole, not one read again).
    pub fn shares(&self, other: &Map) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&*other.0).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// A copy with `key` set to `value` (None: removed).
    pub(crate) fn with(&self, key: &str, value: Option<&str>) -> Map {
        self.iter()
            .filter(|(k, _)| *k != key)
            .chain(value.map(|v| (key, v)))
            .collect()
    }

    /// Sorted by key, the first of equal keys kept.
    fn of_pairs(mut v: Vec<(ArcStr, ArcStr)>) -> Map {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        Map(shared_pairs(v))
    }

    pub fn to_btree(&self) -> std::collections::BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Read a JSON object of strings, comparing its entries in order with `earlier` (the same map
    /// as last read: the API server writes map keys sorted, as the map keeps them): when every entry
    /// is the same, `earlier` is reused and nothing is looked up; from the first difference on, the
    /// rest is shared anew.
    pub(crate) fn read<'de, A: serde::de::MapAccess<'de>>(
        mut m: A,
        earlier_map: Option<&Map>,
    ) -> Result<Map, A::Error> {
        let earlier = earlier_map.map_or(&[][..], |e| &e.0[..]);
        // Entries equal to `earlier`'s so far; once one differs, all are collected.
        let mut same = 0;
        let mut read: Option<Vec<(ArcStr, ArcStr)>> = None;
        loop {
            let expected = match read {
                None => earlier.get(same),
                Some(_) => None,
            };
            let Some(k) = m.next_key_seed(Expect(expected.map(|p| &p.0)))? else {
                break;
            };
            let v = m.next_value_seed(Expect(expected.map(|p| &p.1)))?;
            match (k, v, &mut read) {
                (Text::Same, Text::Same, None) => same += 1,
                (k, v, read) => {
                    let read = read.get_or_insert_with(|| {
                        let mut r =
                            Vec::with_capacity(m.size_hint().unwrap_or(8).min(64) + same + 1);
                        r.extend(earlier[..same].iter().map(|p| (p.0.clone(), p.1.clone())));
                        r
                    });
                    read.push((k.or(expected.map(|p| &p.0)), v.or(expected.map(|p| &p.1))));
                }
            }
        }
        Ok(match read {
            None if same == earlier.len() => earlier_map.cloned().unwrap_or_default(),
            None => Map(earlier[..same].into()),
            Some(read) => Map::of_pairs(read),
        })
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Map {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Map {
        let v: Vec<(ArcStr, ArcStr)> = iter
            .into_iter()
            .map(|(k, v)| (intern(k), intern(v)))
            .collect();
        Map::of_pairs(v)
    }
}

/// A JSON object of strings read into a map of shared strings, with no allocation per entry.
impl<'de> serde::Deserialize<'de> for Map {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        d.deserialize_map(MapVisitor(None))
    }
}

/// Reads a JSON object of strings against the map as last read ([`Map::read`]).
pub(crate) struct MapVisitor<'a>(pub Option<&'a Map>);

impl<'de> serde::de::Visitor<'de> for MapVisitor<'_> {
    type Value = Map;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Map, A::Error> {
        Map::read(m, self.0)
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
    use serde::de::DeserializeSeed;

    #[test]
    fn interned_strings_are_shared_and_purged_when_unused() {
        let a = intern("nodemedic-intern-test-a");
        let b = intern("nodemedic-intern-test-a");
        assert!(ArcStr::ptr_eq(&a, &b));
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

    fn read(json: &str, earlier: Option<&Map>) -> Map {
        let mut d = serde_json::Deserializer::from_str(json);
        struct Seed<'a>(Option<&'a Map>);
        impl<'de> DeserializeSeed<'de> for Seed<'_> {
            type Value = Map;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Map, D::Error> {
                d.deserialize_map(MapVisitor(self.0))
            }
        }
        Seed(earlier).deserialize(&mut d).unwrap()
    }

    #[test]
    fn a_map_read_against_the_last_one_reuses_it_when_unchanged_and_equals_a_fresh_read() {
        let first = read(r#"{"a": "1", "b": "2", "c": "3"}"#, None);
        let again = read(r#"{"a": "1", "b": "2", "c": "3"}"#, Some(&first));
        assert_eq!(again, first);
        assert!(again.shares(&first), "reused, not looked up again");
        assert!(
            Arc::ptr_eq(&again.0, &first.0),
            "the same list, counted once: not a copy counting each pair"
        );
        for (json, want) in [
            (
                r#"{"a": "1", "b": "two", "c": "3"}"#,
                vec![("a", "1"), ("b", "two"), ("c", "3")],
            ),
            (r#"{"a": "1", "b": "2"}"#, vec![("a", "1"), ("b", "2")]),
            (
                r#"{"a": "1", "b": "2", "c": "3", "d": "4"}"#,
                vec![("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")],
            ),
            (
                r#"{"c": "3", "a": "1", "b": "2"}"#,
                vec![("a", "1"), ("b", "2"), ("c", "3")],
            ),
            (r#"{}"#, vec![]),
            (r#"{"a": "1", "a": "x"}"#, vec![("a", "1")]),
        ] {
            let m = read(json, Some(&first));
            assert_eq!(m, read(json, None), "{json}: as a fresh read");
            assert_eq!(m.iter().collect::<Vec<_>>(), want, "{json}");
        }
    }

    #[test]
    fn maps_share_their_pairs_and_unused_pairs_are_purged_with_their_strings() {
        let a: Map = [("nodemedic-pair-test", "x"), ("host", "nodemedic-pair-a")]
            .into_iter()
            .collect();
        let b: Map = [("host", "nodemedic-pair-b"), ("nodemedic-pair-test", "x")]
            .into_iter()
            .collect();
        let shared = |m: &Map| {
            m.0.iter()
                .find(|p| p.0.as_str() == "nodemedic-pair-test")
                .cloned()
        };
        assert!(Arc::ptr_eq(&shared(&a).unwrap(), &shared(&b).unwrap()));
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            [("host", "nodemedic-pair-b"), ("nodemedic-pair-test", "x")]
        );
        drop(a);
        purge();
        let held = |k: &str, v: &str| {
            let t = pairs().lock().unwrap();
            t.values().any(|p| p.0.as_str() == k && p.1.as_str() == v)
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
