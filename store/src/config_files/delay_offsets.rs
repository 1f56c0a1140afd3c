//! `delayOffset.json` (`ScheduleMessageService`, `DelayOffsetSerializeWrapper`):
//! delay level (1-based) → next ConsumeQueue offset of
//! `SCHEDULE_TOPIC_XXXX` queue `level - 1` still to deliver. Keys are unquoted by fastjson.

use std::collections::BTreeMap;

use protocol::message::QueueOffset;
use serde::Deserialize;

use super::{ConfigDocument, fastjson};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelayOffsetTable {
    pub offset_table: BTreeMap<i32, QueueOffset>,
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default, rename = "offsetTable")]
    offset_table: BTreeMap<i32, i64>,
}

impl ConfigDocument for DelayOffsetTable {
    const NAME: &'static str = "delayOffset.json";

    fn encode(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":");
        fastjson::write_int_key_map(
            &mut out,
            self.offset_table
                .iter()
                .map(|(level, o)| (i64::from(*level), o.get())),
        );
        out.push_str("\n\t}\n}");
        out
    }

    fn decode(text: &str) -> Result<Self, String> {
        let wire: Wire = fastjson::parse(text)?;
        Ok(Self {
            offset_table: wire
                .offset_table
                .into_iter()
                .map(|(level, o)| (level, QueueOffset(o)))
                .collect(),
        })
    }
}
