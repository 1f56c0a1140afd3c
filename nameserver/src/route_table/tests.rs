use protocol::body::TopicConfig;

use super::*;

fn wrapper(counter: i64, topics: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
    let mut w = TopicConfigSerializeWrapper {
        data_version: DataVersion {
            timestamp: 1,
            counter,
        },
        ..Default::default()
    };
    for (name, queues) in topics {
        let mut t = TopicConfig::new(*name);
        t.read_queue_nums = *queues;
        t.write_queue_nums = *queues;
        w.topic_config_table.insert(t.topic_name.clone(), t);
    }
    w
}

fn reg(
    name: &str,
    addr: &str,
    id: i64,
    conn: ConnId,
    w: TopicConfigSerializeWrapper,
) -> Registration {
    Registration {
        cluster_name: "C".into(),
        broker_addr: addr.into(),
        broker_name: name.into(),
        broker_id: id,
        ha_server_addr: format!("{addr}-ha"),
        topic_config: w,
        filter_server_list: vec![],
        conn,
        master_epoch: None,
    }
}

fn master_of(t: &RouteTable, name: &str) -> Option<String> {
    t.route("T")?
        .broker_datas
        .iter()
        .find(|b| b.broker_name == name)
        .and_then(|b| b.master_addr().map(str::to_owned))
}

#[test]
fn master_registers_topics_and_slave_learns_master() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    let r = t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    assert_eq!(r, RegisterResult::default());
    let r = t.register(
        reg("a", "s:1", 1, 2, wrapper(1, &[("T", 8), ("U", 1)])),
        now,
    );
    assert_eq!(r.master_addr.as_deref(), Some("m:1"));
    assert_eq!(r.ha_server_addr.as_deref(), Some("m:1-ha"));
    // A slave never updates queue data.
    let route = t.route("T").unwrap();
    assert_eq!(route.queue_datas[0].read_queue_nums, 4);
    assert!(t.route("U").is_none());
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
}

#[test]
fn queue_data_changes_only_with_data_version() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    // Same version, different content: ignored, like Java.
    t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 2)])), now);
    assert_eq!(t.route("T").unwrap().queue_datas[0].write_queue_nums, 4);
    t.register(reg("a", "m:1", 0, 1, wrapper(2, &[("T", 2)])), now);
    assert_eq!(t.route("T").unwrap().queue_datas[0].write_queue_nums, 2);
    assert!(!t.is_topic_config_changed("m:1", &wrapper(2, &[]).data_version));
    assert!(t.is_topic_config_changed("x:1", &wrapper(2, &[]).data_version));
}

#[test]
fn slave_switch_moves_the_address() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    t.register(reg("a", "s:1", 1, 2, wrapper(1, &[])), now);
    t.unregister("C", "m:1", "a", 0);
    t.register(reg("a", "s:1", 0, 2, wrapper(5, &[("T", 4)])), now);
    let bd = &t.route("T").unwrap().broker_datas[0];
    assert_eq!(bd.broker_addrs, BTreeMap::from([(0, "s:1".to_string())]));
}

#[test]
fn expiry_and_connection_close_drop_brokers_and_topics() {
    let mut t = RouteTable::default();
    let start = Instant::now();
    t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), start);
    t.register(
        reg("b", "n:1", 0, 2, wrapper(1, &[("T", 4), ("V", 1)])),
        start,
    );
    assert_eq!(t.route("T").unwrap().queue_datas.len(), 2);

    // Broker b refreshes; a stays silent.
    t.touch("n:1", start + Duration::from_secs(100));
    let expired = t.expire(start + Duration::from_secs(121), Duration::from_secs(120));
    assert_eq!(expired, vec![("m:1".to_string(), 1)]);
    assert_eq!(t.route("T").unwrap().queue_datas.len(), 1);
    assert!(!t.cluster_info().broker_addr_table.contains_key("a"));

    assert_eq!(t.on_connection_closed(2), vec!["n:1".to_string()]);
    assert!(t.route("T").is_none() && t.route("V").is_none());
    assert_eq!(t.topic_count(), 0);
    assert!(t.cluster_info().cluster_addr_table.is_empty());
    assert_eq!(t.on_connection_closed(99), Vec::<String>::new());
}

#[test]
fn closing_a_stale_connection_keeps_a_reregistered_broker() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    t.register(reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    t.register(reg("a", "m:1", 0, 7, wrapper(1, &[("T", 4)])), now);
    assert!(t.on_connection_closed(1).is_empty());
    assert!(t.route("T").is_some());
}

#[test]
fn perms_lists_and_delete() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    let mut w = wrapper(1, &[("T", 4), ("U", 1), ("W", 1)]);
    w.topic_config_table.get_mut("U").unwrap().topic_sys_flag = FLAG_UNIT;
    w.topic_config_table.get_mut("W").unwrap().topic_sys_flag = FLAG_UNIT_SUB;
    t.register(reg("a", "m:1", 0, 1, w), now);
    let mut other = reg("b", "o:1", 0, 2, wrapper(1, &[("T", 4)]));
    other.cluster_name = "D".into();
    t.register(other, now);

    assert_eq!(t.change_write_perm("a", WritePermOp::Wipe), 3);
    assert_eq!(t.route("T").unwrap().queue_datas[0].perm, PERM_READ);
    assert_eq!(t.change_write_perm("a", WritePermOp::Add), 3);
    assert_eq!(t.route("T").unwrap().queue_datas[0].perm, 6);
    assert_eq!(t.change_write_perm("nope", WritePermOp::Add), 0);

    let names = |l: TopicList| l.topic_list.into_iter().collect::<Vec<_>>();
    assert_eq!(names(t.unit_topics(UnitFilter::Unit)), ["U"]);
    assert_eq!(names(t.unit_topics(UnitFilter::HasUnitSub)), ["W"]);
    assert_eq!(names(t.unit_topics(UnitFilter::HasUnitSubNotUnit)), ["W"]);
    assert_eq!(names(t.topics_by_cluster("D")), ["T"]);
    assert!(t.topics_by_cluster("nope").topic_list.is_empty());
    let sys = t.system_topics();
    assert_eq!(names(sys.clone()), ["C", "D", "a", "b"]);
    assert!(sys.broker_addr.is_some());

    t.delete_topic("T", Some("D"));
    assert_eq!(t.route("T").unwrap().queue_datas.len(), 1);
    t.delete_topic("T", Some("missing"));
    assert!(t.route("T").is_some());
    t.delete_topic("T", None);
    assert!(t.route("T").is_none());
    assert_eq!(names(t.all_topics()), ["U", "W"]);
}

/// Issue 15 defect 5: a former master (fenced or partitioned) registering again must not
/// take brokerId 0 back from the master of a newer epoch.
#[test]
fn the_master_of_the_highest_epoch_keeps_the_route() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    let epoch = |mut r: Registration, e: i32| {
        r.master_epoch = Some(e);
        r
    };
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(1, &[("T", 4)])), 3),
        now,
    );
    assert_eq!(r.stale_master, None);
    t.register(
        epoch(reg("a", "new:1", 0, 2, wrapper(1, &[("T", 4)])), 4),
        now,
    );
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));

    // The old master's periodic registration arrives late.
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 3),
        now,
    );
    assert_eq!(r.stale_master, Some((Some(3), 4)));
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));
    // Nor without an epoch while the newer master lives.
    let r = t.register(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), now);
    assert_eq!(r.stale_master, Some((None, 4)));
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));
    // Even after the newer master is gone, the older epoch stays refused.
    t.on_connection_closed(2);
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 3),
        now,
    );
    assert!(r.stale_master.is_some());
    // A newer term (a restart or a promotion) registers.
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 5),
        now,
    );
    assert_eq!(r.stale_master, None);
    assert_eq!(master_of(&t, "a").as_deref(), Some("old:1"));
    // Other groups and slaves are unaffected.
    let r = t.register(reg("b", "b:1", 0, 3, wrapper(1, &[("T", 4)])), now);
    assert_eq!(r.stale_master, None);
    let r = t.register(reg("a", "s:1", 1, 4, wrapper(1, &[])), now);
    assert_eq!(
        (r.stale_master, r.master_addr.as_deref()),
        (None, Some("old:1"))
    );
}
