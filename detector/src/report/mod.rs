//! Reporting to Kubernetes: pure decisions (`aggregate` for Events, `sync` for conditions) and the thin
//! I/O shell that carries them out (`kube`).

pub mod aggregate;
pub mod kube;
pub mod sync;
