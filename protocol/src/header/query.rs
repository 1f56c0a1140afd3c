//! Message lookup headers (`QueryMessageRequestHeader`,
//! `QueryMessageResponseHeader`, `ViewMessageRequestHeader`).

use crate::message::PhysicalOffset;

crate::header! {
    /// QUERY_MESSAGE (12): index lookup by key or UNIQ_KEY within a time range.
    pub struct QueryMessageRequestHeader {
        required topic: String = "topic",
        required key: String = "key",
        required max_num: i32 = "maxNum",
        required begin_timestamp: i64 = "beginTimestamp",
        required end_timestamp: i64 = "endTimestamp",
        /// Not a header field in Java but an extra extField (`MixAll.UNIQUE_MSG_QUERY_FLAG`),
        /// `"true"` when `key` is a UNIQ_KEY; the broker then uses its own max count.
        optional unique_key_query: bool = "_UNIQUE_KEY_QUERY",
    }
}

crate::header! {
    pub struct QueryMessageResponseHeader {
        required index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        required index_last_update_phyoffset: PhysicalOffset = "indexLastUpdatePhyoffset",
    }
}

crate::header! {
    /// VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (decoded from an
    /// offset msgId).
    pub struct ViewMessageRequestHeader {
        required offset: PhysicalOffset = "offset",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::CommandHeader;

    #[test]
    fn unique_key_flag_is_an_ext_field() {
        let f: ExtFields = [
            ("topic", "T"),
            ("key", "AC1F0B01327B5B2133B120D8340B3D7D"),
            ("maxNum", "32"),
            ("beginTimestamp", "0"),
            ("endTimestamp", "9223372036854775807"),
            ("_UNIQUE_KEY_QUERY", "true"),
        ]
        .into_iter()
        .collect();
        let h = QueryMessageRequestHeader::read(&f).unwrap();
        assert_eq!(h.unique_key_query, Some(true));
        assert_eq!(h.end_timestamp, i64::MAX);
        let mut back = ExtFields::new();
        h.write(&mut back);
        assert_eq!(back, f);

        let v: ExtFields = [("offset", "1073741824")].into_iter().collect();
        assert_eq!(
            ViewMessageRequestHeader::read(&v).unwrap().offset,
            PhysicalOffset(1 << 30)
        );
        let r = QueryMessageResponseHeader {
            index_last_update_timestamp: 5,
            index_last_update_phyoffset: PhysicalOffset(6),
        };
        let mut rf = ExtFields::new();
        r.write(&mut rf);
        assert_eq!(
            rf.sorted(),
            [
                ("indexLastUpdatePhyoffset", "6"),
                ("indexLastUpdateTimestamp", "5")
            ]
        );
    }
}
