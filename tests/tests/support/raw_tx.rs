//! A raw transactional producer: one connection that sends half messages, ends them with
//! END_TRANSACTION and sees the broker's CHECK_TRANSACTION_STATE pushes (which
//! `e2e::Client` drops). Requests are signed when it has credentials (ACL suites).

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use e2e::broker_harness::{send_v2, with_fields};
use futures::{SinkExt, StreamExt};
use protocol::body::{HeartbeatData, ProducerData};
use protocol::code::{request, response};
use protocol::header::CheckTransactionStateRequestHeader;
use protocol::message::{MessageSysFlag, parse_offset_msg_id};
use protocol::{RemotingCodec, RemotingCommand};
use security::sign::{Credentials, sign_request};
use tokio::net::TcpSocket;
use tokio_util::codec::Framed;

pub const COMMIT: i32 = MessageSysFlag::TRANSACTION_COMMIT_TYPE;
pub const ROLLBACK: i32 = MessageSysFlag::TRANSACTION_ROLLBACK_TYPE;

/// Where a half message was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Half {
    pub queue_offset: i64,
    pub commit_log_offset: i64,
}

/// A check-back: the record it names and the body of the half message.
#[derive(Debug, Clone)]
pub struct CheckBack {
    pub half: Half,
    pub body: String,
}

pub struct RawTx {
    framed: Framed<tokio::net::TcpStream, RemotingCodec>,
    pub group: String,
    credentials: Option<Credentials>,
    next_opaque: i32,
    pushed: Vec<RemotingCommand>,
}

impl RawTx {
    /// Connects from `from` and registers as a producer of `group` (HEART_BEAT), so the
    /// group's check-backs come here.
    pub async fn connect(
        port: u16,
        from: IpAddr,
        group: &str,
        credentials: Option<(&str, &str)>,
    ) -> std::io::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(from, 0))?;
        let stream = socket
            .connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await?;
        let mut p = Self {
            framed: Framed::new(stream, RemotingCodec::default()),
            group: group.to_owned(),
            credentials: credentials.map(|(k, s)| Credentials::new(k, s)),
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
        let r = p.request(hb).await?;
        assert_eq!(r.code, response::SUCCESS, "heartbeat: {:?}", r.remark);
        Ok(p)
    }

    async fn next_frame(&mut self, within: Duration) -> std::io::Result<Option<RemotingCommand>> {
        match tokio::time::timeout(within, self.framed.next()).await {
            Err(_) => Ok(None),
            Ok(None) => Err(std::io::Error::other("connection closed")),
            Ok(Some(frame)) => frame.map(Some).map_err(std::io::Error::other),
        }
    }

    /// Sends `cmd` (signed when this producer has credentials) and waits for its answer;
    /// pushes arriving meanwhile are kept for [`Self::check_back`].
    pub async fn request(&mut self, mut cmd: RemotingCommand) -> std::io::Result<RemotingCommand> {
        if let Some(c) = &self.credentials {
            sign_request(&mut cmd, c);
        }
        cmd.opaque = self.next_opaque;
        self.next_opaque += 1;
        let opaque = cmd.opaque;
        self.framed.send(cmd).await.map_err(std::io::Error::other)?;
        loop {
            let Some(frame) = self.next_frame(Duration::from_secs(30)).await? else {
                return Err(std::io::Error::other("no answer within 30 s"));
            };
            if frame.is_response() && frame.opaque == opaque {
                return Ok(frame);
            }
            if !frame.is_response() {
                self.pushed.push(frame);
            }
        }
    }

    /// Sends a half message with `uniq` as its UNIQ_KEY to `topic` queue 0; the answer.
    pub async fn send_half_answer(
        &mut self,
        topic: &str,
        body: &str,
        uniq: &str,
    ) -> std::io::Result<RemotingCommand> {
        let props = format!(
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}TAGS\u{1}tx",
            self.group
        );
        let mut half = send_v2(topic, 0, body.as_bytes(), &props);
        half.ext_fields.insert("a", self.group.clone());
        half.ext_fields
            .insert("f", MessageSysFlag::TRANSACTION_PREPARED_TYPE.to_string());
        self.request(half).await
    }

    /// Sends a half message; where it was stored.
    pub async fn send_half(
        &mut self,
        topic: &str,
        body: &str,
        uniq: &str,
    ) -> std::io::Result<Half> {
        let r = self.send_half_answer(topic, body, uniq).await?;
        assert_eq!(r.code, response::SUCCESS, "half {body}: {:?}", r.remark);
        let msg_id = r.ext_fields.get("msgId").expect("msgId");
        let queue_offset = r
            .ext_fields
            .get("queueOffset")
            .and_then(|o| o.parse().ok())
            .expect("queueOffset");
        Ok(Half {
            queue_offset,
            commit_log_offset: parse_offset_msg_id(msg_id).expect("offset msg id").1.get(),
        })
    }

    /// END_TRANSACTION for `half`; the answer.
    pub async fn end(
        &mut self,
        half: Half,
        decision: i32,
        from_check: bool,
    ) -> std::io::Result<RemotingCommand> {
        let cmd = with_fields(
            request::END_TRANSACTION,
            &[
                ("producerGroup", self.group.clone()),
                ("tranStateTableOffset", half.queue_offset.to_string()),
                ("commitLogOffset", half.commit_log_offset.to_string()),
                ("commitOrRollback", decision.to_string()),
                ("fromTransactionCheck", from_check.to_string()),
                ("msgId", "ignored".to_owned()),
            ],
        );
        self.request(cmd).await
    }

    /// The next check-back within `within`, or `None`.
    pub async fn check_back(&mut self, within: Duration) -> std::io::Result<Option<CheckBack>> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let frame = if self.pushed.is_empty() {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                match self.next_frame(left).await? {
                    Some(f) => f,
                    None => return Ok(None),
                }
            } else {
                self.pushed.remove(0)
            };
            if frame.code != request::CHECK_TRANSACTION_STATE || frame.is_response() {
                continue;
            }
            let h: CheckTransactionStateRequestHeader = frame.header().expect("check header");
            let record = protocol::message::decode(&frame.body, true).expect("check body");
            return Ok(Some(CheckBack {
                half: Half {
                    queue_offset: h.tran_state_table_offset.get(),
                    commit_log_offset: h.commit_log_offset.get(),
                },
                body: String::from_utf8_lossy(record.body()).into_owned(),
            }));
        }
    }
}
