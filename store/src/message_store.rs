//! `MessageStore`: owns the CommitLog, checkpoint, lock/abort files, flush and retention
//! services and the dispatcher (ConsumeQueues, IndexFiles, reput), and runs the startup
//! sequence of `DefaultMessageStore.load` / `recover` / `start`:
//!
//! 1. take the `lock` file, `last_exit_ok = !abort exists`;
//! 2. map CommitLog files, open the checkpoint, load ConsumeQueues + IndexFiles;
//! 3. recover ConsumeQueues, then the CommitLog (normal: last 3 files; abnormal: from the
//!    checkpoint-chosen file with re-dispatch), truncate ConsumeQueues to the valid end;
//! 4. rebuild the `topic-queueId` offset table, create `abort`, start reput (waiting until
//!    it caught up), flush and retention services.
//!
//! Callers reach it through [`crate::MessageStoreApi`] (and replication through
//! [`crate::replication::ReplicaStore`]); the read path (`get_message`, queries) lives
//! with the dispatcher's modules.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use protocol::message::PhysicalOffset;

use crate::abort::AbortMarker;
use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::{BatchMessage, BrokerMessage, CommitLog, Recovered};
use crate::config::{BrokerRole, MessageStoreConfig};
use crate::dispatch::{CommitLogReader, Dispatcher};
use crate::error::{IoContext, StoreError};
use crate::flush::{FlushService, FlushWaiter};
use crate::fs::{OsFs, StoreFs};
use crate::lock::StoreLock;
use crate::put_result::{AppendMessageResult, PutMessageResult, PutMessageStatus};
use crate::retention::{Retention, RetentionPass, RetentionService};

/// How long shutdown waits for dispatch to catch up before leaving `abort` behind.
const SHUTDOWN_DISPATCH_WAIT: Duration = Duration::from_secs(10);

/// Why the store currently refuses writes (all reported as SERVICE_NOT_AVAILABLE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteRefusal {
    ShutDown,
    /// A CommitLog write or flush failed: nothing can be acknowledged as durable any
    /// more until a restart (see [`crate::fence`] and [`MessageStore::fence_reason`]).
    Fenced,
    SlaveRole,
    /// Disk usage passed `diskSpaceWarningLevelRatio`.
    DiskFull,
    /// Dispatch cannot write a ConsumeQueue unit or index entry: a put now would be
    /// acknowledged but never reach consumers (see [`Dispatcher::dispatch_failure`]).
    IndexFailed,
}

pub struct MessageStore {
    pub(crate) config: MessageStoreConfig,
    pub(crate) commit_log: Arc<CommitLog>,
    pub(crate) checkpoint: Arc<StoreCheckpoint>,
    pub(crate) dispatcher: Arc<Dispatcher>,
    flush: FlushService,
    retention: Arc<Retention>,
    retention_service: RetentionService,
    abort: AbortMarker,
    last_exit_ok: bool,
    recovered: Recovered,
    disk_full: Arc<AtomicBool>,
    shut_down: AtomicBool,
    /// The role now (starts as `brokerRole`; replication changes it).
    pub(crate) role: crate::replication::RoleCell,
    pub(crate) epochs: crate::ha::EpochFile,
    pub(crate) confirm: crate::ha::ConfirmOffset,
    fs: Arc<dyn StoreFs>,
    /// Released by shutdown, so another store may open the directory afterwards.
    lock: parking_lot::Mutex<Option<StoreLock>>,
}

impl std::fmt::Debug for MessageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore")
            .field("root", &self.config.store_path_root_dir)
            .field("recovered", &self.recovered)
            .finish_non_exhaustive()
    }
}

impl MessageStore {
    /// Opens, recovers and starts the store on the real file system.
    pub fn open(config: MessageStoreConfig) -> Result<Self, StoreError> {
        Self::open_with_fs(config, Arc::new(OsFs))
    }

    /// As [`MessageStore::open`] with segment allocation going through `fs` (fault injection).
    pub fn open_with_fs(
        config: MessageStoreConfig,
        fs: Arc<dyn StoreFs>,
    ) -> Result<Self, StoreError> {
        config.validate()?;
        let root = &config.store_path_root_dir;
        std::fs::create_dir_all(root).ctx(|| format!("create {}", root.display()))?;
        let lock = StoreLock::acquire(&config.lock_path())?;
        let abort = AbortMarker::new(&config.abort_path());
        let last_exit_ok = !abort.exists();

        let epochs = crate::ha::EpochFile::open(&config.epoch_file_path())
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let confirm = crate::ha::ConfirmOffset::open(&config.confirm_offset_path())
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let commit_log = Arc::new(CommitLog::open(&config, Arc::clone(&fs))?);
        let checkpoint = Arc::new(StoreCheckpoint::open(&config.checkpoint_path())?);
        let reader: Arc<dyn CommitLogReader> = Arc::clone(&commit_log) as Arc<dyn CommitLogReader>;
        let dispatcher = Arc::new(Dispatcher::open_with_fs(
            &config,
            reader,
            Arc::clone(&checkpoint),
            Arc::clone(&fs),
        )?);

        let cq_max = dispatcher.recover(last_exit_ok)?;
        let check_crc = config.check_crc_on_recover;
        let had_files = commit_log.mapped_files().file_count() > 0;
        let recovered = if last_exit_ok {
            commit_log.recover_normally(check_crc)?
        } else {
            let use_index = config.message_index_enable && config.message_index_safe;
            commit_log.recover_abnormally(&checkpoint, use_index, check_crc)?
        };
        let mut rebuild_from = None;
        if had_files {
            dispatcher.truncate_dirty(recovered.end)?;
            rebuild_from = dispatcher.validate_queue_tails()?;
        } else {
            dispatcher.destroy_logics()?;
        }
        commit_log.set_queue_offsets(dispatcher.queue_max_offsets());
        dispatcher.correct_min_offsets(commit_log.min_offset());
        tracing::info!(
            last_exit_ok,
            end = recovered.end.0,
            cq_max = cq_max.0,
            "store recovered"
        );

        abort.create()?;
        let reput_from = recovered
            .redispatch_from
            .map_or(cq_max, |r| r.min(cq_max))
            .min(rebuild_from.unwrap_or(recovered.end))
            .min(recovered.end);
        dispatcher.start(reput_from)?;
        // Dispatch may have rebuilt queues (e.g. a deleted consumequeue dir): take the
        // offsets again, as RocketMQ's start() does.
        commit_log.set_queue_offsets(dispatcher.queue_max_offsets());

        let flush = FlushService::start(&config, Arc::clone(&commit_log), Arc::clone(&checkpoint))?;
        let disk_full = Arc::new(AtomicBool::new(false));
        let hook_dispatcher = Arc::clone(&dispatcher);
        let retention = Arc::new(Retention::new(
            &config,
            Arc::clone(&commit_log),
            Arc::clone(&fs),
            Arc::clone(&disk_full),
            Box::new(move |min| {
                if let Err(e) = hook_dispatcher.on_commit_log_min_offset(min) {
                    tracing::error!(error = %e, "cleaning logic files below the CommitLog minimum failed");
                }
            }),
        ));
        retention.check_space();
        let retention_service = RetentionService::start(
            Arc::clone(&retention),
            Duration::from_millis(config.clean_resource_interval.max(1)),
        )?;
        confirm.clamp_to(recovered.end);
        let role = crate::replication::RoleCell::new(config.broker_role);
        Ok(Self {
            config,
            commit_log,
            checkpoint,
            dispatcher,
            flush,
            retention,
            retention_service,
            abort,
            last_exit_ok,
            recovered,
            disk_full,
            shut_down: AtomicBool::new(false),
            role,
            epochs,
            confirm,
            fs,
            lock: parking_lot::Mutex::new(Some(lock)),
        })
    }

    /// The file system the store writes through (the broker's config files use it too).
    pub fn fs(&self) -> &Arc<dyn StoreFs> {
        &self.fs
    }

    pub fn config(&self) -> &MessageStoreConfig {
        &self.config
    }

    pub fn commit_log(&self) -> &Arc<CommitLog> {
        &self.commit_log
    }

    pub fn checkpoint(&self) -> &Arc<StoreCheckpoint> {
        &self.checkpoint
    }

    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// Whether the previous run shut down cleanly (no `abort` file was found).
    pub fn last_exit_ok(&self) -> bool {
        self.last_exit_ok
    }

    /// What CommitLog recovery found at startup.
    pub fn recovered(&self) -> Recovered {
        self.recovered
    }

    /// Why writes are refused right now, if they are.
    pub fn write_refusal(&self) -> Option<WriteRefusal> {
        if self.shut_down.load(Ordering::Acquire) {
            Some(WriteRefusal::ShutDown)
        } else if self.commit_log.fence().is_tripped() {
            Some(WriteRefusal::Fenced)
        } else if self.role.get() == BrokerRole::Slave {
            Some(WriteRefusal::SlaveRole)
        } else if self.disk_full.load(Ordering::Acquire) {
            Some(WriteRefusal::DiskFull)
        } else if self.dispatcher.dispatch_failure().is_some() {
            Some(WriteRefusal::IndexFailed)
        } else {
            None
        }
    }

    /// Why the store took itself out of service until a restart (a failed CommitLog
    /// write or flush), if it did. The broker reports itself not ready meanwhile.
    pub fn fence_reason(&self) -> Option<String> {
        self.commit_log.fence().reason()
    }

    /// `checkStoreStatus`.
    fn refuse(&self) -> Option<PutMessageStatus> {
        if let Some(reason) = self.write_refusal() {
            tracing::debug!(?reason, "put refused");
            return Some(PutMessageStatus::ServiceNotAvailable);
        }
        if self
            .commit_log
            .is_page_cache_busy(self.config.os_page_cache_busy_time_out_mills)
        {
            return Some(PutMessageStatus::OsPageCacheBusy);
        }
        None
    }

    /// Stores one message. The future resolves at once under ASYNC_FLUSH (or when the
    /// producer does not wait); under SYNC_FLUSH once the record is durable, or with
    /// FLUSH_DISK_TIMEOUT after `syncFlushTimeout`.
    pub fn put_message(&self, msg: &BrokerMessage) -> PutMessageFuture {
        if let Some(status) = self.refuse() {
            return PutMessageFuture::ready(PutMessageResult::failed(status));
        }
        let appended = self.commit_log.append(msg);
        self.after_append(appended, msg.wait_store_msg_ok)
    }

    /// Stores a batch (`putMessages`): all records contiguous in one file.
    pub fn put_messages(&self, batch: &BatchMessage) -> PutMessageFuture {
        if let Some(status) = self.refuse() {
            return PutMessageFuture::ready(PutMessageResult::failed(status));
        }
        let appended = self.commit_log.append_batch(batch);
        self.after_append(appended, batch.wait_store_msg_ok)
    }

    fn after_append(
        &self,
        appended: Result<AppendMessageResult, PutMessageStatus>,
        wait: bool,
    ) -> PutMessageFuture {
        let append = match appended {
            Ok(append) => append,
            Err(status) => {
                if status == PutMessageStatus::CreateMapedFileFailed {
                    // Most often the disk is full: re-check now rather than at the next
                    // retention pass, so later puts are refused up front.
                    self.retention.check_space();
                }
                return PutMessageFuture::ready(PutMessageResult::failed(status));
            }
        };
        if wait && let Some(waiter) = self.flush.wait_durable(append.end_offset()) {
            return PutMessageFuture(FutureState::Flushing {
                waiter,
                append: Some(append),
            });
        }
        self.flush.wake();
        PutMessageFuture::ready(PutMessageResult {
            status: PutMessageStatus::PutOk,
            append: Some(append),
        })
    }

    /// SYNC_FLUSH group commits so far (one msync each); 0 under ASYNC_FLUSH.
    pub fn group_commits(&self) -> u64 {
        self.flush.group_commits()
    }

    /// The whole record at `offset` (view by message id), zero-copy.
    pub fn read_by_offset(&self, offset: PhysicalOffset) -> Option<Bytes> {
        self.commit_log.read_record(offset)
    }

    pub fn min_phy_offset(&self) -> PhysicalOffset {
        self.commit_log.min_offset()
    }

    pub fn max_phy_offset(&self) -> PhysicalOffset {
        self.commit_log.max_offset()
    }

    pub fn flushed_phy_offset(&self) -> PhysicalOffset {
        self.commit_log.flushed_offset()
    }

    /// Deletes `topic`'s ConsumeQueues and queue offsets (`cleanUnusedTopic` for one
    /// topic): the disk space of its queues is freed at once, a re-created topic starts at
    /// queue offset 0, and its records stay in the CommitLog until retention removes them.
    /// Returns how many queues were deleted.
    pub fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        self.dispatcher
            .delete_topic(topic, || self.commit_log.remove_topic(topic))
    }

    /// Runs one retention pass now (as the background service does every
    /// `cleanResourceInterval`), e.g. for an admin "delete expired files" request.
    pub fn run_retention(&self, now: SystemTime, local_hour: u32) -> RetentionPass {
        self.retention.run_once(now, local_hour)
    }

    /// Clean shutdown: stop services, flush everything, write the checkpoint and remove
    /// `abort` (kept when dispatch could not catch up or the disk is full, so the next
    /// start recovers abnormally). Idempotent.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.retention_service.shutdown();
        self.flush.shutdown();
        let caught_up = self.dispatcher.wait_caught_up(SHUTDOWN_DISPATCH_WAIT);
        let dispatch_stopped = self.dispatcher.shutdown();
        // A failed flush (or a fenced log) leaves `abort` behind, so the next start
        // recovers from what is really on disk; the rest of the shutdown still runs.
        let result = dispatch_stopped.and_then(|()| {
            self.commit_log
                .flush(0)
                .ctx(|| "flush the CommitLog".to_owned())
                .and_then(|outcome| {
                    if outcome.store_timestamp > 0 {
                        self.checkpoint
                            .set_physic_msg_timestamp(outcome.store_timestamp);
                    }
                    self.checkpoint.flush()
                })
        });
        if let Err(e) = self.confirm.persist() {
            tracing::warn!(error = %e, "persisting the confirm offset failed");
        }
        self.commit_log.shutdown();
        if result.is_ok()
            && caught_up
            && self.dispatcher.dispatch_behind_bytes() == 0
            && !self.disk_full.load(Ordering::Acquire)
        {
            self.abort.remove()?;
        }
        self.lock.lock().take();
        result
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "store shutdown failed");
        }
    }
}

/// Result of a put: ready at once, or waiting for the group commit.
#[derive(Debug)]
pub struct PutMessageFuture(FutureState);

#[derive(Debug)]
enum FutureState {
    Ready(Option<PutMessageResult>),
    Flushing {
        waiter: FlushWaiter,
        append: Option<AppendMessageResult>,
    },
}

impl PutMessageFuture {
    pub(crate) fn ready(result: PutMessageResult) -> Self {
        Self(FutureState::Ready(Some(result)))
    }

    /// Blocks the calling thread until the put completes. For synchronous callers only:
    /// inside an async runtime `.await` the future instead.
    pub fn wait(self) -> PutMessageResult {
        let mut fut = match self.0 {
            FutureState::Ready(Some(result)) => return result,
            state => Self(state),
        };
        struct ThreadWaker(std::thread::Thread);
        impl Wake for ThreadWaker {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(result) = Pin::new(&mut fut).poll(&mut cx) {
                return result;
            }
            std::thread::park();
        }
    }
}

impl Future for PutMessageFuture {
    type Output = PutMessageResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PutMessageResult> {
        match &mut self.0 {
            FutureState::Ready(result) => Poll::Ready(
                result
                    .take()
                    .unwrap_or_else(|| PutMessageResult::failed(PutMessageStatus::UnknownError)),
            ),
            FutureState::Flushing { waiter, append } => {
                Pin::new(waiter).poll(cx).map(|durable| PutMessageResult {
                    status: if durable {
                        PutMessageStatus::PutOk
                    } else {
                        PutMessageStatus::FlushDiskTimeout
                    },
                    append: append.take(),
                })
            }
        }
    }
}
