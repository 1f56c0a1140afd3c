//! Batch sends the store must refuse whole: transaction flags (sysFlag 4 or 12) and a
//! batch-level DELAY. They used to answer SUCCESS and store records no one would ever
//! check, decide or deliver on time.

use e2e::Client;
use e2e::broker_harness::{TempBroker, properties, send_v2, with_fields};
use std::time::Duration;

use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::code::{request, response};

use crate::common::victim_is_served;

fn batch(sys_flag: i32, batch_props: &[(&str, &str)]) -> RemotingCommand {
    let mut body = Vec::new();
    for i in 0..3 {
        let props = properties(&[("UNIQ_KEY", &format!("B{i}"))]);
        protocol::message::batch::BatchEntry {
            flag: 0,
            body: format!("m{i}").as_bytes(),
            properties: &props,
        }
        .encode_to(&mut body)
        .expect("encode");
    }
    let mut cmd = send_v2("BatchAttack", 0, &body, &properties(batch_props));
    cmd.code = request::SEND_BATCH_MESSAGE;
    cmd.ext_fields.insert("m", "true");
    cmd.ext_fields.insert("f", sys_flag.to_string());
    cmd
}

async fn max_offset(c: &Client) -> i64 {
    let r = c
        .request(with_fields(
            request::GET_MAX_OFFSET,
            &[
                ("topic", "BatchAttack".to_owned()),
                ("queueId", "0".to_owned()),
            ],
        ))
        .await
        .expect("max offset");
    r.ext_fields
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(-1)
}

#[test]
fn transactional_or_delayed_batches_are_illegal() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c.request(batch(0, &[])).await.expect("plain batch");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        eventually(Duration::from_secs(10), "the batch dispatched", || async {
            max_offset(&c).await == 3
        })
        .await;
        let stored = 3;
        for (what, sys_flag, props) in [
            ("prepared", 4, &[][..]),
            ("rollback", 12, &[][..]),
            ("commit", 8, &[][..]),
            ("delayed", 0, &[("DELAY", "3")][..]),
            ("unparsable delay", 0, &[("DELAY", "soon")][..]),
        ] {
            let r = c.request(batch(sys_flag, props)).await.expect("answered");
            assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{what}: {:?}", r.remark);
            assert!(
                r.remark.as_deref().unwrap_or("").contains("batch"),
                "{what}: {:?}",
                r.remark
            );
        }
        // Sent after the refused ones: once it is dispatched, nothing else was stored.
        let r = c.request(batch(0, &[])).await.expect("plain batch");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        eventually(
            Duration::from_secs(10),
            "the last batch dispatched",
            || async { max_offset(&c).await >= stored + 3 },
        )
        .await;
        assert_eq!(
            max_offset(&c).await,
            stored + 3,
            "a refused batch was stored"
        );
        victim_is_served(&mut b.broker).await;
    });
}
