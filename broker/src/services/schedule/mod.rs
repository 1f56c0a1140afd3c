//! The delay-level schedule service (`ScheduleMessageService`). The store parks a message with `DELAY` = n in `SCHEDULE_TOPIC_XXXX` queue n−1
//! with its deliver time as the unit's tagsCode. One task per level walks that queue
//! from the level's offset and, for every unit that is due, stores the message in its
//! `REAL_TOPIC` / `REAL_QID`; a level's queue is in deliver-time order, so the walk
//! stops at the first unit not yet due. Progress per level lives in `delayOffset.json`,
//! written every `flushDelayOffsetInterval` and at shutdown; after an unclean stop the
//! deliveries the file had not caught up with are found again through the index
//! (see [`recovery`]) so they are not delivered twice.
//!
//! # What pauses a level, and what is passed over
//!
//! A level's walk never stops for good at one unit. When the store cannot take the copy
//! for its own reasons (not writable, page cache busy, a slave or fenced master, a file
//! it could not create: [`PutMessageStatus::refuses_the_record`] is false) the level pauses and
//! retries the same unit, as passing it would lose the message. A unit that can never be
//! delivered is passed over, counted in `rocketmq_broker_schedule_skipped_total{reason}`
//! and logged (rate-limited, `crate::metrics::skips`):
//!
//! * `unreadable`: the unit points at no valid record (the CommitLog file went with
//!   retention, or the bytes are not a record);
//! * `no_destination`: the record has no usable `REAL_TOPIC` / `REAL_QID`;
//! * `half_message`: its real topic is the transaction half topic (4.9 drops these too);
//! * `put_refused`: the store refuses the copy for what it is (a body over a
//!   since-lowered `maxMessageSize`, properties over the limit), which no retry changes.
//!   RocketMQ 4.9's timer task retries such a put for ever and so stops the level; its
//!   later asynchronous delivery (`PutResultProcess.need2Skip`) passes it after a few
//!   resends. The parked record stays in `SCHEDULE_TOPIC_XXXX` until retention, and the
//!   log line names its CommitLog offset.

pub mod delivery;
pub mod recovery;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use protocol::message::{QueueOffset, record};
use store::config::DelayLevels;
use store::config_files::{ConfigFile, ConfigFileError, DelayOffsetTable, delay_offset_path};

use crate::names::SCHEDULE_TOPIC;
use crate::services::Broker;
use crate::services::put_path::BrokerStore;
use store::{PutMessageStatus, QueueUnit};

/// `TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`: half messages are never delivered from here.
const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Units read per round; the offset is published after each round.
const BATCH: usize = 1024;
/// `DELAY_FOR_A_WHILE`: re-check an empty level, or retry after a failed store.
const RECHECK: Duration = Duration::from_millis(100);

/// The level table and each level's next offset in `SCHEDULE_TOPIC_XXXX`.
pub struct ScheduleService {
    levels: DelayLevels,
    offsets: Mutex<BTreeMap<i32, QueueOffset>>,
    dirty: AtomicBool,
    file: ConfigFile,
}

/// What became of one due unit.
enum Outcome {
    Delivered,
    /// The unit can never be delivered; move on.
    Skipped(Skip),
    /// The store could not take the copy now; try the same unit again later.
    Retry(PutMessageStatus),
}

/// Why a unit was passed over (see the module docs); `label` is the metric's reason.
#[derive(Debug, Clone, Copy)]
enum Skip {
    Unreadable,
    NoDestination,
    HalfMessage,
    PutRefused(PutMessageStatus),
}

impl Skip {
    fn label(self) -> &'static str {
        match self {
            Self::Unreadable => "unreadable",
            Self::NoDestination => "no_destination",
            Self::HalfMessage => "half_message",
            Self::PutRefused(_) => "put_refused",
        }
    }

    fn describe(self) -> String {
        match self {
            Self::Unreadable => "no valid record at its CommitLog offset".to_owned(),
            Self::NoDestination => "the parked record has no usable REAL_TOPIC/REAL_QID".to_owned(),
            Self::HalfMessage => "its real topic is the transaction half topic".to_owned(),
            Self::PutRefused(status) => {
                format!("the store refuses its copy for the real topic ({status:?})")
            }
        }
    }
}

impl ScheduleService {
    /// Loads `delayOffset.json` (or its backup) below `store_root`.
    pub fn open(store_root: &Path, levels: DelayLevels) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(delay_offset_path(store_root));
        let table: DelayOffsetTable = file.load()?;
        Ok(Self {
            levels,
            offsets: Mutex::new(table.offset_table),
            dirty: AtomicBool::new(false),
            file,
        })
    }

    pub fn max_level(&self) -> i32 {
        self.levels.max_level()
    }

    /// Replaces the offsets held with `delayOffset.json`'s, where they are further: what
    /// a slave promoted at runtime starts from (its metadata sync wrote the master's
    /// offsets to the file, not to this table).
    pub fn reload(&self) -> Result<(), ConfigFileError> {
        let table: DelayOffsetTable = self.file.load()?;
        let mut offsets = self.offsets.lock();
        for (level, offset) in table.offset_table {
            let held = offsets.entry(level).or_insert(offset);
            if offset > *held {
                *held = offset;
                self.dirty.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// The level's delay in milliseconds.
    pub fn delay_ms(&self, level: i32) -> i64 {
        self.levels.deliver_timestamp(level, 0)
    }

    pub fn offset(&self, level: i32) -> QueueOffset {
        self.offsets
            .lock()
            .get(&level)
            .copied()
            .unwrap_or(QueueOffset(0))
    }

    fn set_offset(&self, level: i32, offset: QueueOffset) {
        let previous = self.offsets.lock().insert(level, offset);
        if previous != Some(offset) {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// The offset table (GET_ALL_DELAY_OFFSET's body shape).
    pub fn table(&self) -> DelayOffsetTable {
        DelayOffsetTable {
            offset_table: self.offsets.lock().clone(),
        }
    }

    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.dirty.store(false, Ordering::Release);
        let table = self.table();
        self.file.persist(&table).inspect_err(|_| {
            self.dirty.store(true, Ordering::Release);
        })
    }

    pub fn persist_if_dirty(&self) -> Result<(), ConfigFileError> {
        if self.dirty.load(Ordering::Acquire) {
            self.persist()
        } else {
            Ok(())
        }
    }

    /// Messages parked per level and not delivered yet: `(level, count)`.
    pub fn waiting(&self, store: &BrokerStore) -> Vec<(i32, i64)> {
        (1..=self.max_level())
            .map(|level| {
                let max = store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1).get();
                (level, (max - self.offset(level).get()).max(0))
            })
            .collect()
    }

    /// `correctDelayOffset`: an offset outside the queue's `[min, max]` (files lost or
    /// expired, a foreign delayOffset.json) is pulled back into it.
    fn correct_offsets(&self, store: &BrokerStore) {
        for level in 1..=self.max_level() {
            let queue_id = level - 1;
            let min = store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id);
            let max = store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id);
            let current = self.offset(level);
            let corrected = QueueOffset(current.get().clamp(min.get(), max.get().max(min.get())));
            if corrected != current {
                tracing::warn!(
                    level,
                    from = current.get(),
                    to = corrected.get(),
                    "delay offset corrected into the queue's range"
                );
            }
            self.set_offset(level, corrected);
        }
    }
}

/// Runs the schedule service until shutdown: one task per level plus the periodic
/// persistence of `delayOffset.json`. The caller persists once more after it returns.
pub async fn run(broker: Arc<Broker>) {
    // As in RocketMQ, only a master delivers; a slave's copies arrive by replication.
    // A slave promoted at runtime starts delivering from the offsets it synced from
    // its master (`delayOffset.json`, written by the metadata sync).
    let began_as_slave = !broker.acts_as_master();
    if !broker.until_master().await {
        return;
    }
    if began_as_slave && let Err(e) = broker.schedule.reload() {
        tracing::error!(error = %e, "cannot read the synced delayOffset.json; delivering from the offsets held");
    }
    recovery::wait_for_dispatch(&broker).await;
    broker.schedule.correct_offsets(broker.store.as_ref());
    let mut tasks = Vec::new();
    for level in 1..=broker.schedule.max_level() {
        tasks.push(tokio::spawn(run_level(Arc::clone(&broker), level)));
    }
    let period = Duration::from_millis(broker.config.store.flush_delay_offset_interval.max(100));
    loop {
        tokio::select! {
            _ = broker.shutdown.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
        let b = Arc::clone(&broker);
        let result = tokio::task::spawn_blocking(move || b.schedule.persist_if_dirty()).await;
        if let Ok(Err(e)) = result {
            tracing::error!(error = %e, "cannot persist delayOffset.json");
        }
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn run_level(broker: Arc<Broker>, level: i32) {
    let svc = &broker.schedule;
    let store = broker.store.as_ref();
    let queue_id = level - 1;
    let delay_ms = svc.delay_ms(level);
    let mut offset = recovery::skip_delivered(store, level, svc.offset(level));
    svc.set_offset(level, offset);
    loop {
        if broker.shutdown.is_cancelled() {
            return;
        }
        if !broker.acts_as_master() {
            // Demoted or fenced: the new master delivers. Back as master, skip what was
            // delivered meanwhile (its copies carry the parked record's offset).
            if !broker.until_master().await {
                return;
            }
            if let Err(e) = svc.reload() {
                tracing::warn!(level, error = %e, "cannot read the synced delayOffset.json");
            }
            offset = recovery::skip_delivered(store, level, svc.offset(level).max(offset));
            svc.set_offset(level, offset);
        }
        let units = store.queue_units(SCHEDULE_TOPIC, queue_id, offset, BATCH);
        let mut pause = None;
        if units.is_empty() {
            let min = store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id);
            if offset < min {
                // Retention removed the files under the offset.
                tracing::warn!(
                    level,
                    from = offset.get(),
                    to = min.get(),
                    "delay offset below the queue minimum"
                );
                offset = min;
                svc.set_offset(level, offset);
                continue;
            }
            pause = Some(RECHECK);
        }
        let now = crate::now_ms();
        let mut delivered = 0u64;
        for unit in &units {
            let deliver_at = delivery::correct_deliver_timestamp(now, unit.tags_code, delay_ms);
            if deliver_at > now {
                let wait = Duration::from_millis((deliver_at - now) as u64);
                pause = Some(wait.min(RECHECK));
                break;
            }
            match deliver(&broker, unit).await {
                Outcome::Delivered => delivered += 1,
                Outcome::Skipped(why) => broker.metrics.skips.schedule.record(
                    why.label(),
                    format_args!(
                        "delayed message of level {level} at offset {} (CommitLog offset {}) not delivered: {}",
                        unit.offset.get(),
                        unit.physical_offset.get(),
                        why.describe()
                    ),
                ),
                Outcome::Retry(status) => {
                    tracing::warn!(
                        level,
                        offset = unit.offset.get(),
                        ?status,
                        "delayed message not stored, retrying"
                    );
                    pause = Some(RECHECK);
                    break;
                }
            }
            offset = QueueOffset(unit.offset.get() + 1);
        }
        svc.set_offset(level, offset);
        if delivered > 0 {
            broker.metrics.record_delay_delivered(level, delivered);
        }
        match pause {
            Some(wait) => {
                tokio::select! {
                    _ = broker.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            None => tokio::task::yield_now().await,
        }
    }
}

async fn deliver(broker: &Broker, unit: &QueueUnit) -> Outcome {
    let Some(stored) = broker.store.view_message(unit.physical_offset) else {
        return Outcome::Skipped(Skip::Unreadable);
    };
    let Ok(view) = record::decode(&stored, false) else {
        return Outcome::Skipped(Skip::Unreadable);
    };
    let Some(copy) = delivery::copy_for_real_topic(&view, &stored) else {
        return Outcome::Skipped(Skip::NoDestination);
    };
    if copy.topic == TRANS_HALF_TOPIC {
        return Outcome::Skipped(Skip::HalfMessage);
    }
    let status = broker
        .put(crate::services::put_path::Put::Message(copy))
        .await
        .status;
    if status.is_stored() {
        Outcome::Delivered
    } else if status.refuses_the_record() {
        Outcome::Skipped(Skip::PutRefused(status))
    } else {
        Outcome::Retry(status)
    }
}

#[cfg(test)]
mod tests;
