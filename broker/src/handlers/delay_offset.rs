//! GET_ALL_DELAY_OFFSET (`AdminBrokerProcessor.getAllDelayOffset`): the schedule
//! service's progress per delay level in `delayOffset.json`'s shape. RocketMQ answers
//! with the file as last written; this answers with the live table, which the file
//! trails by at most `flushDelayOffsetInterval`.

use std::sync::Arc;

use protocol::RemotingCommand;
use store::config_files::ConfigDocument;

use super::{HandlerResult, success};
use crate::services::Broker;

pub fn all_delay_offsets(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let body = broker.schedule.table().encode();
    Ok(success(request).with_body(body.into_bytes()).into())
}

#[cfg(test)]
mod tests {
    use protocol::code::{request as rq, response};
    use protocol::message::QueueOffset;
    use store::config_files::DelayOffsetTable;

    use super::*;
    use crate::handlers::Reply;
    use crate::test_fixture;

    #[test]
    fn answers_the_level_table() {
        let dir = tempfile::tempdir().unwrap();
        let b = test_fixture::broker(dir.path(), "");
        let req = RemotingCommand::bare_request(rq::GET_ALL_DELAY_OFFSET);
        let Ok(Reply::Response(out)) = all_delay_offsets(&b, &req) else {
            panic!("no answer");
        };
        assert_eq!(out.command.code, response::SUCCESS);
        let text = String::from_utf8(out.command.body.to_vec()).unwrap();
        let table = DelayOffsetTable::decode(&text).unwrap();
        assert_eq!(table, b.schedule.table());
        assert!(table.offset_table.values().all(|o| *o == QueueOffset(0)));
    }
}
