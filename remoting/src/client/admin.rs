//! Broker admin calls (`AdminBrokerProcessor` on the other side): topics, subscription
//! groups, runtime info and configuration, consumer connections and statistics.

use std::collections::BTreeMap;

use protocol::RemotingCommand;
use protocol::body::{KvTable, MessageQueue, TopicConfig, TopicConfigSerializeWrapper};
use protocol::code::request;
use protocol::header::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
};

use super::bodies::{
    ConsumeStats, ConsumerConnection, SubscriptionGroupConfig, SubscriptionGroupTable, TopicOffset,
    decode_consume_stats, decode_topic_stats,
};
use super::{Client, Peer, Result, bad_body, json_body};

/// The template topic UPDATE_AND_CREATE_TOPIC names (`TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub const DEFAULT_TOPIC: &str = "TBW102";

/// Parses `key=value` lines (`MixAll.string2Properties`): blank lines and `#` comments
/// are skipped, the first `=` splits.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

impl Client {
    /// UPDATE_AND_CREATE_TOPIC: creates the topic or replaces its config on `broker`.
    pub async fn create_topic(&self, broker: &Peer, config: &TopicConfig) -> Result<()> {
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: DEFAULT_TOPIC.to_owned(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: config.topic_filter_type.name().to_owned(),
            topic_sys_flag: Some(config.topic_sys_flag),
            order: config.order,
            attributes: protocol::body::topic_config::attributes_header(&config.attributes),
        };
        self.call_ok(
            broker,
            RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC, &header),
        )
        .await
        .map(drop)
    }

    pub async fn delete_topic_in_broker(&self, broker: &Peer, topic: &str) -> Result<()> {
        self.call_ok(
            broker,
            RemotingCommand::request(
                request::DELETE_TOPIC_IN_BROKER,
                &DeleteTopicRequestHeader {
                    topic: topic.to_owned(),
                },
            ),
        )
        .await
        .map(drop)
    }

    /// GET_ALL_TOPIC_CONFIG: every topic config `broker` holds.
    pub async fn topic_configs(&self, broker: &Peer) -> Result<TopicConfigSerializeWrapper> {
        let code = request::GET_ALL_TOPIC_CONFIG;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        json_body(broker, code, "TopicConfigSerializeWrapper", &reply)
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
    pub async fn create_group(
        &self,
        broker: &Peer,
        config: &SubscriptionGroupConfig,
    ) -> Result<()> {
        let cmd = RemotingCommand::bare_request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(protocol::body::encode(config));
        self.call_ok(broker, cmd).await.map(drop)
    }

    pub async fn delete_group(
        &self,
        broker: &Peer,
        group: &str,
        remove_offset: bool,
    ) -> Result<()> {
        self.call_ok(
            broker,
            RemotingCommand::request(
                request::DELETE_SUBSCRIPTIONGROUP,
                &DeleteSubscriptionGroupRequestHeader {
                    group_name: group.to_owned(),
                    remove_offset,
                },
            ),
        )
        .await
        .map(drop)
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
    pub async fn groups(&self, broker: &Peer) -> Result<SubscriptionGroupTable> {
        let code = request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        json_body(broker, code, "SubscriptionGroupWrapper", &reply)
    }

    /// GET_BROKER_RUNTIME_INFO as name → value.
    pub async fn runtime_info(&self, broker: &Peer) -> Result<BTreeMap<String, String>> {
        let code = request::GET_BROKER_RUNTIME_INFO;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        let table: KvTable = json_body(broker, code, "KVTable", &reply)?;
        Ok(table.table)
    }

    /// GET_BROKER_CONFIG as key → value.
    pub async fn broker_config(&self, broker: &Peer) -> Result<BTreeMap<String, String>> {
        let code = request::GET_BROKER_CONFIG;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        let text = std::str::from_utf8(&reply.body)
            .map_err(|e| bad_body(broker, code, "properties text", e))?;
        Ok(parse_properties(text))
    }

    /// UPDATE_BROKER_CONFIG with `key=value` lines; the broker decides which keys it allows.
    pub async fn update_broker_config(
        &self,
        broker: &Peer,
        entries: &[(String, String)],
    ) -> Result<Option<String>> {
        let body: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let cmd = RemotingCommand::bare_request(request::UPDATE_BROKER_CONFIG)
            .with_body(body.into_bytes());
        // The remark says whether the change was kept in the broker's config file.
        Ok(self.call_ok(broker, cmd).await?.remark)
    }

    /// UPDATE_BROKER_CONFIG with a properties text the caller rendered (the operator
    /// escapes keys and values as `java.util.Properties` reads them).
    pub async fn update_broker_config_text(&self, broker: &Peer, text: String) -> Result<()> {
        let cmd = RemotingCommand::bare_request(request::UPDATE_BROKER_CONFIG)
            .with_body(text.into_bytes());
        self.call_ok(broker, cmd).await.map(drop)
    }

    /// GET_CONSUMER_CONNECTION_LIST; CONSUMER_NOT_ONLINE when no client of the group is
    /// connected to `broker`.
    pub async fn consumer_connections(
        &self,
        broker: &Peer,
        group: &str,
    ) -> Result<ConsumerConnection> {
        let code = request::GET_CONSUMER_CONNECTION_LIST;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetConsumerConnectionListRequestHeader {
                        consumer_group: group.to_owned(),
                    },
                ),
            )
            .await?;
        json_body(broker, code, "ConsumerConnection", &reply)
    }

    /// GET_TOPIC_STATS_INFO: min/max offset and last store time per queue.
    pub async fn topic_stats(
        &self,
        broker: &Peer,
        topic: &str,
    ) -> Result<Vec<(MessageQueue, TopicOffset)>> {
        let code = request::GET_TOPIC_STATS_INFO;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetTopicStatsInfoRequestHeader {
                        topic: topic.to_owned(),
                    },
                ),
            )
            .await?;
        decode_topic_stats(&reply.body).map_err(|e| bad_body(broker, code, "TopicStatsTable", e))
    }

    /// GET_CONSUME_STATS: per-queue broker and consumer offsets of `group` (on `topic`
    /// only, when given).
    pub async fn consume_stats(
        &self,
        broker: &Peer,
        group: &str,
        topic: Option<&str>,
    ) -> Result<ConsumeStats> {
        let code = request::GET_CONSUME_STATS;
        let reply = self
            .call_ok(
                broker,
                RemotingCommand::request(
                    code,
                    &GetConsumeStatsRequestHeader {
                        consumer_group: group.to_owned(),
                        topic: topic.map(str::to_owned),
                    },
                ),
            )
            .await?;
        decode_consume_stats(&reply.body).map_err(|e| bad_body(broker, code, "ConsumeStats", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_text_parses_like_java() {
        let p = parse_properties(
            "# comment\nflushDiskType=ASYNC_FLUSH\n\nnamesrvAddr=a:1;b:2\nbad line\nk = v=w\n",
        );
        assert_eq!(
            p.get("flushDiskType").map(String::as_str),
            Some("ASYNC_FLUSH")
        );
        assert_eq!(p.get("namesrvAddr").map(String::as_str), Some("a:1;b:2"));
        assert_eq!(p.get("k").map(String::as_str), Some("v=w"));
        assert_eq!(p.len(), 3);
    }
}
