//! Queue and consumer offset calls: max/min offset, offset by timestamp, a group's
//! committed offset.

use protocol::RemotingCommand;
use protocol::code::{request, response};
use protocol::header::{
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader, SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use protocol::message::{ConsumerOffset, QueueOffset};

use super::{Client, Peer, Result, bad_body};

impl Client {
    /// GET_MAX_OFFSET: the offset the next message of the queue will get.
    pub async fn max_offset(
        &self,
        broker: &Peer,
        topic: &str,
        queue_id: i32,
    ) -> Result<QueueOffset> {
        let code = request::GET_MAX_OFFSET;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetMaxOffsetRequestHeader {
                        topic: topic.to_owned(),
                        queue_id,
                        bname: None,
                    },
                ),
            )
            .await?;
        let h: GetMaxOffsetResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, code, "header", e))?;
        Ok(h.offset)
    }

    /// GET_MIN_OFFSET: the oldest offset still stored.
    pub async fn min_offset(
        &self,
        broker: &Peer,
        topic: &str,
        queue_id: i32,
    ) -> Result<QueueOffset> {
        let code = request::GET_MIN_OFFSET;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetMinOffsetRequestHeader {
                        topic: topic.to_owned(),
                        queue_id,
                        bname: None,
                    },
                ),
            )
            .await?;
        let h: GetMinOffsetResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, code, "header", e))?;
        Ok(h.offset)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP with RocketMQ 4.9's rule: the offset whose store time
    /// matches `timestamp_ms`, else the nearer neighbour in time (the older on a tie); the
    /// first message's offset before it, the last message's offset after it.
    pub async fn search_offset(
        &self,
        broker: &Peer,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
    ) -> Result<QueueOffset> {
        let code = request::SEARCH_OFFSET_BY_TIMESTAMP;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &SearchOffsetRequestHeader {
                        topic: topic.to_owned(),
                        queue_id,
                        timestamp: timestamp_ms,
                        bname: None,
                    },
                ),
            )
            .await?;
        let h: SearchOffsetResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, code, "header", e))?;
        Ok(h.offset)
    }

    /// QUERY_CONSUMER_OFFSET; `None` when the group has committed nothing for the queue.
    pub async fn consumer_offset(
        &self,
        broker: &Peer,
        group: &str,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<ConsumerOffset>> {
        let code = request::QUERY_CONSUMER_OFFSET;
        let reply = self
            .call(
                broker,
                RemotingCommand::request(
                    code,
                    &QueryConsumerOffsetRequestHeader {
                        consumer_group: group.to_owned(),
                        topic: topic.to_owned(),
                        queue_id,
                        bname: None,
                    },
                ),
            )
            .await?;
        if reply.code == response::QUERY_NOT_FOUND {
            return Ok(None);
        }
        let reply = super::expect_success(broker, code, reply)?;
        let h: QueryConsumerOffsetResponseHeader = reply
            .header()
            .map_err(|e| bad_body(broker, code, "header", e))?;
        Ok(Some(h.offset))
    }

    /// UPDATE_CONSUMER_OFFSET.
    pub async fn update_consumer_offset(
        &self,
        broker: &Peer,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: ConsumerOffset,
    ) -> Result<()> {
        self.call_ok(
            broker,
            RemotingCommand::request(
                request::UPDATE_CONSUMER_OFFSET,
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: group.to_owned(),
                    topic: topic.to_owned(),
                    queue_id,
                    commit_offset: offset,
                    bname: None,
                },
            ),
        )
        .await
        .map(drop)
    }
}
