//! Dispatch (reput): turning CommitLog records into ConsumeQueue units and IndexFile
//! entries, and waking long-polling pulls.

mod commitlog_reader;
mod dispatcher;
mod listener;
mod reput;
mod request;
mod topic_delete;

pub use commitlog_reader::{CommitLogReader, roll_next_file};
pub use dispatcher::Dispatcher;
pub use listener::{ArrivedMessage, MessageArrivalListener};
pub use request::{DispatchRequest, SCHEDULE_TOPIC};
pub use topic_delete::DELETED_TOPICS_FILE;

#[cfg(test)]
pub(crate) mod memory_log;
#[cfg(test)]
pub(crate) mod test_harness;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_index_failure;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_topic_delete;
#[cfg(test)]
mod tests_torn_unit;
