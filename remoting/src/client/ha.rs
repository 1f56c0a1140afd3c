//! Replication (HA) admin requests a failover controller drives (RocketMQ 5.x
//! `GET_BROKER_HA_STATUS`, `GET_BROKER_EPOCH_CACHE`, `NOTIFY_BROKER_ROLE_CHANGED`) and
//! their bodies (`HARuntimeInfo` plus role and epoch, `EpochEntryCache`,
//! `NotifyBrokerRoleChangedRequestHeader`). The operator's failover uses them through
//! this module so the wire format has one implementation.

use protocol::code::request;
use protocol::{ExtFields, RemotingCommand};
use serde::Deserialize;

use super::{Client, Peer, Result, json_body};

/// `masterBrokerId` of a fencing notification: no broker has it, so the receiver becomes a
/// slave without a master at the new epoch and refuses writes until a promotion names
/// the new master.
pub const NO_MASTER_BROKER_ID: i64 = -1;

/// `brokerRole` as the broker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum HaRole {
    #[serde(rename = "SYNC_MASTER")]
    SyncMaster,
    #[serde(rename = "ASYNC_MASTER")]
    AsyncMaster,
    #[serde(rename = "SLAVE")]
    Slave,
}

/// GET_BROKER_HA_STATUS answer (`HARuntimeInfo` plus role and epoch).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaStatus {
    pub master: bool,
    pub role: HaRole,
    #[serde(default)]
    pub epoch: i64,
    #[serde(default)]
    pub broker_id: i64,
    /// The master's commit-log max offset as this broker last saw it.
    #[serde(default)]
    pub master_commit_log_max_offset: i64,
    /// This broker's own commit-log max offset.
    #[serde(default)]
    pub max_offset: i64,
    /// Highest offset known to be on every in-sync replica.
    #[serde(default)]
    pub confirm_offset: i64,
    #[serde(default)]
    pub in_sync_slave_nums: i32,
    /// On a master: one entry per connected slave.
    #[serde(default)]
    pub ha_connection_info: Vec<HaConnection>,
    /// On a slave: its connection to the master.
    #[serde(default)]
    pub ha_client_runtime_info: Option<HaClientInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaConnection {
    /// Remote address of the slave's HA connection (`ip:port`).
    pub addr: String,
    pub slave_ack_offset: i64,
    /// Master max offset minus the slave's ack offset.
    pub diff: i64,
    pub in_sync: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaClientInfo {
    #[serde(default)]
    pub master_addr: String,
    #[serde(default)]
    pub max_offset: i64,
    #[serde(default)]
    pub is_activated: bool,
    #[serde(default)]
    pub last_read_timestamp: i64,
}

/// GET_BROKER_EPOCH_CACHE answer (`EpochEntryCache`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochCache {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default)]
    pub epoch_list: Vec<EpochEntry>,
    #[serde(default)]
    pub max_offset: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochEntry {
    pub epoch: i64,
    pub start_offset: i64,
    /// `i64::MAX` (Java `Long.MAX_VALUE`) for the open last entry.
    #[serde(default)]
    pub end_offset: i64,
}

impl EpochCache {
    /// The highest epoch the broker has recorded.
    pub fn last_epoch(&self) -> Option<i64> {
        self.epoch_list.iter().map(|e| e.epoch).max()
    }
}

/// NOTIFY_BROKER_ROLE_CHANGED header: the broker whose brokerId is `master_broker_id`
/// becomes master at `master_epoch`, every other receiver becomes its slave; a broker
/// refuses an epoch lower than its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChange {
    /// Remoting address (`host:port`) of the new master; empty when fencing.
    pub master_address: String,
    pub master_epoch: i64,
    pub sync_state_set_epoch: i64,
    pub master_broker_id: i64,
}

impl RoleChange {
    pub fn ext_fields(&self) -> ExtFields {
        ExtFields::from_iter([
            ("masterAddress", self.master_address.clone()),
            ("masterEpoch", self.master_epoch.to_string()),
            ("syncStateSetEpoch", self.sync_state_set_epoch.to_string()),
            ("masterBrokerId", self.master_broker_id.to_string()),
        ])
    }
}

impl Client {
    /// GET_BROKER_HA_STATUS: role, epoch, offsets and replication connections.
    pub async fn ha_status(&self, broker: &Peer) -> Result<HaStatus> {
        let code = request::GET_BROKER_HA_STATUS;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        json_body(broker, code, "HaStatus", &reply)
    }

    /// GET_BROKER_EPOCH_CACHE: the broker's epoch file.
    pub async fn epoch_cache(&self, broker: &Peer) -> Result<EpochCache> {
        let code = request::GET_BROKER_EPOCH_CACHE;
        let reply = self
            .call_ok(broker, RemotingCommand::bare_request(code))
            .await?;
        json_body(broker, code, "EpochEntryCache", &reply)
    }

    /// NOTIFY_BROKER_ROLE_CHANGED: makes `broker` master or slave at `change`'s epoch.
    pub async fn notify_role_changed(&self, broker: &Peer, change: &RoleChange) -> Result<()> {
        let mut cmd = RemotingCommand::bare_request(request::NOTIFY_BROKER_ROLE_CHANGED);
        cmd.ext_fields = change.ext_fields();
        self.call_ok(broker, cmd).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_master_ha_status() {
        let body = r#"{"master":true,"role":"SYNC_MASTER","epoch":3,"brokerId":0,
            "masterCommitLogMaxOffset":5000,"maxOffset":5000,"confirmOffset":4990,
            "inSyncSlaveNums":1,"haConnectionInfo":[{"addr":"10.0.0.2:40000",
            "slaveAckOffset":4990,"diff":10,"inSync":true}]}"#;
        let s: HaStatus = protocol::body::decode(body.as_bytes()).unwrap();
        assert!(s.master);
        assert_eq!(s.role, HaRole::SyncMaster);
        assert_eq!((s.epoch, s.max_offset, s.confirm_offset), (3, 5000, 4990));
        assert_eq!(s.ha_connection_info[0].diff, 10);
        assert!(s.ha_client_runtime_info.is_none());
    }

    #[test]
    fn reads_a_slave_ha_status_and_epoch_cache() {
        let body = r#"{"master":false,"role":"SLAVE","epoch":3,"brokerId":1,"maxOffset":4096,
            "haClientRuntimeInfo":{"masterAddr":"m:10912","maxOffset":4096,
            "isActivated":true,"lastReadTimestamp":17}}"#;
        let s: HaStatus = protocol::body::decode(body.as_bytes()).unwrap();
        assert_eq!(s.role, HaRole::Slave);
        assert_eq!(s.ha_client_runtime_info.unwrap().master_addr, "m:10912");
        let cache = r#"{"clusterName":"c","brokerName":"c-0","brokerId":1,"epochList":
            [{"epoch":1,"startOffset":0,"endOffset":100},{"epoch":2,"startOffset":100,
            "endOffset":9223372036854775807}],"maxOffset":150}"#;
        let c: EpochCache = protocol::body::decode(cache.as_bytes()).unwrap();
        assert_eq!(c.last_epoch(), Some(2));
    }

    #[test]
    fn unknown_role_is_an_error_not_a_guess() {
        let body = r#"{"master":true,"role":"LEADER"}"#;
        assert!(protocol::body::decode::<HaStatus>(body.as_bytes()).is_err());
    }

    #[test]
    fn role_change_header_fields() {
        let f = RoleChange {
            master_address: "h:10911".to_owned(),
            master_epoch: 4,
            sync_state_set_epoch: 4,
            master_broker_id: 1,
        }
        .ext_fields();
        assert_eq!(f.get("masterAddress"), Some("h:10911"));
        assert_eq!(f.get("masterEpoch"), Some("4"));
        assert_eq!(f.get("syncStateSetEpoch"), Some("4"));
        assert_eq!(f.get("masterBrokerId"), Some("1"));
    }
}
