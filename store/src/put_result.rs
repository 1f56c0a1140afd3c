//! Outcome of a put, as RocketMQ reports it (`PutMessageStatus`, `AppendMessageResult`,
//! `PutMessageResult`).

use std::net::SocketAddr;

use protocol::message::{PhysicalOffset, QueueOffset};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PutMessageStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
    /// Store shut down, slave role, or refusing writes because the disk is full
    /// (see [`crate::MessageStore::write_refusal`] for which).
    ServiceNotAvailable,
    CreateMapedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    OsPageCacheBusy,
    UnknownError,
}

impl PutMessageStatus {
    /// RocketMQ's enum constant name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PutOk => "PUT_OK",
            Self::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            Self::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            Self::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            Self::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            Self::CreateMapedFileFailed => "CREATE_MAPEDFILE_FAILED",
            Self::MessageIllegal => "MESSAGE_ILLEGAL",
            Self::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            Self::OsPageCacheBusy => "OS_PAGECACHE_BUSY",
            Self::UnknownError => "UNKNOWN_ERROR",
        }
    }

    /// The message is stored (possibly not yet durable / replicated).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            Self::PutOk
                | Self::FlushDiskTimeout
                | Self::FlushSlaveTimeout
                | Self::SlaveNotAvailable
        )
    }

    /// True when the store refused this record for what it is (a field over a limit,
    /// an illegal topic or body): the same record is refused again however often it is
    /// retried. Every other failure is about the store's state at that moment (a slave
    /// or fenced master, the page cache busy, a file that could not be created, a failed
    /// write) and may pass later, so a background service retries rather than skips it.
    pub fn refuses_the_record(self) -> bool {
        matches!(self, Self::MessageIllegal | Self::PropertiesSizeExceeded)
    }
}

/// Where and how a message (or batch) was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendMessageResult {
    /// Physical offset of the first record.
    pub wrote_offset: PhysicalOffset,
    /// Bytes of all records written (a BLANK filler is not counted).
    pub wrote_bytes: u32,
    pub store_timestamp: i64,
    /// Queue offset of the first record (0 for prepared / rollback records).
    pub logics_offset: QueueOffset,
    pub msg_num: u32,
    /// Physical offset of every record of a batch (empty for a single message).
    pub batch_offsets: Vec<PhysicalOffset>,
    pub store_host: SocketAddr,
}

impl AppendMessageResult {
    /// End of the written records: what must be durable before a SYNC_FLUSH put returns.
    pub fn end_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.wrote_offset.0 + i64::from(self.wrote_bytes))
    }

    /// Offset msgId of the (first) record: hex of the store host bytes + physical offset.
    pub fn msg_id(&self) -> String {
        offset_msg_id(self.store_host, self.wrote_offset)
    }

    /// `msgId` as RocketMQ reports it: comma-separated ids for a batch.
    pub fn msg_ids(&self) -> String {
        if self.batch_offsets.is_empty() {
            return self.msg_id();
        }
        let ids: Vec<String> = self
            .batch_offsets
            .iter()
            .map(|o| offset_msg_id(self.store_host, *o))
            .collect();
        ids.join(",")
    }
}

/// `MessageDecoder.createMessageId`, shared with the protocol crate's msgId codec.
pub use protocol::message::offset_msg_id;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutMessageStatus,
    /// Present whenever the records were written, even if the flush then timed out.
    pub append: Option<AppendMessageResult>,
}

impl PutMessageResult {
    pub fn failed(status: PutMessageStatus) -> Self {
        Self {
            status,
            append: None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == PutMessageStatus::PutOk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_id_matches_rocketmq_layout() {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        assert_eq!(
            offset_msg_id(host, PhysicalOffset(0x1234)),
            "0A00000100002A9F0000000000001234"
        );
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(offset_msg_id(v6, PhysicalOffset(1)).len(), 56);
        assert_eq!(
            PutMessageStatus::CreateMapedFileFailed.as_str(),
            "CREATE_MAPEDFILE_FAILED"
        );
    }
}
