//! Which TLS cipher suite a connection gets: AES-128-GCM whenever the client offers it,
//! whatever the client's own order (servers apply theirs), and still a connection with a
//! client that offers only AES-256-GCM or only ChaCha20-Poly1305.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rustls::CipherSuite;
use rustls::pki_types::ServerName;
use security::tls::{
    ClientAuth, ClientTlsSettings, MaybeTls, ServerTlsSettings, TlsClient, TlsMode, TlsServer,
};
use tokio::net::{TcpListener, TcpStream};

mod support;
use support::{Pki, write_pki};

/// A server in enforcing mode; answers with the suite each accepted connection got.
async fn server(pki: &Pki) -> (String, tokio::task::JoinHandle<Option<CipherSuite>>) {
    let tls = TlsServer::new(ServerTlsSettings {
        mode: TlsMode::Enforcing,
        cert_path: Some(pki.cert.clone()),
        key_path: Some(pki.key.clone()),
        trust_cert_path: None,
        client_auth: ClientAuth::None,
    })
    .unwrap()
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        match tls.accept(tcp).await.unwrap() {
            MaybeTls::Server(s) => s.get_ref().1.negotiated_cipher_suite().map(|s| s.suite()),
            _ => None,
        }
    });
    (addr, accepted)
}

/// A plain rustls client offering `suites` in that order (as another implementation
/// would); the suite it got.
async fn foreign_client(
    pki: &Pki,
    addr: &str,
    suites: Vec<rustls::SupportedCipherSuite>,
) -> CipherSuite {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(&pki.ca).unwrap();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    stream
        .get_ref()
        .1
        .negotiated_cipher_suite()
        .unwrap()
        .suite()
}

#[tokio::test]
async fn our_client_and_server_agree_on_aes_128_gcm() {
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    let (addr, accepted) = server(&pki).await;
    let client = TlsClient::new(&ClientTlsSettings {
        enable: true,
        trust_cert_path: Some(pki.ca.clone()),
        ..ClientTlsSettings::default()
    })
    .unwrap()
    .unwrap();
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let got = match client.connect(tcp, &addr).await.unwrap() {
        MaybeTls::Client(s) => s.get_ref().1.negotiated_cipher_suite().map(|s| s.suite()),
        _ => None,
    };
    assert_eq!(got, Some(CipherSuite::TLS13_AES_128_GCM_SHA256));
    assert_eq!(
        accepted.await.unwrap(),
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256)
    );
}

#[tokio::test]
async fn the_server_order_wins_over_a_client_preferring_aes_256() {
    use rustls::crypto::ring::cipher_suite::*;
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    // Java's and rustls's own default order.
    let (addr, accepted) = server(&pki).await;
    let got = foreign_client(
        &pki,
        &addr,
        vec![TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256],
    )
    .await;
    assert_eq!(got, CipherSuite::TLS13_AES_128_GCM_SHA256);
    assert_eq!(
        accepted.await.unwrap(),
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256)
    );
    // Clients without AES-128 still connect.
    for (suite, expected) in [
        (
            TLS13_AES_256_GCM_SHA384,
            CipherSuite::TLS13_AES_256_GCM_SHA384,
        ),
        (
            TLS13_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        ),
    ] {
        let (addr, accepted) = server(&pki).await;
        assert_eq!(foreign_client(&pki, &addr, vec![suite]).await, expected);
        assert_eq!(accepted.await.unwrap(), Some(expected));
    }
}
