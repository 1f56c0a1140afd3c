//! Everything the store derives from the CommitLog: ConsumeQueues, IndexFiles, the reput
//! thread that builds them and the ConsumeQueue flush thread (the logic half of RocketMQ's
//! `DefaultMessageStore`). `MessageStore` drives it through open → recover →
//! truncate_dirty → start → shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use protocol::message::{PhysicalOffset, QueueOffset};

use super::commitlog_reader::CommitLogReader;
use super::listener::MessageArrivalListener;
use super::reput::dispatch_available;
use super::topic_delete::DeletedTopics;
use crate::checkpoint::StoreCheckpoint;
use crate::config::{DelayLevels, MessageStoreConfig};
use crate::consume_queue::ConsumeQueueTable;
use crate::error::StoreError;
use crate::index::{IndexConfig, IndexService};

/// State shared by the dispatcher handle, the reput thread and the read path.
pub(crate) struct Shared {
    pub(crate) config: MessageStoreConfig,
    pub(crate) delay_levels: DelayLevels,
    pub(crate) commit_log: Arc<dyn CommitLogReader>,
    pub(crate) checkpoint: Arc<StoreCheckpoint>,
    pub(crate) consume_queues: ConsumeQueueTable,
    pub(crate) index: IndexService,
    pub(crate) index_enabled: bool,
    pub(crate) listener: RwLock<Option<Arc<dyn MessageArrivalListener>>>,
    pub(crate) running: AtomicBool,
    reput_offset: AtomicI64,
    /// Units whose record ends beyond this are not served (confirm offset visibility).
    pub(crate) visible_limit: AtomicI64,
    /// Deleted topics and the CommitLog end at their deletion; see `topic_delete`. Also
    /// the gate every ConsumeQueue put holds, so a deletion never interleaves with one.
    pub(crate) deleted_topics: Mutex<DeletedTopics>,
    /// Set while a record cannot be dispatched (see `reput`'s failure policy); the store
    /// refuses puts meanwhile.
    dispatch_failing: AtomicBool,
    dispatch_failure: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn reput_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.reput_offset.load(Ordering::Acquire))
    }

    pub(crate) fn publish_reput_offset(&self, offset: PhysicalOffset) {
        self.reput_offset.store(offset.0, Ordering::Release);
    }

    pub(crate) fn report_dispatch_failure(&self, offset: PhysicalOffset, reason: String) {
        let text = format!("record at {offset} cannot be indexed: {reason}");
        if !self.dispatch_failing.swap(true, Ordering::AcqRel) {
            tracing::error!(%offset, %reason, "dispatch stopped at a record it cannot index; refusing puts until it succeeds (free disk space or fix the consumequeue/index directory)");
        }
        *self.dispatch_failure.lock() = Some(text);
    }

    pub(crate) fn clear_dispatch_failure(&self) {
        if self.dispatch_failing.load(Ordering::Acquire) {
            *self.dispatch_failure.lock() = None;
            self.dispatch_failing.store(false, Ordering::Release);
            tracing::warn!("dispatch resumed after an indexing failure; accepting puts again");
        }
    }

    fn is_dispatch_failing(&self) -> bool {
        self.dispatch_failing.load(Ordering::Acquire)
    }

    fn behind_bytes(&self) -> u64 {
        (self.commit_log.max_offset().0 - self.reput_offset().0).max(0) as u64
    }
}

pub struct Dispatcher {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Dispatcher {
    /// Loads all ConsumeQueues and IndexFiles (`loadConsumeQueue`, `indexService.load`).
    pub fn open(
        config: &MessageStoreConfig,
        commit_log: Arc<dyn CommitLogReader>,
        checkpoint: Arc<StoreCheckpoint>,
    ) -> Result<Self, StoreError> {
        Self::open_with_fs(config, commit_log, checkpoint, Arc::new(crate::fs::OsFs))
    }

    /// [`Self::open`] with ConsumeQueue and IndexFile files allocated through `fs`.
    pub fn open_with_fs(
        config: &MessageStoreConfig,
        commit_log: Arc<dyn CommitLogReader>,
        checkpoint: Arc<StoreCheckpoint>,
        fs: Arc<dyn crate::fs::StoreFs>,
    ) -> Result<Self, StoreError> {
        let consume_queues = ConsumeQueueTable::load_with_fs(
            &config.consume_queue_dir(),
            config.consume_queue_file_size() as usize,
            Arc::clone(&fs),
        )?;
        let index_config = IndexConfig {
            slot_num: config.max_hash_slot_num as usize,
            index_num: config.max_index_num as usize,
            max_msgs_num_batch: config.max_msgs_num_batch as usize,
        };
        let index = IndexService::load_with_fs(
            &config.index_dir(),
            index_config,
            true,
            checkpoint.index_msg_timestamp(),
            fs,
        )?;
        let shared = Shared {
            delay_levels: config.delay_levels()?,
            index_enabled: config.message_index_enable,
            config: config.clone(),
            commit_log,
            checkpoint,
            consume_queues,
            index,
            listener: RwLock::new(None),
            running: AtomicBool::new(false),
            reput_offset: AtomicI64::new(0),
            visible_limit: AtomicI64::new(i64::MAX),
            deleted_topics: Mutex::new(DeletedTopics::load(&config.config_dir())?),
            dispatch_failing: AtomicBool::new(false),
            dispatch_failure: Mutex::new(None),
        };
        Ok(Self {
            shared: Arc::new(shared),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// ConsumeQueue recovery; after an abnormal exit also drops IndexFiles newer than the
    /// checkpoint (re-dispatch rebuilds them). Returns the highest record end any queue
    /// indexes (`maxPhyOffsetOfConsumeQueue`, 0 when none).
    pub fn recover(&self, last_exit_ok: bool) -> Result<PhysicalOffset, StoreError> {
        if !last_exit_ok {
            self.shared
                .index
                .drop_files_newer_than(self.shared.checkpoint.index_msg_timestamp())?;
        }
        Ok(self.shared.consume_queues.recover()?.unwrap_or_default())
    }

    /// Removes every ConsumeQueue unit whose record does not end at or before
    /// `commitlog_end` (the CommitLog's recovered valid end).
    pub fn truncate_dirty(&self, commitlog_end: PhysicalOffset) -> Result<(), StoreError> {
        self.shared.consume_queues.truncate_dirty(commitlog_end)?;
        Ok(())
    }

    /// Recovery, after [`Self::truncate_dirty`]: checks the last unit of every queue
    /// against the record it names (size, topic, queue id and queue offset must match;
    /// records already removed by retention cannot be checked and count as valid) and
    /// drops units from the end until one matches. Returns where dispatch must start at
    /// the latest to rebuild the dropped units.
    pub fn validate_queue_tails(&self) -> Result<Option<PhysicalOffset>, StoreError> {
        let log = &*self.shared.commit_log;
        let mut rebuild: Option<PhysicalOffset> = None;
        for queue in self.shared.consume_queues.all() {
            let dropped = queue.truncate_invalid_tail(|logical, unit| {
                if unit.physical_offset < log.min_offset() {
                    return true;
                }
                let Ok(size) = usize::try_from(unit.size) else {
                    return false;
                };
                log.read(unit.physical_offset, size).is_some_and(|bytes| {
                    protocol::message::decode(&bytes, false).is_ok_and(|v| {
                        v.total_size() == size
                            && v.topic() == queue.topic()
                            && v.queue_id() == queue.queue_id()
                            && v.queue_offset() == logical
                    })
                })
            })?;
            if let Some(d) = dropped {
                rebuild = Some(rebuild.map_or(d, |r| r.min(d)));
            }
        }
        Ok(rebuild)
    }

    /// No CommitLog file at all: every ConsumeQueue and IndexFile goes (`destroyLogics`).
    pub fn destroy_logics(&self) -> Result<(), StoreError> {
        self.shared.deleted_topics.lock().clear()?;
        self.shared.consume_queues.destroy()?;
        self.shared.index.destroy()?;
        Ok(())
    }

    /// `(topic, queueId, next offset)` of every queue, for the topicQueueTable. Call it
    /// again after [`Self::start`]: re-dispatch may have rebuilt queues.
    pub fn queue_max_offsets(&self) -> Vec<(String, i32, QueueOffset)> {
        self.shared.consume_queues.max_offsets()
    }

    pub fn correct_min_offsets(&self, commitlog_min: PhysicalOffset) {
        self.shared
            .consume_queues
            .correct_min_offsets(commitlog_min);
    }

    /// After CommitLog retention: deletes ConsumeQueue and IndexFiles entirely below the
    /// new minimum and corrects queue minimum offsets.
    pub fn on_commit_log_min_offset(
        &self,
        commitlog_min: PhysicalOffset,
    ) -> Result<(), StoreError> {
        self.shared.consume_queues.delete_below(commitlog_min)?;
        self.shared.index.delete_below(commitlog_min)?;
        self.shared.deleted_topics.lock().prune_below(commitlog_min);
        Ok(())
    }

    /// Serve only units whose record ends at or before `limit` (`None`: no limit).
    pub fn set_visible_limit(&self, limit: Option<PhysicalOffset>) {
        self.shared
            .visible_limit
            .store(limit.map_or(i64::MAX, |l| l.0), Ordering::Release);
    }

    /// Whether the queue holds a unit at `offset` that reads may serve (its record ends
    /// within the visible limit). Long polling parks on this, not on the queue's max offset,
    /// so a pull does not spin on units that wait for a slave's acknowledgement.
    pub fn is_visible(&self, topic: &str, queue_id: i32, offset: QueueOffset) -> bool {
        let limit = self.shared.visible_limit.load(Ordering::Acquire);
        self.consume_queues()
            .find(topic, queue_id)
            .and_then(|q| q.get(offset))
            .is_some_and(|u| u.physical_offset.0.saturating_add(i64::from(u.size)) <= limit)
    }

    /// Replication truncation: drops ConsumeQueue units and IndexFiles beyond `offset`
    /// (the caller stopped dispatch and cut the CommitLog). Returns where dispatch must
    /// restart so the deleted index files are rebuilt.
    pub fn truncate_beyond(&self, offset: PhysicalOffset) -> Result<PhysicalOffset, StoreError> {
        self.shared.deleted_topics.lock().clamp_to(offset);
        self.shared.consume_queues.truncate_dirty_live(offset)?;
        let rebuild = self.shared.index.truncate_beyond(offset)?;
        let from = rebuild.map_or(offset, |r| r.min(offset));
        Ok(from.min(self.shared.reput_offset()))
    }

    pub fn set_arrival_listener(&self, listener: Arc<dyn MessageArrivalListener>) {
        *self.shared.listener.write() = Some(listener);
    }

    /// Starts the reput thread at `reput_from` (raised to the CommitLog minimum) and the
    /// ConsumeQueue flush thread, then blocks until dispatch has caught up with the
    /// CommitLog, as `DefaultMessageStore.start` does.
    pub fn start(&self, reput_from: PhysicalOffset) -> Result<(), StoreError> {
        let shared = &self.shared;
        if shared.running.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        shared.publish_reput_offset(reput_from.max(shared.commit_log.min_offset()));
        let mut threads = self.threads.lock();
        let reput = Arc::clone(shared);
        threads.push(spawn("reput", move || reput_loop(&reput))?);
        let flush = Arc::clone(shared);
        threads.push(spawn("cq-flush", move || flush_loop(&flush))?);
        drop(threads);
        // A record that cannot be indexed stops the wait too: the store then opens
        // refusing puts (and says why) instead of hanging.
        while shared.running.load(Ordering::Acquire)
            && shared.behind_bytes() > 0
            && !shared.is_dispatch_failing()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Stops both threads, flushes every ConsumeQueue and IndexFile and writes the logics
    /// and index timestamps into the checkpoint (the caller flushes the checkpoint).
    pub fn shutdown(&self) -> Result<(), StoreError> {
        self.shared.running.store(false, Ordering::Release);
        for handle in self.threads.lock().drain(..) {
            if handle.join().is_err() {
                tracing::error!("a dispatch thread panicked");
            }
        }
        self.flush(true)
    }

    /// Flushes ConsumeQueues (thorough: everything, else files with enough dirty pages)
    /// and, when thorough, IndexFiles, recording the timestamps in the checkpoint.
    pub fn flush(&self, thorough: bool) -> Result<(), StoreError> {
        flush_once(&self.shared, thorough)
    }

    /// CommitLog max offset − reput offset (`dispatchBehindBytes`).
    pub fn dispatch_behind_bytes(&self) -> u64 {
        self.shared.behind_bytes()
    }

    pub fn reput_offset(&self) -> PhysicalOffset {
        self.shared.reput_offset()
    }

    /// Why dispatch is stuck on a record it cannot index, if it is.
    pub fn dispatch_failure(&self) -> Option<String> {
        if !self.shared.is_dispatch_failing() {
            return None;
        }
        self.shared.dispatch_failure.lock().clone()
    }

    /// Waits until dispatch has caught up; `false` on timeout or while a record cannot
    /// be dispatched.
    pub fn wait_caught_up(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.shared.behind_bytes() > 0 {
            if Instant::now() >= deadline || self.shared.is_dispatch_failing() {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }

    pub fn consume_queues(&self) -> &ConsumeQueueTable {
        &self.shared.consume_queues
    }

    pub fn index(&self) -> &IndexService {
        &self.shared.index
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shared.running.store(false, Ordering::Release);
        for handle in self.threads.get_mut().drain(..) {
            let _ = handle.join();
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| StoreError::io(format!("spawn {name} thread"), e))
}

/// How long the reput thread naps after a round that found records, before looking
/// again. While appends keep coming it never parks, so appenders never pay a wake-up
/// per message (RocketMQ's ReputMessageService polls every 1 ms); when a round finds
/// nothing it parks until the next append, so an idle store dispatches at once. A log
/// readable in groups (SYNC_FLUSH) has nothing new before its next group commit, which
/// wakes the parked thread once: there the nap would only add a wake-up per group.
const BUSY_POLL: Duration = Duration::from_micros(100);

/// Pause before dispatch retries a record it failed to index.
const FAILED_DISPATCH_BACKOFF: Duration = Duration::from_millis(200);

fn reput_loop(shared: &Shared) {
    while shared.running.load(Ordering::Acquire) {
        let before = shared.reput_offset();
        dispatch_available(shared);
        if shared.is_dispatch_failing() {
            std::thread::sleep(FAILED_DISPATCH_BACKOFF);
            continue;
        }
        if shared.reput_offset() > before && !shared.commit_log.readable_in_groups() {
            std::thread::sleep(BUSY_POLL);
            continue;
        }
        shared
            .commit_log
            .wait_beyond(shared.reput_offset(), Duration::from_millis(1));
    }
}

/// `FlushConsumeQueueService`: every `flushIntervalConsumeQueue` ms flush queues with at
/// least `flushConsumeQueueLeastPages` dirty pages; everything (plus the checkpoint values)
/// every `flushConsumeQueueThoroughInterval` ms.
fn flush_loop(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.flush_interval_consume_queue.max(1));
    let thorough_every = Duration::from_millis(shared.config.flush_consume_queue_thorough_interval);
    let mut last_thorough = Instant::now();
    while shared.running.load(Ordering::Acquire) {
        let slept = Instant::now();
        while shared.running.load(Ordering::Acquire) && slept.elapsed() < interval {
            std::thread::sleep(interval.min(Duration::from_millis(10)));
        }
        let thorough = last_thorough.elapsed() >= thorough_every;
        if thorough {
            last_thorough = Instant::now();
        }
        if let Err(e) = flush_once(shared, thorough) {
            tracing::error!(error = %e, "ConsumeQueue flush failed");
        }
    }
}

fn flush_once(shared: &Shared, thorough: bool) -> Result<(), StoreError> {
    let least_pages = if thorough {
        0
    } else {
        shared.config.flush_consume_queue_least_pages as usize
    };
    let logics_timestamp = shared.checkpoint.logics_msg_timestamp();
    shared.consume_queues.flush(least_pages)?;
    let mut index_timestamp = shared.index.flushed_full_timestamp();
    if thorough {
        // Taken before the flush: an entry added while it runs may not be on disk, and the
        // checkpoint must never claim more than was flushed.
        let indexed_before_flush = shared.index.last_end_timestamp();
        shared.index.flush()?;
        index_timestamp = index_timestamp.max(indexed_before_flush);
        shared.checkpoint.set_logics_msg_timestamp(logics_timestamp);
        shared.checkpoint.set_index_msg_timestamp(index_timestamp);
        shared.checkpoint.flush()?;
    } else {
        shared.checkpoint.set_index_msg_timestamp(index_timestamp);
    }
    Ok(())
}
