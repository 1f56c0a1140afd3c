//! Transaction headers (`EndTransactionRequestHeader`,
//! `CheckTransactionStateRequestHeader`).

use crate::message::{MessageSysFlag, PhysicalOffset, QueueOffset, TransactionType};

crate::header! {
    /// END_TRANSACTION (37), producer to broker, oneway.
    pub struct EndTransactionRequestHeader {
        required producer_group: String = "producerGroup",
        /// Queue offset of the half message in `RMQ_SYS_TRANS_HALF_TOPIC`.
        required tran_state_table_offset: QueueOffset = "tranStateTableOffset",
        /// CommitLog offset of the half message.
        required commit_log_offset: PhysicalOffset = "commitLogOffset",
        /// 0 (unknown), 8 (commit) or 12 (rollback): MessageSysFlag transaction bits.
        required commit_or_rollback: i32 = "commitOrRollback",
        default from_transaction_check: bool = "fromTransactionCheck" => false,
        /// The message's UNIQ_KEY.
        required msg_id: String = "msgId",
        optional transaction_id: String = "transactionId",
        optional bname: String = "bname",
    }
}

impl EndTransactionRequestHeader {
    /// The decision, `None` for values other than 0 / 8 / 12 (the broker ignores
    /// those, like an unknown state).
    pub fn decision(&self) -> Option<TransactionType> {
        match self.commit_or_rollback {
            MessageSysFlag::TRANSACTION_NOT_TYPE => Some(TransactionType::Not),
            MessageSysFlag::TRANSACTION_COMMIT_TYPE => Some(TransactionType::Commit),
            MessageSysFlag::TRANSACTION_ROLLBACK_TYPE => Some(TransactionType::Rollback),
            _ => None,
        }
    }
}

crate::header! {
    /// CHECK_TRANSACTION_STATE (39), broker to producer, oneway; the body is the half
    /// message in store layout.
    pub struct CheckTransactionStateRequestHeader {
        /// Queue offset of the re-appended half record.
        required tran_state_table_offset: QueueOffset = "tranStateTableOffset",
        required commit_log_offset: PhysicalOffset = "commitLogOffset",
        /// UNIQ_KEY.
        optional msg_id: String = "msgId",
        optional transaction_id: String = "transactionId",
        optional offset_msg_id: String = "offsetMsgId",
        optional bname: String = "bname",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::CommandHeader;

    #[test]
    fn end_transaction_fields() {
        let f: ExtFields = [
            ("producerGroup", "PG"),
            ("tranStateTableOffset", "3"),
            ("commitLogOffset", "8192"),
            ("commitOrRollback", "12"),
            ("msgId", "AC1F0B01327B5B2133B120D8340B3D7D"),
        ]
        .into_iter()
        .collect();
        let h = EndTransactionRequestHeader::read(&f).unwrap();
        assert_eq!(h.decision(), Some(TransactionType::Rollback));
        assert!(!h.from_transaction_check);
        assert_eq!(h.commit_log_offset, PhysicalOffset(8192));
        let mut back = ExtFields::new();
        h.write(&mut back);
        assert_eq!(back.get("fromTransactionCheck"), Some("false"));
        assert_eq!(back.len(), f.len() + 1);
        let odd = EndTransactionRequestHeader {
            commit_or_rollback: 4,
            ..h
        };
        assert_eq!(odd.decision(), None);

        let c = CheckTransactionStateRequestHeader {
            tran_state_table_offset: QueueOffset(9),
            commit_log_offset: PhysicalOffset(10),
            msg_id: Some("U".into()),
            transaction_id: Some("U".into()),
            offset_msg_id: Some("O".into()),
            bname: None,
        };
        let mut cf = ExtFields::new();
        c.write(&mut cf);
        assert_eq!(
            cf.sorted(),
            [
                ("commitLogOffset", "10"),
                ("msgId", "U"),
                ("offsetMsgId", "O"),
                ("tranStateTableOffset", "9"),
                ("transactionId", "U"),
            ]
        );
        assert_eq!(CheckTransactionStateRequestHeader::read(&cf), Ok(c));
    }
}
