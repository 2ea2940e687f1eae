//! A CA file (`--power-cycle-ca-file`): the PEM certificates trusted instead of the system's for
//! one endpoint. Read at start, to refuse a file that holds none, and again at each request, so a
//! rotated CA is used. I/O (a file read).

use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// A CA file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaError {
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")]
    Empty { path: String },
}

/// The certificates in the PEM file `path`.
pub(crate) fn read(path: &Path) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let shown = path.display().to_string();
    let unreadable = |reason: String| CaError::Unreadable {
        path: shown.clone(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| unreadable(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(CaError::Empty { path: shown });
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_gives_its_certificates_and_a_wrong_one_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["bmc.example".into()]).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, cert.cert.pem()).unwrap();
        assert_eq!(read(&good).unwrap().len(), 1);

        let key_only = dir.path().join("key.pem");
        std::fs::write(&key_only, cert.signing_key.serialize_pem()).unwrap();
        let e = read(&key_only).unwrap_err();
        assert!(matches!(e, CaError::Empty { .. }), "{e}");
        assert!(e.to_string().contains("BEGIN CERTIFICATE"), "{e}");

        let e = read(&dir.path().join("missing.pem")).unwrap_err();
        assert!(e.to_string().contains("missing.pem"), "{e}");
    }
}
