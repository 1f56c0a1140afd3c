//! One IndexFile (`IndexFile.java`, `IndexHeader.java`): a 40-byte
//! header, `slot_num` 4-byte hash slots and `index_num` 20-byte entries, all big-endian.
//! This is only that encoding: the file itself is a [`MappedFile`] of the fixed-layout
//! kind [`INDEX`], which owns allocation, flushing (and its fence) and deletion.
//!
//! Concurrency contract: one writer (the reput thread) fills an entry, then publishes it by
//! storing the slot with `Release`; queries load slots with `Acquire` and only follow entry
//! numbers below the published index count, so every entry they read is complete and never
//! changes afterwards. Header values live in atomics (mirrored into the mapping for disk).

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use protocol::message::PhysicalOffset;

use super::IndexError;
use crate::fs::StoreFs;
use crate::mapped_file::{INDEX, MappedFile, OpenError};

pub const HEADER_SIZE: usize = 40;
pub const SLOT_SIZE: usize = 4;
pub const ENTRY_SIZE: usize = 20;

/// Size of a file with these dimensions.
pub fn index_file_size(slot_num: usize, index_num: usize) -> usize {
    HEADER_SIZE + slot_num * SLOT_SIZE + index_num * ENTRY_SIZE
}

pub struct IndexFile {
    file: MappedFile,
    slot_num: usize,
    index_num: usize,
    begin_timestamp: AtomicI64,
    end_timestamp: AtomicI64,
    begin_phy_offset: AtomicI64,
    end_phy_offset: AtomicI64,
    hash_slot_count: AtomicI32,
    /// Next entry number; entry 0 is never used. Single writer: `put` is only called by
    /// the reput thread (or recovery), never concurrently.
    index_count: AtomicI32,
}

impl From<OpenError> for IndexError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Io { path, source } => IndexError::Io { path, source },
            OpenError::FileSize {
                path,
                expected,
                actual,
            } => IndexError::FileSize {
                path,
                expected,
                actual,
            },
            // Index files are not named by offset, so their names are never parsed.
            OpenError::BadName(path) => {
                IndexError::io(&path)(std::io::ErrorKind::InvalidInput.into())
            }
        }
    }
}

impl IndexFile {
    /// Creates a new file whose header starts at the previous file's end
    /// (`IndexService.getAndCreateLastIndexFile`).
    pub fn create(
        fs: &dyn StoreFs,
        path: &Path,
        slot_num: usize,
        index_num: usize,
        end_phy_offset: PhysicalOffset,
        end_timestamp: i64,
    ) -> Result<Self, IndexError> {
        let size = checked_size(slot_num, index_num)?;
        let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(dir), Some(name)) => (dir, name),
            _ => {
                return Err(IndexError::io(path)(
                    std::io::ErrorKind::InvalidInput.into(),
                ));
            }
        };
        let file =
            MappedFile::create(fs, INDEX, dir, name, 0, size).map_err(IndexError::io(path))?;
        let f = Self::new(file, slot_num, index_num);
        for v in [&f.begin_phy_offset, &f.end_phy_offset] {
            v.store(end_phy_offset.0, Ordering::Relaxed);
        }
        for v in [&f.begin_timestamp, &f.end_timestamp] {
            v.store(end_timestamp, Ordering::Relaxed);
        }
        f.write_header();
        Ok(f)
    }

    /// Maps an existing file, which must have exactly the configured size.
    pub fn open(
        fs: &dyn StoreFs,
        path: &Path,
        slot_num: usize,
        index_num: usize,
    ) -> Result<Self, IndexError> {
        let size = checked_size(slot_num, index_num)?;
        let f = Self::new(
            MappedFile::open(fs, INDEX, path, size, false)?,
            slot_num,
            index_num,
        );
        let h = f.file.read_array::<HEADER_SIZE>(0);
        let i64_at = |p: usize| i64::from_be_bytes(h[p..p + 8].try_into().unwrap_or([0; 8]));
        let i32_at = |p: usize| i32::from_be_bytes(h[p..p + 4].try_into().unwrap_or([0; 4]));
        f.begin_timestamp.store(i64_at(0), Ordering::Relaxed);
        f.end_timestamp.store(i64_at(8), Ordering::Relaxed);
        f.begin_phy_offset.store(i64_at(16), Ordering::Relaxed);
        f.end_phy_offset.store(i64_at(24), Ordering::Relaxed);
        f.hash_slot_count.store(i32_at(32), Ordering::Relaxed);
        let count = i32_at(36).clamp(1, index_num as i32);
        f.index_count.store(count, Ordering::Release);
        Ok(f)
    }

    fn new(file: MappedFile, slot_num: usize, index_num: usize) -> Self {
        Self {
            file,
            slot_num,
            index_num,
            begin_timestamp: AtomicI64::new(0),
            end_timestamp: AtomicI64::new(0),
            begin_phy_offset: AtomicI64::new(0),
            end_phy_offset: AtomicI64::new(0),
            hash_slot_count: AtomicI32::new(0),
            index_count: AtomicI32::new(1),
        }
    }

    /// The shared mapped-file base.
    pub fn mapped(&self) -> &MappedFile {
        &self.file
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn begin_timestamp(&self) -> i64 {
        self.begin_timestamp.load(Ordering::Acquire)
    }

    pub fn end_timestamp(&self) -> i64 {
        self.end_timestamp.load(Ordering::Acquire)
    }

    pub fn begin_phy_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.begin_phy_offset.load(Ordering::Acquire))
    }

    pub fn end_phy_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.end_phy_offset.load(Ordering::Acquire))
    }

    pub fn index_count(&self) -> i32 {
        self.index_count.load(Ordering::Acquire)
    }

    pub fn is_full(&self) -> bool {
        self.index_count() as usize >= self.index_num
    }

    /// `putKey`: adds an entry for `key_hash` (already non-negative); `false` when full.
    pub fn put(&self, key_hash: i32, phy_offset: PhysicalOffset, store_timestamp: i64) -> bool {
        let count = self.index_count.load(Ordering::Relaxed);
        if count as usize >= self.index_num {
            return false;
        }
        let slot = self.slot(key_hash);
        let mut previous = i32::from_be(slot.load(Ordering::Relaxed));
        if previous <= 0 || previous > count {
            previous = 0;
        }
        let begin = self.begin_timestamp.load(Ordering::Relaxed);
        let time_diff = if begin <= 0 {
            0
        } else {
            ((store_timestamp - begin) / 1000).clamp(0, i64::from(i32::MAX)) as i32
        };
        let mut entry = [0u8; ENTRY_SIZE];
        entry[0..4].copy_from_slice(&key_hash.to_be_bytes());
        entry[4..12].copy_from_slice(&phy_offset.0.to_be_bytes());
        entry[12..16].copy_from_slice(&time_diff.to_be_bytes());
        entry[16..20].copy_from_slice(&previous.to_be_bytes());
        self.write_bytes(self.entry_pos(count), &entry);
        // Count first, slot second: a query that sees the slot also sees a count above it.
        self.index_count.store(count + 1, Ordering::Release);
        slot.store(count.to_be(), Ordering::Release);

        if count <= 1 {
            self.begin_phy_offset.store(phy_offset.0, Ordering::Release);
            self.begin_timestamp
                .store(store_timestamp, Ordering::Release);
        }
        if previous == 0 {
            self.hash_slot_count.fetch_add(1, Ordering::Relaxed);
        }
        self.end_phy_offset.store(phy_offset.0, Ordering::Release);
        self.end_timestamp.store(store_timestamp, Ordering::Release);
        self.write_header();
        true
    }

    /// `isTimeMatched`: does `[begin, end]` overlap the file's time range?
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.begin_timestamp(), self.end_timestamp());
        (begin >= b && begin <= e) || (end >= b && end <= e) || (begin <= b && end >= e)
    }

    /// `selectPhyOffset`: walks the bucket chain of `key_hash`, collecting offsets of entries
    /// with the same hash stored within `[begin, end]`, until `out` holds `max` offsets.
    pub fn select(
        &self,
        key_hash: i32,
        max: usize,
        begin: i64,
        end: i64,
        out: &mut Vec<PhysicalOffset>,
    ) {
        let mut next = i32::from_be(self.slot(key_hash).load(Ordering::Acquire));
        let count = self.index_count();
        if next <= 0 || next >= count || count <= 1 {
            return;
        }
        let file_begin = self.begin_timestamp();
        loop {
            if out.len() >= max {
                return;
            }
            let e = self.read_bytes::<ENTRY_SIZE>(self.entry_pos(next));
            let hash = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            let offset = i64::from_be_bytes([e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11]]);
            let time_diff = i32::from_be_bytes([e[12], e[13], e[14], e[15]]);
            let prev = i32::from_be_bytes([e[16], e[17], e[18], e[19]]);
            if time_diff < 0 {
                return;
            }
            let time = file_begin.saturating_add(i64::from(time_diff) * 1000);
            if hash == key_hash && time >= begin && time <= end {
                out.push(PhysicalOffset(offset));
            }
            // Entries only ever link to older (lower-numbered) entries, so a valid chain
            // strictly decreases; anything else is a corrupt file that could loop for ever.
            if prev <= 0 || prev >= next || time < begin {
                return;
            }
            next = prev;
        }
    }

    /// msync of the whole file (slots and header change in place). The first failure
    /// fences the file: every later flush fails too.
    pub fn flush(&self, fs: &dyn StoreFs) -> Result<(), IndexError> {
        self.file
            .flush(fs)
            .map(drop)
            .map_err(IndexError::io(self.path()))
    }

    pub fn delete(&self, fs: &dyn StoreFs) -> Result<(), IndexError> {
        self.file.delete(fs).map_err(IndexError::io(self.path()))
    }

    fn slot(&self, key_hash: i32) -> &AtomicI32 {
        let index = key_hash.unsigned_abs() as usize % self.slot_num;
        // In bounds and a multiple of 4: the size was checked to fit a u32 at creation.
        self.file
            .atomic_i32_at((HEADER_SIZE + index * SLOT_SIZE) as u32)
    }

    fn entry_pos(&self, number: i32) -> usize {
        HEADER_SIZE + self.slot_num * SLOT_SIZE + number as usize * ENTRY_SIZE
    }

    fn write_header(&self) {
        let mut h = [0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(&self.begin_timestamp.load(Ordering::Relaxed).to_be_bytes());
        h[8..16].copy_from_slice(&self.end_timestamp.load(Ordering::Relaxed).to_be_bytes());
        h[16..24].copy_from_slice(&self.begin_phy_offset.load(Ordering::Relaxed).to_be_bytes());
        h[24..32].copy_from_slice(&self.end_phy_offset.load(Ordering::Relaxed).to_be_bytes());
        h[32..36].copy_from_slice(&self.hash_slot_count.load(Ordering::Relaxed).to_be_bytes());
        h[36..40].copy_from_slice(&self.index_count.load(Ordering::Relaxed).to_be_bytes());
        self.write_bytes(0, &h);
    }

    /// Single-writer raw write: header bytes (only read back at load) or an entry that is not
    /// yet published.
    fn write_bytes(&self, pos: usize, bytes: &[u8]) {
        self.file.write_fixed(pos as u32, bytes);
    }

    fn read_bytes<const N: usize>(&self, pos: usize) -> [u8; N] {
        self.file
            .read_array::<N>(u32::try_from(pos).unwrap_or(u32::MAX))
    }
}

/// The file size of valid dimensions; the base maps files of up to `u32::MAX` bytes.
fn checked_size(slot_num: usize, index_num: usize) -> Result<u32, IndexError> {
    let size = slot_num
        .checked_mul(SLOT_SIZE)
        .zip(index_num.checked_mul(ENTRY_SIZE))
        .and_then(|(slots, entries)| slots.checked_add(entries)?.checked_add(HEADER_SIZE))
        .and_then(|size| u32::try_from(size).ok());
    match size {
        Some(size) if slot_num > 0 && index_num >= 2 && index_num <= i32::MAX as usize => Ok(size),
        _ => Err(IndexError::BadConfig(format!(
            "index dimensions slots={slot_num} entries={index_num}"
        ))),
    }
}
