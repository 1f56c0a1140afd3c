//! Nameserver calls (`DefaultRequestProcessor` on the other side): cluster view, topic
//! routes and lists, topic deletion, KV config.

use protocol::RemotingCommand;
use protocol::body::{ClusterInfo, KvTable, TopicList, TopicRouteData};
use protocol::code::{request, response};
use protocol::header::{
    DeleteKVConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader, GetKVConfigRequestHeader,
    GetKVConfigResponseHeader, GetKVListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, PutKVConfigRequestHeader,
};

use super::{Client, ClientError, Peer, Result, bad_body};

/// A master broker as the cluster view lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerEndpoint {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub addr: String,
}

impl BrokerEndpoint {
    pub fn peer(&self) -> Peer {
        Peer::Broker(self.addr.clone())
    }
}

/// Every broker instance of `info`, ordered by cluster, name and id.
pub fn brokers(info: &ClusterInfo) -> Vec<BrokerEndpoint> {
    let mut out = Vec::new();
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            if let Some(data) = info.broker_addr_table.get(name) {
                for (id, addr) in &data.broker_addrs {
                    out.push(BrokerEndpoint {
                        cluster: cluster.clone(),
                        broker_name: name.clone(),
                        broker_id: *id,
                        addr: addr.clone(),
                    });
                }
            }
        }
    }
    out
}

fn decode_cluster_info(peer: &Peer, reply: &RemotingCommand) -> Result<ClusterInfo> {
    protocol::body::decode(&reply.body)
        .map_err(|e| bad_body(peer, request::GET_BROKER_CLUSTER_INFO, "ClusterInfo", e))
}

/// A route to send on, see [`Client::publish_route`].
#[derive(Debug, Clone)]
pub struct PublishRoute {
    pub route: TopicRouteData,
    /// The topic had no route; this is `TBW102`'s, and the broker is to create the topic.
    pub via_default: bool,
}

impl Client {
    fn namesrv_peer(&self) -> Peer {
        Peer::NameServer(self.namesrv_addrs().join(";"))
    }

    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let reply = self
            .namesrv_call_ok(RemotingCommand::bare_request(
                request::GET_BROKER_CLUSTER_INFO,
            ))
            .await?;
        decode_cluster_info(&self.namesrv_peer(), &reply)
    }

    /// GET_BROKER_CLUSTER_INFO from one nameserver, `namesrv`, whatever the configured
    /// list (the operator asks each nameserver pod it manages in turn).
    pub async fn cluster_info_at(&self, namesrv: &Peer) -> Result<ClusterInfo> {
        let reply = self
            .call_ok(
                namesrv,
                RemotingCommand::bare_request(request::GET_BROKER_CLUSTER_INFO),
            )
            .await?;
        decode_cluster_info(namesrv, &reply)
    }

    /// Master brokers, of `cluster` only when given. An unknown cluster is an error.
    pub async fn master_brokers(&self, cluster: Option<&str>) -> Result<Vec<BrokerEndpoint>> {
        let info = self.cluster_info().await?;
        if let Some(c) = cluster
            && !info.cluster_addr_table.contains_key(c)
        {
            return Err(ClientError::Invalid(format!(
                "cluster {c} is not known to nameserver {} (known: {})",
                self.namesrv_addrs().join(";"),
                info.cluster_addr_table
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(brokers(&info)
            .into_iter()
            .filter(|b| b.broker_id == protocol::body::route::MASTER_ID)
            .filter(|b| cluster.is_none_or(|c| c == b.cluster))
            .collect())
    }

    /// GET_ROUTEINFO_BY_TOPIC; TOPIC_NOT_EXIST when no broker serves the topic.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        let reply = self
            .namesrv_call_ok(RemotingCommand::request(
                request::GET_ROUTEINFO_BY_TOPIC,
                &GetRouteInfoRequestHeader {
                    topic: topic.to_owned(),
                    accept_standard_json_only: None,
                },
            ))
            .await?;
        TopicRouteData::decode(&reply.body).map_err(|e| {
            bad_body(
                &self.namesrv_peer(),
                request::GET_ROUTEINFO_BY_TOPIC,
                "TopicRouteData",
                e,
            )
        })
    }

    /// The route a producer sends `topic` on (`DefaultMQProducerImpl.tryToFindTopicPublishInfo`):
    /// the topic's own route, or, when the nameserver has none and `allow_default`, the
    /// `TBW102` route with each broker's queues capped at the producer's
    /// `defaultTopicQueueNums`; the broker then creates the topic on the first send (when
    /// its `autoCreateTopicEnable` is on). Without a `TBW102` route either, the error says
    /// that the topic must be created first.
    pub async fn publish_route(&self, topic: &str, allow_default: bool) -> Result<PublishRoute> {
        match self.topic_route(topic).await {
            Ok(route) => Ok(PublishRoute {
                route,
                via_default: false,
            }),
            Err(e) if allow_default && e.response_code() == Some(response::TOPIC_NOT_EXIST) => {
                let mut route = match self.topic_route(super::admin::DEFAULT_TOPIC).await {
                    Ok(r) => r,
                    Err(d) if d.response_code() == Some(response::TOPIC_NOT_EXIST) => {
                        return Err(ClientError::Invalid(format!(
                            "topic {topic} does not exist and no broker offers {} to create it from \
                             (autoCreateTopicEnable is off): create it first (rmqctl topic create)",
                            super::admin::DEFAULT_TOPIC
                        )));
                    }
                    Err(d) => return Err(d),
                };
                for q in &mut route.queue_datas {
                    q.read_queue_nums =
                        q.read_queue_nums.min(super::send::DEFAULT_TOPIC_QUEUE_NUMS);
                    q.write_queue_nums = q
                        .write_queue_nums
                        .min(super::send::DEFAULT_TOPIC_QUEUE_NUMS);
                }
                Ok(PublishRoute {
                    route,
                    via_default: true,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// All topic names, or those of `cluster`.
    pub async fn topic_list(&self, cluster: Option<&str>) -> Result<TopicList> {
        let cmd = match cluster {
            Some(c) => RemotingCommand::request(
                request::GET_TOPICS_BY_CLUSTER,
                &GetTopicsByClusterRequestHeader {
                    cluster: c.to_owned(),
                },
            ),
            None => RemotingCommand::bare_request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        };
        let code = cmd.code;
        let reply = self.namesrv_call_ok(cmd).await?;
        protocol::body::decode(&reply.body)
            .map_err(|e| bad_body(&self.namesrv_peer(), code, "TopicList", e))
    }

    /// DELETE_TOPIC_IN_NAMESRV on every nameserver.
    pub async fn delete_topic_in_namesrv(&self, topic: &str, cluster: Option<&str>) -> Result<()> {
        self.namesrv_call_all(RemotingCommand::request(
            request::DELETE_TOPIC_IN_NAMESRV,
            &DeleteTopicFromNamesrvRequestHeader {
                topic: topic.to_owned(),
                cluster_name: cluster.map(str::to_owned),
            },
        ))
        .await
    }

    /// DELETE_TOPIC_IN_NAMESRV on `namesrv` only.
    pub async fn delete_topic_in_namesrv_at(
        &self,
        namesrv: &Peer,
        topic: &str,
        cluster: Option<&str>,
    ) -> Result<()> {
        self.call_ok(
            namesrv,
            RemotingCommand::request(
                request::DELETE_TOPIC_IN_NAMESRV,
                &DeleteTopicFromNamesrvRequestHeader {
                    topic: topic.to_owned(),
                    cluster_name: cluster.map(str::to_owned),
                },
            ),
        )
        .await
        .map(drop)
    }

    pub async fn kv_put(&self, namespace: &str, key: &str, value: &str) -> Result<()> {
        self.namesrv_call_all(RemotingCommand::request(
            request::PUT_KV_CONFIG,
            &PutKVConfigRequestHeader {
                namespace: namespace.to_owned(),
                key: key.to_owned(),
                value: value.to_owned(),
            },
        ))
        .await
    }

    /// The value of `namespace`/`key`; `None` when the nameserver has none (QUERY_NOT_FOUND).
    pub async fn kv_get(&self, namespace: &str, key: &str) -> Result<Option<String>> {
        let cmd = RemotingCommand::request(
            request::GET_KV_CONFIG,
            &GetKVConfigRequestHeader {
                namespace: namespace.to_owned(),
                key: key.to_owned(),
            },
        );
        match self.namesrv_call_ok(cmd).await {
            Ok(reply) => {
                let h: GetKVConfigResponseHeader = reply.header().map_err(|e| {
                    bad_body(&self.namesrv_peer(), request::GET_KV_CONFIG, "header", e)
                })?;
                Ok(h.value)
            }
            Err(e) if e.response_code() == Some(response::QUERY_NOT_FOUND) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn kv_delete(&self, namespace: &str, key: &str) -> Result<()> {
        self.namesrv_call_all(RemotingCommand::request(
            request::DELETE_KV_CONFIG,
            &DeleteKVConfigRequestHeader {
                namespace: namespace.to_owned(),
                key: key.to_owned(),
            },
        ))
        .await
    }

    /// Every key of `namespace`; empty when the namespace has none.
    pub async fn kv_list(&self, namespace: &str) -> Result<KvTable> {
        let cmd = RemotingCommand::request(
            request::GET_KVLIST_BY_NAMESPACE,
            &GetKVListByNamespaceRequestHeader {
                namespace: namespace.to_owned(),
            },
        );
        match self.namesrv_call_ok(cmd).await {
            Ok(reply) => protocol::body::decode(&reply.body).map_err(|e| {
                bad_body(
                    &self.namesrv_peer(),
                    request::GET_KVLIST_BY_NAMESPACE,
                    "KVTable",
                    e,
                )
            }),
            Err(e) if e.response_code() == Some(response::QUERY_NOT_FOUND) => {
                Ok(KvTable::default())
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brokers_flatten_the_cluster_view() {
        let info: ClusterInfo = protocol::body::decode(
            br#"{"brokerAddrTable":{"b1":{"cluster":"C","brokerName":"b1","brokerAddrs":{0:"h:1",1:"h:2"}}},
                "clusterAddrTable":{"C":["b1","missing"]}}"#,
        )
        .unwrap();
        let all = brokers(&info);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].addr, "h:1");
        assert_eq!((all[1].broker_id, all[1].cluster.as_str()), (1, "C"));
    }
}
