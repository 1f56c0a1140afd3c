//! Reading messages: PULL_MESSAGE, QUERY_MESSAGE (by key or `UNIQ_KEY`) and
//! VIEW_MESSAGE_BY_ID (by offset msgId).

use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::{
    PullMessageRequestHeader, PullMessageResponseHeader, QueryMessageRequestHeader,
    ViewMessageRequestHeader,
};
use protocol::message::msg_id::parse_offset_msg_id;
use protocol::message::{ConsumerOffset, PullSysFlag, QueueOffset};
use serde::Serialize;

use super::message::{Message, decode_messages};
use super::{Client, ClientError, Peer, Result, bad_body};

/// What to pull.
#[derive(Debug, Clone)]
pub struct PullRequest<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub queue_id: i32,
    pub offset: QueueOffset,
    pub max_messages: i32,
    /// Tag expression (`*`, `a || b`), or a SQL92 selector.
    pub subscription: &'a str,
    pub expression_type: ExpressionType,
    /// Long-polling hold time; `None` answers at once.
    pub suspend_ms: Option<i64>,
    /// Offset to commit for the group along with the pull.
    pub commit_offset: Option<ConsumerOffset>,
}

/// How the broker reads [`PullRequest::subscription`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpressionType {
    #[default]
    Tag,
    /// A SQL92 selector over message properties, evaluated by the broker (which needs
    /// `enablePropertyFilter=true`).
    Sql92,
}

impl ExpressionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ExpressionType::Tag => "TAG",
            ExpressionType::Sql92 => "SQL92",
        }
    }
}

/// A QUERY_MESSAGE lookup.
#[derive(Debug, Clone, Copy)]
pub struct MessageQuery<'a> {
    pub topic: &'a str,
    pub key: &'a str,
    pub max: i32,
    /// Store-time window, ms since the epoch.
    pub begin_ms: i64,
    pub end_ms: i64,
    /// Look `key` up as a `UNIQ_KEY` (client msgId) instead of a KEYS entry.
    pub unique: bool,
}

impl<'a> MessageQuery<'a> {
    /// Any message of `topic` whose KEYS contain `key`.
    pub fn by_key(topic: &'a str, key: &'a str) -> Self {
        Self {
            topic,
            key,
            max: 64,
            begin_ms: 0,
            end_ms: i64::MAX,
            unique: false,
        }
    }

    /// The message of `topic` whose client msgId is `id`.
    pub fn by_uniq_key(topic: &'a str, id: &'a str) -> Self {
        Self {
            topic,
            key: id,
            max: 1,
            begin_ms: 0,
            end_ms: i64::MAX,
            unique: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PullStatus {
    Found,
    NoNewMsg,
    NoMatchedMsg,
    OffsetIllegal,
}

#[derive(Debug, Clone)]
pub struct PullResult {
    pub status: PullStatus,
    pub next_begin_offset: QueueOffset,
    pub min_offset: QueueOffset,
    pub max_offset: QueueOffset,
    pub messages: Vec<Message>,
}

impl Client {
    pub async fn pull(&self, broker: &Peer, req: &PullRequest<'_>) -> Result<PullResult> {
        let code = request::PULL_MESSAGE;
        let header = PullMessageRequestHeader {
            consumer_group: req.group.to_owned(),
            topic: req.topic.to_owned(),
            queue_id: req.queue_id,
            queue_offset: req.offset,
            max_msg_nums: req.max_messages,
            sys_flag: PullSysFlag::build(
                req.commit_offset.is_some(),
                req.suspend_ms.is_some(),
                true,
                false,
            ),
            commit_offset: req.commit_offset.unwrap_or(ConsumerOffset(0)),
            suspend_timeout_millis: req.suspend_ms.unwrap_or(0),
            subscription: Some(req.subscription.to_owned()),
            sub_version: 0,
            expression_type: Some(req.expression_type.as_str().to_owned()),
            bname: None,
        };
        let cmd = RemotingCommand::request(code, &header);
        // A held pull may legitimately take the hold time plus the call timeout.
        let conn = self.connection(broker).await?;
        let wait = self.timeout()
            + std::time::Duration::from_millis(req.suspend_ms.unwrap_or(0).max(0) as u64);
        let reply = conn.request(cmd, wait).await?;
        let status = match reply.code {
            response::SUCCESS => PullStatus::Found,
            response::PULL_NOT_FOUND => PullStatus::NoNewMsg,
            response::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMsg,
            response::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
            other => {
                return Err(ClientError::Refused {
                    peer: broker.clone(),
                    request: code,
                    code: other,
                    remark: reply.remark.unwrap_or_default(),
                });
            }
        };
        let h: PullMessageResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, code, "PullMessageResponseHeader", e))?;
        let messages = if status == PullStatus::Found {
            decode_messages(&reply.body)
                .map_err(|e| bad_body(broker, code, "message records", e))?
        } else {
            Vec::new()
        };
        Ok(PullResult {
            status,
            next_begin_offset: h.next_begin_offset,
            min_offset: h.min_offset,
            max_offset: h.max_offset,
            messages,
        })
    }

    /// QUERY_MESSAGE on one broker: messages of `q.topic` whose KEYS (or, with
    /// `q.unique`, UNIQ_KEY) contain `q.key`.
    pub async fn query_messages(
        &self,
        broker: &Peer,
        q: &MessageQuery<'_>,
    ) -> Result<Vec<Message>> {
        let MessageQuery {
            topic,
            key,
            max,
            begin_ms,
            end_ms,
            unique,
        } = *q;
        let code = request::QUERY_MESSAGE;
        let header = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max_num: max,
            begin_timestamp: begin_ms,
            end_timestamp: end_ms,
            unique_key_query: unique.then_some(true),
        };
        let reply = self
            .call(broker, RemotingCommand::request(code, &header))
            .await?;
        if reply.code == response::QUERY_NOT_FOUND {
            return Ok(Vec::new());
        }
        let reply = super::expect_success(broker, code, reply)?;
        let mut msgs = decode_messages(&reply.body)
            .map_err(|e| bad_body(broker, code, "message records", e))?;
        // The index matches on hashes; keep only real matches, as the Java admin does.
        msgs.retain(|m| {
            m.topic == topic
                && if unique {
                    m.msg_id == key
                } else {
                    m.keys().is_some_and(|k| k.split(' ').any(|k| k == key))
                }
        });
        Ok(msgs)
    }

    /// VIEW_MESSAGE_BY_ID: the message an offset msgId names, asked of the broker the id
    /// encodes (its store host).
    pub async fn view_message(&self, offset_msg_id: &str) -> Result<Message> {
        let (host, offset) = parse_offset_msg_id(offset_msg_id).map_err(|e| {
            ClientError::Invalid(format!("{offset_msg_id} is not an offset msgId: {e}"))
        })?;
        let broker = Peer::Broker(host.to_string());
        let code = request::VIEW_MESSAGE_BY_ID;
        let reply = self
            .call_ok(
                &broker,
                RemotingCommand::request(code, &ViewMessageRequestHeader { offset }),
            )
            .await?;
        let mut msgs = decode_messages(&reply.body)
            .map_err(|e| bad_body(&broker, code, "message record", e))?;
        match msgs.len() {
            1 => Ok(msgs.remove(0)),
            n => Err(bad_body(
                &broker,
                code,
                "message record",
                format!("{n} records"),
            )),
        }
    }
}

impl Client {
    /// HEART_BEAT as a clustering pull consumer of `group` subscribed to `topic` (all
    /// tags), as `MQClientInstance.sendHeartbeatToAllBroker` registers one. The broker
    /// accepts a send-back only for a topic the group's consumers subscribe to.
    pub async fn consumer_heartbeat(
        &self,
        broker: &Peer,
        client_id: &str,
        group: &str,
        topic: &str,
    ) -> Result<()> {
        use protocol::body::{
            ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel,
            SubscriptionData,
        };
        let data = HeartbeatData {
            client_id: client_id.to_owned(),
            producer_data_set: Vec::new(),
            consumer_data_set: vec![ConsumerData {
                group_name: group.to_owned(),
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                subscription_data_set: vec![SubscriptionData {
                    class_filter_mode: false,
                    topic: topic.to_owned(),
                    sub_string: "*".to_owned(),
                    tags_set: Default::default(),
                    code_set: Default::default(),
                    sub_version: 1,
                    expression_type: "TAG".to_owned(),
                }],
                unit_mode: false,
            }],
        };
        let cmd = RemotingCommand::bare_request(request::HEART_BEAT)
            .with_body(protocol::body::encode(&data));
        self.call_ok(broker, cmd).await.map(|_| ())
    }
}
