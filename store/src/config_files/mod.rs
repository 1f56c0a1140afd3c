//! Broker config files kept under `<storeRoot>/config/` in RocketMQ's fastjson shapes:
//! `topics.json`, `consumerOffset.json`, `delayOffset.json`,
//! `subscriptionGroup.json`.
//!
//! Every file is written through [`ConfigFile::persist`] (temp file + fsync + rename, the
//! previous content kept as `.bak`) and read through [`ConfigFile::load`], which falls back to
//! the `.bak` copy when the main file is missing, empty or unparsable — the behaviour of
//! RocketMQ's `ConfigManager.load` / `MixAll.string2File`. Files that requests change are
//! rewritten by a [`ConfigWriter`] thread (group commit, never on an async worker).

mod atomic_file;
mod consumer_offsets;
mod delay_offsets;
mod fastjson;
mod subscription_groups;
mod topics;
mod writer;

use std::path::{Path, PathBuf};

pub use atomic_file::ConfigFile;
pub use consumer_offsets::{ConsumerOffsetTable, OffsetTableKey};
pub use delay_offsets::DelayOffsetTable;
pub use subscription_groups::{SubscriptionGroupConfig, SubscriptionGroupTable};
pub use topics::{
    DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicConfigTable, TopicFilterType,
};
pub use writer::{ConfigState, ConfigWriter, Durable, WriteError};

/// Errors of loading or persisting a config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("config file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid {what}: {reason}")]
    Parse {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
}

/// A document stored in one config file: how it is rendered and parsed.
pub trait ConfigDocument: Default + Sized {
    /// Name used in parse errors (`"topics.json"`).
    const NAME: &'static str;
    /// Render in RocketMQ's pretty fastjson shape.
    fn encode(&self) -> String;
    /// Parse, accepting fastjson's unquoted integer map keys. The error is a human reason.
    fn decode(text: &str) -> Result<Self, String>;
}

/// Standard locations of the config files below a store root (`BrokerPathConfigHelper`).
pub fn config_dir(store_root: &Path) -> PathBuf {
    store_root.join("config")
}

pub fn topics_path(store_root: &Path) -> PathBuf {
    config_dir(store_root).join("topics.json")
}

pub fn consumer_offset_path(store_root: &Path) -> PathBuf {
    config_dir(store_root).join("consumerOffset.json")
}

pub fn delay_offset_path(store_root: &Path) -> PathBuf {
    config_dir(store_root).join("delayOffset.json")
}

pub fn subscription_group_path(store_root: &Path) -> PathBuf {
    config_dir(store_root).join("subscriptionGroup.json")
}

#[cfg(test)]
mod tests;
