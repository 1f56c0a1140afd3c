//! Pull filtering (`ExpressionMessageFilter`, `ExpressionForRetryMessageFilter`): first on
//! the ConsumeQueue unit, then, for SQL92 subscriptions, on the stored message's
//! properties. TAG: `*`/empty matches everything, `A || B` matches by the tags' Java hash
//! codes as stored in ConsumeQueue units; hash collisions pass and clients re-check the tag
//! string. SQL92 ([`sql92`]): evaluated at the broker, which is the only place it is
//! checked (the Java client re-filters by tag set only, empty for SQL92).

pub mod registry;
pub mod sql92;

use std::collections::BTreeSet;
use std::sync::Arc;

use protocol::body::SubscriptionData;
use protocol::message::properties::RETRY_TOPIC;

use protocol::message::java_string_hash;
use registry::FilterRegistry;
use sql92::{CompileError, DecodedProperties, Sql92Filter, Sql92Limits};

pub const EXPRESSION_TAG: &str = "TAG";
pub const EXPRESSION_SQL92: &str = "SQL92";

#[derive(Debug, Clone)]
pub enum MessageFilter {
    All,
    Tags {
        codes: BTreeSet<i32>,
    },
    Sql(Arc<Sql92Filter>),
    /// `filterSupportRetry` on `%RETRY%<group>`: a message is checked against the SQL92
    /// filter `group` registered for the message's original topic (its `RETRY_TOPIC`
    /// property); `inner` is the retry topic's own (TAG) subscription.
    Retry {
        inner: Box<MessageFilter>,
        group: String,
        registry: Arc<FilterRegistry>,
    },
}

/// The store's read path asks the subscription: tags on the ConsumeQueue unit, then
/// SQL92 on the record (`ExpressionMessageFilter`).
impl store::lookup::MessageFilter for MessageFilter {
    fn matches_consume_queue(&self, tags_code: i64) -> bool {
        self.matches_tags_code(tags_code)
    }

    fn matches_commit_log(&self, record: &[u8]) -> bool {
        self.matches_record(record)
    }
}

impl PartialEq for MessageFilter {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::All, Self::All) => true,
            (Self::Tags { codes: a }, Self::Tags { codes: b }) => a == b,
            (Self::Sql(a), Self::Sql(b)) => a == b,
            (
                Self::Retry {
                    inner: a,
                    group: ga,
                    registry: ra,
                },
                Self::Retry {
                    inner: b,
                    group: gb,
                    registry: rb,
                },
            ) => a == b && ga == gb && Arc::ptr_eq(ra, rb),
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// An expression type other than TAG and SQL92 (4.9 has no other filter registered).
    #[error("The broker does not support consumer to filter message by {0}")]
    Unsupported(String),
    #[error("{0}")]
    Compile(#[from] CompileError),
    /// A bound on what the broker holds for subscriptions (not the selector's own).
    #[error("{remark}")]
    Limit { limit: &'static str, remark: String },
}

/// A selector as quoted back in a remark: at most [`EXCERPT_CHARS`] characters, so a
/// refused 16 MB selector is not echoed whole to its sender (or into the log).
pub fn excerpt(selector: &str) -> std::borrow::Cow<'_, str> {
    match selector.char_indices().nth(EXCERPT_CHARS) {
        None => selector.into(),
        Some((cut, _)) => format!("{}... ({} bytes)", &selector[..cut], selector.len()).into(),
    }
}

/// Characters of a selector a remark or log line quotes.
pub const EXCERPT_CHARS: usize = 120;

impl MessageFilter {
    /// Parses a subscription carried in a pull request or heartbeat (SQL92 compiled
    /// here within `limits`, uncached; the broker's paths go through [`FilterRegistry`]).
    pub fn parse(
        expression_type: Option<&str>,
        expression: &str,
        limits: &Sql92Limits,
    ) -> Result<Self, FilterError> {
        if registry::is_tag_type(expression_type) {
            return Ok(Self::tags(expression));
        }
        let t = expression_type.unwrap_or_default();
        Ok(Self::Sql(Arc::new(registry::compile(
            t, expression, limits,
        )?)))
    }

    pub fn from_subscription(
        sub: &SubscriptionData,
        limits: &Sql92Limits,
    ) -> Result<Self, FilterError> {
        let filter = Self::parse(Some(&sub.expression_type), &sub.sub_string, limits)?;
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

    /// Whether the second stage (properties) has anything to check.
    pub fn needs_properties(&self) -> bool {
        matches!(self, Self::Sql(_) | Self::Retry { .. })
    }

    /// `isMatchedByCommitLog` on a whole stored record, reading only its properties. A
    /// record whose lengths do not check out does not match.
    pub fn matches_record(&self, record: &[u8]) -> bool {
        if !self.needs_properties() {
            return true;
        }
        let Ok(raw) = protocol::message::record::properties_of(record) else {
            return false;
        };
        match self {
            Self::All | Self::Tags { .. } => true,
            Self::Sql(f) => f.matches_raw(raw),
            // Rare (retry topics with filterSupportRetry): the general text path.
            Self::Retry { .. } => {
                std::str::from_utf8(raw).is_ok_and(|text| self.matches_properties_text(text))
            }
        }
    }

    /// `isMatchedByCommitLog` on the stored properties text: the one pass over it decodes
    /// only the properties the selector names (the pull path, one selector per message).
    /// Only TRUE matches; NULL and evaluation errors (4.9's exceptions) do not.
    pub fn matches_properties_text(&self, text: &str) -> bool {
        match self {
            Self::All | Self::Tags { .. } => true,
            Self::Sql(f) => f.matches_text(text),
            Self::Retry { .. } => self.retry_matches(
                protocol::message::properties::find(text, RETRY_TOPIC),
                |f| f.matches_text(text),
            ),
        }
    }

    /// [`Self::matches_properties_text`] on properties decoded once and shared by many
    /// selectors (the waiters a new message may wake).
    pub fn matches_properties(&self, props: &DecodedProperties<'_>) -> bool {
        use sql92::PropertySource;
        match self {
            Self::All | Self::Tags { .. } => true,
            Self::Sql(f) => f.matches(props),
            Self::Retry { .. } => self.retry_matches(props.get(RETRY_TOPIC), |f| f.matches(props)),
        }
    }

    /// `%RETRY%` with `filterSupportRetry`: the group's filter for the message's original
    /// topic. 4.9 throws on a retry message without RETRY_TOPIC; such a message has no
    /// original subscription to apply, so it passes here, as does a topic the group does
    /// not filter.
    fn retry_matches(
        &self,
        original_topic: Option<&str>,
        matches: impl FnOnce(&Sql92Filter) -> bool,
    ) -> bool {
        let Self::Retry {
            group, registry, ..
        } = self
        else {
            return true;
        };
        original_topic
            .and_then(|topic| registry.get(topic, group))
            .is_none_or(|e| matches(&e.filter))
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
            Self::All | Self::Sql(_) => true,
            Self::Tags { codes } => codes.contains(&(tags_code as i32)),
            Self::Retry { inner, .. } => inner.matches_tags_code(tags_code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions() {
        assert_eq!(
            MessageFilter::parse(None, "*", &Sql92Limits::default()).unwrap(),
            MessageFilter::All
        );
        assert_eq!(
            MessageFilter::parse(Some("TAG"), "", &Sql92Limits::default()).unwrap(),
            MessageFilter::All
        );
        let f =
            MessageFilter::parse(Some("TAG"), " TagA || TagB ||", &Sql92Limits::default()).unwrap();
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
        let f = MessageFilter::from_subscription(&sub, &Sql92Limits::default()).unwrap();
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagA"))));
        assert!(f.matches_tags_code(i64::from(java_string_hash("TagB"))));
        assert!(!f.matches_tags_code(i64::from(java_string_hash("TagC"))));
        let err =
            MessageFilter::parse(Some("XPATH"), "a > 1", &Sql92Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The broker does not support consumer to filter message by XPATH"
        );
        let sql = MessageFilter::parse(Some("SQL92"), "a > 1", &Sql92Limits::default()).unwrap();
        assert!(sql.matches_tags_code(7));
        assert!(sql.matches_properties_text("a\u{1}2"));
        assert!(!sql.matches_properties_text("a\u{1}1"));
        assert!(!sql.matches_properties_text(""));
    }
}
