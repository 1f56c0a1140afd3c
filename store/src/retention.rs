//! CommitLog retention (`DefaultMessageStore.CleanCommitLogService`).
//!
//! A pass runs every `cleanResourceInterval`. Files whose last modification is older
//! than `fileReservedTime` hours are deleted, oldest first, at the `deleteWhen` hour(s),
//! or at any hour once disk usage passes `diskMaxUsedSpaceRatio`. Above
//! `diskSpaceCleanForciblyRatio` (with `cleanFileForciblyEnable`) files go even if not
//! expired. Above `diskSpaceWarningLevelRatio` the store is marked disk-full and refuses
//! writes until usage drops below the clean-forcibly ratio again (RocketMQ's hysteresis).
//! Deletion stops at the first file that must stay, so the remaining files stay
//! contiguous, and the file being written is never deleted.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::{Condvar, Mutex};
use protocol::message::PhysicalOffset;

use crate::commitlog::CommitLog;
use crate::config::MessageStoreConfig;
use crate::error::{IoContext, StoreError};
use crate::fs::StoreFs;

/// `DELETE_FILES_BATCH_MAX`: at most this many files per pass.
const DELETE_FILES_BATCH_MAX: usize = 10;

/// Called with the new CommitLog minimum after files were deleted (the ConsumeQueues
/// and IndexFiles below it go too).
pub type MinOffsetHook = Box<dyn Fn(PhysicalOffset) + Send + Sync>;

pub struct Retention {
    log: Arc<CommitLog>,
    fs: Arc<dyn StoreFs>,
    dir: PathBuf,
    /// `storePathRootDir` (ConsumeQueues, IndexFiles, checkpoint, config), which may be
    /// another volume than the CommitLog's.
    root: PathBuf,
    reserved: Duration,
    delete_hours: Vec<u32>,
    max_used_ratio: f64,
    warning_ratio: f64,
    clean_forcibly_ratio: f64,
    clean_forcibly_enable: bool,
    delete_interval: Duration,
    disk_full: Arc<AtomicBool>,
    on_min_offset: MinOffsetHook,
}

impl std::fmt::Debug for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retention")
            .field("dir", &self.dir)
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

/// What one pass saw and did.
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionPass {
    pub used_ratio: f64,
    pub disk_full: bool,
    pub deleted: Vec<PathBuf>,
}

impl Retention {
    pub fn new(
        config: &MessageStoreConfig,
        log: Arc<CommitLog>,
        fs: Arc<dyn StoreFs>,
        disk_full: Arc<AtomicBool>,
        on_min_offset: MinOffsetHook,
    ) -> Self {
        Self {
            log,
            fs,
            dir: config.commit_log_dir(),
            root: config.store_path_root_dir.clone(),
            reserved: Duration::from_secs(config.file_reserved_time.saturating_mul(3600)),
            delete_hours: config.delete_hours(),
            max_used_ratio: config.disk_max_used_ratio(),
            warning_ratio: config.disk_space_warning_level_ratio,
            clean_forcibly_ratio: config.disk_space_clean_forcibly_ratio,
            clean_forcibly_enable: config.clean_file_forcibly_enable,
            delete_interval: Duration::from_millis(config.delete_commit_log_files_interval),
            disk_full,
            on_min_offset,
        }
    }

    /// Updates the disk-full flag from the current usage of both volumes the store writes
    /// to (the CommitLog's and the root's, as 4.9 checks the CommitLog and the logic
    /// queue paths): writes are refused when either passes the warning level, since an
    /// acknowledged message must also get its ConsumeQueue unit. Returns the CommitLog
    /// volume's ratio and whether to delete CommitLog files at once (only its own usage
    /// decides that: deleting CommitLog files frees nothing on another volume).
    pub fn check_space(&self) -> (f64, bool) {
        let usage = |dir: &PathBuf| match self.fs.used_ratio(dir) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(path = %dir.display(), error = %e, "reading disk usage failed");
                None
            }
        };
        let (Some(ratio), root_ratio) = (usage(&self.dir), usage(&self.root)) else {
            return (0.0, false);
        };
        let worst = ratio.max(root_ratio.unwrap_or(0.0));
        if worst > self.warning_ratio {
            if !self.disk_full.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    commitlog_ratio = ratio,
                    root_ratio,
                    "disk full: the store refuses writes"
                );
            }
        } else if worst <= self.clean_forcibly_ratio && self.disk_full.swap(false, Ordering::AcqRel)
        {
            // Cleared only below the forced-cleaning level, as before (hysteresis).
            tracing::info!(ratio, "disk space is OK again: the store accepts writes");
        }
        (
            ratio,
            ratio > self.warning_ratio || ratio > self.clean_forcibly_ratio,
        )
    }

    /// One retention pass at wall-clock time `now` (local hour `hour`).
    pub fn run_once(&self, now: SystemTime, hour: u32) -> RetentionPass {
        let (used_ratio, clean_immediately) = self.check_space();
        let time_up = self.delete_hours.contains(&hour);
        let space_pressure = used_ratio > self.max_used_ratio;
        let mut deleted = Vec::new();
        if time_up || space_pressure || clean_immediately {
            let at_once = self.clean_forcibly_enable && clean_immediately;
            for i in 0..DELETE_FILES_BATCH_MAX {
                if i > 0 && !self.delete_interval.is_zero() {
                    std::thread::sleep(self.delete_interval);
                }
                let one = self
                    .log
                    .delete_oldest_while(1, |file| at_once || self.expired(file.path(), now));
                if one.is_empty() {
                    break;
                }
                deleted.extend(one);
            }
        }
        if !deleted.is_empty() {
            tracing::info!(count = deleted.len(), "deleted expired CommitLog files");
            (self.on_min_offset)(self.log.min_offset());
            if clean_immediately {
                self.check_space();
            }
        }
        RetentionPass {
            used_ratio,
            disk_full: self.disk_full.load(Ordering::Acquire),
            deleted,
        }
    }

    fn expired(&self, path: &std::path::Path, now: SystemTime) -> bool {
        let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) else {
            return false;
        };
        modified
            .checked_add(self.reserved)
            .is_some_and(|live_until| now >= live_until)
    }
}

/// Local hour of day of `now` (`deleteWhen` is in the broker's local time).
pub fn local_hour(now: SystemTime) -> u32 {
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as libc::time_t;
    // SAFETY: localtime_r only writes into the zeroed struct we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return ((secs / 3600) % 24) as u32;
    }
    tm.tm_hour as u32
}

/// The background thread running [`Retention::run_once`].
#[derive(Debug)]
pub struct RetentionService {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl RetentionService {
    pub fn start(retention: Arc<Retention>, interval: Duration) -> Result<Self, StoreError> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("store-retention".into())
            .spawn(move || {
                loop {
                    {
                        let mut stopped = flag.0.lock();
                        if !*stopped {
                            flag.1.wait_for(&mut stopped, interval);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    let now = SystemTime::now();
                    retention.run_once(now, local_hour(now));
                }
            })
            .ctx(|| "start the retention thread".to_owned())?;
        Ok(Self {
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn shutdown(&self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}
