//! `topics.json`: a `TopicConfigSerializeWrapper` (`TopicConfigManager.encode`).
//! The types are the protocol crate's, shared with broker
//! registration bodies.

pub use protocol::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};

use super::{ConfigDocument, fastjson};

/// The document stored in `topics.json`.
pub type TopicConfigTable = TopicConfigSerializeWrapper;

impl ConfigDocument for TopicConfigSerializeWrapper {
    const NAME: &'static str = "topics.json";

    fn encode(&self) -> String {
        fastjson::to_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, String> {
        fastjson::parse(text)
    }
}
