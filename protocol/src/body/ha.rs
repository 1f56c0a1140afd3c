//! Replication admin bodies: GET_BROKER_HA_STATUS (907), shaped like 5.x `HARuntimeInfo`
//! plus our fields, and GET_BROKER_EPOCH_CACHE (1007), shaped like 5.x
//! `EpochEntryCache`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaConnectionInfo {
    pub addr: String,
    pub slave_ack_offset: i64,
    /// Master max offset minus the slave's acknowledged offset (replication lag bytes).
    pub diff: i64,
    pub in_sync: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaClientRuntimeInfo {
    pub master_addr: String,
    pub max_offset: i64,
    pub is_activated: bool,
    pub last_read_timestamp: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaRuntimeInfo {
    pub master: bool,
    /// `SYNC_MASTER`, `ASYNC_MASTER` or `SLAVE`.
    pub role: String,
    pub epoch: i32,
    pub broker_id: i64,
    /// The master's CommitLog end as this broker knows it (itself when master).
    pub master_commit_log_max_offset: i64,
    pub max_offset: i64,
    pub confirm_offset: i64,
    pub in_sync_slave_nums: i32,
    pub ha_connection_info: Vec<HaConnectionInfo>,
    pub ha_client_runtime_info: HaClientRuntimeInfo,
    /// Where slaves connect for replication (`brokerIP2:haListenPort`).
    pub ha_server_addr: String,
    /// True when writes are refused because a newer epoch was seen.
    pub fenced: bool,
    /// A slave's cut of its log that waits for an operator's permission (why, and how to
    /// give it); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation_refused: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochEntryBody {
    pub epoch: i32,
    pub start_offset: i64,
    /// Start of the next epoch, or the CommitLog end for the last one.
    pub end_offset: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochEntryCache {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub epoch_list: Vec<EpochEntryBody>,
    pub max_offset: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_follow_the_documented_json() {
        let info = HaRuntimeInfo {
            master: true,
            role: "SYNC_MASTER".into(),
            ha_connection_info: vec![HaConnectionInfo {
                addr: "a".into(),
                slave_ack_offset: 5,
                diff: 1,
                in_sync: true,
            }],
            ..HaRuntimeInfo::default()
        };
        let json = String::from_utf8(crate::body::encode(&info)).unwrap();
        for key in [
            "\"master\":true",
            "\"masterCommitLogMaxOffset\"",
            "\"confirmOffset\"",
            "\"inSyncSlaveNums\"",
            "\"slaveAckOffset\":5",
            "\"inSync\":true",
            "\"haClientRuntimeInfo\"",
            "\"isActivated\"",
            "\"lastReadTimestamp\"",
        ] {
            assert!(json.contains(key), "{key} in {json}");
        }
        let back: HaRuntimeInfo = crate::body::decode(json.as_bytes()).unwrap();
        assert_eq!(back, info);
        let cache = EpochEntryCache {
            epoch_list: vec![EpochEntryBody {
                epoch: 2,
                start_offset: 0,
                end_offset: 9,
            }],
            ..EpochEntryCache::default()
        };
        let json = crate::body::encode(&cache);
        assert_eq!(
            crate::body::decode::<EpochEntryCache>(&json).unwrap(),
            cache
        );
    }
}
