//! The detector library's errors (the binary reports them; only `main` uses anyhow). Pure.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid rule files:\n{0}")]
    Rules(#[from] crate::config::ConfigErrors),
    #[error("no rule files found in {0:?}")]
    NoRules(Vec<PathBuf>),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("stopped before the node could be read")]
    Stopped,
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
