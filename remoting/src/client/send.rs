//! Producing: SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, oneway sends, and END_TRANSACTION for
//! half messages (`MQClientAPIImpl.sendMessage`, `DefaultMQProducerImpl.endTransaction`).

use protocol::code::{request, response};
use protocol::header::{
    CheckTransactionStateRequestHeader, ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use protocol::message::batch::BatchEntry;
use protocol::message::msg_id::parse_offset_msg_id;
use protocol::message::properties;
use protocol::message::{MessageSysFlag, QueueOffset};
use protocol::{RemotingCommand, SharedStr};
use serde::Serialize;

use super::message::{Message, OutgoingMessage};
use super::{Client, ClientError, Peer, Result, bad_body};

/// `defaultTopicQueueNums` the Java producer sends.
pub(crate) const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;

/// The broker's verdict on a stored message (`SendStatus`): anything but `SendOk`
/// still means the message was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SendStatus {
    SendOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    pub status: SendStatus,
    /// Client msgId(s) (`UNIQ_KEY`), comma-separated for a batch.
    pub msg_id: String,
    /// Offset msgId(s) the broker assigned, comma-separated for a batch.
    pub offset_msg_id: String,
    pub queue_id: i32,
    /// Queue offset of the (first) message.
    pub queue_offset: QueueOffset,
    pub transaction_id: Option<String>,
}

/// Where and as whom a message is sent.
#[derive(Debug, Clone, Copy)]
pub struct SendTo<'a> {
    pub broker: &'a Peer,
    pub queue_id: i32,
    pub producer_group: &'a str,
}

impl Client {
    /// A fresh `UNIQ_KEY` (`MessageClientIDSetter.createUniqID`).
    pub fn next_uniq_key(&self) -> String {
        self.uniq_keys.lock().generate()
    }

    fn send_header(
        to: SendTo<'_>,
        topic: &str,
        sys_flag: MessageSysFlag,
        props: String,
        batch: bool,
    ) -> SendMessageRequestHeaderV2 {
        SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
            producer_group: to.producer_group.into(),
            topic: topic.into(),
            default_topic: SharedStr::from_static(super::admin::DEFAULT_TOPIC),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id: to.queue_id,
            sys_flag,
            born_timestamp: super::now_ms(),
            flag: 0,
            properties: Some(props.into()),
            reconsume_times: Some(0),
            unit_mode: false,
            batch,
            max_reconsume_times: None,
            bname: None,
        })
    }

    /// The SEND_MESSAGE_V2 command for `msg` and the `UNIQ_KEY` it carries. A
    /// transactional message is a half message (`TRAN_MSG`, prepared sysFlag).
    pub fn send_command(
        &self,
        to: SendTo<'_>,
        msg: &OutgoingMessage,
        transactional: bool,
    ) -> (RemotingCommand, String) {
        // A UNIQ_KEY among the user properties is kept: a re-send (DLQ) carries the
        // original client msgId so consumers that de-duplicate by it see one message.
        let uniq = msg
            .user_properties
            .iter()
            .find(|(k, _)| k == properties::UNIQ_KEY)
            .map_or_else(|| self.next_uniq_key(), |(_, v)| v.clone());
        let extra: &[(&str, &str)] = if transactional {
            &[
                (properties::TRAN_MSG, "true"),
                (properties::PGROUP, to.producer_group),
            ]
        } else {
            &[]
        };
        let props = msg.properties_text(&uniq, extra);
        let mut header = Self::send_header(
            to,
            &msg.topic,
            OutgoingMessage::sys_flag(transactional),
            props,
            false,
        );
        header.h = msg.flag;
        let cmd =
            RemotingCommand::request(request::SEND_MESSAGE_V2, &header).with_body(msg.body.clone());
        (cmd, uniq)
    }

    /// The SEND_BATCH_MESSAGE command for `msgs` (all of one topic) and their `UNIQ_KEY`s.
    pub fn batch_command(
        &self,
        to: SendTo<'_>,
        msgs: &[OutgoingMessage],
    ) -> Result<(RemotingCommand, Vec<String>)> {
        let Some(first) = msgs.first() else {
            return Err(ClientError::Invalid(
                "a batch needs at least one message".into(),
            ));
        };
        if msgs
            .iter()
            .any(|m| m.topic != first.topic || m.delay_level.is_some())
        {
            return Err(ClientError::Invalid(
                "a batch must be of one topic and carry no delay level (as in RocketMQ)".into(),
            ));
        }
        let uniqs: Vec<String> = msgs.iter().map(|_| self.next_uniq_key()).collect();
        let props: Vec<String> = msgs
            .iter()
            .zip(&uniqs)
            .map(|(m, u)| m.properties_text(u, &[]))
            .collect();
        let entries: Vec<BatchEntry<'_>> = msgs
            .iter()
            .zip(&props)
            .map(|(m, p)| BatchEntry {
                flag: m.flag,
                body: &m.body,
                properties: p,
            })
            .collect();
        let body = protocol::message::batch::encode(&entries)
            .map_err(|e| ClientError::Invalid(format!("cannot encode batch: {e}")))?;
        let header = Self::send_header(
            to,
            &first.topic,
            MessageSysFlag(0),
            "WAIT\u{1}true".to_owned(),
            true,
        );
        let cmd = RemotingCommand::request(request::SEND_BATCH_MESSAGE, &header).with_body(body);
        Ok((cmd, uniqs))
    }

    /// Interprets a send response (`MQClientAPIImpl.processSendResponse`).
    pub fn send_result(
        broker: &Peer,
        request: i32,
        reply: RemotingCommand,
        uniq: String,
    ) -> Result<SendResult> {
        let status = match reply.code {
            response::SUCCESS => SendStatus::SendOk,
            response::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
            response::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
            response::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
            code => {
                return Err(ClientError::Refused {
                    peer: broker.clone(),
                    request,
                    code,
                    remark: reply.remark.unwrap_or_default(),
                });
            }
        };
        let h: SendMessageResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, request, "SendMessageResponseHeader", e))?;
        Ok(SendResult {
            status,
            msg_id: uniq,
            offset_msg_id: h.msg_id,
            queue_id: h.queue_id,
            queue_offset: h.queue_offset,
            transaction_id: h.transaction_id,
        })
    }

    /// Sends one message and waits for the broker's verdict.
    pub async fn send(
        &self,
        to: SendTo<'_>,
        msg: &OutgoingMessage,
        transactional: bool,
    ) -> Result<SendResult> {
        let (cmd, uniq) = self.send_command(to, msg, transactional);
        let reply = self.call(to.broker, cmd).await?;
        Self::send_result(to.broker, request::SEND_MESSAGE_V2, reply, uniq)
    }

    pub async fn send_batch(&self, to: SendTo<'_>, msgs: &[OutgoingMessage]) -> Result<SendResult> {
        let (cmd, uniqs) = self.batch_command(to, msgs)?;
        let reply = self.call(to.broker, cmd).await?;
        Self::send_result(
            to.broker,
            request::SEND_BATCH_MESSAGE,
            reply,
            uniqs.join(","),
        )
    }

    /// Sends one message without waiting for (or getting) an answer.
    pub async fn send_oneway(&self, to: SendTo<'_>, msg: &OutgoingMessage) -> Result<()> {
        let (cmd, _) = self.send_command(to, msg, false);
        self.oneway(to.broker, cmd).await
    }

    /// END_TRANSACTION (oneway, like the Java producer) committing or rolling back the
    /// half message `sent`.
    pub async fn end_transaction(
        &self,
        broker: &Peer,
        producer_group: &str,
        sent: &SendResult,
        commit: bool,
    ) -> Result<()> {
        let (_, commit_log_offset) = parse_offset_msg_id(&sent.offset_msg_id)
            .map_err(|e| bad_body(broker, request::SEND_MESSAGE_V2, "offset msgId", e))?;
        let header = EndTransactionRequestHeader {
            producer_group: producer_group.to_owned(),
            tran_state_table_offset: sent.queue_offset,
            commit_log_offset,
            commit_or_rollback: decision(commit),
            from_transaction_check: false,
            msg_id: sent.msg_id.clone(),
            transaction_id: sent
                .transaction_id
                .clone()
                .or_else(|| Some(sent.msg_id.clone())),
            bname: None,
        };
        self.oneway(
            broker,
            RemotingCommand::request(request::END_TRANSACTION, &header),
        )
        .await
    }

    /// CONSUMER_SEND_MSG_BACK: hands a consumed message back for another attempt, as a
    /// consumer does when its listener fails. Delay level 0 lets the broker pick
    /// `3 + reconsumeTimes`.
    pub async fn send_back(
        &self,
        broker: &Peer,
        group: &str,
        msg: &Message,
        delay_level: i32,
    ) -> Result<()> {
        let header = ConsumerSendMsgBackRequestHeader {
            offset: msg.physical_offset,
            group: group.to_owned(),
            delay_level,
            origin_msg_id: Some(msg.msg_id.clone()),
            origin_topic: Some(msg.topic.clone()),
            unit_mode: false,
            max_reconsume_times: None,
            bname: None,
        };
        let cmd = RemotingCommand::request(request::CONSUMER_SEND_MSG_BACK, &header);
        self.call_ok(broker, cmd).await.map(|_| ())
    }
}

fn decision(commit: bool) -> i32 {
    if commit {
        MessageSysFlag::TRANSACTION_COMMIT_TYPE
    } else {
        MessageSysFlag::TRANSACTION_ROLLBACK_TYPE
    }
}

/// The answer to a broker's CHECK_TRANSACTION_STATE (`ClientRemotingProcessor
/// .checkTransactionState`): a oneway END_TRANSACTION with `fromTransactionCheck`,
/// committing or rolling back. `None` for any other request or a malformed header.
pub fn answer_transaction_check(
    request_cmd: &RemotingCommand,
    producer_group: &str,
    commit: bool,
) -> Option<RemotingCommand> {
    if request_cmd.code != request::CHECK_TRANSACTION_STATE {
        return None;
    }
    let h: CheckTransactionStateRequestHeader = request_cmd.header().ok()?;
    let props = protocol::message::record::decode(&request_cmd.body, false).ok();
    let uniq = props
        .as_ref()
        .and_then(|v| properties::find(v.properties(), properties::UNIQ_KEY))
        .map(str::to_owned)
        .or(h.msg_id.clone())
        .unwrap_or_default();
    let header = EndTransactionRequestHeader {
        producer_group: producer_group.to_owned(),
        tran_state_table_offset: h.tran_state_table_offset,
        commit_log_offset: h.commit_log_offset,
        commit_or_rollback: decision(commit),
        from_transaction_check: true,
        msg_id: uniq,
        transaction_id: h.transaction_id,
        bname: h.bname,
    };
    let mut cmd = RemotingCommand::request(request::END_TRANSACTION, &header)
        .with_remark("answered by rmq-bench's transaction checker");
    cmd.mark_oneway();
    Some(cmd)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{SinkExt, StreamExt};
    use protocol::RemotingCodec;
    use protocol::header::CheckTransactionStateRequestHeader;
    use protocol::message::PhysicalOffset;
    use protocol::message::msg_id::offset_msg_id;
    use tokio::net::TcpListener;
    use tokio_util::codec::Framed;

    use super::*;

    /// A fake broker checks the half message and the END_TRANSACTION that follows it, as
    /// a 4.9 broker's `SendMessageProcessor` and `EndTransactionProcessor` read them.
    #[tokio::test]
    async fn transactional_send_then_commit_speaks_the_java_wire_format() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let store_host: std::net::SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let broker = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut framed = Framed::new(socket, RemotingCodec::default());
            let half = framed.next().await.unwrap().unwrap();
            assert_eq!(half.code, request::SEND_MESSAGE_V2);
            let h = SendMessageRequestHeader::read_for_code(half.code, &half.ext_fields).unwrap();
            assert_eq!(
                h.sys_flag.transaction_type(),
                protocol::message::TransactionType::Prepared
            );
            let props = h.properties.unwrap();
            assert_eq!(properties::find(&props, properties::TRAN_MSG), Some("true"));
            assert_eq!(properties::find(&props, properties::PGROUP), Some("TXG"));
            let uniq = properties::find(&props, properties::UNIQ_KEY)
                .unwrap()
                .to_owned();
            let reply = RemotingCommand::response_to(&half, response::SUCCESS).with_header(
                &SendMessageResponseHeader {
                    msg_id: offset_msg_id(store_host, PhysicalOffset(4096)),
                    queue_id: 1,
                    queue_offset: QueueOffset(7),
                    transaction_id: None,
                },
            );
            framed.send(reply).await.unwrap();
            let end = framed.next().await.unwrap().unwrap();
            assert_eq!(end.code, request::END_TRANSACTION);
            assert!(end.is_oneway());
            let e: EndTransactionRequestHeader = end.header().unwrap();
            assert_eq!(
                e.decision(),
                Some(protocol::message::TransactionType::Commit)
            );
            assert_eq!(e.commit_log_offset, PhysicalOffset(4096));
            assert_eq!(e.tran_state_table_offset, QueueOffset(7));
            assert_eq!(
                (e.producer_group.as_str(), e.msg_id.as_str()),
                ("TXG", uniq.as_str())
            );
            assert!(!e.from_transaction_check);
        });
        let client = Client::new("127.0.0.1:1", Duration::from_secs(5));
        let peer = Peer::Broker(addr.to_string());
        let to = SendTo {
            broker: &peer,
            queue_id: 1,
            producer_group: "TXG",
        };
        let sent = client
            .send(to, &OutgoingMessage::new("T", &b"half"[..]), true)
            .await
            .unwrap();
        assert_eq!(sent.status, SendStatus::SendOk);
        client
            .end_transaction(&peer, "TXG", &sent, true)
            .await
            .unwrap();
        broker.await.unwrap();
    }

    #[test]
    fn transaction_checks_are_answered_with_a_oneway_commit() {
        let check = RemotingCommand::request(
            request::CHECK_TRANSACTION_STATE,
            &CheckTransactionStateRequestHeader {
                tran_state_table_offset: QueueOffset(3),
                commit_log_offset: PhysicalOffset(99),
                msg_id: Some("UNIQ".into()),
                transaction_id: Some("TX".into()),
                offset_msg_id: None,
                bname: None,
            },
        );
        let answer = answer_transaction_check(&check, "TXG", true).unwrap();
        assert!(answer.is_oneway());
        let e: EndTransactionRequestHeader = answer.header().unwrap();
        assert!(e.from_transaction_check);
        assert_eq!(
            (e.commit_log_offset, e.msg_id.as_str()),
            (PhysicalOffset(99), "UNIQ")
        );
        assert_eq!(
            e.commit_or_rollback,
            MessageSysFlag::TRANSACTION_COMMIT_TYPE
        );
        let other = RemotingCommand::bare_request(request::NOTIFY_CONSUMER_IDS_CHANGED);
        assert!(answer_transaction_check(&other, "TXG", true).is_none());
    }
}
