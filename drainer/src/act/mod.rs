//! Carrying out decisions, I/O: a thin executor of the effects a round returns, against the
//! [`Cluster`](crate::model::cluster::Cluster) seam behind the leadership gate
//! ([`Gated`](crate::model::cluster::Gated)), at the injected clock. Each write puts
//! the node's drain record first or together with the change, so a new leader sees what was done;
//! what happens is handed to the [`Recorder`](crate::record::Recorder) as an occurrence. Nothing here decides: the record's
//! transitions come in with the effect (the controller works them out with `model::record`).
//! Dry-run: Events only.
//!
//! ```text
//!  executor  the executor and the node writes (cordon, uncordon, probation, record, delete)
//!  hold      the cordon, our taints and the record written together
//!  key       the record key, from the drainer's Secret
//!  drain     a drain's evictions, and writing how it ended
//!  marks     the after-drain labels, annotations and taints
//!  ladder    a remediation step's record, the Node's deletion for its replacement
//!  symptoms  the PodsNotStarting / PodsNotTerminating conditions
//!  publisher the one task that keeps the drainer's own ConfigMaps: reboot requests, settings, memory
//!  recall    the record memory's ConfigMaps, read at leadership and kept (by the publisher)
//!  objects   the drainer's own objects, made at start where missing and allowed
//!  turns     whose requests go first: a round's holds, then the drains' (32 at once)
//!  kube      the Cluster over the Kubernetes API (what `drainer run` writes with; its RBAC)
//!  capi      the Machine and BareMetalHost behind a Node (Cluster API, Metal3) for `kube`
//!  memory    the Cluster in memory (`drainer simulate`, tests)
//! ```
//!
//! Every write goes through the seam's gate: the Executor's, and the drainer's own ConfigMaps
//! (settings, reboot requests, record memory) through `Cluster::keep_configmap`, the one way they
//! are written. What is left outside: the record key Secret and the objects made at start, before
//! any leadership (`key`, `objects`), and the Lease itself (`leader`).

pub(crate) mod capi;
pub mod drain;
pub mod executor;
pub mod hold;
pub mod key;
pub mod kube;
pub(crate) mod ladder;
pub mod marks;
pub mod medik8s;
pub mod memory;
pub mod objects;
pub(crate) mod power;
pub(crate) mod publisher;
pub mod recall;
pub(crate) mod symptoms;
pub(crate) mod turns;

pub(crate) use drain::{DrainRun, PDB_RETRY};
pub(crate) use executor::{Executor, FollowUp};
pub use kube::{
    CLUSTER_API_PERMISSIONS, DELETE_NODES_PERMISSIONS, FORCE_DELETE_PERMISSIONS, KURED_PERMISSIONS,
    KubeCluster, METAL3_PERMISSIONS, PERMISSIONS,
};
pub use medik8s::MEDIK8S_PERMISSIONS;

#[cfg(test)]
mod tests;
