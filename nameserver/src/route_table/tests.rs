use protocol::body::TopicConfig;

use super::*;
use crate::limits::RouteLimits;

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
        grpc_port: None,
    }
}

/// Registers `r`, which must be admitted.
fn put(t: &mut RouteTable, r: Registration, now: Instant) -> RegisterResult {
    t.register(r, now).expect("admitted")
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
    let r = put(&mut t, reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    assert_eq!(r, RegisterResult::default());
    let r = put(
        &mut t,
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
fn grpc_ports_become_grpc_addrs_of_live_brokers_only() {
    let mut t = RouteTable::new(RouteLimits::default());
    let now = Instant::now();
    let with_port = |r: Registration, port| Registration {
        grpc_port: Some(port),
        ..r
    };
    put(
        &mut t,
        with_port(
            reg("a", "10.0.0.1:10911", 0, 1, wrapper(1, &[("T", 4)])),
            8081,
        ),
        now,
    );
    put(
        &mut t,
        reg("a", "10.0.0.2:10911", 1, 2, wrapper(1, &[("T", 4)])),
        now,
    );
    put(
        &mut t,
        with_port(reg("b", "[::1]:10921", 0, 3, wrapper(1, &[("T", 2)])), 9091),
        now,
    );
    let route = t.route("T").unwrap();
    let grpc = |name: &str| {
        route
            .broker_datas
            .iter()
            .find(|bd| bd.broker_name == name)
            .unwrap()
            .grpc_addrs
            .clone()
    };
    // The slave registered no port: only the master's endpoint, on its registered host.
    assert_eq!(grpc("a"), [(0, "10.0.0.1:8081".to_owned())].into());
    assert_eq!(grpc("b"), [(0, "[::1]:9091".to_owned())].into());
    // Not kept in the cluster table: nothing of it changes for 4.x admin tools.
    assert!(
        t.cluster_info()
            .broker_addr_table
            .values()
            .all(|bd| bd.grpc_addrs.is_empty())
    );
    // A re-registration without the port (the endpoint turned off) drops it.
    put(
        &mut t,
        reg("a", "10.0.0.1:10911", 0, 1, wrapper(1, &[("T", 4)])),
        now,
    );
    assert!(t.route("T").unwrap().broker_datas[0].grpc_addrs.is_empty());
}

#[test]
fn queue_data_changes_only_with_data_version() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    put(&mut t, reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    // Same version, different content: ignored, like Java.
    put(&mut t, reg("a", "m:1", 0, 1, wrapper(1, &[("T", 2)])), now);
    assert_eq!(t.route("T").unwrap().queue_datas[0].write_queue_nums, 4);
    put(&mut t, reg("a", "m:1", 0, 1, wrapper(2, &[("T", 2)])), now);
    assert_eq!(t.route("T").unwrap().queue_datas[0].write_queue_nums, 2);
    assert!(!t.is_topic_config_changed("m:1", &wrapper(2, &[]).data_version));
    assert!(t.is_topic_config_changed("x:1", &wrapper(2, &[]).data_version));
}

#[test]
fn slave_switch_moves_the_address() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    put(&mut t, reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    put(&mut t, reg("a", "s:1", 1, 2, wrapper(1, &[])), now);
    t.unregister("m:1", now);
    put(&mut t, reg("a", "s:1", 0, 2, wrapper(5, &[("T", 4)])), now);
    let bd = &t.route("T").unwrap().broker_datas[0];
    assert_eq!(bd.broker_addrs, BTreeMap::from([(0, "s:1".to_string())]));
}

#[test]
fn expiry_and_connection_close_drop_brokers_and_topics() {
    let mut t = RouteTable::default();
    let start = Instant::now();
    put(
        &mut t,
        reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])),
        start,
    );
    put(
        &mut t,
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

    assert_eq!(t.on_connection_closed(2, start), vec!["n:1".to_string()]);
    assert!(t.route("T").is_none() && t.route("V").is_none());
    assert_eq!(t.sizes(), RouteSizes::default());
    assert!(t.cluster_info().cluster_addr_table.is_empty());
    assert_eq!(t.on_connection_closed(99, start), Vec::<String>::new());
}

#[test]
fn closing_a_stale_connection_keeps_a_reregistered_broker() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    put(&mut t, reg("a", "m:1", 0, 1, wrapper(1, &[("T", 4)])), now);
    put(&mut t, reg("a", "m:1", 0, 7, wrapper(1, &[("T", 4)])), now);
    assert!(t.on_connection_closed(1, now).is_empty());
    assert!(t.route("T").is_some());
}

#[test]
fn perms_lists_and_delete() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    let mut w = wrapper(1, &[("T", 4), ("U", 1), ("W", 1)]);
    w.topic_config_table.get_mut("U").unwrap().topic_sys_flag = FLAG_UNIT;
    w.topic_config_table.get_mut("W").unwrap().topic_sys_flag = FLAG_UNIT_SUB;
    put(&mut t, reg("a", "m:1", 0, 1, w), now);
    let mut other = reg("b", "o:1", 0, 2, wrapper(1, &[("T", 4)]));
    other.cluster_name = "D".into();
    put(&mut t, other, now);

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

/// A former master (fenced or partitioned) registering again must not
/// take brokerId 0 back from the master of a newer epoch (registrations authenticated:
/// the epoch fences even once its holder is gone).
#[test]
fn the_master_of_the_highest_epoch_keeps_the_route() {
    let mut t = RouteTable::default().with_authenticated_registrations(true);
    let now = Instant::now();
    let epoch = |mut r: Registration, e: i32| {
        r.master_epoch = Some(e);
        r
    };
    put(
        &mut t,
        epoch(reg("a", "old:1", 0, 1, wrapper(1, &[("T", 4)])), 3),
        now,
    );
    put(
        &mut t,
        epoch(reg("a", "new:1", 0, 2, wrapper(1, &[("T", 4)])), 4),
        now,
    );
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));

    // The old master's periodic registration arrives late.
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 3),
        now,
    );
    assert_eq!(
        r,
        Err(RegisterRefusal::StaleMaster {
            theirs: Some(3),
            ours: 4
        })
    );
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));
    // Nor without an epoch while the newer master lives.
    let r = t.register(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), now);
    assert_eq!(
        r,
        Err(RegisterRefusal::StaleMaster {
            theirs: None,
            ours: 4
        })
    );
    assert_eq!(master_of(&t, "a").as_deref(), Some("new:1"));
    // Even after the newer master is gone, the older epoch stays refused.
    t.on_connection_closed(2, now);
    let r = t.register(
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 3),
        now,
    );
    assert!(matches!(r, Err(RegisterRefusal::StaleMaster { .. })));
    // A newer term (a restart or a promotion) registers.
    put(
        &mut t,
        epoch(reg("a", "old:1", 0, 1, wrapper(2, &[("T", 4)])), 5),
        now,
    );
    assert_eq!(master_of(&t, "a").as_deref(), Some("old:1"));
    // Other groups and slaves are unaffected.
    put(&mut t, reg("b", "b:1", 0, 3, wrapper(1, &[("T", 4)])), now);
    let r = put(&mut t, reg("a", "s:1", 1, 4, wrapper(1, &[])), now);
    assert_eq!(r.master_addr.as_deref(), Some("old:1"));
}

fn limited(set: impl FnOnce(&mut RouteLimits)) -> RouteTable {
    let mut limits = RouteLimits::default();
    set(&mut limits);
    RouteTable::new(limits)
}

/// The refusal's key, for a registration that must be refused by a limit.
fn refused_by(t: &mut RouteTable, r: Registration, now: Instant) -> &'static str {
    match t.register(r, now) {
        Err(RegisterRefusal::Limit(refusal)) => {
            assert!(
                refusal.remark().contains(refusal.key),
                "{}",
                refusal.remark()
            );
            refusal.key
        }
        other => panic!("expected a limit refusal, got {other:?}"),
    }
}

/// The counters match the tables, and every address listed in brokerData is live.
fn assert_consistent(t: &RouteTable) {
    let pairs: usize = t.topic_queue_table.values().map(BTreeMap::len).sum();
    assert_eq!(t.queue_datas, pairs);
    for bd in t.broker_addr_table.values() {
        for addr in bd.broker_addrs.values() {
            assert!(t.broker_live_table.contains_key(addr), "{addr} not live");
        }
    }
}

#[test]
fn max_brokers_refuses_new_addresses_whole_and_never_evicts() {
    let mut t = limited(|l| l.max_brokers = 2);
    let now = Instant::now();
    put(&mut t, reg("a", "a:1", 0, 1, wrapper(1, &[("A", 4)])), now);
    put(&mut t, reg("b", "b:1", 0, 2, wrapper(1, &[("B", 4)])), now);
    let before = t.sizes();

    let mut c = reg("c", "c:1", 0, 3, wrapper(1, &[("C", 4)]));
    c.cluster_name = "Other".into();
    c.master_epoch = Some(7);
    assert_eq!(refused_by(&mut t, c.clone(), now), "maxBrokers");
    // Nothing of it was applied: no route, name, cluster, liveness or epoch.
    assert_eq!(t.sizes(), before);
    assert!(t.route("C").is_none());
    assert!(!t.cluster_info().cluster_addr_table.contains_key("Other"));
    assert!(t.data_version("c:1").is_none());

    // Registered brokers keep registering, with changed topics too.
    put(
        &mut t,
        reg("a", "a:1", 0, 1, wrapper(2, &[("A", 8), ("A2", 1)])),
        now,
    );
    assert_eq!(t.route("A").unwrap().queue_datas[0].write_queue_nums, 8);
    assert!(t.route("A2").is_some());

    // Room comes back when a broker leaves.
    t.on_connection_closed(2, now);
    put(&mut t, c, now);
    assert!(t.route("C").is_some());
    assert_consistent(&t);
}

#[test]
fn one_address_cannot_fill_the_table_with_names_or_clusters() {
    let mut t = limited(|l| l.max_brokers = 3);
    let now = Instant::now();
    // One live address listed under many names.
    for i in 0..3 {
        put(
            &mut t,
            reg(&format!("n{i}"), "x:1", 0, 1, wrapper(1, &[])),
            now,
        );
    }
    assert_eq!(
        refused_by(&mut t, reg("n3", "x:1", 0, 1, wrapper(1, &[])), now),
        "maxBrokers"
    );
    assert_eq!(t.sizes().broker_names, 3);
    // Re-registering under a name it holds is no growth.
    put(&mut t, reg("n1", "x:1", 0, 1, wrapper(2, &[("T", 1)])), now);
    assert_eq!(t.on_connection_closed(1, now), vec!["x:1".to_string()]);
    assert_eq!(t.sizes(), RouteSizes::default());

    // One name in many clusters.
    for i in 0..3 {
        let mut r = reg("a", "a:1", 0, 1, wrapper(1, &[]));
        r.cluster_name = format!("C{i}");
        put(&mut t, r, now);
    }
    let mut r = reg("a", "a:1", 0, 1, wrapper(1, &[]));
    r.cluster_name = "C3".into();
    assert_eq!(refused_by(&mut t, r, now), "maxBrokers");
    assert_eq!(t.cluster_info().cluster_addr_table.len(), 3);
    t.unregister("a:1", now);
    assert!(t.cluster_info().cluster_addr_table.is_empty());
    assert_consistent(&t);
}

#[test]
fn topic_caps_refuse_a_new_broker_whole_and_only_the_growth_of_a_registered_one() {
    let mut t = limited(|l| l.max_route_topics = 4);
    let now = Instant::now();
    put(
        &mut t,
        reg("a", "a:1", 0, 1, wrapper(1, &[("T1", 4), ("T2", 4)])),
        now,
    );
    put(&mut t, reg("z", "z:1", 0, 9, wrapper(1, &[("Z", 1)])), now);
    let key = refused_by(
        &mut t,
        reg("b", "b:1", 0, 2, wrapper(1, &[("T3", 4), ("T4", 4)])),
        now,
    );
    assert_eq!(key, "maxRouteTopics");
    assert!(!t.cluster_info().broker_addr_table.contains_key("b"));
    assert!(t.data_version("b:1").is_none());

    // The registered broker grows past the cap: its known topics are updated, the new
    // ones left out, and it stays registered with its last applied version.
    let grown = wrapper(2, &[("T1", 8), ("T2", 4), ("T3", 4), ("T4", 4)]);
    let r = put(&mut t, reg("a", "a:1", 0, 1, grown.clone()), now);
    assert_eq!(r.growth_refused.map(|g| g.key), Some("maxRouteTopics"));
    assert_eq!(t.route("T1").unwrap().queue_datas[0].write_queue_nums, 8);
    assert!(t.route("T3").is_none() && t.route("T4").is_none());
    assert_eq!(t.data_version("a:1"), Some(wrapper(1, &[]).data_version));
    assert!(t.is_topic_config_changed("a:1", &grown.data_version));

    // Room again: the same registration, sent again next period, adds them.
    t.on_connection_closed(9, now);
    let r = put(&mut t, reg("a", "a:1", 0, 1, grown.clone()), now);
    assert_eq!(r.growth_refused, None);
    assert!(t.route("T3").is_some() && t.route("T4").is_some());
    assert!(!t.is_topic_config_changed("a:1", &grown.data_version));
    assert_consistent(&t);
}

#[test]
fn queue_data_cap_counts_topics_per_broker() {
    let mut t = limited(|l| l.max_queue_datas = 3);
    let now = Instant::now();
    put(
        &mut t,
        reg("a", "a:1", 0, 1, wrapper(1, &[("T1", 4), ("T2", 4)])),
        now,
    );
    // The same topics on a second broker are two more entries.
    let key = refused_by(
        &mut t,
        reg("b", "b:1", 0, 2, wrapper(1, &[("T1", 4), ("T2", 4)])),
        now,
    );
    assert_eq!(key, "maxQueueDatas");
    put(&mut t, reg("b", "b:1", 0, 2, wrapper(1, &[("T1", 4)])), now);
    assert_eq!(t.sizes().queue_datas, 3);
    // A slave's topics are never stored, so they count for nothing.
    put(
        &mut t,
        reg("b", "s:1", 1, 3, wrapper(1, &[("T2", 4), ("T9", 1)])),
        now,
    );
    t.on_connection_closed(1, now);
    assert_eq!(t.sizes().queue_datas, 1);
    assert_consistent(&t);
}

#[test]
fn names_addresses_and_filter_servers_are_checked() {
    let mut t = limited(|l| {
        l.max_name_length = 32;
        l.max_filter_servers_per_broker = 2;
    });
    let now = Instant::now();
    let long = "x".repeat(33);
    let cases: Vec<(Registration, &str)> = vec![
        (
            Registration {
                cluster_name: "bad cluster".into(),
                ..reg("a", "a:1", 0, 1, wrapper(1, &[]))
            },
            "maxNameLength",
        ),
        (reg(&long, "a:1", 0, 1, wrapper(1, &[])), "maxNameLength"),
        (reg("a/b", "a:1", 0, 1, wrapper(1, &[])), "maxNameLength"),
        (reg("", "a:1", 0, 1, wrapper(1, &[])), "maxNameLength"),
        (reg("a", &long, 0, 1, wrapper(1, &[])), "maxNameLength"),
        (reg("a", "", 0, 1, wrapper(1, &[])), "maxNameLength"),
        (
            reg("a", "a:1", 0, 1, wrapper(1, &[(long.as_str(), 1)])),
            "maxNameLength",
        ),
        (
            Registration {
                filter_server_list: vec!["f:1".into(), "f:2".into(), "f:3".into()],
                ..reg("a", "a:1", 0, 1, wrapper(1, &[]))
            },
            "maxFilterServersPerBroker",
        ),
        (
            Registration {
                filter_server_list: vec![long.clone()],
                ..reg("a", "a:1", 0, 1, wrapper(1, &[]))
            },
            "maxNameLength",
        ),
    ];
    for (r, key) in cases {
        assert_eq!(refused_by(&mut t, r, now), key);
        assert_eq!(t.sizes(), RouteSizes::default());
    }
    // At the bounds everything registers.
    let name = "n".repeat(32);
    let mut r = reg(&name, "host.example:10911", 0, 1, wrapper(1, &[(&name, 1)]));
    r.filter_server_list = vec!["f:1".into(), "f:2".into()];
    put(&mut t, r, now);
    assert_eq!(t.sizes().filter_servers, 2);
}

#[test]
fn leaving_brokers_take_their_topics_names_and_filter_servers() {
    let mut t = RouteTable::default();
    let start = Instant::now();
    for i in 0..3 {
        let mut r = reg(
            &format!("b{i}"),
            &format!("b{i}:1"),
            0,
            i,
            wrapper(1, &[(format!("T{i}").as_str(), 1), ("Shared", 1)]),
        );
        r.cluster_name = format!("C{i}");
        r.filter_server_list = vec![format!("f{i}:1")];
        put(&mut t, r, start);
    }
    let full = t.sizes();
    assert_eq!(
        (
            full.live_brokers,
            full.topics,
            full.queue_datas,
            full.filter_servers
        ),
        (3, 4, 6, 3)
    );
    // b0 expires, b1's connection closes, b2 unregisters naming another cluster and id.
    t.touch("b1:1", start + Duration::from_secs(100));
    t.touch("b2:1", start + Duration::from_secs(100));
    t.expire(start + Duration::from_secs(121), Duration::from_secs(120));
    t.on_connection_closed(1, start);
    t.unregister("b2:1", start);
    assert_eq!(t.sizes(), RouteSizes::default());
    let info = t.cluster_info();
    assert!(info.cluster_addr_table.is_empty() && info.broker_addr_table.is_empty());
    assert!(t.all_topics().topic_list.is_empty());
}

#[test]
fn master_epochs_expire_after_retention_and_are_bounded() {
    let retention = Duration::from_secs(3600);
    let mut t = limited(|l| {
        l.max_master_epochs = 2;
        l.master_epoch_retention = retention;
    })
    .with_authenticated_registrations(true);
    let t0 = Instant::now();
    let epoch = |mut r: Registration, e: i32| {
        r.master_epoch = Some(e);
        r
    };
    put(&mut t, epoch(reg("a", "a:1", 0, 1, wrapper(1, &[])), 3), t0);
    put(&mut t, epoch(reg("b", "b:1", 0, 2, wrapper(1, &[])), 1), t0);
    assert_eq!(t.sizes().master_epochs, 2);
    // Full of entries of live names: a new name with an epoch is refused whole...
    assert_eq!(
        refused_by(&mut t, epoch(reg("c", "c:1", 0, 3, wrapper(1, &[])), 1), t0),
        "maxMasterEpochs"
    );
    assert!(t.data_version("c:1").is_none());
    // ...one without (a RocketMQ broker) needs no entry.
    put(&mut t, reg("d", "d:1", 0, 4, wrapper(1, &[])), t0);

    // a's last broker goes: its entry still fences a former master for the retention.
    t.on_connection_closed(1, t0);
    let half = t0 + retention / 2;
    let long = Duration::from_secs(86_400 * 365);
    t.expire(half, long);
    assert_eq!(t.sizes().master_epochs, 2);
    assert!(matches!(
        t.register(epoch(reg("a", "old:1", 0, 5, wrapper(1, &[])), 2), half),
        Err(RegisterRefusal::StaleMaster { .. })
    ));
    assert_eq!(
        refused_by(
            &mut t,
            epoch(reg("c", "c:1", 0, 3, wrapper(1, &[])), 1),
            half
        ),
        "maxMasterEpochs"
    );

    // After the retention it is gone; b, still registered, keeps its entry however long.
    let later = t0 + retention + Duration::from_secs(1);
    t.expire(later, long);
    assert_eq!(t.sizes().master_epochs, 1);
    t.expire(t0 + long / 2, long);
    assert_eq!(t.sizes().master_epochs, 1);
    assert!(matches!(
        t.register(epoch(reg("b", "old:2", 0, 6, wrapper(1, &[])), 0), later),
        Err(RegisterRefusal::StaleMaster { .. })
    ));
    // The freed slot takes a new name, and a's name registers afresh.
    put(
        &mut t,
        epoch(reg("c", "c:1", 0, 3, wrapper(1, &[])), 1),
        later,
    );
    assert_eq!(
        refused_by(
            &mut t,
            epoch(reg("a", "old:1", 0, 5, wrapper(1, &[])), 2),
            later
        ),
        "maxMasterEpochs"
    );
    t.on_connection_closed(3, later);
    let much_later = later + retention + Duration::from_secs(1);
    // Purged when a new name needs a slot, without waiting for the scan.
    put(
        &mut t,
        epoch(reg("a", "old:1", 0, 5, wrapper(1, &[])), 2),
        much_later,
    );
    assert_eq!(master_of_name(&t, "a").as_deref(), Some("old:1"));
}

fn master_of_name(t: &RouteTable, name: &str) -> Option<String> {
    t.cluster_info()
        .broker_addr_table
        .get(name)
        .and_then(|bd| bd.master_addr().map(str::to_owned))
}

/// Unauthenticated registrations (no ACL, no `adminSecret`): an anonymous peer that
/// registered `masterEpoch=i32::MAX` fences the real master only while it is live; once
/// its connection goes, the real master's next registration takes the route back.
#[test]
fn an_unauthenticated_epoch_fences_only_while_its_holder_is_live() {
    let mut t = RouteTable::default();
    let now = Instant::now();
    let epoch = |mut r: Registration, e: i32| {
        r.master_epoch = Some(e);
        r
    };
    put(
        &mut t,
        epoch(reg("a", "real:1", 0, 1, wrapper(1, &[("T", 4)])), 3),
        now,
    );
    put(
        &mut t,
        epoch(reg("a", "evil:1", 0, 2, wrapper(1, &[("T", 4)])), i32::MAX),
        now,
    );
    let again = || epoch(reg("a", "real:1", 0, 1, wrapper(2, &[("T", 4)])), 3);
    assert!(matches!(
        t.register(again(), now),
        Err(RegisterRefusal::StaleMaster { .. })
    ));
    t.on_connection_closed(2, now);
    put(&mut t, again(), now);
    assert_eq!(master_of(&t, "a").as_deref(), Some("real:1"));
    // The real master's own epoch fences an older one again while it is live.
    assert!(matches!(
        t.register(epoch(reg("a", "old:1", 0, 3, wrapper(1, &[])), 2), now),
        Err(RegisterRefusal::StaleMaster { .. })
    ));
}
