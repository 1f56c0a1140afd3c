//! `ClusterInfo` (`common/protocol/body/ClusterInfo.java`), the body of
//! GET_BROKER_CLUSTER_INFO. Encoding lives beside the route types it shares the
//! numeric-key rule with ([`super::route`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::BrokerData;
use super::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// brokerName → its addresses.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// cluster name → broker names.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}
