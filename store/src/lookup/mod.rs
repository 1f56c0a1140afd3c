//! The read path over ConsumeQueues, IndexFiles and the CommitLog: pulling messages
//! (`DefaultMessageStore.getMessage`), offsets by time and queries by key. Returned records
//! are zero-copy views that keep their CommitLog file mapped while in use.

mod by_key;
mod by_time;
mod filter;
mod get_message;

pub use by_key::QueryMessageResult;
pub use filter::{AcceptAll, MessageFilter};
pub use get_message::{GetMessageResult, GetMessageStatus};
pub(crate) use get_message::{batch_full, memory_budget};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_by_time;
