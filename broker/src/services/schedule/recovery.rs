//! Restart without duplicates. `delayOffset.json` is written periodically, so after a
//! crash (SIGKILL, power loss) a level's stored offset may lag the deliveries made since
//! it was last written; RocketMQ delivers those again. Here, before a level starts, the
//! units from its stored offset are checked: a unit was delivered when its real queue
//! holds a copy naming the unit's own record (`DELAY_PARKED_OFFSET` equal to the parked
//! record's CommitLog offset, a property only the broker writes). The copy is looked
//! up through the index under the parked record's `UNIQ_KEY`, the only key the index
//! has; the key narrows the search and never decides, so another message sharing it
//! (a producer re-sending one `Message` object) is not taken for the copy. A parked
//! record without `UNIQ_KEY`, or whose copy hides behind more than
//! [`LOOKUP_MAX`] records under its key, is delivered again (as 4.9 would), never lost.
//! Deliveries happen in queue order, so the delivered units are a prefix and the check
//! stops at the first one without a copy.

use std::time::{Duration, Instant};

use protocol::message::properties::{self, UNIQ_KEY};
use protocol::message::{QueueOffset, record};

use super::delivery;
use crate::names::SCHEDULE_TOPIC;
use crate::services::Broker;
use crate::services::put_path::BrokerStore;

/// How long to wait for the store to index what recovery re-dispatches.
const DISPATCH_WAIT: Duration = Duration::from_secs(60);
/// At most this many units per level are checked (a flush interval's worth is plenty).
const MAX_CHECKED: usize = 1_000_000;
const STEP: usize = 1024;
/// Records under one `UNIQ_KEY` looked at for a unit's copy.
const LOOKUP_MAX: usize = 64;

/// Waits until the store has dispatched the whole CommitLog (ConsumeQueues and index
/// rebuilt after an unclean stop), so [`skip_delivered`] sees every earlier copy.
pub async fn wait_for_dispatch(broker: &Broker) {
    let deadline = Instant::now() + DISPATCH_WAIT;
    while broker.store.dispatch_behind_bytes() > 0 && Instant::now() < deadline {
        tokio::select! {
            _ = broker.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

/// The first offset of `level` from `from` whose message has not been delivered yet.
pub fn skip_delivered(store: &BrokerStore, level: i32, from: QueueOffset) -> QueueOffset {
    let mut offset = from;
    let mut checked = 0;
    while checked < MAX_CHECKED {
        let units = store.queue_units(SCHEDULE_TOPIC, level - 1, offset, STEP);
        if units.is_empty() {
            break;
        }
        for unit in &units {
            if !already_delivered(store, unit.physical_offset) {
                log_skipped(level, from, offset);
                return offset;
            }
            offset = QueueOffset(unit.offset.get() + 1);
        }
        checked += units.len();
    }
    log_skipped(level, from, offset);
    offset
}

fn log_skipped(level: i32, from: QueueOffset, to: QueueOffset) {
    if to != from {
        tracing::info!(
            level,
            from = from.get(),
            to = to.get(),
            "delayed messages already delivered before the restart skipped"
        );
    }
}

fn already_delivered(store: &BrokerStore, parked_at: protocol::message::PhysicalOffset) -> bool {
    let Some(stored) = store.view_message(parked_at) else {
        return false;
    };
    let Ok(parked) = record::decode(&stored, false) else {
        return false;
    };
    let props = parked.properties();
    let (Some(uniq), Some((topic, queue_id))) = (
        properties::find(props, UNIQ_KEY),
        delivery::real_destination(props),
    ) else {
        return false;
    };
    let parked_time = parked.store_timestamp();
    // Index entries keep their time in whole seconds from the file's start: look from
    // a little earlier and compare exact store times below.
    store
        .query_message(
            topic,
            uniq,
            LOOKUP_MAX,
            parked_time.saturating_sub(2_000),
            i64::MAX,
        )
        .messages
        .iter()
        .filter_map(|copy| record::decode(copy, false).ok())
        .any(|copy| {
            copy.topic() == topic
                && copy.queue_id() == queue_id
                && copy.store_timestamp() >= parked_time
                && copy.physical_offset() > parked.physical_offset()
                && delivery::parked_offset(copy.properties()) == Some(parked.physical_offset())
        })
}
