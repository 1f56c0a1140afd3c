//! Compressed batch bodies (the C++ client compresses a whole batch over 4 KiB and flags
//! the request COMPRESSED): a zip bomb inflates no further than `maxMessageSize` and is
//! refused with MESSAGE_ILLEGAL naming the key; a corrupt stream is refused; a genuine
//! compressed batch is stored as plain messages.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, decode_records, properties, pull, send_v2};
use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::message::batch::BatchEntry;
use protocol::message::compress::{DEFAULT_LEVEL, deflate_zlib};

use crate::common::{refusals, victim_is_served};

const TOPIC: &str = "CompressedBatch";
/// Bytes each bomb inflates to: 16 times the default `maxMessageSize`.
const BOMB_PLAIN: usize = 64 * 1024 * 1024;
const BOMBS: usize = 8;

fn compressed_batch(body: &[u8]) -> RemotingCommand {
    let mut cmd = send_v2(TOPIC, 0, body, "");
    cmd.code = request::SEND_BATCH_MESSAGE;
    cmd.ext_fields.insert("m", "true");
    // sysFlag COMPRESSED, as the C++ client sets it.
    cmd.ext_fields.insert("f", "1");
    cmd
}

fn plain_batch(n: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..n {
        let props = properties(&[("UNIQ_KEY", &format!("Z{i:04}"))]);
        BatchEntry {
            flag: 0,
            body: format!("zipped-{i:04}-{}", "y".repeat(180)).as_bytes(),
            properties: &props,
        }
        .encode_to(&mut body)
        .expect("encode");
    }
    body
}

#[test]
fn zip_bombs_are_capped_and_genuine_compressed_batches_stored() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let bomb = deflate_zlib(&vec![0u8; BOMB_PLAIN], 9);
        assert!(bomb.len() < 1024 * 1024, "the bomb fits one request");
        let attacker_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let baseline = b.broker.anon_rss_kib().expect("rss");
        let attackers = (0..BOMBS).map(|_| {
            let bomb = bomb.clone();
            let port = b.broker.port;
            tokio::spawn(async move {
                let c = Client::connect_from(attacker_ip, port)
                    .await
                    .expect("attacker connects");
                c.request(compressed_batch(&bomb)).await.expect("answered")
            })
        });
        for a in attackers {
            let r = a.await.expect("attacker task");
            assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
            let remark = r.remark.unwrap_or_default();
            assert!(remark.contains("maxMessageSize"), "{remark}");
        }
        // Each bomb stops at the 4 MiB cap: 8 at once stay far below one inflated bomb.
        let grown = b
            .broker
            .anon_rss_kib()
            .expect("rss")
            .saturating_sub(baseline);
        assert!(
            grown < 48 * 1024,
            "RSS grew {grown} KiB for {BOMBS} bombs of {BOMB_PLAIN} bytes"
        );
        let counted = refusals(b.broker.http_port, "maxMessageSize").await;
        assert!(counted >= BOMBS as f64, "refusals counted: {counted}");

        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(compressed_batch(b"\x78\x9cnot a zlib stream"))
            .await
            .expect("answered");
        assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);

        let genuine = deflate_zlib(&plain_batch(32), DEFAULT_LEVEL);
        let r = c
            .request(compressed_batch(&genuine))
            .await
            .expect("answered");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        eventually(Duration::from_secs(10), "the batch readable", || async {
            let r = c
                .request(pull("reader", TOPIC, 0, 0, 64, None, "*"))
                .await
                .expect("pull");
            r.code == response::SUCCESS && decode_records(&r.body).len() == 32
        })
        .await;
        let r = c
            .request(pull("reader", TOPIC, 0, 0, 64, None, "*"))
            .await
            .expect("pull");
        for (i, m) in decode_records(&r.body).iter().enumerate() {
            let want = format!("zipped-{i:04}-{}", "y".repeat(180));
            assert_eq!(m.body, want.as_bytes(), "entry {i} stored plain");
        }
        victim_is_served(&mut b.broker).await;
    });
}
