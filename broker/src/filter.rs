//! Tag filtering of pulls (`FilterAPI.buildSubscriptionData`, `ExpressionMessageFilter`):
//! `*`/empty matches everything, `A || B` matches by the tags' Java hash codes as stored
//! in ConsumeQueue units. Hash collisions pass; clients re-check the tag string.

use std::collections::BTreeSet;

use protocol::body::SubscriptionData;

use crate::names::java_string_hash;

pub const EXPRESSION_TAG: &str = "TAG";
pub const EXPRESSION_SQL92: &str = "SQL92";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageFilter {
    All,
    Tags { codes: BTreeSet<i32> },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// SQL92 needs `enablePropertyFilter`, which this broker does not implement yet.
    #[error("The broker does not support consumer to filter message by {0}")]
    Unsupported(String),
}

impl MessageFilter {
    /// Parses a subscription carried in a pull request or heartbeat.
    pub fn parse(expression_type: Option<&str>, expression: &str) -> Result<Self, FilterError> {
        match expression_type.unwrap_or(EXPRESSION_TAG) {
            t if t.eq_ignore_ascii_case(EXPRESSION_TAG) || t.is_empty() => {
                Ok(Self::tags(expression))
            }
            other => Err(FilterError::Unsupported(other.to_owned())),
        }
    }

    pub fn from_subscription(sub: &SubscriptionData) -> Result<Self, FilterError> {
        let filter = Self::parse(Some(&sub.expression_type), &sub.sub_string)?;
        // A heartbeat also carries the codes the client computed, which RocketMQ's broker
        // uses as they are. They are merged with the codes of the trimmed tags of
        // subString (FilterAPI.buildSubscriptionData's rule) rather than trusted alone:
        // rocketmq-client-rust 1.0 hashes the untrimmed tags of "A || B", so its codes
        // alone would match nothing. Extra codes are harmless: clients re-check tags.
        match filter {
            Self::Tags { mut codes } => {
                codes.extend(sub.code_set.iter().copied());
                Ok(Self::Tags { codes })
            }
            f => Ok(f),
        }
    }

    fn tags(expression: &str) -> Self {
        let expression = expression.trim();
        if expression.is_empty() || expression == "*" {
            return Self::All;
        }
        let codes: BTreeSet<i32> = expression
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(java_string_hash)
            .collect();
        if codes.is_empty() {
            Self::All
        } else {
            Self::Tags { codes }
        }
    }

    /// `isMatchedByConsumeQueue` for a TAG filter: the unit's tags code (a sign-extended
    /// i32 hash) must be one of the subscribed codes.
    pub fn matches_tags_code(&self, tags_code: i64) -> bool {
        match self {
            Self::All => true,
            Self::Tags { codes } => codes.contains(&(tags_code as i32)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions() {
        assert_eq!(MessageFilter::parse(None, "*").unwrap(), MessageFilter::All);
        assert_eq!(
            MessageFilter::parse(Some("TAG"), "").unwrap(),
            MessageFilter::All
        );
        let f = MessageFilter::parse(Some("TAG"), " TagA || TagB ||").unwrap();
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagA"))));
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagB"))));
        assert!(!f.matches_tags_code(i64::from(java_string_hash("TagC"))));
        assert!(!f.matches_tags_code(0));
        // Codes hashed from untrimmed tags (rocketmq-client-rust 1.0) still match.
        let sub = SubscriptionData {
            sub_string: "TagA || TagB".into(),
            expression_type: "TAG".into(),
            code_set: [java_string_hash("TagA "), java_string_hash(" TagB")].into(),
            class_filter_mode: false,
            topic: "T".into(),
            tags_set: ["TagA".to_owned(), "TagB".to_owned()].into(),
            sub_version: 1,
        };
        let f = MessageFilter::from_subscription(&sub).unwrap();
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagA"))));
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagB"))));
        assert!(!f.matches_tags_code(i64::from(java_string_hash("TagC"))));
        let err = MessageFilter::parse(Some("SQL92"), "a > 1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "The broker does not support consumer to filter message by SQL92"
        );
    }
}
