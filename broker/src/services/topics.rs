//! The broker's topic table (`TopicConfigManager`): system topics, auto-creation from the
//! `TBW102` template on first send, retry/DLQ topics, persistence to `topics.json`, and
//! the data version the nameserver uses to notice changes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use protocol::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use store::config_files::{
    ConfigFile, ConfigFileError, ConfigState, ConfigWriter, Durable, topics_path,
};
use store::fs::{OsFs, StoreFs};
use tokio::sync::Notify;

use crate::config::BrokerConfig;
use crate::names::{self, perm};
use crate::now_ms;

/// Why a topic could not be created for a send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoCreateError {
    #[error("topic[{topic}] not exist, apply first please!")]
    NotExist { topic: String },
    #[error("topic[{topic}] not exist, and the broker holds maxTopics {max} topics")]
    Full { topic: String, max: usize },
}

/// `topics.json` is rewritten by a [`ConfigWriter`] thread. Topics created on request
/// paths (sends, heartbeats) are in force at once and written soon after; admin changes
/// (UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, a slave's sync) are committed: in
/// force, and answered, only once a rewrite carrying them succeeded, and refused (not
/// applied) when it failed. See `store::config_files::ConfigWriter` for the group commit.
pub struct TopicManager {
    topics: Arc<Topics>,
    file: ConfigFile,
    writer: ConfigWriter<Topics>,
    /// `maxQueueNums`: queue counts of created topics are capped at it.
    max_queue_nums: i32,
    /// `maxTopics`: past it no topic is auto-created or created by an admin.
    max_topics: usize,
}

/// The live table, shared with the writer thread.
struct Topics {
    table: RwLock<TopicTable>,
    /// Woken on every change so the registration task re-registers at once.
    changed: Notify,
}

#[derive(Clone)]
struct TopicTable {
    topics: BTreeMap<String, TopicConfig>,
    version: DataVersion,
}

/// An admin change of the table.
pub enum TopicChange {
    Upsert(TopicConfig),
    Delete(String),
}

impl TopicTable {
    fn apply(&mut self, change: &TopicChange) {
        let changed = match change {
            TopicChange::Upsert(config) => {
                self.topics
                    .insert(config.topic_name.clone(), config.clone());
                true
            }
            TopicChange::Delete(topic) => self.topics.remove(topic).is_some(),
        };
        if changed {
            self.version = self.version.next(now_ms());
        }
    }
}

impl ConfigState for Topics {
    type Change = TopicChange;

    fn render(&self, staged: &[TopicChange]) -> Vec<u8> {
        let mut table = self.table.read().clone();
        for change in staged {
            table.apply(change);
        }
        protocol::body::encode(&TopicConfigSerializeWrapper {
            topic_config_table: table.topics,
            data_version: table.version,
        })
    }

    fn apply(&self, written: Vec<TopicChange>) {
        {
            let mut table = self.table.write();
            for change in &written {
                table.apply(change);
            }
        }
        self.changed.notify_one();
    }
}

impl TopicManager {
    /// Loads `topics.json` and adds the system topics RocketMQ always has.
    pub fn open(store_root: &Path, broker: &BrokerConfig) -> Result<Self, ConfigFileError> {
        Self::open_with_fs(store_root, broker, Arc::new(OsFs))
    }

    /// [`Self::open`] writing through `fs` (the store's file system).
    pub fn open_with_fs(
        store_root: &Path,
        broker: &BrokerConfig,
        fs: Arc<dyn StoreFs>,
    ) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::with_fs(topics_path(store_root), fs);
        let loaded = file.load_with("topics.json", |text| {
            protocol::body::decode::<TopicConfigSerializeWrapper>(text.as_bytes())
                .map_err(|e| e.to_string())
        })?;
        let (mut topics, version) = match loaded {
            Some(w) => (w.topic_config_table, w.data_version),
            None => (BTreeMap::new(), DataVersion::new(now_ms())),
        };
        for t in system_topics(broker) {
            topics.entry(t.topic_name.clone()).or_insert(t);
        }
        if !broker.auto_create_topic_enable {
            // TBW102 is only a template while auto-creation is on (`TopicConfigManager`).
            topics.remove(names::AUTO_CREATE_TOPIC);
        }
        let topics = Arc::new(Topics {
            table: RwLock::new(TopicTable { topics, version }),
            changed: Notify::new(),
        });
        let writer = ConfigWriter::spawn(file.clone(), Arc::clone(&topics))?;
        Ok(Self {
            topics,
            file,
            writer,
            max_queue_nums: broker.max_queue_nums.max(1),
            max_topics: broker.max_topics as usize,
        })
    }

    fn table(&self) -> parking_lot::RwLockReadGuard<'_, TopicTable> {
        self.topics.table.read()
    }

    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.table().topics.get(topic).cloned()
    }

    /// Whether `maxTopics` is reached: a new topic would pass it. (Checked before a
    /// creation; concurrent creations may pass it by as many as are in flight.)
    pub fn is_full(&self) -> bool {
        self.len() >= self.max_topics
    }

    /// `maxTopics`.
    pub fn max_topics(&self) -> usize {
        self.max_topics
    }

    /// Whether `topic` exists here with a queue `queue_id` (read or write).
    pub fn has_queue(&self, topic: &str, queue_id: i32) -> bool {
        self.get(topic)
            .is_some_and(|t| (0..t.read_queue_nums.max(t.write_queue_nums)).contains(&queue_id))
    }

    pub fn contains(&self, topic: &str) -> bool {
        self.table().topics.contains_key(topic)
    }

    pub fn names(&self) -> Vec<String> {
        self.table().topics.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.table().topics.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn data_version(&self) -> DataVersion {
        self.table().version
    }

    /// Woken on every change (the registration task re-registers at once).
    pub fn changed(&self) -> &Notify {
        &self.topics.changed
    }

    /// The table as registrations and GET_ALL_TOPIC_CONFIG carry it.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        let t = self.table();
        TopicConfigSerializeWrapper {
            topic_config_table: t.topics.clone(),
            data_version: t.version,
        }
    }

    /// Inserts or replaces a topic (UPDATE_AND_CREATE_TOPIC): in force, with a change
    /// signalled, once the returned future reports it written.
    pub fn upsert(&self, config: TopicConfig) -> Durable {
        self.writer.commit(TopicChange::Upsert(config))
    }

    /// Removes a topic (absent: nothing changes) once the returned future reports the
    /// table without it written.
    pub fn delete(&self, topic: &str) -> Durable {
        self.writer.commit(TopicChange::Delete(topic.to_owned()))
    }

    /// `createTopicInSendMessageMethod`: the topic's config, creating it from the
    /// `default_topic` template when it is unknown. The template must exist and carry the
    /// INHERIT bit; the new topic gets min(requested, template write queues) queues and
    /// the template's perm without INHERIT.
    pub fn get_or_auto_create(
        &self,
        topic: &str,
        default_topic: &str,
        requested_queues: i32,
        topic_sys_flag: i32,
    ) -> Result<(TopicConfig, bool), AutoCreateError> {
        if let Some(existing) = self.get(topic) {
            return Ok((existing, false));
        }
        let not_exist = || AutoCreateError::NotExist {
            topic: topic.to_owned(),
        };
        let template = self.get(default_topic).ok_or_else(not_exist)?;
        if template.perm & perm::INHERIT == 0 {
            return Err(not_exist());
        }
        if self.is_full() {
            return Err(AutoCreateError::Full {
                topic: topic.to_owned(),
                max: self.max_topics,
            });
        }
        let queues = requested_queues.clamp(1, template.write_queue_nums.max(1));
        let mut config = TopicConfig::new(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        config.perm = template.perm & !perm::INHERIT;
        config.topic_sys_flag = topic_sys_flag;
        config.topic_filter_type = template.topic_filter_type;
        let created = self.insert_if_absent(config);
        Ok(created)
    }

    /// `createTopicInSendMessageBackMethod` / retry topics of heartbeats: a topic with
    /// `queues` queues and `perm`, created when missing.
    pub fn get_or_create_system(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        sys_flag: i32,
    ) -> TopicConfig {
        if let Some(existing) = self.get(topic) {
            return existing;
        }
        let queues = queues.clamp(1, self.max_queue_nums);
        let mut config = TopicConfig::new(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        config.perm = perm;
        config.topic_sys_flag = sys_flag;
        self.insert_if_absent(config).0
    }

    fn insert_if_absent(&self, config: TopicConfig) -> (TopicConfig, bool) {
        {
            let mut t = self.topics.table.write();
            if let Some(existing) = t.topics.get(&config.topic_name) {
                return (existing.clone(), false);
            }
            t.topics.insert(config.topic_name.clone(), config.clone());
            t.version = t.version.next(now_ms());
        }
        tracing::info!(topic = %config.topic_name, queues = config.write_queue_nums, perm = config.perm, "topic created");
        self.topics.changed.notify_one();
        self.writer.mark_dirty();
        (config, true)
    }

    /// A new data version with the table unchanged (brokerPermission changed), so the
    /// next registration, which this triggers, counts as new route data.
    pub fn touch(&self) {
        {
            let mut t = self.topics.table.write();
            t.version = t.version.next(now_ms());
        }
        self.topics.changed.notify_one();
    }

    /// Writes `topics.json` now, from a snapshot taken under the file's persist lock
    /// (shutdown; blocks, so never on an async worker).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file.persist_with(|| encode_table(&self.table()))
    }

    /// Waits until topics created on request paths are on disk; `true` when they are.
    pub fn flush_created(&self, within: Duration) -> bool {
        self.writer.flush(within)
    }
}

fn encode_table(t: &TopicTable) -> Vec<u8> {
    protocol::body::encode(&TopicConfigSerializeWrapper {
        topic_config_table: t.topics.clone(),
        data_version: t.version,
    })
}

fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    let mut t = TopicConfig::new(name);
    t.read_queue_nums = queues;
    t.write_queue_nums = queues;
    t.perm = perm;
    t
}

/// The topics `TopicConfigManager`'s constructor always creates.
fn system_topics(b: &BrokerConfig) -> Vec<TopicConfig> {
    let rw = perm::READ | perm::WRITE;
    let inherit_rw = rw | perm::INHERIT;
    let mut out = vec![
        topic(names::SELF_TEST_TOPIC, 1, rw),
        topic(names::BENCHMARK_TOPIC, 1024, rw),
        topic(names::OFFSET_MOVED_EVENT, 1, rw),
        topic(names::SCHEDULE_TOPIC, 18, rw),
        topic(
            &b.broker_cluster_name,
            16,
            if b.cluster_topic_enable {
                inherit_rw
            } else {
                perm::INHERIT
            },
        ),
        topic(
            &b.broker_name,
            1,
            if b.broker_topic_enable {
                inherit_rw
            } else {
                perm::INHERIT
            },
        ),
        topic(&format!("{}_REPLY_TOPIC", b.broker_cluster_name), 1, rw),
    ];
    if b.auto_create_topic_enable {
        out.push(topic(
            names::AUTO_CREATE_TOPIC,
            b.default_topic_queue_nums,
            inherit_rw,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;

    fn manager(dir: &Path, auto: bool) -> TopicManager {
        let b = BrokerConfig {
            auto_create_topic_enable: auto,
            ..BrokerConfig::default()
        };
        TopicManager::open(dir, &b).unwrap()
    }

    #[test]
    fn auto_create_from_tbw102_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        assert_eq!(m.get(names::AUTO_CREATE_TOPIC).unwrap().perm, 7);
        let v0 = m.data_version();
        let (t, created) = m
            .get_or_auto_create("T1", names::AUTO_CREATE_TOPIC, 4, 0)
            .unwrap();
        assert!(created);
        assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (4, 4, 6));
        assert_ne!(m.data_version(), v0);
        // More queues than the template has are capped at the template's.
        let (t, _) = m
            .get_or_auto_create("T2", names::AUTO_CREATE_TOPIC, 100, 0)
            .unwrap();
        assert_eq!(t.write_queue_nums, 8);
        // A template without INHERIT cannot create.
        assert!(m.get_or_auto_create("T3", "T1", 4, 0).is_err());
        drop(m);
        let again = manager(dir.path(), true);
        assert_eq!(again.get("T1").unwrap().write_queue_nums, 4);
    }

    /// Persists from many threads at once never lose a topic nor fail on the shared
    /// `.tmp` (each takes its snapshot under the file's lock).
    #[test]
    fn concurrent_persists_never_lose_a_topic() {
        let dir = tempfile::tempdir().unwrap();
        let m = std::sync::Arc::new(manager(dir.path(), true));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let m = std::sync::Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..20 {
                        block_on(m.upsert(TopicConfig::new(format!("A{t}_{i}")))).unwrap();
                        m.get_or_create_system(&format!("S{t}_{i}"), 1, perm::READ, 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(m.flush_created(Duration::from_secs(10)));
        let again = manager(dir.path(), true);
        for t in 0..8 {
            for i in 0..20 {
                assert!(again.contains(&format!("A{t}_{i}")), "A{t}_{i} lost");
                assert!(again.contains(&format!("S{t}_{i}")), "S{t}_{i} lost");
            }
        }
    }

    #[test]
    fn created_queue_counts_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let b = BrokerConfig {
            max_queue_nums: 16,
            ..BrokerConfig::default()
        };
        let m = TopicManager::open(dir.path(), &b).unwrap();
        let t = m.get_or_create_system("%RETRY%g", i32::MAX, perm::READ, 0);
        assert_eq!((t.read_queue_nums, t.write_queue_nums), (16, 16));
    }

    #[test]
    fn no_template_when_auto_create_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), false);
        assert!(!m.contains(names::AUTO_CREATE_TOPIC));
        let err = m
            .get_or_auto_create("T1", names::AUTO_CREATE_TOPIC, 4, 0)
            .unwrap_err();
        assert_eq!(err.to_string(), "topic[T1] not exist, apply first please!");
        let v0 = m.data_version();
        block_on(m.delete(names::SELF_TEST_TOPIC)).unwrap();
        assert!(!m.contains(names::SELF_TEST_TOPIC));
        let v1 = m.data_version();
        assert_ne!(v1, v0);
        block_on(m.delete(names::SELF_TEST_TOPIC)).unwrap();
        assert_eq!(
            m.data_version(),
            v1,
            "deleting an absent topic changes nothing"
        );
    }
}
