//! The facts dispatch extracts from one CommitLog record (`DispatchRequest`, built by
//! `CommitLog.checkMessageAndReturnSize`), borrowed from the mapped bytes.

use protocol::message::properties::{self, DELAY, KEYS, TAGS, UNIQ_KEY};
use protocol::message::tag::tags_code;
use protocol::message::{PhysicalOffset, QueueOffset, RecordView, TransactionType};

use crate::config::DelayLevels;

/// `TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`: its units carry the deliver time as tagsCode.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

#[derive(Debug, Clone, Copy)]
pub struct DispatchRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub queue_offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    pub size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub transaction_type: TransactionType,
    pub keys: Option<&'a str>,
    pub uniq_key: Option<&'a str>,
    pub properties: &'a str,
}

impl<'a> DispatchRequest<'a> {
    pub fn from_record(view: &RecordView<'a>, delay_levels: &DelayLevels) -> Self {
        let properties = view.properties();
        let store_timestamp = view.store_timestamp();
        let topic = view.topic();
        // One pass over the properties; a repeated name keeps its last value (Java HashMap).
        let (mut tags, mut keys, mut uniq_key, mut delay) = (None, None, None, None);
        for (name, value) in properties::iter(properties) {
            match name {
                TAGS => tags = Some(value),
                KEYS => keys = Some(value),
                UNIQ_KEY => uniq_key = Some(value),
                DELAY => delay = Some(value),
                _ => {}
            }
        }
        let mut tags_code = tags.map_or(0, tags_code);
        if topic == SCHEDULE_TOPIC {
            // CommitLog.checkMessageAndReturnSize: level clamped to the max, only if > 0.
            if let Some(level) = delay.and_then(|l| l.parse::<i32>().ok()) {
                let level = level.min(delay_levels.max_level());
                if level > 0 {
                    tags_code = delay_levels.deliver_timestamp(level, store_timestamp);
                }
            }
        }
        Self {
            topic,
            queue_id: view.queue_id(),
            queue_offset: view.queue_offset(),
            physical_offset: view.physical_offset(),
            size: view.total_size() as i32,
            tags_code,
            store_timestamp,
            transaction_type: view.sys_flag().transaction_type(),
            keys,
            uniq_key,
            properties,
        }
    }

    /// Only NOT and COMMIT records get a ConsumeQueue unit.
    pub fn goes_to_consume_queue(&self) -> bool {
        matches!(
            self.transaction_type,
            TransactionType::Not | TransactionType::Commit
        )
    }
}
