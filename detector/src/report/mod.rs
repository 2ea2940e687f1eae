//! Reporting to Kubernetes: pure decisions (`aggregate` for Events, `sync` for conditions), the seam
//! writes go through (`reporter`), the thin I/O shell that carries them out (`kube`), and the one task
//! that drives them (`writer`).

pub mod aggregate;
pub mod confinement;
pub mod kube;
pub mod reporter;
pub mod sync;
pub mod writer;
