//! The in-memory store answers as the file store does: the same puts through the same
//! trait give the same statuses, offsets and records on both.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use protocol::message::{MessageSysFlag, QueueOffset, TransactionType, decode};

use super::MemStore;
use crate::MessageStore;
use crate::api::MessageStoreApi;
use crate::commitlog::tests_support::{config, message};
use crate::commitlog::{BatchItem, BatchMessage, BrokerMessage};
use crate::config::BrokerRole;
use crate::dispatch::{ArrivedMessage, MessageArrivalListener};
use crate::lookup::{GetMessageStatus, MessageFilter};
use crate::put_result::PutMessageStatus;

type Api = dyn MessageStoreApi;

fn tagged(topic: &str, queue_id: i32, n: usize, tags: &str) -> BrokerMessage {
    let mut m = message(topic, queue_id, format!("body {n}").as_bytes());
    m.properties = format!("TAGS\u{1}{tags}\u{2}KEYS\u{1}k{n}\u{2}");
    m
}

fn batch(topic: &str, n: usize) -> BatchMessage {
    let one = message(topic, 0, b"x");
    BatchMessage {
        topic: topic.to_owned(),
        queue_id: 0,
        sys_flag: MessageSysFlag(0),
        born_timestamp: one.born_timestamp,
        born_host: one.born_host,
        store_host: one.store_host,
        reconsume_times: 0,
        wait_store_msg_ok: true,
        items: (0..n)
            .map(|i| BatchItem {
                flag: 0,
                body: format!("item {i}").into_bytes().into(),
                properties: format!("TAGS\u{1}b\u{2}UNIQ_KEY\u{1}u{i}\u{2}"),
            })
            .collect(),
    }
}

struct Tag(i64);

impl MessageFilter for Tag {
    fn matches_consume_queue(&self, tags_code: i64) -> bool {
        tags_code == self.0
    }
}

/// What a sequence of puts and reads shows through the trait, minus store timestamps.
fn observe(store: &dyn MessageStoreApi) -> Vec<String> {
    let mut seen = Vec::new();
    for n in 0..10 {
        let tags = if n % 2 == 0 { "A" } else { "B" };
        let r = store.put_message(&tagged("T", 0, n, tags), ()).wait();
        let a = r.append.unwrap();
        seen.push(format!(
            "{:?} {} {} {}",
            r.status,
            a.wrote_offset,
            a.logics_offset,
            a.msg_id()
        ));
    }
    let b = store.put_messages(&batch("T", 3), ()).wait();
    let a = b.append.unwrap();
    seen.push(format!(
        "{:?} {} {} {}",
        b.status,
        a.logics_offset,
        a.msg_num,
        a.msg_ids()
    ));
    let mut half = tagged("T", 0, 99, "A");
    half.sys_flag = MessageSysFlag(0).with_transaction_type(TransactionType::Prepared);
    let h = store.put_message(&half, ()).wait();
    seen.push(format!(
        "half {:?} {}",
        h.status,
        h.append.unwrap().logics_offset
    ));
    let illegal = store.put_message(&tagged("", 0, 0, "A"), ()).wait();
    seen.push(format!("illegal {:?}", illegal.status));

    let tag_a = Tag(protocol::message::tag::tags_code("A"));
    for (offset, max, filter) in [
        (0, 4, None),
        (3, 32, Some(&tag_a as &dyn MessageFilter)),
        (13, 1, None),
        (14, 1, None),
        (-1, 1, None),
    ] {
        let r = store.get_message("T", 0, QueueOffset(offset), max, filter);
        let bodies: Vec<String> = r
            .messages
            .iter()
            .map(|m| String::from_utf8_lossy(decode(m, true).unwrap().body()).into_owned())
            .collect();
        seen.push(format!(
            "get {offset} {:?} next {} [{}, {}) {bodies:?} {:?}",
            r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.queue_offsets
        ));
    }
    let nowhere = store.get_message("U", 0, QueueOffset(0), 1, None);
    seen.push(format!("missing {:?}", nowhere.status));
    let units = store.queue_units("T", 0, QueueOffset(11), 10);
    seen.push(format!("units {units:?}"));
    let first = units[0].physical_offset;
    let viewed = store.view_message(first).unwrap();
    seen.push(format!(
        "view {}",
        decode(&viewed, true).unwrap().queue_offset()
    ));
    let found = store
        .query_message("T", "k4", 10, 0, i64::MAX)
        .messages
        .len();
    seen.push(format!("query {found}"));
    seen.push(format!(
        "queue [{}, {}) visible {} {}",
        store.min_offset_in_queue("T", 0),
        store.max_offset_in_queue("T", 0),
        store.has_visible_message("T", 0, QueueOffset(12)),
        store.has_visible_message("T", 0, QueueOffset(13)),
    ));
    seen.push(format!("deleted {:?}", store.delete_topic("T").unwrap()));
    seen.push(format!("after {}", store.max_offset_in_queue("T", 0)));
    seen
}

#[test]
fn the_memory_store_answers_as_the_file_store_does() {
    let dir = tempfile::tempdir().unwrap();
    let files = MessageStore::open(config(dir.path(), 1024 * 1024)).unwrap();
    let mem = MemStore::new(config(dir.path(), 1024 * 1024)).unwrap();
    let on_files = observe_waiting(&files, &files);
    assert_eq!(observe(&mem), on_files);
    MessageStoreApi::<()>::shutdown(&files).unwrap();
}

/// [`observe`] on the file store, which indexes in the background: the same steps, each
/// read once dispatch has caught up with the puts before it.
fn observe_waiting(store: &dyn MessageStoreApi, files: &MessageStore) -> Vec<String> {
    let waiting = Waiting {
        inner: store,
        files,
    };
    observe(&waiting)
}

struct Waiting<'a> {
    inner: &'a dyn MessageStoreApi,
    files: &'a MessageStore,
}

impl Waiting<'_> {
    fn caught_up(&self) {
        assert!(
            self.files
                .dispatcher()
                .wait_caught_up(Duration::from_secs(10))
        );
    }
}

impl MessageStoreApi for Waiting<'_> {
    fn put_message(&self, msg: &BrokerMessage, p: ()) -> crate::PutMessageFuture {
        let r = self.inner.put_message(msg, p).wait();
        self.caught_up();
        crate::message_store::PutMessageFuture::ready(r)
    }
    fn put_messages(&self, b: &BatchMessage, p: ()) -> crate::PutMessageFuture {
        let r = self.inner.put_messages(b, p).wait();
        self.caught_up();
        crate::message_store::PutMessageFuture::ready(r)
    }
    fn get_message(
        &self,
        t: &str,
        q: i32,
        o: QueueOffset,
        m: usize,
        f: Option<&dyn MessageFilter>,
    ) -> crate::lookup::GetMessageResult {
        self.inner.get_message(t, q, o, m, f)
    }
    fn max_offset_in_queue(&self, t: &str, q: i32) -> QueueOffset {
        self.inner.max_offset_in_queue(t, q)
    }
    fn min_offset_in_queue(&self, t: &str, q: i32) -> QueueOffset {
        self.inner.min_offset_in_queue(t, q)
    }
    fn has_visible_message(&self, t: &str, q: i32, o: QueueOffset) -> bool {
        self.inner.has_visible_message(t, q, o)
    }
    fn offset_in_queue_by_time(&self, t: &str, q: i32, ts: i64) -> QueueOffset {
        self.inner.offset_in_queue_by_time(t, q, ts)
    }
    fn message_store_time(&self, t: &str, q: i32, o: QueueOffset) -> Option<i64> {
        self.inner.message_store_time(t, q, o)
    }
    fn earliest_message_time(&self, t: &str, q: i32) -> Option<i64> {
        self.inner.earliest_message_time(t, q)
    }
    fn check_in_disk_by_consume_offset(&self, t: &str, q: i32, o: QueueOffset) -> bool {
        self.inner.check_in_disk_by_consume_offset(t, q, o)
    }
    fn query_message(
        &self,
        t: &str,
        k: &str,
        n: usize,
        b: i64,
        e: i64,
    ) -> crate::lookup::QueryMessageResult {
        self.inner.query_message(t, k, n, b, e)
    }
    fn queue_units(&self, t: &str, q: i32, f: QueueOffset, m: usize) -> Vec<crate::QueueUnit> {
        self.inner.queue_units(t, q, f, m)
    }
    fn view_message(&self, o: protocol::message::PhysicalOffset) -> Option<bytes::Bytes> {
        self.inner.view_message(o)
    }
    fn delete_topic(&self, t: &str) -> Result<usize, crate::StoreError> {
        self.inner.delete_topic(t)
    }
    fn dispatch_behind_bytes(&self) -> u64 {
        self.inner.dispatch_behind_bytes()
    }
    fn flush_behind_bytes(&self) -> u64 {
        self.inner.flush_behind_bytes()
    }
    fn out_of_service(&self) -> Option<String> {
        self.inner.out_of_service()
    }
    fn min_phy_offset(&self) -> protocol::message::PhysicalOffset {
        self.inner.min_phy_offset()
    }
    fn max_phy_offset(&self) -> protocol::message::PhysicalOffset {
        self.inner.max_phy_offset()
    }
    fn set_arrival_listener(&self, l: Arc<dyn MessageArrivalListener>) {
        self.inner.set_arrival_listener(l);
    }
    fn shutdown(&self) -> Result<(), crate::StoreError> {
        self.inner.shutdown()
    }
    fn config_fs(&self) -> Arc<dyn crate::fs::StoreFs> {
        self.inner.config_fs()
    }
}

#[derive(Default)]
struct Arrivals(Mutex<Vec<(String, i32, i64, i64)>>);

impl MessageArrivalListener for Arrivals {
    fn arriving(&self, m: &ArrivedMessage<'_>) {
        let entry = (m.topic.to_owned(), m.queue_id, m.max_offset.0, m.tags_code);
        self.0.lock().push(entry);
    }
}

#[test]
fn delayed_messages_go_to_the_schedule_topic_and_arrivals_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemStore::new(config(dir.path(), 1024 * 1024)).unwrap();
    let arrivals = Arc::new(Arrivals::default());
    MessageStoreApi::<()>::set_arrival_listener(&store, arrivals.clone());
    let store: &Api = &store;
    store.put_message(&tagged("T", 2, 0, "A"), ()).wait();
    let mut delayed = tagged("T", 2, 1, "A");
    delayed.properties.push_str("DELAY\u{1}3\u{2}");
    let r = store.put_message(&delayed, ()).wait();
    let stored = store.view_message(r.append.unwrap().wrote_offset).unwrap();
    let view = decode(&stored, true).unwrap();
    assert_eq!(view.topic(), "SCHEDULE_TOPIC_XXXX");
    assert_eq!(view.queue_id(), 2, "level 3 is queue 2");
    let units = store.queue_units("SCHEDULE_TOPIC_XXXX", 2, QueueOffset(0), 10);
    assert_eq!(units.len(), 1);
    assert_eq!(
        units[0].tags_code,
        view.store_timestamp() + 10_000,
        "deliver time of 10s"
    );
    let seen = arrivals.0.lock().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        ("T".to_owned(), 2, 1, protocol::message::tag::tags_code("A"))
    );
    assert_eq!(seen[1].0, "SCHEDULE_TOPIC_XXXX");
}

#[test]
fn a_slave_or_shut_down_store_refuses_puts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1024 * 1024);
    c.broker_role = BrokerRole::Slave;
    let slave = MemStore::new(c).unwrap();
    let r = MessageStoreApi::<()>::put_message(&slave, &tagged("T", 0, 0, "A"), ()).wait();
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    let master = MemStore::new(config(dir.path(), 1024 * 1024)).unwrap();
    let store: &Api = &master;
    store.put_message(&tagged("T", 0, 0, "A"), ()).wait();
    store.shutdown().unwrap();
    let r = store.put_message(&tagged("T", 0, 1, "A"), ()).wait();
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    let got = store.get_message("T", 0, QueueOffset(0), 1, None);
    assert_eq!(got.status, GetMessageStatus::Found, "reads still served");
}
