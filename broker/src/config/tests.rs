use super::*;

#[test]
fn broker_and_store_keys_and_unknowns() {
    let text = "brokerClusterName=C1\nbrokerName=b1\nbrokerId=0\nnamesrvAddr=ns1:9876; ns2:9876\n\
                listenPort=20911\nbrokerIP1=10.1.2.3\nstorePathRootDir=/tmp/s\n\
                mappedFileSizeCommitLog=1048576\nflushDiskType=SYNC_FLUSH\nautoCreateTopicEnable=false\n\
                maxMessageSize=1024\nlongPollingEnable=false\nsomethingNew=1\n";
    let c = Config::from_properties(text).unwrap();
    assert_eq!(c.broker.broker_cluster_name, "C1");
    assert_eq!(c.broker.broker_addr(), "10.1.2.3:20911");
    assert_eq!(c.broker.namesrv_addrs(), vec!["ns1:9876", "ns2:9876"]);
    assert!(!c.broker.auto_create_topic_enable);
    assert!(!c.broker.long_polling_enable);
    assert_eq!(c.store.store_path_root_dir, Path::new("/tmp/s"));
    assert_eq!(c.store.mapped_file_size_commit_log, 1 << 20);
    assert_eq!(c.store.flush_disk_type, store::FlushDiskType::SyncFlush);
    assert_eq!(c.store.max_message_size, 1024);
    assert_eq!(c.unknown_keys, vec!["somethingNew"]);
    let printed = c.render();
    assert!(printed.contains("brokerName=b1\n"));
    assert!(printed.contains("flushDiskType=SYNC_FLUSH\n"));
    assert!(printed.contains("storePathRootDir=/tmp/s\n"));
}

#[test]
fn secrets_are_redacted_and_acl_keys_read() {
    let c = Config::from_properties(
        "haSecret=hunter2hunter2\naccessKey=broker-a1\nsecretKey=topsecret-1\naclEnable=true\nstorePathRootDir=/data/store\n",
    )
    .unwrap();
    let printed = c.render();
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(!printed.contains("topsecret"), "{printed}");
    assert!(!format!("{c:?}").contains("topsecret"));
    assert!(printed.contains("secretKey=******\n"));
    assert!(printed.contains("accessKey=broker-a1\n"));
    assert!(c.broker.acl_enable);
    assert_eq!(
        c.broker.acl_file_path(&c.store.store_path_root_dir),
        Path::new("/data/store/../conf/plain_acl.yml")
    );
    let creds = c.broker.credentials().unwrap().unwrap();
    assert_eq!(creds.secret_key().expose(), "topsecret-1");
    assert!(
        Config::from_properties("accessKey=x\nsecretKey=")
            .unwrap()
            .broker
            .credentials()
            .is_err()
    );
}

#[test]
fn bad_values_are_errors() {
    let e = Config::from_properties("listenPort=abc").unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad value \"abc\" for listenPort: expected an integer (default 10911)"
    );
    // Said once (the store's own wording is not repeated), with the choices.
    let e = Config::from_properties("flushDiskType=SOMETIMES").unwrap_err();
    assert_eq!(
        format!("{:#}", anyhow::Error::from(e)),
        "bad value \"SOMETIMES\" for flushDiskType: expected one of ASYNC_FLUSH, SYNC_FLUSH"
    );
    let e = Config::from_properties("autoCreateTopicEnable=yes").unwrap_err();
    assert!(e.to_string().ends_with("expected true or false"), "{e}");
}

#[test]
fn register_period_is_clamped() {
    let mut b = BrokerConfig {
        register_name_server_period: 1,
        ..BrokerConfig::default()
    };
    assert_eq!(b.register_period(), Duration::from_secs(10));
    b.register_name_server_period = 600_000;
    assert_eq!(b.register_period(), Duration::from_secs(60));
}

/// GET_BROKER_CONFIG (and `-p`) printed `haSecret`.
#[test]
fn the_ha_secret_is_never_rendered_or_debug_printed() {
    let c = Config::from_properties("haSecret=hunter2-topsecret\nbrokerName=b\n").unwrap();
    assert_eq!(c.broker.ha_secret.expose(), "hunter2-topsecret");
    assert!(c.render().contains("haSecret=******\n"), "{}", c.render());
    for shown in [c.render(), format!("{c:?}"), format!("{:?}", c.broker)] {
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
