//! One `topic`/`queueId` ConsumeQueue (`ConsumeQueue.java`): a list of [`CqFile`]s forming
//! a logical byte stream in which logical offset `n` lives at byte `n × 20`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::RwLock;
use protocol::message::{PhysicalOffset, QueueOffset};

use super::CqError;
use super::file::CqFile;
use super::unit::{CqUnit, UNIT_SIZE, UNIT_SIZE_I64};
use crate::fs::{OsFs, StoreFs};

/// What [`ConsumeQueue::put`] did with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    Appended,
    /// The record ends at or below the highest record already indexed (re-dispatch).
    AlreadyIndexed,
    /// The unit's logical offset is below the queue's write position.
    Duplicate,
}

/// Units of one file from a start position up to the write position seen when the window
/// was taken (`ConsumeQueue.getIndexBuffer`). Holds its file alive.
pub struct UnitWindow {
    file: Arc<CqFile>,
    start: usize,
    end: usize,
}

impl UnitWindow {
    /// Logical offset of the first unit in the window.
    pub fn start_offset(&self) -> QueueOffset {
        QueueOffset((self.file.from() + self.start as i64) / UNIT_SIZE_I64)
    }

    pub fn len(&self) -> usize {
        (self.end - self.start) / UNIT_SIZE
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// `(logical offset, unit)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (QueueOffset, CqUnit)> + '_ {
        let first = self.start_offset().0;
        (self.start..self.end)
            .step_by(UNIT_SIZE)
            .enumerate()
            .map(move |(n, pos)| (QueueOffset(first + n as i64), self.file.raw_unit(pos)))
    }

    /// First logical offset of the next file (`rollNextFile`).
    pub fn next_file_offset(&self) -> QueueOffset {
        QueueOffset((self.file.from() + self.file.size() as i64) / UNIT_SIZE_I64)
    }
}

pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    dir: PathBuf,
    file_size: usize,
    files: RwLock<Vec<Arc<CqFile>>>,
    fs: Arc<dyn StoreFs>,
    /// End (offset + size) of the last record indexed: re-dispatch below it is skipped.
    max_physic_offset: AtomicI64,
    /// Logical byte offset of the first unit whose record is still in the CommitLog.
    min_logic_offset: AtomicI64,
}

impl ConsumeQueue {
    /// Loads the queue's files from `dir` (which may not exist yet). Every file must be
    /// exactly `file_size` bytes (the newest may be short, see `CqFile::open`); `file_size` must be a positive multiple of 20.
    pub fn load(
        topic: &str,
        queue_id: i32,
        dir: PathBuf,
        file_size: usize,
    ) -> Result<Self, CqError> {
        Self::load_with_fs(topic, queue_id, dir, file_size, Arc::new(OsFs))
    }

    /// [`Self::load`] with new files allocated through `fs`.
    pub fn load_with_fs(
        topic: &str,
        queue_id: i32,
        dir: PathBuf,
        file_size: usize,
        fs: Arc<dyn StoreFs>,
    ) -> Result<Self, CqError> {
        if file_size == 0 || !file_size.is_multiple_of(UNIT_SIZE) {
            return Err(CqError::BadConfig(format!(
                "ConsumeQueue file size {file_size} is not a positive multiple of {UNIT_SIZE}"
            )));
        }
        let mut files = Vec::new();
        match fs::read_dir(&dir) {
            Ok(entries) => {
                let mut paths: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect();
                paths.retain(|p| !matches!(crate::fs::remove_stale_tmp(p), Ok(true)));
                paths.sort();
                let newest = paths.len().saturating_sub(1);
                for (i, path) in paths.iter().enumerate() {
                    files.push(Arc::new(CqFile::open(
                        fs.as_ref(),
                        path,
                        file_size,
                        i == newest,
                    )?));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CqError::io(&dir)(e)),
        }
        let queue = Self {
            topic: topic.to_string(),
            queue_id,
            dir,
            file_size,
            files: RwLock::new(files),
            fs,
            max_physic_offset: AtomicI64::new(-1),
            min_logic_offset: AtomicI64::new(0),
        };
        if let Some(first) = queue.files.read().first() {
            queue
                .min_logic_offset
                .store(first.from(), Ordering::Release);
        }
        Ok(queue)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn file_size(&self) -> usize {
        self.file_size
    }

    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    /// End of the last indexed record (`getMaxPhysicOffset`), `None` when nothing indexed.
    pub fn max_physic_offset(&self) -> Option<PhysicalOffset> {
        let v = self.max_physic_offset.load(Ordering::Acquire);
        (v >= 0).then_some(PhysicalOffset(v))
    }

    /// `getMinOffsetInQueue`.
    pub fn min_offset(&self) -> QueueOffset {
        QueueOffset(self.min_logic_offset.load(Ordering::Acquire) / UNIT_SIZE_I64)
    }

    /// `getMaxOffsetInQueue`: the next logical offset to be written.
    pub fn max_offset(&self) -> QueueOffset {
        QueueOffset(self.files.read().last().map_or(0, |f| f.end()) / UNIT_SIZE_I64)
    }

    /// `ConsumeQueue.recover`: from the third-to-last file, keep units while
    /// `offset >= 0 && size > 0`; everything after the first other unit is truncated.
    pub fn recover(&self) -> Result<(), CqError> {
        let files = self.files.read().clone();
        if files.is_empty() {
            return Ok(());
        }
        let start = files.len().saturating_sub(3);
        let mut end = files[start].from();
        let mut max_physic = -1i64;
        for file in &files[start..] {
            let mut pos = 0;
            while pos + UNIT_SIZE <= file.size() {
                let unit = file.raw_unit(pos);
                // Units follow CommitLog order: one that does not start at or after the
                // previous record's end is torn or stale, and so is everything after it.
                if !unit.is_written()
                    || (!unit.is_pre_blank() && unit.physical_offset.0 < max_physic)
                {
                    break;
                }
                if !unit.is_pre_blank() {
                    max_physic = unit.end_offset().0;
                }
                pos += UNIT_SIZE;
            }
            end = file.from() + pos as i64;
            if pos < file.size() {
                break;
            }
        }
        self.truncate_logic_to(end)?;
        self.max_physic_offset.store(max_physic, Ordering::Release);
        Ok(())
    }

    /// Drops every unit at or after logical byte `end` (`truncateDirtyFiles`): files
    /// starting after it are deleted, the file holding it gets its write position there (a
    /// file starting exactly at `end` stays, empty, so the queue keeps its logical position).
    fn truncate_logic_to(&self, end: i64) -> Result<(), CqError> {
        self.truncate_logic(end, false)
    }

    /// `live`: readers may hold windows, so the file holding `end` is replaced by a copy
    /// of its prefix (see [`CqFile::replace_with_prefix`]) rather than zeroed in place.
    fn truncate_logic(&self, end: i64, live: bool) -> Result<(), CqError> {
        let mut files = self.files.write();
        let mut deleted = false;
        while let Some(last) = files.last() {
            if last.from() <= end {
                break;
            }
            last.delete(self.fs.as_ref())?;
            files.pop();
            deleted = true;
        }
        if deleted {
            // The removals must be durable before anything is written after the cut, or a
            // crash brings the deleted files (and their stale units) back.
            crate::fs::sync_dir(&self.dir).map_err(CqError::io(&self.dir))?;
        }
        if let Some((last, earlier)) = files.split_last_mut() {
            let pos = (end - last.from()).clamp(0, last.size() as i64) as usize;
            if live {
                if pos < last.wrote() {
                    *last = Arc::new(last.replace_with_prefix(self.fs.as_ref(), pos)?);
                }
            } else {
                last.truncate_to(self.fs.as_ref(), pos)?;
            }
            if !live {
                // Recovery: every earlier file is whole.
                for file in earlier {
                    file.set_positions(file.size());
                }
            }
        }
        let min = self.min_logic_offset.load(Ordering::Acquire);
        self.min_logic_offset
            .store(min.min(end.max(0)), Ordering::Release);
        Ok(())
    }

    /// Appends the unit for logical offset `cq_offset` (`putMessagePositionInfo`).
    pub fn put(&self, unit: CqUnit, cq_offset: QueueOffset) -> Result<PutOutcome, CqError> {
        if unit.end_offset().0 <= self.max_physic_offset.load(Ordering::Acquire) {
            return Ok(PutOutcome::AlreadyIndexed);
        }
        let expect = cq_offset
            .0
            .checked_mul(UNIT_SIZE_I64)
            .filter(|v| *v >= 0)
            .ok_or(CqError::BadOffset(cq_offset))?;
        let file = self.file_for_append(expect)?;
        let current = file.end();
        if expect < current {
            return Ok(PutOutcome::Duplicate);
        }
        if expect != current {
            // Java logs "logic queue order maybe wrong" and appends anyway; so do we.
            tracing::warn!(
                topic = %self.topic, queue_id = self.queue_id, expect, current,
                "ConsumeQueue logic offset gap: unit appended at the write position"
            );
        }
        if !file.append(&unit) {
            return Err(CqError::Internal(
                "ConsumeQueue file full after roll".into(),
            ));
        }
        self.max_physic_offset
            .store(unit.end_offset().0, Ordering::Release);
        Ok(PutOutcome::Appended)
    }

    /// The file to append to, creating the first one (with pre-blank filling when the queue
    /// starts at a non-zero offset) or the next one when the last is full.
    fn file_for_append(&self, expect: i64) -> Result<Arc<CqFile>, CqError> {
        if let Some(last) = self.files.read().last()
            && !last.is_full()
        {
            return Ok(Arc::clone(last));
        }
        let mut files = self.files.write();
        let size = self.file_size as i64;
        let file = match files.last() {
            Some(last) if !last.is_full() => return Ok(Arc::clone(last)),
            Some(last) => CqFile::create(
                self.fs.as_ref(),
                &self.dir,
                last.from() + size,
                self.file_size,
            )?,
            None => {
                let from = expect - expect % size;
                let file = CqFile::create(self.fs.as_ref(), &self.dir, from, self.file_size)?;
                while file.end() < expect {
                    file.append(&CqUnit::PRE_BLANK);
                }
                self.min_logic_offset.store(expect, Ordering::Release);
                file
            }
        };
        let file = Arc::new(file);
        files.push(Arc::clone(&file));
        Ok(file)
    }

    /// `MappedFileQueue.getMappedFileByTime`: the first file whose mtime is at or after
    /// `timestamp`, else the last file. RocketMQ 4.9 uses the file's last-modified time as
    /// a cheap upper bound of the store times it indexes; a file whose mtime cannot be
    /// read counts as 0, as Java's `File.lastModified` does.
    pub fn file_by_time(&self, timestamp: i64) -> Option<Arc<CqFile>> {
        let files = self.files.read();
        files
            .iter()
            .find(|f| f.modified_millis() >= timestamp)
            .or(files.last())
            .cloned()
    }

    /// `minLogicOffset`: logical byte offset of the first unit still served.
    pub fn min_logic_byte(&self) -> i64 {
        self.min_logic_offset.load(Ordering::Acquire)
    }

    /// The unit at `offset`, if written.
    pub fn get(&self, offset: QueueOffset) -> Option<CqUnit> {
        let window = self.window_from(offset)?;
        window.iter().next().map(|(_, unit)| unit)
    }

    /// Units from `offset` to the end of the file holding it (`getIndexBuffer`); `None`
    /// when the offset is below the minimum, not written, or its file is gone.
    pub fn window_from(&self, offset: QueueOffset) -> Option<UnitWindow> {
        let logic = offset.0.checked_mul(UNIT_SIZE_I64)?;
        if logic < self.min_logic_offset.load(Ordering::Acquire) {
            return None;
        }
        let file = self.file_containing(logic)?;
        let start = (logic - file.from()) as usize;
        let end = file.wrote();
        (start < end).then_some(UnitWindow { file, start, end })
    }

    fn file_containing(&self, logic: i64) -> Option<Arc<CqFile>> {
        let files = self.files.read();
        let size = self.file_size as i64;
        // Files are sorted by start offset; a missing file leaves a gap, not a shift.
        let index = files
            .binary_search_by_key(&(logic - logic.rem_euclid(size)), |f| f.from())
            .ok()?;
        Some(Arc::clone(&files[index]))
    }

    /// Drops units whose record does not end at or before `commitlog_end`
    /// (`truncateDirtyLogicFiles`), so no unit points past the CommitLog's valid end.
    pub fn truncate_dirty(&self, commitlog_end: PhysicalOffset) -> Result<(), CqError> {
        self.truncate_dirty_with(commitlog_end, false)
    }

    /// [`Self::truncate_dirty`] while the store serves reads (replication truncation).
    pub fn truncate_dirty_live(&self, commitlog_end: PhysicalOffset) -> Result<(), CqError> {
        self.truncate_dirty_with(commitlog_end, true)
    }

    fn truncate_dirty_with(
        &self,
        commitlog_end: PhysicalOffset,
        live: bool,
    ) -> Result<(), CqError> {
        let files = self.files.read().clone();
        let mut keep_end = files.first().map_or(0, |f| f.from());
        let mut max_physic = -1i64;
        'files: for file in &files {
            let mut pos = 0;
            while pos + UNIT_SIZE <= file.wrote() {
                let unit = file.raw_unit(pos);
                if !unit.is_pre_blank() {
                    if unit.end_offset() > commitlog_end {
                        keep_end = file.from() + pos as i64;
                        break 'files;
                    }
                    max_physic = unit.end_offset().0;
                }
                pos += UNIT_SIZE;
            }
            keep_end = file.end();
        }
        self.truncate_logic(keep_end, live)?;
        self.max_physic_offset.store(max_physic, Ordering::Release);
        Ok(())
    }

    /// Recovery: drops units from the end while `valid(logical offset, unit)` says the
    /// CommitLog does not hold the record they describe (a torn unit written just before
    /// a crash can name any offset and size, and one past every real record would make
    /// `put` skip every later unit as "already indexed"). When units were dropped,
    /// returns the CommitLog offset from which dispatch must rebuild them: the end of the
    /// last unit kept (0 when none is).
    pub fn truncate_invalid_tail(
        &self,
        mut valid: impl FnMut(QueueOffset, CqUnit) -> bool,
    ) -> Result<Option<PhysicalOffset>, CqError> {
        let files = self.files.read().clone();
        let mut keep_end = None;
        let mut dropped = false;
        'files: for file in files.iter().rev() {
            let mut pos = file.wrote();
            while pos >= UNIT_SIZE {
                let unit = file.raw_unit(pos - UNIT_SIZE);
                let logical = QueueOffset((file.from() + (pos - UNIT_SIZE) as i64) / UNIT_SIZE_I64);
                if unit.is_pre_blank() || valid(logical, unit) {
                    keep_end = Some(file.from() + pos as i64);
                    break 'files;
                }
                dropped = true;
                pos -= UNIT_SIZE;
            }
        }
        if !dropped {
            return Ok(None);
        }
        let end = keep_end.unwrap_or_else(|| files.first().map_or(0, |f| f.from()));
        tracing::warn!(
            topic = %self.topic, queue_id = self.queue_id, end = end / UNIT_SIZE_I64,
            "dropping ConsumeQueue units that do not match the CommitLog"
        );
        self.truncate_logic_to(end)?;
        // The last real unit kept is now the highest record indexed (none: -1).
        let max_physic = self
            .files
            .read()
            .last()
            .filter(|f| f.wrote() >= UNIT_SIZE)
            .map(|f| f.raw_unit(f.wrote() - UNIT_SIZE))
            .filter(|u| !u.is_pre_blank())
            .map_or(-1, |u| u.end_offset().0);
        self.max_physic_offset.store(max_physic, Ordering::Release);
        // The dropped units' own offsets are not trustworthy; the end of the last unit
        // kept is a record boundary, and every record of this queue after it must be
        // dispatched again.
        Ok(Some(PhysicalOffset(max_physic.max(0))))
    }

    /// `correctMinOffset`: the first unit whose record is at or above the CommitLog minimum.
    pub fn correct_min_offset(&self, commitlog_min: PhysicalOffset) {
        let files = self.files.read().clone();
        for file in &files {
            let wrote = file.wrote();
            if wrote == 0 {
                continue;
            }
            let last = file.raw_unit(wrote - UNIT_SIZE);
            if last.physical_offset < commitlog_min && !last.is_pre_blank() {
                continue;
            }
            let mut pos = 0;
            while pos < wrote {
                let unit = file.raw_unit(pos);
                if !unit.is_pre_blank() && unit.physical_offset >= commitlog_min {
                    break;
                }
                pos += UNIT_SIZE;
            }
            self.min_logic_offset
                .store(file.from() + pos as i64, Ordering::Release);
            return;
        }
        if let Some(last) = files.last() {
            self.min_logic_offset.store(last.end(), Ordering::Release);
        }
    }

    /// `deleteExpiredFile`: deletes whole files (never the last one) whose last unit points
    /// below the CommitLog minimum, then corrects the minimum offset. Returns files deleted.
    pub fn delete_below(&self, commitlog_min: PhysicalOffset) -> Result<usize, CqError> {
        let mut deleted = 0;
        {
            let mut files = self.files.write();
            while files.len() > 1 {
                let first = &files[0];
                let wrote = first.wrote();
                let expired = wrote >= UNIT_SIZE && {
                    let last = first.raw_unit(wrote - UNIT_SIZE);
                    last.is_written() && last.end_offset() <= commitlog_min
                };
                if !expired {
                    break;
                }
                first.delete(self.fs.as_ref())?;
                files.remove(0);
                deleted += 1;
            }
        }
        self.correct_min_offset(commitlog_min);
        Ok(deleted)
    }

    /// Flushes files with at least `least_pages` dirty 4 KiB pages (0 = everything dirty).
    /// A fenced file fails every flush, dirty or not: the checkpoint must not advance past
    /// units whose durability is unknown.
    pub fn flush(&self, least_pages: usize) -> Result<(), CqError> {
        let files = self.files.read().clone();
        for file in files.iter() {
            if file.is_fenced() {
                return file.flush(self.fs.as_ref());
            }
            if file.dirty_bytes() == 0 {
                continue;
            }
            if least_pages == 0 || file.is_full() || file.dirty_bytes() >= least_pages * 4096 {
                file.flush(self.fs.as_ref())?;
            }
        }
        Ok(())
    }

    /// Deletes every file (`ConsumeQueue.destroy`).
    pub fn destroy(&self) -> Result<(), CqError> {
        let mut files = self.files.write();
        for file in files.drain(..) {
            file.delete(self.fs.as_ref())?;
        }
        self.max_physic_offset.store(-1, Ordering::Release);
        self.min_logic_offset.store(0, Ordering::Release);
        Ok(())
    }
}
