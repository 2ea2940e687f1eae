//! The ground floor: the vocabulary every layer of the drainer shares, pure data and its pure
//! functions, importing nothing else of the crate. Node and pod views as the caches keep them, the
//! drain record (the drainer's only state, kept on each node), what happens to a node as data
//! (occurrences, with their Event reasons), and the shared strings that keep the caches small.

pub mod attempt;
pub(crate) mod capi;
pub mod cluster;
pub mod intern;
pub mod keys;
pub mod ladder;
pub(crate) mod lifecycle;
pub mod lite;
pub(crate) mod medik8s;
pub(crate) mod metal3;
pub mod node;
pub mod occurrence;
pub mod pod;
pub mod pod_lite;
pub(crate) mod progress;
pub mod record;
pub mod seal;
pub(crate) mod selection;
pub(crate) mod symptom;
pub mod transition;
pub mod uid;
