//! Message filtering during pulls (`MessageFilter`; the broker's `ExpressionMessageFilter`
//! implements it from the subscription).

/// Decides which queue entries a pull returns.
pub trait MessageFilter {
    /// First stage, on the ConsumeQueue unit alone (tag hash, or deliver time for the
    /// schedule topic). RocketMQ: `isMatchedByConsumeQueue`.
    fn matches_consume_queue(&self, tags_code: i64) -> bool;

    /// Second stage, on the stored record (SQL92 filters). RocketMQ: `isMatchedByCommitLog`.
    fn matches_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}

/// Subscription `*`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

impl MessageFilter for AcceptAll {
    fn matches_consume_queue(&self, _tags_code: i64) -> bool {
        true
    }
}
