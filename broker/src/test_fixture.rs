//! A broker over an in-memory store ([`store::mem::MemStore`]) with its metadata files in
//! a temporary directory, for unit tests of handlers and services that need the whole
//! state; [`broker_on_files`] and [`broker_with_fs`] put it over the file store for tests
//! of what reaches the disk.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use protocol::message::{MessageSysFlag, PhysicalOffset, QueueOffset, record};
use store::commitlog::BrokerMessage;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::services::Broker;
use crate::services::clients::Channel;
use crate::services::clients::Conn;
use crate::services::filter::MessageFilter;
use crate::services::put_path::BrokerStore;

/// A broker rooted at `dir` over an in-memory store; `extra` is more broker.conf text.
pub fn broker(dir: &Path, extra: &str) -> Arc<Broker> {
    let config = config(dir, extra);
    let store: Arc<BrokerStore> =
        Arc::new(store::mem::MemStore::new(config.store.clone()).unwrap());
    Broker::open(config, store, Arc::new(Metrics::new())).unwrap()
}

/// [`broker`] over the file store (8 MiB CommitLog files).
pub fn broker_on_files(dir: &Path, extra: &str) -> Arc<Broker> {
    broker_with_fs(dir, extra, Arc::new(store::fs::OsFs))
}

fn config(dir: &Path, extra: &str) -> Config {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=8388608\n{extra}",
        dir.display()
    );
    Config::from_properties(&text).unwrap()
}

/// [`broker`] with the store and the config files written through `fs` (fault injection).
pub fn broker_with_fs(dir: &Path, extra: &str, fs: Arc<dyn store::fs::StoreFs>) -> Arc<Broker> {
    let config = config(dir, extra);
    let store = store::MessageStore::open_with_fs(config.store.clone(), fs).unwrap();
    let store: Arc<BrokerStore> = Arc::new(store);
    Broker::open(config, store, Arc::new(Metrics::new())).unwrap()
}

/// A client connection to `b`; the receiver sees what the broker pushes to it.
pub fn conn(b: &Broker) -> (Conn, tokio::sync::mpsc::Receiver<protocol::RemotingCommand>) {
    let (outbound, pushed) = tokio::sync::mpsc::channel(16);
    let id = b.next_conn_id();
    let peer = SocketAddr::from(([127, 0, 0, 1], 40000));
    let channel = Channel {
        id,
        peer,
        outbound,
        close: tokio_util::sync::CancellationToken::new(),
    };
    b.clients.add_channel(channel.clone());
    (Conn { id, peer, channel }, pushed)
}

/// Runs `request` through the dispatch table, as a connection does; the answer.
pub async fn dispatch(
    b: &Arc<Broker>,
    conn: &Conn,
    request: protocol::RemotingCommand,
) -> protocol::RemotingCommand {
    crate::dispatch::dispatch(b, conn, request)
        .await
        .expect("an answer")
        .command
}

pub fn message(topic: &str, queue_id: i32, body: &str, properties: String) -> BrokerMessage {
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    BrokerMessage {
        topic: topic.to_owned(),
        queue_id,
        flag: 0,
        body: Bytes::from(body.to_owned()),
        properties,
        sys_flag: MessageSysFlag(0),
        born_timestamp: 1,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        wait_store_msg_ok: true,
    }
}

/// Every record of the queue, whole.
pub fn records(b: &Broker, topic: &str, queue_id: i32) -> Vec<Bytes> {
    let filter = MessageFilter::parse(None, "*", &Default::default()).unwrap();
    let mut out = Vec::new();
    let mut offset = QueueOffset(0);
    loop {
        let got = b
            .store
            .get_message(topic, queue_id, offset, 1000, Some(&filter));
        if got.messages.is_empty() {
            return out;
        }
        offset = got.next_begin_offset;
        out.extend(got.messages);
    }
}

/// `(body, properties)` of every record of the queue.
pub fn bodies(b: &Broker, topic: &str, queue_id: i32) -> Vec<(String, String)> {
    records(b, topic, queue_id)
        .iter()
        .map(|m| {
            let v = record::decode(m, false).unwrap();
            (
                String::from_utf8_lossy(v.body()).into_owned(),
                v.properties().to_owned(),
            )
        })
        .collect()
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A live consumer of `group` subscribing to `topic`.
pub fn subscribe(b: &Broker, group: &str, topic: &str) {
    let data = protocol::body::ConsumerData {
        group_name: group.into(),
        consume_type: protocol::body::ConsumeType::ConsumePassively,
        message_model: protocol::body::MessageModel::Clustering,
        consume_from_where: protocol::body::ConsumeFromWhere::ConsumeFromFirstOffset,
        subscription_data_set: vec![protocol::body::SubscriptionData {
            class_filter_mode: false,
            topic: topic.into(),
            sub_string: "*".into(),
            tags_set: Default::default(),
            code_set: Default::default(),
            sub_version: 1,
            expression_type: "TAG".into(),
        }],
        unit_mode: false,
    };
    let info = crate::services::clients::ClientInfo {
        client_id: format!("{group}@c"),
        language: protocol::LanguageCode::Java,
        version: 409,
        last_update: std::time::Instant::now(),
        access_key: None,
    };
    b.clients
        .register_consumer(&data, b.next_conn_id(), info)
        .expect("consumer registers");
}
