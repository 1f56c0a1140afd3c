//! The metrics port with `tls.metrics.enable`: axum served through [`GatedListener`] with
//! a [`TlsServer`]. Permissive serves HTTP and HTTPS on one port; enforcing refuses
//! HTTP; no client certificate is asked for even when the remoting port requires one; a
//! peer that stalls its handshake neither blocks others nor keeps its slot; new
//! certificates are used after a reload.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use prometheus_client::metrics::counter::Counter;
use security::conn_gate::{ConnGate, GateLimits, GateMetrics, GatedListener};
use security::tls::{
    ClientAuth, ClientTlsSettings, ServerTlsSettings, TlsClient, TlsMode, TlsServer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod support;
use support::{Pki, write_pki};

/// The HTTP idle deadline; a handshake must also finish within it.
const IDLE: Duration = Duration::from_secs(2);

/// A metrics port in `mode` whose remoting side requires client certificates (mTLS).
/// Returns its port, the TLS server (for reloads) and the idle-closed counter.
async fn serve(pki: &Pki, mode: TlsMode) -> (u16, Arc<TlsServer>, Counter) {
    let tls = TlsServer::new(ServerTlsSettings {
        mode,
        cert_path: Some(pki.cert.clone()),
        key_path: Some(pki.key.clone()),
        trust_cert_path: Some(pki.ca.clone()),
        client_auth: ClientAuth::Require,
    })
    .unwrap()
    .unwrap();
    let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = inner.local_addr().unwrap().port();
    let idle_closed = Counter::default();
    let listener = GatedListener {
        inner,
        gate: ConnGate::new(
            // The first-request deadline is longer than the idle one: a stalled
            // handshake here is closed as idle.
            GateLimits::cap(8, Duration::from_secs(60)),
            GateMetrics::default(),
        ),
        idle: IDLE,
        idle_closed: idle_closed.clone(),
        tls: Some(Arc::clone(&tls)),
    };
    let app = Router::new().route("/metrics", get(|| async { "rocketmq_up 1\n" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, tls, idle_closed)
}

const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// What the server sent back before closing (an error cut short counts as the end).
async fn read_all(mut stream: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => raw.extend_from_slice(&chunk[..n]),
            Err(_) => panic!("the server neither answered nor closed"),
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

async fn get_plain(port: u16) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let _ = tcp.write_all(REQUEST).await;
    read_all(tcp).await
}

/// GET /metrics over TLS trusting `ca`, without a client certificate.
async fn get_tls(port: u16, ca: &Path) -> Result<String, String> {
    let client = TlsClient::new(&ClientTlsSettings {
        enable: true,
        trust_cert_path: Some(ca.to_owned()),
        ..ClientTlsSettings::default()
    })
    .unwrap()
    .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let mut stream = client
        .connect(tcp, &addr)
        .await
        .map_err(|e| e.to_string())?;
    stream.write_all(REQUEST).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    Ok(read_all(stream).await)
}

fn is_ok(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200") && answer.contains("rocketmq_up 1")
}

#[tokio::test]
async fn permissive_serves_http_and_https_without_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    let (port, _, _) = serve(&pki, TlsMode::Permissive).await;
    let https = get_tls(port, &pki.ca).await.expect("HTTPS");
    assert!(is_ok(&https), "{https}");
    let http = get_plain(port).await;
    assert!(is_ok(&http), "{http}");
}

#[tokio::test]
async fn enforcing_refuses_plain_http_and_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    let (port, _, _) = serve(&pki, TlsMode::Enforcing).await;
    let http = get_plain(port).await;
    assert!(http.is_empty(), "plain HTTP got an answer: {http}");
    let https = get_tls(port, &pki.ca).await.expect("HTTPS");
    assert!(is_ok(&https), "{https}");
}

#[tokio::test]
async fn a_stalled_handshake_blocks_nobody_and_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    let (port, _, idle_closed) = serve(&pki, TlsMode::Enforcing).await;
    // The first bytes of a TLS handshake record, then silence.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let https = get_tls(port, &pki.ca)
        .await
        .expect("HTTPS beside a stalled peer");
    assert!(is_ok(&https), "{https}");
    // The stalled peer is closed by the idle deadline, and counted.
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(IDLE * 20, stalled.read(&mut buf))
        .await
        .expect("closed by the idle deadline")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(idle_closed.get(), 1);
}

#[tokio::test]
async fn reloaded_certificates_serve_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let pki = write_pki(dir.path(), "a");
    let (port, tls, _) = serve(&pki, TlsMode::Enforcing).await;
    let old_ca = dir.path().join("old-ca.pem");
    std::fs::copy(&pki.ca, &old_ca).unwrap();
    assert!(is_ok(&get_tls(port, &old_ca).await.expect("HTTPS")));
    let next = write_pki(dir.path(), "b");
    for (from, to) in [
        (&next.cert, &pki.cert),
        (&next.key, &pki.key),
        (&next.ca, &pki.ca),
    ] {
        std::fs::copy(from, to).unwrap();
    }
    assert!(tls.reload_if_changed().unwrap());
    let https = get_tls(port, &next.ca)
        .await
        .expect("HTTPS with the new CA");
    assert!(is_ok(&https), "{https}");
    assert!(
        get_tls(port, &old_ca).await.is_err(),
        "the old certificate is still served"
    );
}
