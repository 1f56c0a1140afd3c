//! The filter of a pop: 4.x pulls' engine and limits (`handlers::pull_filter`), from the
//! expression the consumer sends with each request.

use protocol::code::response;

use crate::services::Broker;
use crate::services::filter::registry::is_tag_type;
use crate::services::filter::{EXPRESSION_SQL92, MessageFilter};

/// A refused filter: response code and remark.
pub(super) fn build(
    broker: &Broker,
    expression_type: Option<&str>,
    expression: &str,
) -> Result<MessageFilter, (i32, String)> {
    if is_tag_type(expression_type) {
        let text = if expression.trim().is_empty() {
            "*"
        } else {
            expression
        };
        return MessageFilter::parse(expression_type, text, broker.filters.limits())
            .map_err(|e| (response::SUBSCRIPTION_PARSE_FAILED, e.to_string()));
    }
    let kind = expression_type.unwrap_or(EXPRESSION_SQL92);
    if !broker.config.broker.enable_property_filter {
        return Err((
            response::SYSTEM_ERROR,
            format!("The broker does not support consumer to filter message by {kind}"),
        ));
    }
    if expression.trim().is_empty() {
        return Err((
            response::SUBSCRIPTION_PARSE_FAILED,
            "parse the consumer's subscription failed: empty SQL92 expression".to_owned(),
        ));
    }
    broker
        .filters
        .compile_cached(kind, expression)
        .map(MessageFilter::Sql)
        .map_err(|e| {
            (
                response::SUBSCRIPTION_PARSE_FAILED,
                format!(
                    "parse the consumer's subscription[{}] failed: {e}",
                    crate::services::filter::excerpt(expression)
                ),
            )
        })
}
