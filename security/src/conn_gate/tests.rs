use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const C: [u8; 4] = [10, 0, 0, 3];

fn ip(a: [u8; 4]) -> IpAddr {
    a.into()
}

fn limits(max: usize, per_source: usize, reserve_percent: u32) -> GateLimits {
    GateLimits {
        max,
        per_source,
        reserve_percent,
        exempt: ExemptSources::default(),
        first_request: Duration::from_secs(60),
    }
}

fn counted() -> GateMetrics {
    let mut reasons = RefusalCounters::default();
    for r in Refusal::ALL {
        reasons = reasons.with(r, Counter::default());
    }
    GateMetrics {
        reasons,
        ..GateMetrics::default()
    }
}

fn gate(l: GateLimits) -> Arc<ConnGate> {
    ConnGate::new(l, counted())
}

#[test]
fn global_and_per_source_caps_free_on_drop() {
    let g = gate(limits(3, 2, 0));
    let a1 = g.admit(ip(A)).expect("a1");
    let a2 = g.admit(ip(A)).expect("a2");
    assert_eq!(g.admit(ip(A)).err(), Some(Refusal::PerSource));
    let b1 = g.admit(ip(B)).expect("b1");
    assert_eq!(g.admit(ip(B)).err(), Some(Refusal::Cap));
    let m = g.metrics();
    assert_eq!(m.refused.get(), 2);
    assert_eq!(m.reasons.get(Refusal::PerSource), 1);
    assert_eq!(m.reasons.get(Refusal::Cap), 1);
    assert_eq!(m.open.get(), 3);
    drop(a1);
    assert!(g.admit(ip(B)).is_ok(), "a freed slot is reusable");
    drop((a2, b1));
    assert_eq!(g.open(), 0);
    assert_eq!(g.metrics().open.get(), 0);
}

#[test]
fn no_per_source_share_when_zero() {
    let g = gate(limits(4, 0, 0));
    let slots: Vec<_> = (0..4).map(|_| g.admit(ip(A)).expect("slot")).collect();
    assert_eq!(g.admit(ip(A)).err(), Some(Refusal::Cap));
    drop(slots);
}

/// An IPv4 peer on a dual-stack listener is the same source as over IPv4.
#[test]
fn mapped_ipv4_is_the_same_source() {
    let g = gate(limits(8, 1, 0));
    let _a = g.admit(ip(A)).expect("a");
    let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
    assert_eq!(g.admit(mapped).err(), Some(Refusal::PerSource));
}

/// While one source holds everything but the reserve, a source holding no slot still
/// gets in, once each; the holder does not.
#[test]
fn the_reserve_admits_only_sources_holding_no_slot() {
    // 10 slots, 20 % reserved: 8 for anyone, 2 for newcomers. No per-source share, so
    // the hog takes all 8 it can.
    let g = gate(limits(10, 0, 20));
    assert_eq!(g.reserved(), 2);
    let hog: Vec<_> = (0..8).map(|_| g.admit(ip(A)).expect("hog")).collect();
    assert_eq!(g.admit(ip(A)).err(), Some(Refusal::Reserved));
    let b = g.admit(ip(B)).expect("a newcomer takes a reserved slot");
    assert_eq!(
        g.admit(ip(B)).err(),
        Some(Refusal::Reserved),
        "one reserved slot per newcomer"
    );
    let c = g.admit(ip(C)).expect("another newcomer");
    assert_eq!(
        g.admit("10.0.0.4".parse().unwrap()).err(),
        Some(Refusal::Cap)
    );
    assert_eq!(g.metrics().reasons.get(Refusal::Reserved), 2);
    assert_eq!(g.metrics().reasons.get(Refusal::Cap), 1);
    drop((hog, b, c));
    assert_eq!(g.open(), 0);
}

#[test]
fn the_reserve_rounds_down_and_never_takes_every_slot() {
    assert_eq!(gate(limits(64, 0, 10)).reserved(), 6);
    assert_eq!(gate(limits(16, 0, 10)).reserved(), 1);
    assert_eq!(gate(limits(4, 0, 10)).reserved(), 0);
    assert_eq!(gate(limits(4, 0, 100)).reserved(), 3);
    assert_eq!(gate(limits(1, 0, 100)).reserved(), 0);
    assert_eq!(gate(limits(10_000, 0, 10)).reserved(), 1000);
}

/// Share and reserve together: the hog stops at its share, and everyone else is served.
#[test]
fn one_source_is_held_to_its_share() {
    let g = gate(limits(16, 4, 10));
    let hog: Vec<_> = (0..4).map(|_| g.admit(ip(A)).expect("hog")).collect();
    for _ in 0..10 {
        assert_eq!(g.admit(ip(A)).err(), Some(Refusal::PerSource));
    }
    let others: Vec<_> = (0..4).map(|_| g.admit(ip(B)).expect("other")).collect();
    assert_eq!(g.metrics().reasons.get(Refusal::PerSource), 10);
    drop((hog, others));
}

#[test]
fn exempt_sources_are_spared_the_share_but_not_the_cap_or_reserve() {
    let mut l = limits(10, 2, 20);
    l.exempt = "10.0.0.1, 192.168.0.0/16".parse().unwrap();
    let g = gate(l);
    let nat: Vec<_> = (0..8)
        .map(|_| g.admit(ip(A)).expect("exempt from the share"))
        .collect();
    assert_eq!(
        g.admit(ip(A)).err(),
        Some(Refusal::Reserved),
        "the reserve still holds"
    );
    let cidr: IpAddr = "192.168.7.9".parse().unwrap();
    let _c = g.admit(cidr).expect("a newcomer from the exempt block");
    let _b = g.admit(ip(B)).expect("another newcomer");
    assert_eq!(g.admit(ip(C)).err(), Some(Refusal::Cap));
    drop(nat);
    // Not exempt: held to the share.
    let _b2 = g.admit(ip(B)).expect("second");
    assert_eq!(g.admit(ip(B)).err(), Some(Refusal::PerSource));
}

#[test]
fn exemption_lists_take_addresses_and_cidr_only() {
    let e: ExemptSources = " 10.0.0.1 ,fd00::/8,, 172.16.0.0/12 ".parse().unwrap();
    assert!(e.contains(ip(A)));
    assert!(e.contains("fd12::1".parse().unwrap()));
    assert!(e.contains("172.31.255.1".parse().unwrap()));
    assert!(e.contains("::ffff:10.0.0.1".parse().unwrap()));
    assert!(!e.contains(ip(B)));
    assert!("".parse::<ExemptSources>().unwrap().is_empty());
    for bad in [
        "*",
        "10.0.0.*",
        "10.0.0.1-9",
        "10.0.0.0/33",
        "host.example",
        "10.0.0.1 x",
    ] {
        let err = bad.parse::<ExemptSources>().expect_err(bad);
        assert!(err.to_string().contains("CIDR"), "{err}");
    }
}

#[tokio::test]
async fn a_step_past_the_first_request_deadline_is_dropped_and_counted() {
    let mut l = limits(4, 0, 0);
    l.first_request = Duration::from_millis(100);
    let g = gate(l);
    let slot = g.admit(ip(A)).expect("slot");
    let r = slot
        .before_first_request(std::future::pending::<()>())
        .await;
    assert_eq!(r, Err(FirstRequestTimeout(Duration::from_millis(100))));
    assert_eq!(g.metrics().reasons.get(Refusal::FirstRequestTimeout), 1);
    // The deadline is absolute: a later step waits no longer.
    let later = slot.before_first_request(std::future::pending::<()>());
    let r = tokio::time::timeout(Duration::from_secs(5), later).await;
    assert!(matches!(r, Ok(Err(FirstRequestTimeout(_)))), "{r:?}");
    assert_eq!(g.metrics().reasons.get(Refusal::FirstRequestTimeout), 2);
}

async fn http_listener(l: GateLimits, idle: Duration) -> (GatedListener, SocketAddr, Counter) {
    let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = inner.local_addr().expect("addr");
    let idle_closed = Counter::default();
    let listener = GatedListener {
        inner,
        gate: gate(l),
        idle,
        idle_closed: idle_closed.clone(),
        tls: None,
    };
    (listener, addr, idle_closed)
}

#[tokio::test]
async fn an_idle_http_peer_is_closed_and_counted() {
    let (mut listener, addr, idle_closed) =
        http_listener(limits(4, 0, 0), Duration::from_millis(200)).await;
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
    // The server side waits for a request that never comes; the idle timeout is the
    // shorter deadline, so the close counts as idle.
    let mut buf = [0u8; 16];
    let err = tokio::time::timeout(Duration::from_secs(10), io.read(&mut buf))
        .await
        .expect("the idle deadline fires")
        .expect_err("an idle read fails");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(idle_closed.get(), 1);
    drop(io);
    // The slot is freed and the peer sees the close.
    assert_eq!(listener.gate.open(), 0);
    let n = silent.read(&mut buf).await.unwrap_or(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn progress_pushes_the_idle_deadline_back() {
    let (mut listener, addr, _) = http_listener(limits(4, 0, 0), Duration::from_millis(300)).await;
    let mut peer = TcpStream::connect(addr).await.expect("connect");
    let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
    // A complete head, then five bytes 100 ms apart: 500 ms in all, longer than the
    // idle timeout, but never 300 ms without progress.
    peer.write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("head");
    let mut head = [0u8; 18];
    io.read_exact(&mut head).await.expect("head read");
    for i in 0..5u8 {
        // Time itself: the gaps between the bytes are what the idle timeout measures.
        tokio::time::sleep(Duration::from_millis(100)).await;
        peer.write_all(&[i]).await.expect("write");
        let mut b = [0u8; 1];
        io.read_exact(&mut b)
            .await
            .expect("progress keeps the connection");
        assert_eq!(b[0], i);
    }
}

/// A peer trickling header bytes (never idle) is closed at the first-request deadline;
/// one that completed its head is not, however long it then takes.
#[tokio::test]
async fn an_incomplete_head_is_closed_at_the_first_request_deadline() {
    let mut l = limits(4, 0, 0);
    l.first_request = Duration::from_millis(400);
    let (mut listener, addr, idle_closed) = http_listener(l, Duration::from_secs(60)).await;
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
    let trickle = tokio::spawn(async move {
        for b in b"GET / HTTP/1.1\r\nX-Slow: ".iter().cycle() {
            if slow.write_all(&[*b]).await.is_err() {
                return;
            }
            // Time itself: a peer trickling, never idle for the idle timeout.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut buf = [0u8; 64];
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), io.read(&mut buf))
            .await
            .expect("the first-request deadline fires")
        {
            Ok(n) => assert!(n > 0, "the trickle never ends"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert!(
        err.to_string().contains("httpFirstRequestTimeoutMillis"),
        "{err}"
    );
    let reasons = listener.gate.metrics().reasons.clone();
    assert_eq!(reasons.get(Refusal::FirstRequestTimeout), 1);
    assert_eq!(idle_closed.get(), 0);
    trickle.abort();

    // A complete head disarms it.
    let mut peer = TcpStream::connect(addr).await.expect("connect");
    let (mut io, _) = axum::serve::Listener::accept(&mut listener).await;
    peer.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("head");
    let mut head = [0u8; 27];
    io.read_exact(&mut head).await.expect("head read");
    // Time itself: past the 400 ms first-request deadline, which must no longer apply.
    tokio::time::sleep(Duration::from_millis(600)).await;
    peer.write_all(b"x").await.expect("write");
    let mut b = [0u8; 1];
    io.read_exact(&mut b)
        .await
        .expect("past the deadline, still open");
    assert_eq!(reasons.get(Refusal::FirstRequestTimeout), 1);
}
