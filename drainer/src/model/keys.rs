//! The drainer's own annotation keys on its Lease (pure constants); the keys it shares with the
//! detector (the drain record, draino's annotations, the exclusion label) are in
//! `nodemedic_common::keys`.

/// The annotation on the drainer's Lease that pauses it (`kubectl annotate lease ... KEY=reason`).
pub const PAUSE_ANNOTATION: &str = "nodemedic.io/pause";
/// The annotation where the leader keeps the breaker's state across restarts and leader changes.
pub const BREAKER_ANNOTATION: &str = "nodemedic.io/breaker";
/// The annotation where earlier releases kept the record memory (`decide::fleet::seen`), which now
/// lives in ConfigMaps of its own (`act::recall`): read back once, then removed.
pub(crate) const RECORDS_ANNOTATION: &str = "nodemedic.io/records";
