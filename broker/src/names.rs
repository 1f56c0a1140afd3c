//! Names, permissions and validation rules shared by the handlers (`MixAll`,
//! `TopicValidator`, `PermName`).

pub const AUTO_CREATE_TOPIC: &str = "TBW102";
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Prefix of system consumer groups, always auto-created.
pub const CID_RMQ_SYS_PREFIX: &str = "CID_RMQ_SYS_";
pub const MAX_TOPIC_LEN: usize = 127;
/// `Validators.CHARACTER_MAX_LENGTH`, the group name limit of 4.9's clients.
pub const MAX_GROUP_LEN: usize = 255;

/// Topics clients may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
const NOT_ALLOWED_SEND: &[&str] = &[
    SCHEDULE_TOPIC,
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
];

/// `PermName` bits.
pub mod perm {
    pub const READ: i32 = 0x4;
    pub const WRITE: i32 = 0x2;
    pub const INHERIT: i32 = 0x1;

    pub fn is_readable(perm: i32) -> bool {
        perm & READ != 0
    }

    pub fn is_writeable(perm: i32) -> bool {
        perm & WRITE != 0
    }
}

pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// `TopicValidator.validateTopic`: the remark RocketMQ answers, or `Ok`.
pub fn validate_topic(topic: &str) -> Result<(), String> {
    if topic.trim().is_empty() {
        return Err("The specified topic is blank.".to_owned());
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(format!(
            "The specified topic is longer than topic max length {MAX_TOPIC_LEN}."
        ));
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
    {
        return Err(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    Ok(())
}

/// `Validators.checkGroup`: a group name is a topic name up to 255 characters. 4.9
/// checks it only in clients; the broker checks it too before creating anything named
/// after it (the group and its `%RETRY%` topic).
pub fn validate_group(group: &str) -> Result<(), String> {
    if group.trim().is_empty() {
        return Err("the specified group is blank".to_owned());
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(format!(
            "the specified group is longer than group max length {MAX_GROUP_LEN}"
        ));
    }
    if !group
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
    {
        return Err(format!(
            "the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    Ok(())
}

pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND.contains(&topic)
}

/// `MixAll.DLQ_NUMS_PER_GROUP`: a dead letter queue has one queue.
pub const DLQ_QUEUE_NUMS: i32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_rules() {
        assert!(validate_topic("Topic_A-1%|x").is_ok());
        assert!(validate_topic(" ").unwrap_err().contains("blank"));
        assert!(
            validate_topic("a b")
                .unwrap_err()
                .contains("illegal characters")
        );
        assert!(
            validate_topic(&"a".repeat(128))
                .unwrap_err()
                .contains("max length")
        );
        assert!(validate_topic(&"a".repeat(127)).is_ok());
        assert!(is_not_allowed_send_topic(SCHEDULE_TOPIC));
        assert!(!is_not_allowed_send_topic("TopicTest"));
    }
}
