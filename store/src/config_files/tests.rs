use std::fs;

use protocol::message::{ConsumerOffset, QueueOffset};

use super::*;

fn sample_topics() -> TopicConfigTable {
    let mut table = TopicConfigTable::default();
    table.data_version = table.data_version.next(1_700_000_000_000);
    for (name, queues) in [("TopicTest", 4), ("%RETRY%g1", 1)] {
        table.topic_config_table.insert(
            name.to_string(),
            TopicConfig {
                read_queue_nums: queues,
                write_queue_nums: queues,
                ..TopicConfig::new(name)
            },
        );
    }
    table
}

#[test]
fn topics_round_trip_and_java_shape() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(topics_path(dir.path()));
    let table = sample_topics();
    file.persist(&table).unwrap();
    let text = fs::read_to_string(file.path()).unwrap();
    assert!(
        text.contains("\"topicFilterType\":\"SINGLE_TAG\""),
        "{text}"
    );
    assert!(text.contains("\t\"dataVersion\":{"), "{text}");
    let order: Vec<usize> = [
        "\"order\"",
        "\"perm\"",
        "\"readQueueNums\"",
        "\"topicName\"",
    ]
    .iter()
    .map(|k| text.find(k).unwrap())
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "fields not alphabetical: {text}"
    );
    assert_eq!(file.load::<TopicConfigTable>().unwrap(), table);
}

#[test]
fn topics_reads_java_written_file() {
    let java = "{\n\t\"dataVersion\":{\n\t\t\"counter\":12,\n\t\t\"timestamp\":1700000000000\n\t},\n\t\"topicConfigTable\":{\n\t\t\"TopicTest\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":4,\n\t\t\t\"topicFilterType\":\"MULTI_TAG\",\n\t\t\t\"topicName\":\"TopicTest\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":4\n\t\t}\n\t}\n}";
    let table = TopicConfigTable::decode(java).unwrap();
    assert_eq!(table.data_version.counter, 12);
    let topic = &table.topic_config_table["TopicTest"];
    assert_eq!(topic.read_queue_nums, 4);
    assert_eq!(topic.topic_filter_type, TopicFilterType::MultiTag);
}

#[test]
fn consumer_offsets_read_unquoted_and_quoted_keys() {
    let java = "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%g1@g1\":{0:0\n\t\t},\n\t\t\"TopicTest@g1\":{0:250,1:250,2:249,3:250\n\t\t}\n\t}\n}";
    let table = ConsumerOffsetTable::decode(java).unwrap();
    assert_eq!(table.query("TopicTest", "g1", 2), Some(ConsumerOffset(249)));
    assert_eq!(table.query("%RETRY%g1", "g1", 0), Some(ConsumerOffset(0)));
    assert_eq!(table.query("TopicTest", "g2", 0), None);

    let quoted = r#"{"offsetTable":{"TopicTest@g1":{"0":7,"3":9}}}"#;
    let table = ConsumerOffsetTable::decode(quoted).unwrap();
    assert_eq!(table.query("TopicTest", "g1", 3), Some(ConsumerOffset(9)));
}

#[test]
fn consumer_offsets_round_trip_writes_unquoted_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(consumer_offset_path(dir.path()));
    let mut table = ConsumerOffsetTable::default();
    table.commit("TopicTest", "g1", 0, ConsumerOffset(250));
    table.commit("TopicTest", "g1", 1, ConsumerOffset(-1));
    table.commit("Other", "g2", 7, ConsumerOffset(i64::MAX));
    file.persist(&table).unwrap();
    let text = fs::read_to_string(file.path()).unwrap();
    assert!(
        text.contains("\"TopicTest@g1\":{0:250,1:-1\n\t\t}"),
        "{text}"
    );
    assert_eq!(file.load::<ConsumerOffsetTable>().unwrap(), table);
    let key = table.offset_table.keys().next().unwrap();
    assert_eq!(key.split(), Some(("Other", "g2")));
}

#[test]
fn delay_offsets_round_trip_and_java_shape() {
    let java = "{\n\t\"offsetTable\":{1:35,2:0,3:117,4:0,5:3\n\t}\n}";
    let table = DelayOffsetTable::decode(java).unwrap();
    assert_eq!(table.offset_table[&3], QueueOffset(117));
    assert_eq!(table.offset_table.len(), 5);

    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(delay_offset_path(dir.path()));
    file.persist(&table).unwrap();
    assert_eq!(fs::read_to_string(file.path()).unwrap(), java);
    assert_eq!(file.load::<DelayOffsetTable>().unwrap(), table);
}

#[test]
fn subscription_groups_round_trip_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(subscription_group_path(dir.path()));
    let mut table = SubscriptionGroupTable::default();
    table.subscription_group_table.insert(
        "g1".into(),
        SubscriptionGroupConfig {
            group_name: "g1".into(),
            retry_max_times: 3,
            ..SubscriptionGroupConfig::default()
        },
    );
    file.persist(&table).unwrap();
    assert_eq!(file.load::<SubscriptionGroupTable>().unwrap(), table);

    let sparse = r#"{"subscriptionGroupTable":{"g2":{"groupName":"g2"}}}"#;
    let parsed = SubscriptionGroupTable::decode(sparse).unwrap();
    let g2 = &parsed.subscription_group_table["g2"];
    assert_eq!(
        (g2.retry_queue_nums, g2.retry_max_times, g2.consume_enable),
        (1, 16, true)
    );
}

#[test]
fn torn_temp_file_does_not_affect_load_or_next_persist() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(consumer_offset_path(dir.path()));
    let mut table = ConsumerOffsetTable::default();
    table.commit("T", "g", 0, ConsumerOffset(1));
    file.persist(&table).unwrap();

    // A crash while writing the next version leaves a half-written .tmp behind.
    fs::write(file.temp_path(), "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:").unwrap();
    assert_eq!(file.load::<ConsumerOffsetTable>().unwrap(), table);

    table.commit("T", "g", 0, ConsumerOffset(2));
    file.persist(&table).unwrap();
    assert!(!file.temp_path().exists());
    assert_eq!(file.load::<ConsumerOffsetTable>().unwrap(), table);
}

#[test]
fn corrupt_main_file_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(topics_path(dir.path()));
    let first = sample_topics();
    file.persist(&first).unwrap();
    let mut second = first.clone();
    second.data_version = second.data_version.next(1_700_000_000_001);
    second.topic_config_table.remove("%RETRY%g1");
    file.persist(&second).unwrap();
    assert_eq!(
        TopicConfigTable::decode(&fs::read_to_string(file.backup_path()).unwrap()).unwrap(),
        first,
        ".bak holds the previous version"
    );

    fs::write(file.path(), "{\"dataVersion\":{\"coun").unwrap();
    assert_eq!(file.load::<TopicConfigTable>().unwrap(), first);
    fs::write(file.path(), "").unwrap();
    assert_eq!(file.load::<TopicConfigTable>().unwrap(), first);
    fs::remove_file(file.path()).unwrap();
    assert_eq!(file.load::<TopicConfigTable>().unwrap(), first);
}

#[test]
fn missing_files_give_defaults_and_corrupt_bak_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(delay_offset_path(dir.path()));
    assert_eq!(
        file.load::<DelayOffsetTable>().unwrap(),
        DelayOffsetTable::default()
    );

    fs::create_dir_all(config_dir(dir.path())).unwrap();
    fs::write(file.path(), "{{{").unwrap();
    fs::write(file.backup_path(), "[1,").unwrap();
    let err = file.load::<DelayOffsetTable>().unwrap_err();
    assert!(
        matches!(
            err,
            ConfigFileError::Parse {
                what: "delayOffset.json",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn load_with_reports_absence_and_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(config_dir(dir.path()).join("x.json"));
    let object = |text: &str| -> Result<String, String> {
        if text.starts_with('{') {
            Ok(text.to_owned())
        } else {
            Err("not an object".into())
        }
    };
    assert_eq!(file.load_with("x.json", object).unwrap(), None);
    file.persist_bytes(b"{1}").unwrap();
    file.persist_bytes(b"{2}").unwrap();
    assert_eq!(
        file.load_with("x.json", object).unwrap().as_deref(),
        Some("{2}")
    );
    fs::write(file.path(), b"garbage").unwrap();
    assert_eq!(
        file.load_with("x.json", object).unwrap().as_deref(),
        Some("{1}")
    );
    fs::write(file.backup_path(), b"junk").unwrap();
    assert!(matches!(
        file.load_with("x.json", object),
        Err(ConfigFileError::Parse { what: "x.json", .. })
    ));
}

/// Persists of one path from many threads (and several `ConfigFile`s of it) are
/// serialised: none fails on the shared `.tmp`, the file always parses, and the last
/// write carries the newest snapshot.
#[test]
fn concurrent_persists_are_serialised_and_end_with_the_newest_state() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let path = config_dir(dir.path()).join("n.json");
    let state = Arc::new(Mutex::new(Vec::<u32>::new()));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (state, file) = (Arc::clone(&state), ConfigFile::new(&path));
            std::thread::spawn(move || {
                for i in 0..25 {
                    state.lock().unwrap().push(t * 100 + i);
                    file.persist_with(|| serde_json::to_vec(&*state.lock().unwrap()).unwrap())
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let on_disk: Vec<u32> = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk.len(), 200);
}
