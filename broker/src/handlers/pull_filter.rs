//! The filter checks of PULL_MESSAGE (`PullMessageProcessor.processRequest`), in 4.9's
//! order: build the subscription (from the request, or the group's registered one and its
//! compiled filter data), then refuse non-TAG types when `enablePropertyFilter` is off,
//! then wrap for `%RETRY%` topics when `filterSupportRetry` is on.

use std::sync::Arc;

use protocol::body::SubscriptionData;
use protocol::code::response;
use protocol::header::PullMessageRequestHeader;

use crate::names::RETRY_GROUP_TOPIC_PREFIX;
use crate::services::Broker;
use crate::services::filter::registry::is_tag_type;
use crate::services::filter::{EXPRESSION_SQL92, MessageFilter};

/// A refused pull: response code and remark.
pub type Refusal = (i32, String);

/// The subscription flag is set (pull and lite-pull consumers): the selector comes with
/// the request. Unlike 4.9, whose broker then matches everything when the SQL does not
/// compile, a bad selector is refused with SUBSCRIPTION_PARSE_FAILED.
pub fn from_request(
    broker: &Broker,
    h: &PullMessageRequestHeader,
) -> Result<MessageFilter, Refusal> {
    let kind = h.expression_type.as_deref();
    let text = h.subscription.as_deref().unwrap_or("");
    let filter = if is_tag_type(kind) {
        MessageFilter::parse(
            kind,
            if text.is_empty() { "*" } else { text },
            broker.filters.limits(),
        )
        .map_err(|e| (response::SYSTEM_ERROR, e.to_string()))?
    } else {
        if text.trim().is_empty() {
            return Err((
                response::SUBSCRIPTION_PARSE_FAILED,
                "parse the consumer's subscription failed".to_owned(),
            ));
        }
        let compiled = broker
            .filters
            .compile_cached(kind.unwrap_or_default(), text)
            .map_err(|e| {
                (
                    response::SUBSCRIPTION_PARSE_FAILED,
                    format!(
                        "parse the consumer's subscription[{}] failed: {e}",
                        crate::services::filter::excerpt(text)
                    ),
                )
            })?;
        MessageFilter::Sql(compiled)
    };
    finish(broker, h, kind, filter)
}

/// No subscription flag (push consumers): the group's subscription from its heartbeat,
/// and for SQL92 the filter compiled when that heartbeat registered it.
pub fn from_registered(
    broker: &Broker,
    h: &PullMessageRequestHeader,
    sub: &SubscriptionData,
) -> Result<MessageFilter, Refusal> {
    let kind = Some(sub.expression_type.as_str());
    let filter = if is_tag_type(kind) {
        MessageFilter::from_subscription(sub, broker.filters.limits())
            .map_err(|e| (response::SYSTEM_ERROR, e.to_string()))?
    } else {
        let Some(entry) = broker.filters.get(&h.topic, &h.consumer_group) else {
            return Err((
                response::FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!"
                    .to_owned(),
            ));
        };
        if entry.client_version < h.sub_version {
            return Err((
                response::FILTER_DATA_NOT_LATEST,
                "The broker's consumer filter data is not latest".to_owned(),
            ));
        }
        MessageFilter::Sql(entry.filter)
    };
    finish(broker, h, kind, filter)
}

fn finish(
    broker: &Broker,
    h: &PullMessageRequestHeader,
    kind: Option<&str>,
    filter: MessageFilter,
) -> Result<MessageFilter, Refusal> {
    let b = &broker.config.broker;
    if !is_tag_type(kind) && !b.enable_property_filter {
        return Err((
            response::SYSTEM_ERROR,
            format!(
                "The broker does not support consumer to filter message by {}",
                kind.unwrap_or(EXPRESSION_SQL92)
            ),
        ));
    }
    if b.filter_support_retry
        && let Some(group) = h.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
    {
        return Ok(MessageFilter::Retry {
            inner: Box::new(filter),
            group: group.to_owned(),
            registry: Arc::clone(&broker.filters),
        });
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use protocol::message::{ConsumerOffset, PullSysFlag, QueueOffset};

    use super::*;
    use crate::test_fixture::{self, wait_until};

    fn header(topic: &str, expression_type: &str, subscription: &str) -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: topic.into(),
            queue_id: 0,
            queue_offset: QueueOffset(0),
            max_msg_nums: 32,
            sys_flag: PullSysFlag::build(false, false, true, false),
            commit_offset: ConsumerOffset(0),
            suspend_timeout_millis: 0,
            subscription: Some(subscription.into()),
            sub_version: 5,
            expression_type: Some(expression_type.into()),
            bname: None,
        }
    }

    fn sub(topic: &str, expr: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            class_filter_mode: false,
            topic: topic.into(),
            sub_string: expr.into(),
            tags_set: Default::default(),
            code_set: Default::default(),
            sub_version: version,
            expression_type: EXPRESSION_SQL92.into(),
        }
    }

    /// Bodies a pull of `topic` with `filter` returns.
    fn pulled(b: &Broker, topic: &str, filter: &MessageFilter) -> Vec<String> {
        b.store
            .get_message(topic, 0, QueueOffset(0), 32, Some(filter))
            .messages
            .iter()
            .map(|m| {
                let v = protocol::message::record::decode(m, false).unwrap();
                String::from_utf8_lossy(v.body()).into_owned()
            })
            .collect()
    }

    fn store(b: &Broker, topic: &str, msgs: &[(&str, &str)]) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for (body, props) in msgs {
            let m = test_fixture::message(topic, 0, body, (*props).to_owned());
            rt.block_on(
                b.store
                    .put_message(&m, crate::services::put_path::PutPermit::for_tests()),
            );
        }
        let n = msgs.len() as i64;
        wait_until(topic, || {
            b.store.max_offset_in_queue(topic, 0) == QueueOffset(n)
        });
    }

    #[test]
    fn sql92_pull_filters_by_properties_and_retry_follows_filter_support_retry() {
        let dir = tempfile::tempdir().unwrap();
        let b = test_fixture::broker(
            dir.path(),
            "enablePropertyFilter=true\nfilterSupportRetry=true\n",
        );
        store(
            &b,
            "T",
            &[("low", "a\u{1}1"), ("high", "a\u{1}9"), ("none", "b\u{1}9")],
        );
        let f = from_request(&b, &header("T", "SQL92", "a > 5")).unwrap();
        assert_eq!(pulled(&b, "T", &f), ["high"]);

        // Registered subscription (push consumers): versions and missing data.
        let registered = sub("T", "a < 5 OR b IS NOT NULL", 5);
        assert_eq!(
            from_registered(&b, &header("T", "SQL92", ""), &registered)
                .unwrap_err()
                .0,
            response::FILTER_DATA_NOT_EXIST
        );
        b.filters
            .register("g", &sub("T", "a < 5 OR b IS NOT NULL", 4))
            .unwrap();
        assert_eq!(
            from_registered(&b, &header("T", "SQL92", ""), &registered)
                .unwrap_err()
                .0,
            response::FILTER_DATA_NOT_LATEST
        );
        b.filters.register("g", &registered).unwrap();
        let f = from_registered(&b, &header("T", "SQL92", ""), &registered).unwrap();
        assert_eq!(pulled(&b, "T", &f), ["low", "none"]);

        // %RETRY%g: each message against g's filter of its RETRY_TOPIC.
        store(
            &b,
            "%RETRY%g",
            &[
                ("r-low", "RETRY_TOPIC\u{1}T\u{2}a\u{1}1"),
                ("r-high", "RETRY_TOPIC\u{1}T\u{2}a\u{1}9"),
                ("r-other-topic", "RETRY_TOPIC\u{1}U\u{2}a\u{1}9"),
            ],
        );
        let f = from_request(&b, &header("%RETRY%g", "TAG", "*")).unwrap();
        assert!(matches!(f, MessageFilter::Retry { .. }));
        assert_eq!(pulled(&b, "%RETRY%g", &f), ["r-low", "r-other-topic"]);

        let dir2 = tempfile::tempdir().unwrap();
        let plain = test_fixture::broker(dir2.path(), "enablePropertyFilter=true\n");
        let f = from_request(&plain, &header("%RETRY%g", "TAG", "*")).unwrap();
        assert_eq!(f, MessageFilter::All);
    }

    #[test]
    fn sql92_needs_the_property_filter_and_a_selector() {
        let dir = tempfile::tempdir().unwrap();
        let off = test_fixture::broker(dir.path(), "");
        let (code, remark) = from_request(&off, &header("T", "SQL92", "a > 5")).unwrap_err();
        assert_eq!(code, response::SYSTEM_ERROR);
        assert_eq!(
            remark,
            "The broker does not support consumer to filter message by SQL92"
        );
        let dir2 = tempfile::tempdir().unwrap();
        let on = test_fixture::broker(dir2.path(), "enablePropertyFilter=true\n");
        for bad in ["", "a >"] {
            let (code, _) = from_request(&on, &header("T", "SQL92", bad)).unwrap_err();
            assert_eq!(code, response::SUBSCRIPTION_PARSE_FAILED, "{bad:?}");
        }
    }
}
