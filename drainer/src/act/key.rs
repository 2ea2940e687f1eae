//! The drainer's record key (see [`crate::model::seal`]), I/O.
//!
//! As the shipped manifests run it (`--record-key-file`): a file its pod mounts from the Secret
//! `<lease name>-record-key`, made once at install (`kubectl create secret`, or the Helm chart),
//! which the drainer's ServiceAccount has no grant on. A token stolen from the drainer's pod can
//! then read no key, so it cannot seal a record the drainer would take for its own (and act on).
//! The file's bytes are the key as they are: a Secret the drainer filled itself before (32 random
//! bytes) keeps every record on the Nodes verifiable across the upgrade.
//!
//! Without `--record-key-file` (a drainer run by hand, or under an older Role): read, and filled at
//! the first start with a random key, through the API (an update with the Secret's
//! resourceVersion, so two replicas starting together agree on one key), said once as the weaker
//! setup it is: whoever holds that token can read the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

use crate::model::seal::{KeyTooShort, SealKey, random_bytes};

/// The Secret's data key that holds the record key.
pub(crate) const DATA_KEY: &str = "key";

/// The Secret's default name for a drainer with Lease `lease`.
pub(crate) fn default_secret(lease: &str) -> String {
    format!("{lease}-record-key")
}

/// Why the record key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the drain record key Secret {namespace}/{name} does not exist: make it once (`{}`), and mount it with --record-key-file as deploy/base/drainer-deployment.yaml does",
        make_command(namespace, name)
    )]
    Missing { namespace: String, name: String },
    #[error("cannot read or fill the drain record key Secret {namespace}/{name}: {}; the shipped manifests grant no Secret and mount the key as a file instead: make the Secret once (`{}`), mount it into the drainer's pod and give --record-key-file, as deploy/base/drainer-deployment.yaml does", nodemedic_common::client::said(.source), make_command(namespace, name))]
    Forbidden {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read or fill the drain record key Secret {namespace}/{name}: {}", nodemedic_common::client::said(.source))]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the drain record key Secret {namespace}/{name}: {source}")]
    TooShort {
        namespace: String,
        name: String,
        #[source]
        source: KeyTooShort,
    },
    #[error(
        "the drain record key Secret {namespace}/{name} kept changing while it was being filled"
    )]
    Contended { namespace: String, name: String },
    #[error("--record-key-file {}: {source}", path.display())]
    FileTooShort {
        path: PathBuf,
        #[source]
        source: KeyTooShort,
    },
    #[error("--record-key-file {}: cannot read it: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--record-key-previous-file {}: {reason}", path.display())]
    Previous { path: PathBuf, reason: String },
}

impl KeyError {
    /// The API server could not be reached or was not serving (worth waiting for).
    pub fn unreachable(&self) -> bool {
        matches!(self, KeyError::Api { source, .. } if nodemedic_common::client::unreachable(source))
    }
}

/// How often a record key file not there yet is looked for again.
const FILE_POLL: Duration = Duration::from_secs(2);

/// What reading the record key file found.
pub(crate) enum FileKey {
    Key(Box<SealKey>),
    /// Not there yet: the Secret is made after the pod started (an optional Secret volume is
    /// filled by the kubelet when it appears) or holds no `key`.
    Absent,
}

/// The record key in the file `path`, its bytes as they are.
pub(crate) fn read_file(path: &Path) -> Result<FileKey, KeyError> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => Ok(FileKey::Absent),
        Ok(bytes) => SealKey::new(&bytes)
            .map(|k| FileKey::Key(Box::new(k)))
            .map_err(|source| KeyError::FileTooShort {
                path: path.into(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileKey::Absent),
        Err(source) => Err(KeyError::File {
            path: path.into(),
            source,
        }),
    }
}

/// The command that makes the record key Secret `namespace/name` with a new random key.
pub(crate) fn make_command(namespace: &str, name: &str) -> String {
    format!(
        "kubectl -n {namespace} create secret generic {name} --from-literal={DATA_KEY}=\"$(head -c 32 /dev/urandom | base64)\""
    )
}

/// The record key from the file `path`, waited for while it is not there (said once, with the
/// command that makes the Secret it is mounted from): the drainer is not ready meanwhile. With
/// `previous` (a rotation: the Secret's `previous` item), the records the key before sealed are
/// trusted too; that file may be absent (no rotation under way).
pub(crate) async fn from_file(
    path: &Path,
    previous: Option<&Path>,
    namespace: &str,
    name: &str,
) -> Result<SealKey, KeyError> {
    let mut said = false;
    loop {
        match read_file(path)? {
            FileKey::Key(k) => {
                tracing::info!(file = %path.display(), "drain records are sealed with the key from the file");
                return with_previous(*k, previous);
            }
            FileKey::Absent if !said => {
                said = true;
                tracing::warn!(
                    file = %path.display(),
                    make = %make_command(namespace, name),
                    "waiting for the drain record key: the file is not there (its Secret is missing or holds no `{DATA_KEY}`); make the Secret once, as `make` says, and the kubelet puts it in place: not ready meanwhile"
                );
            }
            FileKey::Absent => {}
        }
        tokio::time::sleep(FILE_POLL).await;
    }
}

/// `key`, trusting also the records sealed with the key in `previous` if that file holds one.
pub(crate) fn with_previous(key: SealKey, previous: Option<&Path>) -> Result<SealKey, KeyError> {
    let Some(path) = previous else {
        return Ok(key);
    };
    let said = |reason: String| KeyError::Previous {
        path: path.into(),
        reason,
    };
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => Ok(key),
        Ok(bytes) => {
            let key = key.with_previous(&bytes).map_err(|e| said(e.to_string()))?;
            tracing::warn!(file = %path.display(), "a record key rotation is under way: records sealed with the previous key are trusted too, and sealed with the new one when next written; remove the Secret's `previous` once every node's record was written again (a week at most)");
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(key),
        Err(e) => Err(said(format!("cannot read it: {e}"))),
    }
}

/// A failed call on the record key Secret `namespace/name`: a refusal names the file instead.
fn api_error(namespace: &str, name: &str, source: kube::Error) -> KeyError {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    match &source {
        kube::Error::Api(e) if e.code == 403 => KeyError::Forbidden {
            namespace,
            name,
            source,
        },
        _ => KeyError::Api {
            namespace,
            name,
            source,
        },
    }
}

/// The record key from Secret `namespace/name`, filled with a new random key if it holds none.
pub(crate) async fn load(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<SealKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_error = |source| api_error(namespace, name, source);
    for _ in 0..5 {
        let Some(mut secret) = api.get_opt(name).await.map_err(api_error)? else {
            return Err(KeyError::Missing {
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        if let Some(key) = secret.data.as_ref().and_then(|d| d.get(DATA_KEY)) {
            return SealKey::new(&key.0).map_err(|source| KeyError::TooShort {
                namespace: namespace.into(),
                name: name.into(),
                source,
            });
        }
        secret
            .data
            .get_or_insert_with(BTreeMap::new)
            .insert(DATA_KEY.into(), ByteString(random_bytes().to_vec()));
        match api.replace(name, &PostParams::default(), &secret).await {
            Ok(_) => tracing::info!(%namespace, %name, "made the drain record key"),
            // Another replica filled it first: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(api_error(e)),
        }
    }
    Err(KeyError::Contended {
        namespace: namespace.into(),
        name: name.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_taken_as_its_bytes_and_one_not_there_yet_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        assert!(matches!(read_file(&path), Ok(FileKey::Absent)));
        std::fs::write(&path, b"").unwrap();
        assert!(matches!(read_file(&path), Ok(FileKey::Absent)));
        std::fs::write(&path, b"short").unwrap();
        let Err(e) = read_file(&path) else {
            panic!("5 bytes taken for a key")
        };
        assert!(matches!(e, KeyError::FileTooShort { .. }));
        assert!(e.to_string().contains("has 5 bytes"), "{e}");
        // The same bytes the drainer once filled its Secret with give the same key.
        let bytes = random_bytes();
        std::fs::write(&path, bytes).unwrap();
        let FileKey::Key(k) = read_file(&path).unwrap() else {
            panic!("a key")
        };
        let same = SealKey::new(&bytes).unwrap();
        assert!(same.verify(b"r", &k.seal(b"r")));
        // A folder is no key: said, not waited for.
        let Err(e) = read_file(dir.path()) else {
            panic!("a folder taken for a key")
        };
        assert!(matches!(e, KeyError::File { .. }), "{e}");
    }

    #[test]
    fn a_refused_secret_says_to_mount_the_key_as_a_file() {
        let refused = kube::Error::Api(
            kube::core::Status::failure(
                "secrets \"draino-record-key\" is forbidden: User \"system:serviceaccount:kube-system:draino\" cannot get resource \"secrets\"",
                "Forbidden",
            )
            .with_code(403)
            .boxed(),
        );
        let said = api_error("kube-system", "draino-record-key", refused).to_string();
        assert!(said.contains("cannot get resource \"secrets\""), "{said}");
        assert!(said.contains("--record-key-file"), "{said}");
        assert!(
            said.contains("kubectl -n kube-system create secret generic draino-record-key"),
            "{said}"
        );
        let gone = kube::Error::Api(
            kube::core::Status::failure("etcd is down", "InternalError")
                .with_code(500)
                .boxed(),
        );
        let said = api_error("kube-system", "k", gone).to_string();
        assert!(!said.contains("--record-key-file"), "{said}");
    }

    #[test]
    fn the_command_that_makes_the_secret_names_it_and_its_data_key() {
        let c = make_command("kube-system", "nodemedic-drainer-record-key");
        assert!(
            c.starts_with("kubectl -n kube-system create secret generic nodemedic-drainer-record-key --from-literal=key="),
            "{c}"
        );
    }
}
