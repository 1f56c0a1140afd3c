use super::*;

#[test]
fn renders_series() {
    let m = Metrics::new();
    m.observe_request(10, Duration::from_micros(80));
    m.observe_request(10, Duration::from_micros(90));
    m.record_put("T", 2, 10);
    m.record_put("T", 3, 5);
    m.record_put("U", 1, 1);
    m.record_get("T", 1, 100);
    m.connection_opened();
    m.record_retry("G");
    m.record_retry("G");
    m.record_dlq("G");
    m.record_delay_delivered(2, 5);
    m.observe_request(77_777, Duration::from_micros(5));
    m.observe_request(-3, Duration::from_micros(5));
    m.record_put("Gone", 1, 1);
    m.record_retry("GoneGroup");
    m.forget_topic("Gone");
    m.forget_group("GoneGroup");
    let text = m.encode().unwrap();
    assert!(
        text.contains(r#"rocketmq_request_latency_seconds_count{request_code="UNKNOWN"} 2"#),
        "{text}"
    );
    assert!(!text.contains("77777") && !text.contains("Gone"), "{text}");
    assert!(
        text.contains(r#"rocketmq_retry_messages_total{group="G"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rocketmq_dlq_messages_total{group="G"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"rocketmq_delay_messages_delivered_total{level="2"} 5"#));
    assert!(
        text.contains(r#"rocketmq_request_latency_seconds_count{request_code="SEND_MESSAGE"} 2"#),
        "{text}"
    );
    assert!(text.contains(r#"rocketmq_producer_messages_total{topic="T"} 5"#));
    assert!(text.contains(r#"rocketmq_producer_message_size_total{topic="T"} 15"#));
    assert!(text.contains(r#"rocketmq_producer_messages_total{topic="U"} 1"#));
    assert!(text.contains(r#"rocketmq_consumer_message_size_total{topic="T"} 100"#));
    assert!(text.contains("rocketmq_broker_connections 1"));
    assert!(text.contains("rocketmq_storage_dispatch_behind_bytes 0"));
    // The deleted topic's series went; the broker-wide total keeps its message.
    assert_eq!(m.put_messages_total(), 7);
    assert!(m.runtime_text().starts_with("[ 0 days, 0 hours"));
}
