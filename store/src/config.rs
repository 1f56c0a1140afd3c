//! Store configuration: the subset of RocketMQ's `MessageStoreConfig` this engine honours,
//! under RocketMQ's property names and with its 4.9.8 defaults.
//!
//! Every size is configurable so tests can use files of a few KiB and cross file
//! boundaries constantly. Values can come from serde (camelCase JSON/YAML, the Java key
//! names) or one `key=value` at a time from a `broker.properties` file ([`MessageStoreConfig::set`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// `FlushDiskType` of RocketMQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlushDiskType {
    #[serde(rename = "ASYNC_FLUSH")]
    AsyncFlush,
    #[serde(rename = "SYNC_FLUSH")]
    SyncFlush,
}

/// `BrokerRole` of RocketMQ. Replication is not part of the store; the role only changes
/// which statuses a put can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerRole {
    #[serde(rename = "ASYNC_MASTER")]
    AsyncMaster,
    #[serde(rename = "SYNC_MASTER")]
    SyncMaster,
    #[serde(rename = "SLAVE")]
    Slave,
}

/// A value type that can be read from a `broker.properties` string.
trait PropertyValue: Sized {
    fn parse_property(text: &str) -> Option<Self>;
}

macro_rules! from_str_property {
    ($($t:ty),*) => {$(
        impl PropertyValue for $t {
            fn parse_property(text: &str) -> Option<Self> {
                text.trim().parse().ok()
            }
        }
    )*};
}
from_str_property!(u32, u64, i32, bool, f64, String);

impl PropertyValue for PathBuf {
    fn parse_property(text: &str) -> Option<Self> {
        let text = text.trim();
        (!text.is_empty()).then(|| PathBuf::from(text))
    }
}

impl PropertyValue for Option<PathBuf> {
    fn parse_property(text: &str) -> Option<Self> {
        Some(PathBuf::parse_property(text))
    }
}

impl PropertyValue for FlushDiskType {
    fn parse_property(text: &str) -> Option<Self> {
        match text.trim() {
            "ASYNC_FLUSH" => Some(Self::AsyncFlush),
            "SYNC_FLUSH" => Some(Self::SyncFlush),
            _ => None,
        }
    }
}

impl PropertyValue for BrokerRole {
    fn parse_property(text: &str) -> Option<Self> {
        match text.trim() {
            "ASYNC_MASTER" => Some(Self::AsyncMaster),
            "SYNC_MASTER" => Some(Self::SyncMaster),
            "SLAVE" => Some(Self::Slave),
            _ => None,
        }
    }
}

/// One table declares each field, its RocketMQ key and its default, so the struct, its
/// serde names, `Default` and [`MessageStoreConfig::set`] can never disagree.
macro_rules! store_config {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty = $key:literal => $default:expr ; )*) => {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct MessageStoreConfig {
            $( $(#[$doc])* #[serde(rename = $key)] pub $field: $ty, )*
        }

        impl Default for MessageStoreConfig {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl MessageStoreConfig {
            /// Every RocketMQ key this config understands.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// Applies one `key=value` pair. Returns `Ok(false)` for a key that is not a
            /// store key (the broker owns it), an error for a store key with a bad value.
            pub fn set(&mut self, key: &str, value: &str) -> Result<bool, StoreError> {
                match key {
                    $( $key => {
                        self.$field = <$ty as PropertyValue>::parse_property(value).ok_or_else(|| {
                            StoreError::Config(format!("bad value {value:?} for {key}"))
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }
        }
    };
}

const GIB: u32 = 1 << 30;

fn default_root() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("store"), |h| Path::new(&h).join("store"))
}

store_config! {
    /// Root of the store (`${user.home}/store`).
    store_path_root_dir: PathBuf = "storePathRootDir" => default_root();
    /// CommitLog directory; `None` means `<root>/commitlog`.
    store_path_commit_log: Option<PathBuf> = "storePathCommitLog" => None;
    mapped_file_size_commit_log: u32 = "mappedFileSizeCommitLog" => GIB;
    /// Bytes per ConsumeQueue file; use [`MessageStoreConfig::consume_queue_file_size`].
    mapped_file_size_consume_queue: u32 = "mappedFileSizeConsumeQueue" => 300_000 * 20;
    flush_disk_type: FlushDiskType = "flushDiskType" => FlushDiskType::AsyncFlush;
    broker_role: BrokerRole = "brokerRole" => BrokerRole::AsyncMaster;
    /// ASYNC_FLUSH period, ms.
    flush_interval_commit_log: u64 = "flushIntervalCommitLog" => 500;
    /// true: the async flusher sleeps the interval; false: it is also woken by puts.
    flush_commit_log_timed: bool = "flushCommitLogTimed" => true;
    flush_commit_log_least_pages: u32 = "flushCommitLogLeastPages" => 4;
    /// ms since the last full flush after which everything dirty is flushed.
    flush_commit_log_thorough_interval: u64 = "flushCommitLogThoroughInterval" => 10_000;
    /// SYNC_FLUSH wait before a put reports FLUSH_DISK_TIMEOUT, ms.
    sync_flush_timeout: u64 = "syncFlushTimeout" => 5_000;
    slave_timeout: u64 = "slaveTimeout" => 3_000;
    /// Body limit in bytes (the whole record may be up to this + 64 KiB).
    max_message_size: u32 = "maxMessageSize" => 4 * 1024 * 1024;
    check_crc_on_recover: bool = "checkCRCOnRecover" => true;
    /// Hours a CommitLog file is kept after its last write.
    file_reserved_time: u64 = "fileReservedTime" => 72;
    /// Hour(s) of day at which expired files are deleted, `;`-separated (`"04"`, `"04;16"`).
    delete_when: String = "deleteWhen" => "04".to_owned();
    /// Percent of the disk above which expired files are deleted at any hour (10..=95).
    disk_max_used_space_ratio: u32 = "diskMaxUsedSpaceRatio" => 75;
    /// Fraction of the disk above which the store refuses writes (RocketMQ reads this from
    /// the system property `rocketmq.broker.diskSpaceWarningLevelRatio`).
    disk_space_warning_level_ratio: f64 = "diskSpaceWarningLevelRatio" => 0.90;
    /// Fraction above which files are deleted even if not expired (`...diskSpaceCleanForciblyRatio`).
    disk_space_clean_forcibly_ratio: f64 = "diskSpaceCleanForciblyRatio" => 0.85;
    clean_file_forcibly_enable: bool = "cleanFileForciblyEnable" => true;
    /// Period of the retention check, ms.
    clean_resource_interval: u64 = "cleanResourceInterval" => 10_000;
    /// Pause between two file deletions in one retention pass, ms.
    delete_commit_log_files_interval: u64 = "deleteCommitLogFilesInterval" => 100;
    /// Pre-fault new CommitLog files (write every page once) before they are used.
    warm_mapped_file_enable: bool = "warmMapedFileEnable" => false;
    /// A put holding the put lock longer than this makes new puts report OS_PAGECACHE_BUSY, ms.
    os_page_cache_busy_time_out_mills: u64 = "osPageCacheBusyTimeOutMills" => 1_000;
    message_index_enable: bool = "messageIndexEnable" => true;
    message_index_safe: bool = "messageIndexSafe" => false;
    max_hash_slot_num: u32 = "maxHashSlotNum" => 5_000_000;
    max_index_num: u32 = "maxIndexNum" => 5_000_000 * 4;
    max_msgs_num_batch: u32 = "maxMsgsNumBatch" => 64;
    default_query_max_num: u32 = "defaultQueryMaxNum" => 32;
    flush_interval_consume_queue: u64 = "flushIntervalConsumeQueue" => 1_000;
    flush_consume_queue_least_pages: u32 = "flushConsumeQueueLeastPages" => 2;
    flush_consume_queue_thorough_interval: u64 = "flushConsumeQueueThoroughInterval" => 60_000;
    max_transfer_bytes_on_message_in_memory: u32 = "maxTransferBytesOnMessageInMemory" => 256 * 1024;
    max_transfer_count_on_message_in_memory: u32 = "maxTransferCountOnMessageInMemory" => 32;
    max_transfer_bytes_on_message_in_disk: u32 = "maxTransferBytesOnMessageInDisk" => 64 * 1024;
    max_transfer_count_on_message_in_disk: u32 = "maxTransferCountOnMessageInDisk" => 8;
    /// Most ConsumeQueue units one pull scans for a batch, whatever its `maxMsgNums`
    /// (not a RocketMQ key: 4.9 scans `max(800, maxMsgNums)` units up to the end of the
    /// queue's file, so a filtered pull naming a huge count reads and evaluates every
    /// message of a 300,000-unit file). 1,024 is the largest `pullBatchSize` a 4.9 push
    /// consumer may use; 4.9's floor of 800 units applies below it.
    max_pull_scan_units: u32 = "maxPullScanUnits" => 1024;
    access_message_in_memory_max_ratio: u32 = "accessMessageInMemoryMaxRatio" => 40;
    message_delay_level: String = "messageDelayLevel" =>
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".to_owned();
    flush_delay_offset_interval: u64 = "flushDelayOffsetInterval" => 10_000;
    /// A SYNC_MASTER slave further behind than this many bytes does not count
    /// (SLAVE_NOT_AVAILABLE at once).
    ha_slave_fallbehind_max: u64 = "haSlaveFallbehindMax" => 256 * 1024 * 1024;
    /// Most CommitLog bytes per HA transfer frame.
    ha_transfer_batch_size: u32 = "haTransferBatchSize" => 32 * 1024;
    /// ms without traffic after which either HA side sends a heartbeat.
    ha_send_heartbeat_interval: u64 = "haSendHeartbeatInterval" => 5_000;
    /// ms without reads after which either HA side closes the connection.
    ha_housekeeping_interval: u64 = "haHousekeepingInterval" => 20_000;
    /// Hide ConsumeQueue entries beyond the confirm offset from consumers: `true`,
    /// `false`, or empty for "on when the role is SYNC_MASTER".
    confirm_offset_visibility: String = "confirmOffsetVisibility" => String::new();
}

/// RocketMQ's `OS_PAGE_SIZE`: the unit of flush accounting.
pub const OS_PAGE_SIZE: u32 = 4096;

impl MessageStoreConfig {
    /// A config rooted at `root`, everything else default.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Self {
            store_path_root_dir: root.into(),
            ..Self::default()
        }
    }

    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }

    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("config")
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_path_root_dir.join("checkpoint")
    }

    pub fn abort_path(&self) -> PathBuf {
        self.store_path_root_dir.join("abort")
    }

    /// Epoch history of this replica (`EpochFileCache`).
    pub fn epoch_file_path(&self) -> PathBuf {
        self.store_path_root_dir.join("epochFile")
    }

    pub fn confirm_offset_path(&self) -> PathBuf {
        self.store_path_root_dir.join("confirmOffset")
    }

    pub fn lock_path(&self) -> PathBuf {
        self.store_path_root_dir.join("lock")
    }

    /// `getMappedFileSizeConsumeQueue`: rounded up to whole 20-byte units.
    pub fn consume_queue_file_size(&self) -> u32 {
        self.mapped_file_size_consume_queue.div_ceil(20).max(1) * 20
    }

    /// `diskMaxUsedSpaceRatio` clamped to 10..=95 as `getDiskMaxUsedSpaceRatio` does.
    pub fn disk_max_used_ratio(&self) -> f64 {
        f64::from(self.disk_max_used_space_ratio.clamp(10, 95)) / 100.0
    }

    /// The hours of day listed in `deleteWhen`.
    pub fn delete_hours(&self) -> Vec<u32> {
        self.delete_when
            .split(';')
            .filter_map(|h| h.trim().parse().ok())
            .filter(|h| *h < 24)
            .collect()
    }

    /// Rejects combinations the engine cannot run with.
    pub fn validate(&self) -> Result<(), StoreError> {
        let min_file = 4 * OS_PAGE_SIZE;
        if self.mapped_file_size_commit_log < min_file {
            return Err(StoreError::Config(format!(
                "mappedFileSizeCommitLog {} is below the {min_file}-byte minimum",
                self.mapped_file_size_commit_log
            )));
        }
        if self.mapped_file_size_commit_log > i32::MAX as u32 {
            return Err(StoreError::Config(
                "mappedFileSizeCommitLog must fit an i32".to_owned(),
            ));
        }
        self.delay_levels()?;
        Ok(())
    }

    pub fn delay_levels(&self) -> Result<DelayLevels, StoreError> {
        DelayLevels::parse(&self.message_delay_level)
    }
}

/// The parsed `messageDelayLevel` table (`ScheduleMessageService.parseDelayLevel`):
/// level `i` (1-based) waits `delays[i - 1]` ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayLevels {
    delays_ms: Vec<i64>,
}

impl DelayLevels {
    pub fn parse(spec: &str) -> Result<Self, StoreError> {
        let delays_ms = spec
            .split_whitespace()
            .map(|item| {
                let bad = || StoreError::Config(format!("bad messageDelayLevel item {item:?}"));
                let unit = item.chars().last().ok_or_else(bad)?;
                let factor = match unit {
                    's' => 1_000,
                    'm' => 60_000,
                    'h' => 3_600_000,
                    'd' => 86_400_000,
                    _ => return Err(bad()),
                };
                let n: i64 = item[..item.len() - 1].parse().map_err(|_| bad())?;
                n.checked_mul(factor).filter(|d| *d >= 0).ok_or_else(bad)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if delays_ms.is_empty() {
            return Err(StoreError::Config("messageDelayLevel is empty".to_owned()));
        }
        Ok(Self { delays_ms })
    }

    pub fn max_level(&self) -> i32 {
        i32::try_from(self.delays_ms.len()).unwrap_or(i32::MAX)
    }

    /// `computeDeliverTimestamp`: store time + the level's delay; an unknown level
    /// waits one second.
    pub fn deliver_timestamp(&self, level: i32, store_timestamp: i64) -> i64 {
        let delay = usize::try_from(level - 1)
            .ok()
            .and_then(|i| self.delays_ms.get(i))
            .copied();
        store_timestamp.saturating_add(delay.unwrap_or(1_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_rocketmq() {
        let c = MessageStoreConfig::with_root("/r");
        assert_eq!(c.mapped_file_size_commit_log, 1_073_741_824);
        assert_eq!(c.consume_queue_file_size(), 6_000_000);
        assert_eq!(c.commit_log_dir(), PathBuf::from("/r/commitlog"));
        assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.delete_hours(), vec![4]);
        assert_eq!(c.disk_max_used_ratio(), 0.75);
        let levels = c.delay_levels().unwrap();
        assert_eq!(levels.max_level(), 18);
        assert_eq!(levels.deliver_timestamp(1, 10), 1_010);
        assert_eq!(levels.deliver_timestamp(18, 0), 7_200_000);
        assert_eq!(levels.deliver_timestamp(19, 0), 1_000);
        c.validate().unwrap();
    }

    #[test]
    fn set_by_rocketmq_key_and_serde_names() {
        let mut c = MessageStoreConfig::default();
        assert!(c.set("flushDiskType", "SYNC_FLUSH").unwrap());
        assert!(c.set("mappedFileSizeCommitLog", "65536").unwrap());
        assert!(c.set("checkCRCOnRecover", "false").unwrap());
        assert!(c.set("storePathCommitLog", "/x/cl").unwrap());
        assert!(!c.set("brokerName", "b").unwrap());
        assert!(c.set("syncFlushTimeout", "soon").is_err());
        assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
        assert_eq!(c.mapped_file_size_commit_log, 65536);
        assert_eq!(c.commit_log_dir(), PathBuf::from("/x/cl"));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["flushDiskType"], "SYNC_FLUSH");
        assert_eq!(json["warmMapedFileEnable"], false);
        let back: MessageStoreConfig =
            serde_json::from_str(r#"{"mappedFileSizeConsumeQueue": 30, "deleteWhen": "04;16"}"#)
                .unwrap();
        assert_eq!(back.consume_queue_file_size(), 40);
        assert_eq!(back.delete_hours(), vec![4, 16]);
        assert_eq!(back.max_message_size, 4 * 1024 * 1024);
    }

    #[test]
    fn bad_delay_levels_and_sizes_are_rejected() {
        assert!(DelayLevels::parse("1s 5x").is_err());
        assert!(DelayLevels::parse("").is_err());
        assert!(DelayLevels::parse("s").is_err());
        let c = MessageStoreConfig {
            mapped_file_size_commit_log: 100,
            ..MessageStoreConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
