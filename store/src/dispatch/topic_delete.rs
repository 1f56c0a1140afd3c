//! Deleting one topic's ConsumeQueues (`DefaultMessageStore.cleanUnusedTopic` for the
//! topic of a DELETE_TOPIC_IN_BROKER).
//!
//! RocketMQ 4.9 leaves the topic's records in the CommitLog (retention removes them with
//! their files) and only destroys the queues and the topic's `topicQueueTable` entries, so
//! a re-created topic starts at queue offset 0. Records already dispatched are not
//! dispatched again while the broker runs, because the reput offset only moves forward.
//! RocketMQ re-creates the deleted queues in two cases, both fixed here:
//! - records appended before the deletion but not yet dispatched are dispatched after it,
//!   re-creating the queue at their old offsets, so the new life's offset-0 units collide
//!   with them;
//! - a restart dispatches again from the highest record end any remaining queue indexes;
//!   when the deleted topic's records are newer, the topic comes back.
//!
//! The deletion therefore records the CommitLog end taken under the put lock (the
//! "boundary": the old life lies below it, the new one at or above it) in
//! `config/deletedTopics.json`, and dispatch skips the topic's records below it. An entry
//! is kept until retention has removed every CommitLog byte below its boundary.

use std::collections::HashMap;
use std::path::Path;

use protocol::message::PhysicalOffset;
use serde::{Deserialize, Serialize};

use super::Dispatcher;
use crate::config_files::ConfigFile;
use crate::error::StoreError;

/// File name of the deletion record inside the store's `config/` directory.
pub const DELETED_TOPICS_FILE: &str = "deletedTopics.json";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    /// Topic → CommitLog end at its deletion.
    deleted_topics: HashMap<String, i64>,
}

/// Deleted topics and their boundaries, persisted.
pub(crate) struct DeletedTopics {
    file: ConfigFile,
    boundaries: HashMap<String, PhysicalOffset>,
}

impl DeletedTopics {
    /// Loads `<config_dir>/deletedTopics.json` (or its `.bak`); an absent file is empty.
    pub(crate) fn load(config_dir: &Path) -> Result<Self, StoreError> {
        let file = ConfigFile::new(config_dir.join(DELETED_TOPICS_FILE));
        let doc = file
            .load_with(DELETED_TOPICS_FILE, |text| {
                serde_json::from_str::<Document>(text).map_err(|e| e.to_string())
            })?
            .unwrap_or_default();
        let boundaries = doc
            .deleted_topics
            .into_iter()
            .map(|(topic, b)| (topic, PhysicalOffset(b)))
            .collect();
        Ok(Self { file, boundaries })
    }

    /// Whether a record of `topic` at `offset` belongs to a deleted life of the topic
    /// (and must not re-create its queue).
    pub(crate) fn covers(&self, topic: &str, offset: PhysicalOffset) -> bool {
        !self.boundaries.is_empty()
            && self
                .boundaries
                .get(topic)
                .is_some_and(|boundary| offset < *boundary)
    }

    /// The CommitLog was cut back to `end` (replication truncation): bytes written there
    /// from now on are new, whatever topic they belong to.
    pub(crate) fn clamp_to(&mut self, end: PhysicalOffset) {
        let mut changed = false;
        for boundary in self.boundaries.values_mut() {
            changed |= *boundary > end;
            *boundary = (*boundary).min(end);
        }
        if changed && let Err(e) = self.persist() {
            tracing::error!(error = %e, "recording clamped topic deletions failed");
        }
    }

    /// The CommitLog is gone entirely (`destroyLogics`): nothing is left to skip.
    pub(crate) fn clear(&mut self) -> Result<(), StoreError> {
        if self.boundaries.is_empty() {
            return Ok(());
        }
        self.boundaries.clear();
        self.persist()
    }

    /// Retention moved the CommitLog minimum: entries whose old life is entirely gone
    /// can no longer match a record and are dropped from the file.
    pub(crate) fn prune_below(&mut self, commitlog_min: PhysicalOffset) {
        let before = self.boundaries.len();
        self.boundaries.retain(|_, b| *b > commitlog_min);
        if self.boundaries.len() != before
            && let Err(e) = self.persist()
        {
            tracing::error!(error = %e, "pruning recorded topic deletions failed");
        }
    }

    fn insert(&mut self, topic: &str, boundary: PhysicalOffset, commitlog_min: PhysicalOffset) {
        self.boundaries.retain(|_, b| *b > commitlog_min);
        if boundary > commitlog_min {
            self.boundaries.insert(topic.to_owned(), boundary);
        }
    }

    fn persist(&self) -> Result<(), StoreError> {
        let doc = Document {
            deleted_topics: self
                .boundaries
                .iter()
                .map(|(t, b)| (t.clone(), b.0))
                .collect(),
        };
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| StoreError::Corrupt(format!("encode {DELETED_TOPICS_FILE}: {e}")))?;
        Ok(self.file.persist_text(&text)?)
    }
}

impl Dispatcher {
    /// Deletes `topic`'s ConsumeQueues (files and directory) and calls `forget_offsets`,
    /// which must drop the topic from the CommitLog's queue-offset table and return the
    /// CommitLog end under its put lock. Both happen while no ConsumeQueue put runs.
    /// Returns how many queues were deleted.
    pub fn delete_topic(
        &self,
        topic: &str,
        forget_offsets: impl FnOnce() -> PhysicalOffset,
    ) -> Result<usize, StoreError> {
        let mut deleted = self.shared.deleted_topics.lock();
        let boundary = forget_offsets();
        deleted.insert(topic, boundary, self.shared.commit_log.min_offset());
        if let Err(e) = deleted.persist() {
            // The queue offsets are already forgotten, so the queues must go regardless;
            // only a restart could bring the old life back (RocketMQ's behaviour).
            tracing::error!(topic, error = %e, "recording the topic deletion failed");
        }
        let queues = self.shared.consume_queues.remove_topic(topic)?;
        tracing::info!(
            topic,
            queues,
            boundary = boundary.0,
            "topic's ConsumeQueues deleted"
        );
        Ok(queues)
    }
}
