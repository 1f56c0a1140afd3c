//! `GetConsumerListByGroupResponseBody`: `{"consumerIdList":[...]}`.

use serde::{Deserialize, Serialize};

use super::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerListBody {
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub consumer_id_list: Vec<String>,
}
