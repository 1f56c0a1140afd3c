//! IPv6 born hosts and abnormal recovery, as a user met them: a broker bound to `::` takes sends from
//! `[::1]` (so every record carries an IPv6 born host, which moves STORETIMESTAMP 12
//! bytes further), is killed with SIGKILL, and must start again and serve every message.
//! Before the fix abnormal recovery panicked on every restart.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{BrokerProcess, Launch, pull, send_v2};
use e2e::metrics::wait_dispatched;
use e2e::wait::runtime;
use protocol::code::response;
use protocol::message::record::records;

/// Whether this machine has an IPv6 loopback to test with.
fn ipv6_loopback() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

/// Every message of queue 0 of `topic`: body and whether its born host is IPv6.
async fn pull_all(c: &Client, topic: &str) -> Vec<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        let r = c
            .request(pull("CG6", topic, 0, offset, 32, None, "*"))
            .await
            .unwrap();
        match r.code {
            response::SUCCESS => {
                for v in records(&r.body, true) {
                    let v = v.expect("well-formed record");
                    out.push((v.body().to_vec(), v.born_host().is_ipv6()));
                }
                offset = r
                    .ext_fields
                    .get("nextBeginOffset")
                    .unwrap()
                    .parse()
                    .unwrap();
            }
            response::PULL_NOT_FOUND => return out,
            other => panic!("pull answered {other} {:?}", r.remark),
        }
    }
}

#[test]
fn ipv6_born_hosts_survive_kill_9_and_restart() {
    if !ipv6_loopback() {
        println!("skipped: this machine has no IPv6 loopback (binding [::1] failed)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let launch = Launch {
        prefix: Vec::new(),
        host: "::1".to_owned(),
    };
    let mut b = BrokerProcess::start_with(
        dir.path(),
        None,
        &[("bindAddress", "::"), ("flushDiskType", "SYNC_FLUSH")],
        launch,
    );
    let rt = runtime();
    let addr = format!("[::1]:{}", b.port);
    let sent: Vec<Vec<u8>> = (0..3).map(|i| format!("v6-{i}").into_bytes()).collect();
    rt.block_on(async {
        let c = Client::connect_addr(&addr).await.unwrap();
        for body in &sent {
            let r = c.request(send_v2("V6Topic", 0, body, "")).await.unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        wait_dispatched(b.http_port, Duration::from_secs(10)).await;
        let got = pull_all(&c, "V6Topic").await;
        assert_eq!(got.len(), sent.len());
        assert!(
            got.iter().all(|(_, v6)| *v6),
            "records carry the IPv6 born host"
        );
    });
    b.kill9();
    assert!(
        dir.path().join("store/abort").exists(),
        "kill -9 leaves abort"
    );

    // Twice: the first restart recovers abnormally, the second must not be poisoned by it.
    for round in 0..2 {
        b.restart();
        rt.block_on(async {
            wait_dispatched(b.http_port, Duration::from_secs(10)).await;
            let c = Client::connect_addr(&addr).await.unwrap();
            let got = pull_all(&c, "V6Topic").await;
            let bodies: Vec<_> = got.into_iter().map(|(b, _)| b).collect();
            assert_eq!(bodies, sent, "round {round}");
        });
        b.kill9();
    }
}
