//! Connection hogging on every listener. An attacker from 127.0.0.2 opens as many
//! connections as a port lets it, says nothing useful on them (half a request), and
//! reconnects as soon as one is closed, for the whole test; meanwhile a victim from
//! 127.0.0.1 must be served every single time. One address once held all 64 slots of the
//! metrics port (`/healthz` failed 38 of 38 times, and Kubernetes restarts a broker whose
//! liveness probe fails) and all 16 of the HA port (a real slave got its greeting 1 time
//! in 30). The limits: per-source shares (`*MaxConnectionsPerIp`), the reserve for new
//! sources (`connectionReservePercent`), exemptions (`connectionLimitExemptAddresses`)
//! and the first-request deadlines (`firstRequestTimeoutMillis`,
//! `httpFirstRequestTimeoutMillis`, `haHandshakeTimeoutMillis`).

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use e2e::broker_harness::{BrokerProcess, TempBroker, send_v2};
use e2e::nameserver::Options;
use e2e::wait::{eventually, runtime};
use e2e::{Client, NameServer, http, ports};
use protocol::code::{request, response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::{metric, refusals, victim_is_served};

const ATTACKER: [u8; 4] = [127, 0, 0, 2];
/// Times the victim must be served while the attack runs.
const VICTIM_ROUNDS: usize = 30;
/// What the broker may hold in anonymous memory under these attacks.
const RSS_BOUND_KIB: u64 = 64 * 1024;
/// A request head cut short: the slowloris opening on the metrics port.
const PARTIAL_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n";
/// Three bytes of a remoting frame's four-byte length.
const PARTIAL_FRAME: &[u8] = &[0, 0, 0];

async fn connect_from(from: [u8; 4], port: u16) -> io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    socket.connect(([127, 0, 0, 1], port).into()).await
}

/// Whether the server has not closed `s` yet (whatever it sent is read and dropped).
fn still_open(s: &TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// One attacking address: keeps `want` connections open across `ports`, each opened
/// with `opening`, and replaces every one the server closes (refused at accept or timed
/// out), at most `BURST` per round, until dropped.
struct Hog {
    stop: CancellationToken,
    task: JoinHandle<()>,
    opened: Arc<AtomicUsize>,
}

/// New connections per round and the pause between rounds: a steady reconnect stream
/// without exhausting the attacker's own ephemeral ports.
const BURST: usize = 8;
const ROUND: Duration = Duration::from_millis(25);

impl Hog {
    fn start(from: [u8; 4], ports: Vec<u16>, want: usize, opening: &'static [u8]) -> Self {
        let stop = CancellationToken::new();
        let opened = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let (stop, opened) = (stop.clone(), Arc::clone(&opened));
            async move {
                let mut held: Vec<TcpStream> = Vec::new();
                let mut turn = 0usize;
                loop {
                    held.retain(still_open);
                    for _ in 0..BURST.min(want.saturating_sub(held.len())) {
                        let port = ports[turn % ports.len()];
                        turn += 1;
                        let connected =
                            tokio::time::timeout(Duration::from_secs(2), connect_from(from, port));
                        let Ok(Ok(mut s)) = connected.await else {
                            break;
                        };
                        let _ = s.write_all(opening).await;
                        held.push(s);
                        opened.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(ROUND) => {}
                    }
                }
            }
        });
        Self { stop, task, opened }
    }

    /// Connections opened so far (admitted or not).
    fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

/// `series` from the broker's or nameserver's metrics port reaches `at_least`.
async fn wait_metric(http_port: u16, series: &str, at_least: f64) {
    eventually(Duration::from_secs(30), series, || async {
        metric(http_port, series).await >= at_least
    })
    .await;
}

/// `/healthz` answers 200 every time, from a fresh connection each time.
async fn healthz_every_time(http_port: u16) {
    for round in 0..VICTIM_ROUNDS {
        let r = http::get(http_port, "/healthz").await;
        assert!(
            matches!(r, Ok((200, _))),
            "victim probe {round} of {VICTIM_ROUNDS} failed: {r:?}"
        );
    }
}

fn assert_memory_bounded(b: &BrokerProcess) {
    let rss = b.anon_rss_kib().expect("broker RSS");
    assert!(
        rss < RSS_BOUND_KIB,
        "anonymous RSS {rss} KiB over {RSS_BOUND_KIB} KiB"
    );
}

/// The metrics port with its shipped limits (64 slots, 16 per source, 10 % reserved):
/// the attacker wants more than all 64 and gets its 16; the kubelet's probe is answered
/// every time.
#[test]
fn the_broker_metrics_port_answers_probes_while_one_address_hogs_it() {
    let mut b = TempBroker::start(None, &[]);
    let http_port = b.broker.http_port;
    runtime().block_on(async {
        let hog = Hog::start(ATTACKER, vec![http_port], 72, PARTIAL_HEAD);
        // The attacker holds its whole share: further connections are refused for it.
        wait_metric(
            http_port,
            r#"rocketmq_listener_refusals_total{listener="http",reason="per_source"}"#,
            1.0,
        )
        .await;
        healthz_every_time(http_port).await;
        assert!(hog.opened() > 16, "the attacker kept reconnecting");
        assert!(refusals(http_port, "httpMaxConnectionsPerIp").await >= 1.0);
        assert_memory_bounded(&b.broker);
        victim_is_served(&mut b.broker).await;
    });
}

/// Two attacking addresses hog the nameserver's metrics port, each held to its share,
/// sending half a request head on every connection, which times out and is replaced;
/// probes are answered every time.
#[test]
fn the_nameserver_metrics_port_answers_probes_while_attackers_hog_it() {
    let ns = NameServer::start(
        Options::default()
            .config("httpMaxConnections", 8)
            .config("httpMaxConnectionsPerIp", 3)
            .config("httpFirstRequestTimeoutMillis", 1000),
    );
    let http_port = ns.http_port;
    runtime().block_on(async {
        let hog = Hog::start(ATTACKER, vec![http_port], 12, PARTIAL_HEAD);
        let second = Hog::start([127, 0, 0, 3], vec![http_port], 12, PARTIAL_HEAD);
        wait_metric(
            http_port,
            r#"rmq_namesrv_listener_refusals_total{listener="http",reason="per_source"}"#,
            2.0,
        )
        .await;
        healthz_every_time(http_port).await;
        // Half a head never completes: each is closed at the deadline, and the
        // attackers reconnect.
        wait_metric(
            http_port,
            r#"rmq_namesrv_listener_refusals_total{listener="http",reason="first_request_timeout"}"#,
            6.0,
        )
        .await;
        assert!(hog.opened() > 3 && second.opened() > 3);
        healthz_every_time(http_port).await;
        let c = Client::connect(ns.port).await.expect("remoting connect");
        let r = c
            .request(protocol::RemotingCommand::bare_request(
                request::GET_BROKER_CLUSTER_INFO,
            ))
            .await
            .expect("cluster info");
        assert_eq!(r.code, response::SUCCESS);
    });
}

/// The HA slave handshake up to the master's verdict on the slave's hello (see
/// `broker/src/ha/handshake.rs`): the greeting, a hello MACed with `secret`, and the
/// status byte of the answer (0: accepted).
async fn slave_handshake(port: u16, group: &str, secret: &str) -> io::Result<u8> {
    use ring::hmac;
    let exchange = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
        let mut greeting = [0u8; 21];
        s.read_exact(&mut greeting).await?;
        if &greeting[..5] != b"RMQH\x02" {
            return Err(io::Error::other(format!("greeting {greeting:?}")));
        }
        let (id, epoch, nonce) = (1i64, 0i32, [9u8; 16]);
        let mut mac_in = b"rmq-ha-v2 slave".to_vec();
        mac_in.extend_from_slice(&greeting[5..]);
        mac_in.extend_from_slice(&nonce);
        mac_in.extend_from_slice(group.as_bytes());
        mac_in.extend_from_slice(&id.to_be_bytes());
        mac_in.extend_from_slice(&epoch.to_be_bytes());
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        let mut hello = (group.len() as u16).to_be_bytes().to_vec();
        hello.extend_from_slice(group.as_bytes());
        hello.extend_from_slice(&id.to_be_bytes());
        hello.extend_from_slice(&epoch.to_be_bytes());
        hello.extend_from_slice(&nonce);
        hello.extend_from_slice(hmac::sign(&key, &mac_in).as_ref());
        s.write_all(&hello).await?;
        s.read_u8().await
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "HA handshake"))?
}

/// A peer without the group's secret keeps opening HA connections and never answers
/// the greeting; with the shipped `haMaxConnections` (16) and `haMaxConnectionsPerIp`
/// (8) a slave still completes its handshake every time, and the silent connections are
/// closed at `haHandshakeTimeoutMillis`.
#[test]
fn a_slave_is_answered_while_a_peer_without_the_secret_hogs_the_ha_port() {
    let ha_port = ports::free_port();
    let ha = ha_port.to_string();
    let mut b = TempBroker::start(
        None,
        &[("haListenPort", &ha), ("haHandshakeTimeoutMillis", "1000")],
    );
    let http_port = b.broker.http_port;
    runtime().block_on(async {
        let hog = Hog::start(ATTACKER, vec![ha_port], 24, b"");
        wait_metric(
            http_port,
            r#"rocketmq_listener_refusals_total{listener="ha",reason="per_source"}"#,
            1.0,
        )
        .await;
        for round in 0..VICTIM_ROUNDS {
            let status = slave_handshake(ha_port, "broker-e2e", "e2e-ha-secret").await;
            assert!(
                matches!(status, Ok(0)),
                "slave handshake {round} of {VICTIM_ROUNDS}: {status:?}"
            );
        }
        wait_metric(
            http_port,
            r#"rocketmq_broker_limit_refusals_total{limit="haHandshakeTimeoutMillis"}"#,
            8.0,
        )
        .await;
        assert!(hog.opened() > 8, "the attacker kept reconnecting");
        assert_memory_bounded(&b.broker);
        victim_is_served(&mut b.broker).await;
    });
}

/// Open remoting connections now (both ports share one gate).
async fn remoting_open(http_port: u16) -> f64 {
    metric(
        http_port,
        r#"rocketmq_listener_connections{listener="remoting"}"#,
    )
    .await
}

/// The remoting ports (main and VIP share one gate of 16 slots, the default share and
/// reserve): the attacker holds everything but the reserved slot and sends half a frame
/// on each; a client connecting afresh on either port sends successfully every time.
#[test]
fn a_client_sends_while_one_address_hogs_the_remoting_ports() {
    let fast = ports::free_port().to_string();
    let mut b = TempBroker::start(
        None,
        &[
            ("maxConnections", "16"),
            ("fastListenPortEnable", "true"),
            ("fastListenPort", &fast),
            ("firstRequestTimeoutMillis", "1000"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    let fast: u16 = fast.parse().expect("port");
    runtime().block_on(async {
        let hog = Hog::start(ATTACKER, vec![port, fast], 24, PARTIAL_FRAME);
        wait_metric(
            http_port,
            r#"rocketmq_listener_refusals_total{listener="remoting",reason="reserved"}"#,
            1.0,
        )
        .await;
        for round in 0..VICTIM_ROUNDS {
            let to = if round % 2 == 0 { port } else { fast };
            let c = Client::connect(to).await.expect("victim connects");
            let r = c.request(send_v2("VictimTopic", 0, b"victim", "")).await;
            assert!(
                matches!(&r, Ok(r) if r.code == response::SUCCESS),
                "victim send {round} of {VICTIM_ROUNDS} on port {to}: {r:?}"
            );
            c.close().await;
            // The reserve admits sources holding no slot: wait until the broker has
            // seen this connection go before the next one.
            eventually(
                Duration::from_secs(10),
                "the victim's slot to free",
                || async { remoting_open(http_port).await < 16.0 },
            )
            .await;
        }
        // Half a frame is no request: those connections time out and are replaced.
        wait_metric(
            http_port,
            r#"rocketmq_broker_limit_refusals_total{limit="firstRequestTimeoutMillis"}"#,
            15.0,
        )
        .await;
        assert!(hog.opened() > 15);
        assert_memory_bounded(&b.broker);
        drop(hog);
        victim_is_served(&mut b.broker).await;
    });
}

/// A remoting connection that sends nothing is closed at `firstRequestTimeoutMillis`
/// and counted; a client that sent its first request in time may then stay quiet far
/// longer (4.x clients heartbeat every 30 s) and is still served.
#[test]
fn a_silent_remoting_connection_is_closed_at_the_first_request_deadline() {
    let mut b = TempBroker::start(None, &[("firstRequestTimeoutMillis", "500")]);
    let http_port = b.broker.http_port;
    runtime().block_on(async {
        let client = Client::connect(b.broker.port).await.expect("client");
        let r = client
            .request(protocol::RemotingCommand::bare_request(
                request::GET_BROKER_RUNTIME_INFO,
            ))
            .await
            .expect("first request");
        assert_eq!(r.code, response::SUCCESS);
        let mut silent = TcpStream::connect(("127.0.0.1", b.broker.port))
            .await
            .expect("connect");
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf))
            .await
            .expect("closed by the broker, not left open")
            .unwrap_or(0);
        assert_eq!(n, 0);
        assert_eq!(refusals(http_port, "firstRequestTimeoutMillis").await, 1.0);
        assert_eq!(
            metric(
                http_port,
                r#"rocketmq_listener_refusals_total{listener="remoting",reason="first_request_timeout"}"#
            )
            .await,
            1.0
        );
        // The deadline passed long ago for the client too: it is not affected.
        let r = client
            .request(protocol::RemotingCommand::bare_request(
                request::GET_BROKER_RUNTIME_INFO,
            ))
            .await
            .expect("a later request");
        assert_eq!(r.code, response::SUCCESS);
        victim_is_served(&mut b.broker).await;
    });
}

/// The nameserver's listeners apply the same deadlines: a silent remoting connection
/// and a silent HTTP connection are closed and counted, by listener.
#[test]
fn the_nameserver_closes_silent_connections_at_the_first_request_deadline() {
    let ns = NameServer::start(
        Options::default()
            .config("firstRequestTimeoutMillis", 500)
            .config("httpFirstRequestTimeoutMillis", 500),
    );
    runtime().block_on(async {
        for port in [ns.port, ns.http_port] {
            let mut silent = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            let mut buf = [0u8; 16];
            let n = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf))
                .await
                .expect("closed by the nameserver, not left open")
                .unwrap_or(0);
            assert_eq!(n, 0, "port {port}");
        }
        for listener in ["remoting", "http"] {
            let series = format!(
                "rmq_namesrv_listener_refusals_total{{listener=\"{listener}\",reason=\"first_request_timeout\"}}"
            );
            assert_eq!(metric(ns.http_port, &series).await, 1.0, "{series}");
        }
    });
}

/// Clients behind one NAT address listed in `connectionLimitExemptAddresses` are not
/// held to `maxConnectionsPerIp`; other addresses still are.
#[test]
fn an_exempt_address_is_not_held_to_the_per_source_share() {
    let mut b = TempBroker::start(
        None,
        &[
            ("maxConnectionsPerIp", "2"),
            ("connectionLimitExemptAddresses", "10.9.0.0/16, 127.0.0.3"),
        ],
    );
    let (port, http_port) = (b.broker.port, b.broker.http_port);
    runtime().block_on(async {
        let nat: IpAddr = [127, 0, 0, 3].into();
        let mut behind_nat = Vec::new();
        for i in 0..6 {
            let c = Client::connect_from(nat, port).await.expect("connect");
            let r = c.request(send_v2("NatTopic", 0, b"m", "")).await;
            assert!(
                matches!(&r, Ok(r) if r.code == response::SUCCESS),
                "exempt client {i}: {r:?}"
            );
            behind_nat.push(c);
        }
        let other: IpAddr = ATTACKER.into();
        let mut capped = Vec::new();
        for _ in 0..2 {
            let c = Client::connect_from(other, port).await.expect("connect");
            let r = c.request(send_v2("NatTopic", 0, b"m", "")).await;
            assert!(matches!(&r, Ok(r) if r.code == response::SUCCESS), "{r:?}");
            capped.push(c);
        }
        let third = Client::connect_from(other, port).await.expect("connect");
        assert!(
            third.wait_closed(Duration::from_secs(10)).await,
            "a third connection from a non-exempt address is closed at accept"
        );
        assert_eq!(refusals(http_port, "maxConnectionsPerIp").await, 1.0);
        victim_is_served(&mut b.broker).await;
    });
}

/// After its first request a connection may stay silent only for
/// `serverChannelMaxIdleTimeSeconds`: one request, then nothing, and the slot is freed.
#[test]
fn a_connection_idle_after_its_first_request_is_closed() {
    let mut b = TempBroker::start(None, &[("serverChannelMaxIdleTimeSeconds", "1")]);
    runtime().block_on(async {
        let idle = Client::connect(b.broker.port).await.expect("connect");
        let r = idle
            .request(send_v2("IdleTopic", 0, b"x", ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(
            idle.wait_closed(Duration::from_secs(15)).await,
            "an idle connection stayed open"
        );
        victim_is_served(&mut b.broker).await;
    });
}
