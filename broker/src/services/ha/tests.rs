use crate::config::Config;

/// An ASYNC group's slave used to become SYNC_MASTER when promoted (its own role is
/// SLAVE), so after a failover every send failed with SLAVE_NOT_AVAILABLE until a
/// slave came back. `haMasterRole` names the group's master role.
#[test]
fn a_promoted_slave_takes_the_groups_master_role() {
    use store::BrokerRole;
    let settings = |text: &str| {
        let c = Config::from_properties(&format!("haSecret=s\n{text}")).unwrap();
        super::enabled(&c).map(|_| super::HaSettings::from_config(&c).promoted_role)
    };
    assert_eq!(
        settings("brokerRole=SLAVE\nbrokerId=1\nhaMasterRole=ASYNC_MASTER\n"),
        Ok(BrokerRole::AsyncMaster)
    );
    assert_eq!(
        settings("brokerRole=SLAVE\nbrokerId=1\n"),
        Ok(BrokerRole::SyncMaster)
    );
    assert_eq!(
        settings("brokerRole=ASYNC_MASTER\n"),
        Ok(BrokerRole::AsyncMaster)
    );
    let err = settings("brokerRole=SLAVE\nbrokerId=1\nhaMasterRole=SLAVE\n").unwrap_err();
    assert!(err.contains("haMasterRole=SLAVE"), "{err}");
}

/// Replication used to run with an empty secret (the HA port then
/// authenticated nothing).
#[test]
fn replication_refuses_to_run_without_a_secret() {
    let conf = |text: &str| Config::from_properties(text).unwrap();
    for text in [
        "brokerRole=SLAVE\nbrokerId=1\n",
        "brokerRole=SYNC_MASTER\n",
        "brokerRole=ASYNC_MASTER\nhaMasterAddress=10.0.0.1:10912\n",
    ] {
        let err = super::enabled(&conf(&format!("haSecret=\n{text}"))).unwrap_err();
        assert!(err.contains("haSecret is empty"), "{err}");
    }
    // The single local broker (scripts/run-local.sh) runs without replication.
    assert_eq!(
        super::enabled(&conf("haSecret=\nbrokerRole=ASYNC_MASTER\n")),
        Ok(false)
    );
    assert_eq!(
        super::enabled(&conf("haSecret=s\nbrokerRole=SLAVE\n")),
        Ok(true)
    );
}
