//! Certificates for the TLS tests, generated per run (no keys are committed).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

/// A CA and a server certificate for 127.0.0.1 it signed, as PEM files.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Writes a fresh [`Pki`] as `<tag>-ca.pem`, `<tag>-server.pem` and `<tag>-server.key`
/// in `dir`.
pub fn write_pki(dir: &Path, tag: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let put = |name: &str, text: String| {
        let p = dir.join(format!("{tag}-{name}"));
        std::fs::write(&p, text).unwrap();
        p
    };
    Pki {
        ca: put("ca.pem", ca.pem()),
        cert: put("server.pem", cert.pem()),
        key: put("server.key", key.serialize_pem()),
    }
}
