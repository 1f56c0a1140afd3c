//! The VIP port (4.9's `fastRemotingServer` on `listenPort - 2`): older
//! 4.x Java clients with `vipChannelEnabled` send there, so it must answer exactly as
//! the main port does; `fastListenPortEnable=false` closes it.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, decode_records, pull, send_v2, with_fields};
use e2e::metrics::wait_dispatched;
use e2e::ports::free_port;
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};

async fn max_offset(c: &Client) -> RemotingCommand {
    c.request(with_fields(
        request::GET_MAX_OFFSET,
        &[("topic", "VipTopic".into()), ("queueId", "0".into())],
    ))
    .await
    .expect("max offset")
}

async fn config(c: &Client) -> RemotingCommand {
    c.request(RemotingCommand::bare_request(request::GET_BROKER_CONFIG))
        .await
        .expect("broker config")
}

#[test]
fn vip_port_answers_as_the_main_port() {
    let vip = free_port();
    let vip_text = vip.to_string();
    let b = TempBroker::start(
        None,
        &[
            ("fastListenPortEnable", "true"),
            ("fastListenPort", vip_text.as_str()),
        ],
    );
    runtime().block_on(async {
        let main = Client::connect(b.broker.port).await.expect("main port");
        let fast = Client::connect(vip).await.expect("VIP port");
        // A send on the VIP port is stored like one on the main port: the queue
        // offsets continue across both.
        let r = fast
            .request(send_v2("VipTopic", 0, b"via-vip", ""))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.ext_fields.get("queueOffset"), Some("0"));
        let r = main
            .request(send_v2("VipTopic", 0, b"via-main", ""))
            .await
            .unwrap();
        assert_eq!(r.ext_fields.get("queueOffset"), Some("1"));

        // Both ports serve the same pulls and the same admin answers.
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        let a = main
            .request(pull("G", "VipTopic", 0, 0, 32, None, "*"))
            .await
            .unwrap();
        let v = fast
            .request(pull("G", "VipTopic", 0, 0, 32, None, "*"))
            .await
            .unwrap();
        let (ra, rv) = (decode_records(&a.body), decode_records(&v.body));
        assert_eq!(ra.len(), 2, "messages pullable: {:?}", a.remark);
        assert_eq!(a.code, v.code);
        assert_eq!(
            ra.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
            rv.iter().map(|m| m.body.clone()).collect::<Vec<_>>()
        );
        assert_eq!(&ra[0].body[..], b"via-vip");
        let (a, v) = (max_offset(&main).await, max_offset(&fast).await);
        assert_eq!(a.code, response::SUCCESS);
        assert_eq!(a.ext_fields.get("offset"), v.ext_fields.get("offset"));
        let (a, v) = (config(&main).await, config(&fast).await);
        assert_eq!(a.body, v.body);
        assert!(String::from_utf8_lossy(&v.body).contains(&format!("fastListenPort={vip}")));
    });
}

#[test]
fn vip_port_can_be_turned_off() {
    let vip = free_port();
    let vip_text = vip.to_string();
    let b = TempBroker::start(
        None,
        &[
            ("fastListenPortEnable", "false"),
            ("fastListenPort", vip_text.as_str()),
        ],
    );
    runtime().block_on(async {
        assert!(Client::connect(b.broker.port).await.is_ok());
        assert!(
            Client::connect(vip).await.is_err(),
            "the VIP port answered although it is turned off"
        );
    });
}
