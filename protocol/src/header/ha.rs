//! Replication admin headers (RocketMQ 5.x controller mode).

crate::header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008), `NotifyBrokerRoleChangedRequestHeader`. The
    /// broker whose `brokerId` equals `masterBrokerId` becomes master of `masterEpoch`;
    /// every other one becomes a slave of `masterAddress` (remoting address). An epoch
    /// below the broker's current one is refused. `masterHaAddress` is our addition: the
    /// master's HA address when known (otherwise asked from the master).
    pub struct NotifyBrokerRoleChangedRequestHeader {
        optional master_address: String = "masterAddress",
        required master_epoch: i32 = "masterEpoch",
        default sync_state_set_epoch: i32 = "syncStateSetEpoch" => 0,
        required master_broker_id: i64 = "masterBrokerId",
        optional master_ha_address: String = "masterHaAddress",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ext_fields::ExtFields;
    use crate::header::CommandHeader;

    #[test]
    fn round_trip_and_required_fields() {
        let h = NotifyBrokerRoleChangedRequestHeader {
            master_address: Some("10.0.0.1:10911".into()),
            master_epoch: 3,
            sync_state_set_epoch: 2,
            master_broker_id: 1,
            master_ha_address: None,
        };
        let mut f = ExtFields::new();
        h.write(&mut f);
        assert_eq!(NotifyBrokerRoleChangedRequestHeader::read(&f).unwrap(), h);
        assert!(NotifyBrokerRoleChangedRequestHeader::read(&ExtFields::new()).is_err());
    }
}
