//! `consumerOffset.json` (`ConsumerOffsetManager`): committed offsets
//! per `"<topic>@<group>"` and queue id. fastjson writes the inner `Map<Integer, Long>` with
//! unquoted keys; both spellings are read.

use std::collections::BTreeMap;

use protocol::message::ConsumerOffset;
use serde::Deserialize;

use super::{ConfigDocument, fastjson};

/// The `"<topic>@<group>"` key of the offset table (`ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OffsetTableKey(String);

impl OffsetTableKey {
    pub fn new(topic: &str, group: &str) -> Self {
        Self(format!("{topic}@{group}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `(topic, group)`; topic and group names cannot contain `@` (`TopicValidator`).
    pub fn split(&self) -> Option<(&str, &str)> {
        self.0.split_once('@')
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerOffsetTable {
    pub offset_table: BTreeMap<OffsetTableKey, BTreeMap<i32, ConsumerOffset>>,
}

impl ConsumerOffsetTable {
    pub fn commit(&mut self, topic: &str, group: &str, queue_id: i32, offset: ConsumerOffset) {
        self.offset_table
            .entry(OffsetTableKey::new(topic, group))
            .or_default()
            .insert(queue_id, offset);
    }

    pub fn query(&self, topic: &str, group: &str, queue_id: i32) -> Option<ConsumerOffset> {
        self.offset_table
            .get(&OffsetTableKey::new(topic, group))
            .and_then(|queues| queues.get(&queue_id).copied())
    }
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default, rename = "offsetTable")]
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl ConfigDocument for ConsumerOffsetTable {
    const NAME: &'static str = "consumerOffset.json";

    fn encode(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":{");
        for (n, (key, queues)) in self.offset_table.iter().enumerate() {
            out.push_str(if n == 0 { "\n\t\t" } else { ",\n\t\t" });
            out.push_str(&fastjson::quoted(key.as_str()));
            out.push(':');
            fastjson::write_int_key_map(
                &mut out,
                queues.iter().map(|(q, o)| (i64::from(*q), o.get())),
            );
            out.push_str("\n\t\t}");
        }
        out.push_str("\n\t}\n}");
        out
    }

    fn decode(text: &str) -> Result<Self, String> {
        let wire: Wire = fastjson::parse(text)?;
        Ok(Self {
            offset_table: wire
                .offset_table
                .into_iter()
                .map(|(k, queues)| {
                    let queues = queues
                        .into_iter()
                        .map(|(q, o)| (q, ConsumerOffset(o)))
                        .collect();
                    (OffsetTableKey(k), queues)
                })
                .collect(),
        })
    }
}
