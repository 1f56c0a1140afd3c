use super::*;

fn channel(id: ConnId) -> (Channel, mpsc::Receiver<RemotingCommand>) {
    let (tx, rx) = mpsc::channel(4);
    let ch = Channel {
        id,
        peer: SocketAddr::from(([127, 0, 0, 1], 1000 + id as u16)),
        outbound: tx,
        close: CancellationToken::new(),
    };
    (ch, rx)
}

fn consumer(group: &str, topic: &str, expr: &str, version: i64) -> ConsumerData {
    ConsumerData {
        group_name: group.into(),
        consume_type: ConsumeType::ConsumePassively,
        message_model: MessageModel::Clustering,
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        subscription_data_set: vec![SubscriptionData {
            class_filter_mode: false,
            topic: topic.into(),
            sub_string: expr.into(),
            tags_set: Default::default(),
            code_set: Default::default(),
            sub_version: version,
            expression_type: "TAG".into(),
        }],
        unit_mode: false,
    }
}

fn info(id: &str, at: Instant) -> ClientInfo {
    ClientInfo {
        client_id: id.into(),
        language: LanguageCode::Java,
        version: 409,
        last_update: at,
        access_key: None,
    }
}

#[test]
fn membership_subscriptions_and_expiry() {
    let m = ClientManager::default();
    let now = Instant::now();
    let (c1, _r1) = channel(1);
    let (c2, _r2) = channel(2);
    m.add_channel(c1);
    m.add_channel(c2);
    let join = |c: &ConsumerData, conn, i| m.register_consumer(c, conn, i).unwrap();
    assert!(join(&consumer("g", "T", "*", 1), 1, info("a", now)));
    assert!(!join(&consumer("g", "T", "*", 1), 1, info("a", now)));
    assert!(join(&consumer("g", "T", "TagA", 2), 2, info("b", now)));
    assert_eq!(m.consumer_ids("g"), vec!["a", "b"]);
    assert_eq!(m.subscription("g", "T").unwrap().sub_string, "TagA");
    assert_eq!(m.consumer_channels("g").len(), 2);
    m.register_producer("pg", 2, info("b", now)).unwrap();
    let later = now + Duration::from_secs(121);
    // Connection 2 refreshes only its producer membership: its stale consumer
    // membership goes, the connection stays; connection 1 has nothing fresh.
    m.register_producer("pg", 2, info("b", later)).unwrap();
    let expired = m.expire(later, Duration::from_secs(120));
    assert_eq!(
        expired.channels.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(expired.groups, vec!["g"]);
    assert!(m.consumer_group("g").is_none());
    assert_eq!(m.remove_channel(1), Vec::<String>::new());
    assert!(join(&consumer("g", "T", "*", 3), 2, info("b", later)));
    assert!(m.unregister_consumer("g", 2));
    assert!(m.consumer_group("g").is_none());
    assert_eq!(m.producer_group_names(), vec!["pg"]);
}

#[test]
fn memberships_are_capped_per_connection_and_in_all() {
    let m = ClientManager::new(ClientLimits {
        groups_per_connection: 3,
        groups: 4,
        ..ClientLimits::default()
    });
    let now = Instant::now();
    for g in ["a", "b", "c"] {
        m.register_consumer(&consumer(g, "T", "*", 1), 1, info("x", now))
            .unwrap();
    }
    // Refreshing a membership is not a new one.
    m.register_consumer(&consumer("a", "T", "*", 1), 1, info("x", now))
        .unwrap();
    let e = m.register_producer("p", 1, info("x", now)).unwrap_err();
    assert_eq!(e.limit, "maxGroupsPerConnection");
    assert_eq!(
        m.admits(2, ["a", "b", "c"], []).map_err(|e| e.limit),
        Ok(())
    );
    m.register_producer("p", 2, info("y", now)).unwrap();
    let e = m
        .register_consumer(&consumer("d", "T", "*", 1), 2, info("y", now))
        .unwrap_err();
    assert_eq!(e.limit, "maxClientGroups");
    assert_eq!(m.admits(2, ["d"], []).unwrap_err().limit, "maxClientGroups");
    // Joining an existing group needs no new slot in the broker-wide table.
    m.register_consumer(&consumer("a", "T", "*", 1), 2, info("y", now))
        .unwrap();
    // Owners leaving free the slots.
    m.remove_channel(1);
    assert_eq!(m.group_count(), 2);
    m.register_consumer(&consumer("d", "T", "*", 1), 2, info("y", now))
        .unwrap();
}

#[test]
fn subscriptions_are_bounded_in_bytes() {
    let one = subscription_bytes(&consumer("g", "T", "*", 1).subscription_data_set[0]);
    let m = ClientManager::new(ClientLimits {
        subscription_bytes: 2 * one,
        ..ClientLimits::default()
    });
    let now = Instant::now();
    m.register_consumer(&consumer("a", "T", "*", 1), 1, info("x", now))
        .unwrap();
    m.register_consumer(&consumer("b", "T", "*", 1), 1, info("x", now))
        .unwrap();
    let e = m
        .register_consumer(&consumer("c", "T", "*", 1), 1, info("x", now))
        .unwrap_err();
    assert_eq!(e.limit, "maxClientSubscriptionBytes");
    // The refused membership was not counted; a bigger subscription of a member
    // is refused, the old one stays.
    assert_eq!(m.group_count(), 2);
    let big = consumer("a", "T", &"x".repeat(64), 2);
    assert!(m.register_consumer(&big, 1, info("x", now)).is_err());
    assert_eq!(m.subscription("a", "T").unwrap().sub_string, "*");
    assert_eq!(m.subscription_bytes(), 2 * one);
    m.remove_channel(1);
    assert_eq!(m.subscription_bytes(), 0);
}
