//! A terminating broker leaves the nameservers' routes before it stops serving (the
//! preStop behaviour, done by the broker itself on SIGTERM because its image is
//! `scratch` and has nothing a preStop `exec` could run).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::broker_harness::BrokerProcess;
use e2e::nameserver::Options;
use e2e::wait::{Lazy, eventually, eventually_ok};
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::body::ClusterInfo;
use protocol::code::{request, response};

async fn registered(ns: &Client) -> bool {
    let r = ns
        .request(RemotingCommand::bare_request(
            request::GET_BROKER_CLUSTER_INFO,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let info = ClusterInfo::decode(&r.body).unwrap();
    info.broker_addr_table
        .get("broker-e2e")
        .is_some_and(|b| !b.broker_addrs.is_empty())
}

#[tokio::test]
async fn sigterm_unregisters_first_and_keeps_serving_until_the_wait_is_over() {
    let ns = NameServer::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let (path, ns_port) = (dir.path().to_path_buf(), ns.port);
    // The harness blocks while the broker starts: off the runtime's thread.
    let mut broker = tokio::task::spawn_blocking(move || {
        BrokerProcess::start_in(
            &path,
            Some(ns_port),
            &[("shutdownUnregisterWaitMs", "4000")],
        )
    })
    .await
    .unwrap();
    let admin = Client::connect(ns.port).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "the broker to register",
        || async { registered(&admin).await },
    )
    .await;

    broker.signal_term();
    let signalled = Instant::now();
    // Within 3 s: out of the routes before its 4 s shutdownUnregisterWaitMs is over.
    let log = || broker.log();
    eventually_ok(
        Duration::from_secs(3),
        "the broker to unregister",
        || async {
            if registered(&admin).await {
                Err(Lazy(log))
            } else {
                Ok(())
            }
        },
    )
    .await;
    // Out of the routes, and still answering new connections: clients that have not
    // refreshed their routes yet lose nothing.
    let c = Client::connect(broker.port)
        .await
        .expect("the broker still accepts after unregistering");
    let r = c
        .request(RemotingCommand::bare_request(
            request::GET_BROKER_RUNTIME_INFO,
        ))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
    assert!(
        signalled.elapsed() < Duration::from_secs(4),
        "the checks above ran after the wait; rerun on a less loaded machine"
    );
    drop(c);
    let status = tokio::task::spawn_blocking(move || {
        let s = broker.wait_exit(Duration::from_secs(30));
        (s, broker)
    })
    .await
    .unwrap()
    .0;
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() >= Duration::from_secs(4));
}
