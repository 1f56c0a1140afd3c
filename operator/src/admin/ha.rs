//! Replication (HA) admin requests the operator's failover drives. Their codes, bodies and
//! header live in the shared client library (`remoting::client::ha`); they are re-exported
//! here so the failover code names them through the admin module.

pub use remoting::client::ha::{
    EpochCache, EpochEntry, HaClientInfo, HaConnection, HaRole, HaStatus, NO_MASTER_BROKER_ID,
    RoleChange,
};
