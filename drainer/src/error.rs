//! The drainer library's errors (the binary reports them; only `main` uses anyhow). Pure data.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("guard TLS: cannot load {} / {}: {source}", cert.display(), key.display())]
    GuardTls {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("guard: cannot listen on {0}")]
    GuardListen(SocketAddr),
    #[error(transparent)]
    RecordKey(#[from] crate::act::key::KeyError),
    /// Boxed: it is large, and every `Result` of the drainer's start-up carries this type.
    #[error(transparent)]
    Object(Box<crate::act::objects::ObjectError>),
    #[error("--reboot-signing-key {0}")]
    RebootKey(#[from] nodemedic_common::reboot::KeyError),
    #[error(
        "refusing to start (--refuse-looser-start): these settings are looser than the ones last published in {configmap}: {}; roll the change back, or start once without --refuse-looser-start to take them",
        loosened.join("; ")
    )]
    LooserStart {
        configmap: String,
        loosened: Vec<String>,
    },
}

impl From<crate::act::objects::ObjectError> for Error {
    fn from(e: crate::act::objects::ObjectError) -> Error {
        Error::Object(Box::new(e))
    }
}

impl Error {
    /// The API server could not be reached or was not serving: worth waiting for at start.
    pub fn unreachable(&self) -> bool {
        match self {
            Error::RecordKey(e) => e.unreachable(),
            Error::Object(e) => e.unreachable(),
            _ => false,
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
