//! PEM certificates, keys and trust bundles, from files or from bytes already in memory
//! (a Kubernetes Secret the operator read). Errors name where the bytes came from, never
//! what they hold.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

pub(super) fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn invalid(origin: &str, reason: impl Into<String>) -> TlsError {
    TlsError::File {
        path: origin.to_owned(),
        reason: reason.into(),
    }
}

/// The certificates in `bytes` (at least one); `origin` names them in errors.
pub(super) fn parse_certs(
    bytes: &[u8],
    origin: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(origin, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(origin, "no certificate in it"));
    }
    Ok(certs)
}

/// The private key in `bytes`.
pub(super) fn parse_key(bytes: &[u8], origin: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| {
        invalid(
            origin,
            format!("no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })
}

/// A trust bundle: every certificate in `bytes` as a root.
pub(super) fn parse_roots(bytes: &[u8], origin: &str) -> Result<rustls::RootCertStore, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    for cert in parse_certs(bytes, origin)? {
        store
            .add(cert)
            .map_err(|e| invalid(origin, e.to_string()))?;
    }
    Ok(store)
}

pub(super) fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    parse_certs(&read(path)?, &path.display().to_string())
}

pub(super) fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    parse_key(&read(path)?, &path.display().to_string())
}

pub(super) fn roots(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    parse_roots(&read(path)?, &path.display().to_string())
}
