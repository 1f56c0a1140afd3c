//! TLS end to end with certificates generated here (rcgen; no keys are committed):
//! permissive mode serves TLS and plaintext on one port; enforcing mode refuses
//! plaintext; required client certificates (mTLS) refuse a client without one; brokers
//! register with the nameserver and a slave syncs from its master over TLS; `rmqctl`
//! and the operator's admin client speak TLS; the metrics ports serve HTTPS
//! (`tls.metrics.enable`); new certificates are picked up without a restart.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::broker_harness::{BrokerProcess, TempBroker, send_v2};
use e2e::nameserver::Options;
use e2e::wait::{Lazy, eventually, eventually_ok, runtime};
use e2e::{Client, NameServer, cli};
use futures::{SinkExt, StreamExt};
use protocol::code::{request, response};
use protocol::{RemotingCodec, RemotingCommand};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use security::tls::{ClientTlsSettings, TlsClient};
use tokio_util::codec::Framed;

/// A CA and the PEM files it signed, in `dir`.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write_pki(dir: &Path, tag: &str) -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("rmq test CA {tag}"));
    let ca = ca_params.self_signed(&ca_key).expect("CA cert");
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca, &ca_key).expect("leaf cert");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(
        vec!["rmq-client".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let put = |name: &str, text: &str| {
        let p = dir.join(format!("{tag}-{name}"));
        std::fs::write(&p, text).expect("write PEM");
        p
    };
    Pki {
        ca: put("ca.pem", &ca.pem()),
        server_cert: put("server.pem", &server_cert),
        server_key: put("server.key", &server_key),
        client_cert: put("client.pem", &client_cert),
        client_key: put("client.key", &client_key),
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn client_settings(pki: &Pki, with_cert: bool) -> ClientTlsSettings {
    ClientTlsSettings {
        enable: true,
        trust_cert_path: Some(pki.ca.clone()),
        cert_path: with_cert.then(|| pki.client_cert.clone()),
        key_path: with_cert.then(|| pki.client_key.clone()),
        server_name: None,
    }
}

/// One request over TLS; `Err` when the connection or handshake fails or the server
/// closes instead of answering.
async fn tls_request(
    port: u16,
    settings: &ClientTlsSettings,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, String> {
    let tls = TlsClient::new(settings).map_err(|e| e.to_string())?;
    let addr = format!("127.0.0.1:{port}");
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| e.to_string())?;
    let stream = security::tls::connect(tls.as_ref(), tcp, &addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut framed = Framed::new(stream, RemotingCodec::default());
    framed.send(cmd).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), framed.next()).await {
        Ok(Some(Ok(r))) => Ok(r),
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => Err("closed".into()),
        Err(_) => Err("no answer".into()),
    }
}

/// A plaintext request; `Err` when the server closes the connection.
async fn plain_request(port: u16, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    let c = Client::connect(port).await.map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(5), c.request(cmd))
        .await
        .map_err(|_| "no answer".to_owned())?
        .map_err(|e| e.to_string())
}

fn cluster_info() -> RemotingCommand {
    RemotingCommand::bare_request(request::GET_BROKER_CLUSTER_INFO)
}

#[test]
fn permissive_serves_both_and_rmqctl_speaks_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = write_pki(dir.path(), "a");
    let ns = NameServer::start(
        Options::default()
            .config("tls.server.mode", "permissive")
            .config("tls.server.certPath", s(&pki.server_cert))
            .config("tls.server.keyPath", s(&pki.server_key))
            .config("tls.metrics.enable", "true"),
    );
    let b = TempBroker::start(
        Some(ns.port),
        &[
            ("tls.server.mode", "permissive"),
            ("tls.server.certPath", &s(&pki.server_cert)),
            ("tls.server.keyPath", &s(&pki.server_key)),
            ("tls.enable", "true"),
            ("tls.client.trustCertPath", &s(&pki.ca)),
            ("tls.metrics.enable", "true"),
        ],
    );
    let broker_addr = b.broker.addr();
    runtime().block_on(async {
        // The broker registered over TLS (tls.enable): the nameserver knows it.
        let settings = client_settings(&pki, false);
        eventually(Duration::from_secs(10), "registration over TLS", || async {
            tls_request(ns.port, &settings, cluster_info())
                .await
                .is_ok_and(|r| String::from_utf8_lossy(&r.body).contains(&broker_addr))
        })
        .await;
        // Plaintext still works in permissive mode, on both servers.
        let r = plain_request(ns.port, cluster_info())
            .await
            .expect("plaintext");
        assert_eq!(r.code, response::SUCCESS);
        let r = plain_request(b.broker.port, send_v2("TlsTopic", 0, b"plain", ""))
            .await
            .expect("plaintext send");
        assert_eq!(r.code, response::SUCCESS);
        let r = tls_request(b.broker.port, &settings, send_v2("TlsTopic", 0, b"tls", ""))
            .await
            .expect("TLS send");
        assert_eq!(r.code, response::SUCCESS);
        // The metrics ports (tls.metrics.enable) answer HTTPS, and HTTP in permissive
        // mode (the harness's readiness probes used it).
        let https = TlsClient::new(&settings)
            .expect("client TLS")
            .expect("enabled");
        for (who, port, metric) in [
            ("nameserver", ns.http_port, "rmq_namesrv_"),
            ("broker", b.broker.http_port, "rocketmq_"),
        ] {
            let (status, body) = e2e::http::get_tls(port, "/metrics", &https)
                .await
                .unwrap_or_else(|e| panic!("{who} /metrics over HTTPS: {e}"));
            assert_eq!(status, 200, "{who}: {body}");
            assert!(body.contains(metric), "{who}: {body}");
            let (status, _) = e2e::http::get(port, "/healthz").await.expect("plain HTTP");
            assert_eq!(status, 200, "{who}");
        }
        // A client that does not trust the server's CA fails the handshake.
        let other = write_pki(dir.path(), "other");
        assert!(
            tls_request(
                b.broker.port,
                &client_settings(&other, false),
                cluster_info()
            )
            .await
            .is_err()
        );
    });
    let ns_addr = format!("127.0.0.1:{}", ns.port);
    let out = cli::run(
        "rmqctl",
        &[
            "-n",
            &ns_addr,
            "-o",
            "json",
            "--tls",
            "--tls-ca",
            &s(&pki.ca),
            "topic",
            "create",
            "-t",
            "ByTls",
            "-b",
            &broker_addr,
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let out = cli::run(
        "rmqctl",
        &[
            "-n",
            &ns_addr,
            "-o",
            "json",
            "--tls",
            "--tls-ca",
            &s(&pki.ca),
            "cluster",
            "list",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&broker_addr), "{out:?}");
}

#[test]
fn enforcing_mtls_replication_and_reload() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = write_pki(dir.path(), "a");
    let server_tls = |mode: &'static str| {
        vec![
            ("tls.server.mode", mode.to_owned()),
            ("tls.server.certPath", s(&pki.server_cert)),
            ("tls.server.keyPath", s(&pki.server_key)),
            ("tls.server.trustCertPath", s(&pki.ca)),
            ("tls.server.need.client.auth", "require".to_owned()),
            ("tlsFileCheckIntervalMs", "200".to_owned()),
            ("tls.enable", "true".to_owned()),
            ("tls.client.trustCertPath", s(&pki.ca)),
            ("tls.client.certPath", s(&pki.client_cert)),
            ("tls.client.keyPath", s(&pki.client_key)),
        ]
    };
    let mut ns_options = Options::default();
    for (k, v) in server_tls("enforcing").into_iter().take(6) {
        ns_options = ns_options.config(k, v);
    }
    let ns = NameServer::start(ns_options);
    let master_conf = server_tls("enforcing");
    let as_refs = |c: &[(&'static str, String)]| -> Vec<(&'static str, String)> { c.to_vec() };
    let master_dir = dir.path().join("master");
    let slave_dir = dir.path().join("slave");
    std::fs::create_dir_all(&master_dir).unwrap();
    std::fs::create_dir_all(&slave_dir).unwrap();
    let mut m_conf: Vec<(&str, String)> = as_refs(&master_conf);
    m_conf.push(("brokerRole", "SYNC_MASTER".into()));
    m_conf.push(("haSecret", "tls-test-secret".into()));
    let m_refs: Vec<(&str, &str)> = m_conf.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let master = BrokerProcess::start_in(&master_dir, Some(ns.port), &m_refs);
    let mut s_conf = m_conf.clone();
    s_conf.retain(|(k, _)| *k != "brokerRole");
    s_conf.push(("brokerRole", "SLAVE".into()));
    s_conf.push(("brokerId", "1".into()));
    s_conf.push(("haMasterAddress", format!("127.0.0.1:{}", master.port + 1)));
    s_conf.push(("slaveSyncInterval", "500".into()));
    let s_refs: Vec<(&str, &str)> = s_conf.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let slave = BrokerProcess::start_in(&slave_dir, Some(ns.port), &s_refs);

    runtime().block_on(async {
        let with_cert = client_settings(&pki, true);
        let without_cert = client_settings(&pki, false);
        // Enforcing: plaintext is refused (closed, no answer), on both servers.
        assert!(plain_request(ns.port, cluster_info()).await.is_err());
        assert!(
            plain_request(master.port, send_v2("T", 0, b"x", ""))
                .await
                .is_err()
        );
        // The HA port too (beyond 4.9, whose HA is plaintext): a plaintext peer gets no
        // handshake greeting, only a close.
        {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut ha = tokio::net::TcpStream::connect(("127.0.0.1", master.port + 1))
                .await
                .expect("HA port");
            ha.write_all(&0i64.to_be_bytes()).await.ok();
            let mut greeting = [0u8; 4];
            let n = tokio::time::timeout(Duration::from_secs(15), ha.read(&mut greeting))
                .await
                .expect("closed, not left hanging")
                .unwrap_or(0);
            assert_eq!(n, 0, "plaintext HA peer got {:?}", &greeting[..n]);
        }
        // mTLS: no client certificate, no service.
        assert!(
            tls_request(master.port, &without_cert, cluster_info())
                .await
                .is_err()
        );
        // Brokers registered over mutual TLS.
        eventually(
            Duration::from_secs(15),
            "both brokers registered",
            || async {
                tls_request(ns.port, &with_cert, cluster_info())
                    .await
                    .is_ok_and(|r| {
                        let body = String::from_utf8_lossy(&r.body).into_owned();
                        body.contains(&master.addr()) && body.contains(&slave.addr())
                    })
            },
        )
        .await;
        // The operator's admin client over mTLS, built from PEM as it reads a Secret;
        // without TLS it gets nothing.
        {
            use operator::admin::{Admin, PeerAccess, RemotingAdmin};
            let pem = |p: &Path| std::fs::read(p).expect("PEM");
            let tls = TlsClient::from_pem(
                &pem(&pki.ca),
                Some((&pem(&pki.client_cert), &pem(&pki.client_key))),
                "test PKI",
            )
            .expect("TLS client from PEM");
            let admin = RemotingAdmin::with_access(
                Duration::from_secs(5),
                PeerAccess {
                    credentials: None,
                    tls: Some(tls),
                },
            );
            let info = admin
                .runtime_info(&master.addr())
                .await
                .expect("runtime info over mTLS");
            assert!(info.commit_log_max_offset().is_some());
            let plain = RemotingAdmin::new(Duration::from_secs(5));
            assert!(plain.runtime_info(&master.addr()).await.is_err());
        }
        // SYNC_MASTER answers SUCCESS only once the slave acknowledged the record over
        // the (TLS) HA connection; SLAVE_NOT_AVAILABLE until the slave has connected.
        let slave_log = || slave.log();
        eventually_ok(
            Duration::from_secs(15),
            "the slave to replicate over TLS",
            || async {
                let r = tls_request(
                    master.port,
                    &with_cert,
                    send_v2("TlsRepl", 0, b"replicated", ""),
                )
                .await
                .expect("TLS send");
                if r.code == response::SUCCESS {
                    return Ok(());
                }
                assert_eq!(r.code, response::SLAVE_NOT_AVAILABLE, "{:?}", r.remark);
                Err(Lazy(slave_log))
            },
        )
        .await;
        // The slave's metadata sync from the master (remoting port, TLS) brings the topic.
        eventually(
            Duration::from_secs(15),
            "topic synced to the slave",
            || async {
                tls_request(
                    slave.port,
                    &with_cert,
                    RemotingCommand::bare_request(request::GET_ALL_TOPIC_CONFIG),
                )
                .await
                .is_ok_and(|r| String::from_utf8_lossy(&r.body).contains("TlsRepl"))
            },
        )
        .await;

        // New certificates from another CA are picked up without a restart.
        let next = write_pki(dir.path(), "b");
        for (from, to) in [
            (&next.server_cert, &pki.server_cert),
            (&next.server_key, &pki.server_key),
            (&next.ca, &pki.ca),
        ] {
            std::fs::copy(from, to).expect("replace PEM");
        }
        let next_client = client_settings(&next, true);
        eventually(Duration::from_secs(10), "reloaded certificates", || async {
            tls_request(master.port, &next_client, cluster_info())
                .await
                .is_ok()
        })
        .await;
    });
}

#[test]
fn metrics_tls_without_tls_refuses_to_start_naming_the_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ns_conf = dir.path().join("namesrv.conf");
    std::fs::write(
        &ns_conf,
        "listenPort=0\nmetricsPort=0\ntls.metrics.enable=true\n",
    )
    .unwrap();
    let broker_conf = dir.path().join("broker.conf");
    std::fs::write(
        &broker_conf,
        format!(
            "storePathRootDir={}\nlistenPort=0\nmetricsPort=0\ntls.metrics.enable=true\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    for (bin, conf) in [("rmq-nameserver", &ns_conf), ("rmq-broker", &broker_conf)] {
        let out = std::process::Command::new(e2e::binary::path(bin))
            .arg("-c")
            .arg(conf)
            .env("HOME", dir.path())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bin} started: {stderr}");
        assert!(
            stderr.contains("tls.metrics.enable=true needs TLS")
                && stderr.contains("tls.server.mode"),
            "{bin}: {stderr}"
        );
    }
}

#[test]
fn a_broker_whose_certificate_does_not_load_stops_before_opening_its_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let missing = dir.path().join("missing-server.pem");
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        format!(
            "storePathRootDir={}\nlistenPort=0\nmetricsPort=0\ntls.server.mode=enforcing\n\
             tls.server.certPath={}\ntls.server.keyPath={}\n",
            store.display(),
            missing.display(),
            missing.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(e2e::binary::path("rmq-broker"))
        .arg("-c")
        .arg(&conf)
        .env("HOME", dir.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {stderr}");
    assert!(stderr.contains("missing-server.pem"), "{stderr}");
    assert!(!store.exists(), "the store was opened first: {stderr}");
}
