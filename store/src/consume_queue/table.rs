//! All ConsumeQueues of a store (`DefaultMessageStore.consumeQueueTable`).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use protocol::message::{PhysicalOffset, QueueOffset};

use super::{ConsumeQueue, CqError};
use crate::fs::{OsFs, StoreFs};

type Queues = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

pub struct ConsumeQueueTable {
    root: PathBuf,
    file_size: usize,
    fs: Arc<dyn StoreFs>,
    queues: RwLock<Queues>,
}

impl ConsumeQueueTable {
    /// Loads every `<root>/<topic>/<queueId>/` directory (`DefaultMessageStore.loadConsumeQueue`).
    pub fn load(root: &Path, file_size: usize) -> Result<Self, CqError> {
        Self::load_with_fs(root, file_size, Arc::new(OsFs))
    }

    /// [`Self::load`] with every queue's files allocated through `fs`.
    pub fn load_with_fs(
        root: &Path,
        file_size: usize,
        fs: Arc<dyn StoreFs>,
    ) -> Result<Self, CqError> {
        let mut queues: Queues = HashMap::new();
        match fs::read_dir(root) {
            Ok(topics) => {
                for topic_dir in topics.filter_map(Result::ok).map(|e| e.path()) {
                    let Some(topic) = topic_dir.file_name().and_then(|n| n.to_str()) else {
                        continue;
                    };
                    if !topic_dir.is_dir() {
                        continue;
                    }
                    let topic = topic.to_string();
                    let entries = fs::read_dir(&topic_dir).map_err(CqError::io(&topic_dir))?;
                    for queue_dir in entries.filter_map(Result::ok).map(|e| e.path()) {
                        let queue_id = queue_dir
                            .file_name()
                            .and_then(|n| n.to_str())
                            .and_then(|n| n.parse::<i32>().ok());
                        let Some(queue_id) = queue_id.filter(|_| queue_dir.is_dir()) else {
                            tracing::warn!(path = %queue_dir.display(), "ignoring non-queue entry in consumequeue");
                            continue;
                        };
                        let queue = ConsumeQueue::load_with_fs(
                            &topic,
                            queue_id,
                            queue_dir,
                            file_size,
                            Arc::clone(&fs),
                        )?;
                        queues
                            .entry(topic.clone())
                            .or_default()
                            .insert(queue_id, Arc::new(queue));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CqError::io(root)(e)),
        }
        Ok(Self {
            root: root.to_path_buf(),
            file_size,
            fs,
            queues: RwLock::new(queues),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn find(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.read().get(topic)?.get(&queue_id).cloned()
    }

    /// `findConsumeQueue`: creates the (empty, file-less) queue on first use. Topic names
    /// that could escape the directory are refused.
    pub fn find_or_create(&self, topic: &str, queue_id: i32) -> Result<Arc<ConsumeQueue>, CqError> {
        if let Some(queue) = self.find(topic, queue_id) {
            return Ok(queue);
        }
        if !usable_dir_name(topic) {
            return Err(CqError::BadConfig(format!(
                "topic name {topic:?} unusable as a directory"
            )));
        }
        let mut queues = self.queues.write();
        let by_id = queues.entry(topic.to_string()).or_default();
        if let Some(queue) = by_id.get(&queue_id) {
            return Ok(Arc::clone(queue));
        }
        let dir = self.root.join(topic).join(queue_id.to_string());
        let queue = Arc::new(ConsumeQueue::load_with_fs(
            topic,
            queue_id,
            dir,
            self.file_size,
            Arc::clone(&self.fs),
        )?);
        by_id.insert(queue_id, Arc::clone(&queue));
        Ok(queue)
    }

    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .values()
            .flat_map(|by_id| by_id.values().cloned())
            .collect()
    }

    /// Recovers every queue; returns the highest record end they index
    /// (`maxPhyOffsetOfConsumeQueue`).
    pub fn recover(&self) -> Result<Option<PhysicalOffset>, CqError> {
        for queue in self.all() {
            queue.recover()?;
        }
        Ok(self.max_physic_offset())
    }

    pub fn max_physic_offset(&self) -> Option<PhysicalOffset> {
        self.all()
            .iter()
            .filter_map(|q| q.max_physic_offset())
            .max()
    }

    pub fn truncate_dirty(&self, commitlog_end: PhysicalOffset) -> Result<(), CqError> {
        for queue in self.all() {
            queue.truncate_dirty(commitlog_end)?;
        }
        Ok(())
    }

    /// [`Self::truncate_dirty`] while the store serves reads.
    pub fn truncate_dirty_live(&self, commitlog_end: PhysicalOffset) -> Result<(), CqError> {
        for queue in self.all() {
            queue.truncate_dirty_live(commitlog_end)?;
        }
        Ok(())
    }

    pub fn correct_min_offsets(&self, commitlog_min: PhysicalOffset) {
        for queue in self.all() {
            queue.correct_min_offset(commitlog_min);
        }
    }

    pub fn delete_below(&self, commitlog_min: PhysicalOffset) -> Result<usize, CqError> {
        let mut deleted = 0;
        for queue in self.all() {
            deleted += queue.delete_below(commitlog_min)?;
        }
        Ok(deleted)
    }

    pub fn flush(&self, least_pages: usize) -> Result<(), CqError> {
        for queue in self.all() {
            queue.flush(least_pages)?;
        }
        Ok(())
    }

    /// `(topic, queueId, next offset)` of every queue, to rebuild the topicQueueTable.
    pub fn max_offsets(&self) -> Vec<(String, i32, QueueOffset)> {
        self.all()
            .iter()
            .map(|q| (q.topic().to_string(), q.queue_id(), q.max_offset()))
            .collect()
    }

    /// Drops `topic`'s queues from the table and deletes their files and the topic's
    /// directory (the per-topic half of `cleanUnusedTopic`). Readers still holding a queue
    /// or window keep a valid mapping until they drop it. Returns the queues removed.
    pub fn remove_topic(&self, topic: &str) -> Result<usize, CqError> {
        let removed = self.queues.write().remove(topic).unwrap_or_default();
        for queue in removed.values() {
            queue.destroy()?;
        }
        if usable_dir_name(topic) {
            let dir = self.root.join(topic);
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CqError::io(&dir)(e)),
            }
        }
        Ok(removed.len())
    }

    /// Deletes every queue (no CommitLog left, `destroyLogics`).
    pub fn destroy(&self) -> Result<(), CqError> {
        let mut queues = self.queues.write();
        for queue in queues.values().flat_map(|by_id| by_id.values()) {
            queue.destroy()?;
        }
        queues.clear();
        Ok(())
    }
}

/// Topic names that could escape the consumequeue directory are never used as paths.
fn usable_dir_name(topic: &str) -> bool {
    !(topic.is_empty() || topic == "." || topic == ".." || topic.contains(['/', '\\', '\0']))
}
