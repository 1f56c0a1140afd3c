//! One 20-byte ConsumeQueue unit (`ConsumeQueue.CQ_STORE_UNIT_SIZE`).

use protocol::message::PhysicalOffset;

pub const UNIT_SIZE: usize = 20;
/// Same, for offset arithmetic on the logical byte stream.
pub const UNIT_SIZE_I64: i64 = UNIT_SIZE as i64;

/// Where a queue's message lives in the CommitLog, plus its filter hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    pub physical_offset: PhysicalOffset,
    /// The record's TOTALSIZE.
    pub size: i32,
    /// Tag hash (`String.hashCode` of TAGS, sign-extended), or the deliver time for
    /// `SCHEDULE_TOPIC_XXXX`.
    pub tags_code: i64,
}

impl CqUnit {
    /// The filler `ConsumeQueue.fillPreBlank` writes before the first unit of a queue whose
    /// first file starts below that unit's logical offset.
    pub const PRE_BLANK: Self = Self {
        physical_offset: PhysicalOffset(0),
        size: i32::MAX,
        tags_code: 0,
    };

    pub fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut out = [0; UNIT_SIZE];
        out[0..8].copy_from_slice(&self.physical_offset.0.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8; UNIT_SIZE]) -> Self {
        let mut offset = [0; 8];
        offset.copy_from_slice(&bytes[0..8]);
        let mut size = [0; 4];
        size.copy_from_slice(&bytes[8..12]);
        let mut tags = [0; 8];
        tags.copy_from_slice(&bytes[12..20]);
        Self {
            physical_offset: PhysicalOffset(i64::from_be_bytes(offset)),
            size: i32::from_be_bytes(size),
            tags_code: i64::from_be_bytes(tags),
        }
    }

    /// `offset >= 0 && size > 0`: the recovery and read-path test for a written unit.
    pub fn is_written(&self) -> bool {
        self.physical_offset.0 >= 0 && self.size > 0
    }

    pub fn is_pre_blank(&self) -> bool {
        *self == Self::PRE_BLANK
    }

    /// First CommitLog byte after the record.
    pub fn end_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.physical_offset.0.saturating_add(i64::from(self.size)))
    }
}
