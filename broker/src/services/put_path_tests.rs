//! Every put site honours the fence, flush and replica rules.

use std::path::Path;
use std::sync::Arc;

use protocol::RemotingCommand;
use protocol::code::{request as rq, response};
use protocol::header::ConsumerSendMsgBackRequestHeader;
use protocol::message::PhysicalOffset;

use super::*;
use crate::config::Config;
use crate::handlers::Reply;
use crate::metrics::Metrics;
use crate::services::ha::{Ha, HaSettings};
use crate::test_fixture;

/// A broker over a real store with replication state attached (no listener started).
fn broker_with_ha(dir: &Path, conf: &str) -> (Arc<Broker>, Arc<Ha>) {
    let text = format!(
        "storePathRootDir={}\nmappedFileSizeCommitLog=8388608\nhaListenPort=0\nhaSecret=s\n{conf}",
        dir.display()
    );
    let config = Config::from_properties(&text).unwrap();
    let store = Arc::new(store::MessageStore::open(config.store.clone()).unwrap());
    let ha = Ha::new(
        HaSettings::from_config(&config),
        Arc::clone(&store) as _,
        None,
    );
    let broker = Broker::open(config, store, Arc::new(Metrics::new())).unwrap();
    let _ = broker.ha.set(Arc::clone(&ha));
    (broker, ha)
}

fn message(topic: &str) -> BrokerMessage {
    test_fixture::message(
        topic,
        0,
        "payload",
        "UNIQ_KEY\u{1}UK1\u{2}TAGS\u{1}A".into(),
    )
}

async fn send_back(broker: &Arc<Broker>, offset: PhysicalOffset) -> RemotingCommand {
    test_fixture::subscribe(broker, "g", "T");
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: "g".to_owned(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: Some("T".into()),
        unit_mode: false,
        max_reconsume_times: Some(16),
        bname: None,
    };
    let mut request = RemotingCommand::request(rq::CONSUMER_SEND_MSG_BACK, &h);
    request.version = 373;
    match crate::handlers::send_back::consumer_send_msg_back(broker, &request).await {
        Ok(Reply::Response(out)) => out.command,
        other => panic!("no answer: {:?}", other.is_ok()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_master_stores_nothing_on_any_put_site() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, ha) = broker_with_ha(dir.path(), "brokerRole=ASYNC_MASTER\n");
    let stored = broker.put(Put::Message(message("T"))).await;
    assert_eq!(stored.status, PutMessageStatus::PutOk);
    let original = stored.append.unwrap().wrote_offset;
    let end = broker.store.max_phy_offset();

    ha.fence(7);
    for put in [
        Put::Message(message("T")),
        Put::TransactionEnd {
            msg: message("T"),
            prepared: original,
        },
    ] {
        let r = broker.put(put).await;
        assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    }
    // CONSUMER_SEND_MSG_BACK used to write its retry copy on a fenced master.
    let out = send_back(&broker, original).await;
    assert_eq!(out.code, response::SYSTEM_ERROR, "{:?}", out.remark);
    assert_eq!(out.remark.as_deref(), Some("SERVICE_NOT_AVAILABLE"));
    assert_eq!(broker.store.max_phy_offset(), end, "nothing was appended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_back_on_a_sync_master_waits_for_a_slave_like_a_send() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, _ha) = broker_with_ha(dir.path(), "brokerRole=SYNC_MASTER\n");
    let stored = broker.put(Put::Message(message("T"))).await;
    // No slave: stored locally, not replicated.
    assert_eq!(stored.status, PutMessageStatus::SlaveNotAvailable);
    let original = stored.append.unwrap().wrote_offset;
    // 4.9 answers a send-back by the store's and the slave's result; this one used to
    // answer SUCCESS without waiting for any slave.
    let out = send_back(&broker, original).await;
    assert_eq!(out.code, response::SYSTEM_ERROR, "{:?}", out.remark);
    assert_eq!(out.remark.as_deref(), Some("SLAVE_NOT_AVAILABLE"));
}
