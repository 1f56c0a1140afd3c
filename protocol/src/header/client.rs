//! Client registration headers. HEART_BEAT carries no header, only
//! a JSON body.

crate::header! {
    /// UNREGISTER_CLIENT (35).
    pub struct UnregisterClientRequestHeader {
        /// `clientIP@instanceName[@unitName]`.
        required client_id: String = "clientID",
        optional producer_group: String = "producerGroup",
        optional consumer_group: String = "consumerGroup",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::CommandHeader;

    #[test]
    fn client_id_key_is_upper_case_id() {
        let f: ExtFields = [("clientID", "10.0.0.1@1234#5678"), ("consumerGroup", "CG")]
            .into_iter()
            .collect();
        let h = UnregisterClientRequestHeader::read(&f).unwrap();
        assert_eq!(h.client_id, "10.0.0.1@1234#5678");
        assert_eq!(h.producer_group, None);
        let mut back = ExtFields::new();
        h.write(&mut back);
        assert_eq!(back, f);
    }
}
