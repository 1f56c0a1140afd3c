//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies (`common/protocol/body/LockBatchRequestBody.java`,
//! `UnlockBatchRequestBody.java`, `LockBatchResponseBody.java`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::MessageQueue;
use super::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(default)]
    pub consumer_group: String,
    #[serde(default)]
    pub client_id: String,
    /// 4.9 adds `onlyThisBroker`; absent in older clients.
    #[serde(default)]
    pub only_this_broker: bool,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub mq_set: BTreeSet<MessageQueue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnlockBatchRequestBody {
    #[serde(default)]
    pub consumer_group: String,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub only_this_broker: bool,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub mq_set: BTreeSet<MessageQueue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    #[serde(
        rename = "lockOKMQSet",
        default,
        deserialize_with = "lenient::null_as_default"
    )]
    pub lock_ok_mq_set: BTreeSet<MessageQueue>,
}
