//! `MessageQueue` (`common/message/MessageQueue.java`) as it appears in JSON bodies.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    #[serde(default)]
    pub topic: String,
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub queue_id: i32,
}
