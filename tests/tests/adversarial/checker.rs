//! Half messages built to stop the transaction checker. The checker walks the half
//! queue in order; a half it could not get past (one immune for 31 years, whose
//! immunity copy sat at the tail; one whose properties are a few bytes under the
//! 32,767-byte limit, so its re-appended copy is refused) used to end every round
//! there, and no producer behind it was ever asked about its transaction again. An
//! attacker sends those first; a victim producer's half after them must still get its
//! check-back.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{TempBroker, send_v2};
use e2e::wait::{eventually, runtime};
use futures::{SinkExt, StreamExt};
use protocol::body::{HeartbeatData, ProducerData};
use protocol::code::{request, response};
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::{MessageSysFlag, parse_offset_msg_id};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::net::TcpSocket;
use tokio_util::codec::Framed;

use crate::common::{metric, victim_is_served};

/// Checker rounds every half second; halves older than that are due.
const CHECKER_CONF: &[(&str, &str)] = &[
    ("transactionCheckInterval", "500"),
    ("transactionTimeOut", "500"),
];
/// The record format's properties limit (a Java short).
const MAX_PROPERTIES_LEN: usize = 32_767;
const TOPIC: &str = "TxAttack";

/// A producer connection that also sees what the broker pushes to it
/// (CHECK_TRANSACTION_STATE), which `e2e::Client` drops.
struct RawProducer {
    framed: Framed<tokio::net::TcpStream, RemotingCodec>,
    group: String,
    next_opaque: i32,
    /// Check-backs that arrived while waiting for a response.
    pushed: Vec<RemotingCommand>,
}

impl RawProducer {
    /// Connects from `from` (127.0.0.2 for the attacker) and registers `group` with a
    /// HEART_BEAT, so check-backs of the group's halves come to this connection.
    async fn connect(port: u16, from: Ipv4Addr, group: &str) -> Self {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::new(IpAddr::V4(from), 0))
            .expect("bind source address");
        let stream = socket
            .connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .expect("connect");
        let mut p = Self {
            framed: Framed::new(stream, RemotingCodec::default()),
            group: group.to_owned(),
            next_opaque: 1,
            pushed: Vec::new(),
        };
        let data = HeartbeatData {
            client_id: format!("{from}@{group}"),
            producer_data_set: vec![ProducerData {
                group_name: group.to_owned(),
            }],
            consumer_data_set: Vec::new(),
        };
        let hb = RemotingCommand::bare_request(request::HEART_BEAT)
            .with_body(protocol::body::encode(&data));
        let r = p.request(hb).await;
        assert_eq!(r.code, response::SUCCESS, "heartbeat: {:?}", r.remark);
        p
    }

    async fn next_frame(&mut self) -> RemotingCommand {
        tokio::time::timeout(Duration::from_secs(30), self.framed.next())
            .await
            .expect("a frame within 30 s")
            .expect("connection open")
            .expect("well-formed frame")
    }

    async fn request(&mut self, mut cmd: RemotingCommand) -> RemotingCommand {
        cmd.opaque = self.next_opaque;
        self.next_opaque += 1;
        let opaque = cmd.opaque;
        self.framed.send(cmd).await.expect("send");
        loop {
            let frame = self.next_frame().await;
            if frame.is_response() && frame.opaque == opaque {
                return frame;
            }
            if !frame.is_response() {
                self.pushed.push(frame);
            }
        }
    }

    /// Sends a half message of this group to `TOPIC` queue 0; returns its CommitLog
    /// offset.
    async fn send_half(&mut self, uniq: &str, extra: &[(&str, &str)]) -> i64 {
        let mut props = format!(
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{}\u{2}UNIQ_KEY\u{1}{uniq}",
            self.group
        );
        for (k, v) in extra {
            props.push_str(&format!("\u{2}{k}\u{1}{v}"));
        }
        let mut half = send_v2(TOPIC, 0, uniq.as_bytes(), &props);
        half.ext_fields.insert("a", self.group.clone());
        half.ext_fields
            .insert("f", MessageSysFlag::TRANSACTION_PREPARED_TYPE.to_string());
        let r = self.request(half).await;
        assert_eq!(r.code, response::SUCCESS, "half {uniq}: {:?}", r.remark);
        let msg_id = r.ext_fields.get("msgId").expect("msgId");
        parse_offset_msg_id(msg_id).expect("offset msg id").1.get()
    }

    /// Waits for the check-back of the half whose UNIQ_KEY is `uniq`.
    async fn check_back_for(&mut self, uniq: &str) -> CheckTransactionStateRequestHeader {
        loop {
            let frame = if self.pushed.is_empty() {
                self.next_frame().await
            } else {
                self.pushed.remove(0)
            };
            if frame.code != request::CHECK_TRANSACTION_STATE || frame.is_response() {
                continue;
            }
            let h: CheckTransactionStateRequestHeader = frame.header().expect("check header");
            if h.msg_id.as_deref() == Some(uniq) {
                return h;
            }
        }
    }
}

/// The wire properties of a half whose stored properties end `spare` bytes under the
/// limit: the broker appends `CLUSTER` (send), then `REAL_TOPIC` and `REAL_QID` (half).
fn near_limit_padding(group: &str, uniq: &str, cluster: &str, spare: usize) -> String {
    let wire_without_pad =
        format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{group}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}PAD\u{1}");
    let added = format!("\u{2}CLUSTER\u{1}{cluster}\u{2}REAL_TOPIC\u{1}{TOPIC}\u{2}REAL_QID\u{1}0");
    "p".repeat(MAX_PROPERTIES_LEN - spare - wire_without_pad.len() - added.len())
}

/// The immune-for-ever half and the near-limit half come first; the victim's half after
/// them is checked, the near-limit half gets its one check-back naming its own offset,
/// and the broker goes on serving.
#[test]
fn halves_built_to_stop_the_checker_do_not_stop_it() {
    let mut b = TempBroker::start(None, CHECKER_CONF);
    let cluster = b
        .broker
        .conf("brokerClusterName")
        .expect("cluster name")
        .to_owned();
    runtime().block_on(async {
        let mut attacker =
            RawProducer::connect(b.broker.port, Ipv4Addr::new(127, 0, 0, 2), "PG_ATTACK").await;
        attacker
            .send_half(
                "IMMUNE",
                &[("CHECK_IMMUNITY_TIME_IN_SECONDS", "1000000000")],
            )
            .await;
        let pad = near_limit_padding("PG_ATTACK", "NEARLIMIT", &cluster, 10);
        let near_limit = attacker.send_half("NEARLIMIT", &[("PAD", &pad)]).await;
        // The broker stored it 10 bytes under the limit, as intended.
        let viewer = Client::connect(b.broker.port).await.expect("connect");
        let stored = view_properties(&viewer, near_limit).await;
        assert_eq!(stored, MAX_PROPERTIES_LEN - 10);

        let mut victim =
            RawProducer::connect(b.broker.port, Ipv4Addr::LOCALHOST, "PG_VICTIM").await;
        victim.send_half("VICTIM", &[]).await;
        let first = victim.check_back_for("VICTIM").await;
        assert!(
            first.tran_state_table_offset.get() > 2,
            "the victim's copy is checked: {first:?}"
        );

        // The near-limit half was asked about at its own record, and counted.
        let h = attacker.check_back_for("NEARLIMIT").await;
        assert_eq!(h.commit_log_offset.get(), near_limit);
        let http_port = b.broker.http_port;
        eventually(Duration::from_secs(10), "the skip counted", || async move {
            metric(
                http_port,
                "rocketmq_broker_transaction_check_skipped_total{reason=\"reappend_refused\"}",
            )
            .await
                >= 1.0
        })
        .await;

        // Later rounds still reach the victim's transaction (its copy is checked again).
        let again = victim.check_back_for("VICTIM").await;
        assert!(again.tran_state_table_offset > first.tran_state_table_offset);
        victim_is_served(&mut b.broker).await;
    });
}

/// Length of the stored properties of the record at CommitLog `offset`.
async fn view_properties(c: &Client, offset: i64) -> usize {
    let r = c
        .request(e2e::broker_harness::with_fields(
            request::VIEW_MESSAGE_BY_ID,
            &[("offset", offset.to_string())],
        ))
        .await
        .expect("VIEW_MESSAGE_BY_ID");
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    e2e::broker_harness::decode_records(&r.body)
        .remove(0)
        .properties
        .len()
}
