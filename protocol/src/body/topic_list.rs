//! `TopicList` (`common/protocol/body/TopicList.java`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub topic_list: BTreeSet<String>,
    /// Set by GET_SYSTEM_TOPIC_LIST_FROM_NS to a broker the caller may ask for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}
