//! INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), as 4.9's `Broker2Client.getConsumeStatus`
//! serves mqadmin's `getConsumerStatus`: the broker asks each connected member of the
//! group for its consume offsets (GET_CONSUMER_STATUS_FROM_CLIENT, 221).
//!
//! Unlike 4.9, which asks the members one after another with 5 s each and leaves out a
//! member that does not answer without saying so, the members are asked at once with a
//! bounded wait (`consumerStatusAnswerTimeoutMillis`), and the answer names every member
//! that gave no offsets and why (`unansweredTable`). Members whose client is known not
//! to implement 221 are not asked: the C++ client (every release of rocketmq-client-cpp
//! leaves the request unhandled and never answers) and clients older than V3_0_7.

use std::sync::Arc;

use futures::future::join_all;
use protocol::RemotingCommand;
use protocol::body::GetConsumerStatusBody;
use protocol::code::{request as rq, response};
use protocol::header::GetConsumerStatusRequestHeader;
use protocol::language::LanguageCode;

use super::offset_reset::MIN_CLIENT_VERSION;
use super::{HandlerResult, error, success};
use crate::services::Broker;
use crate::services::clients::{Channel, ClientInfo};

/// Why a member is not asked at all, from what its requests said about it.
fn never_answers(client: &ClientInfo) -> Option<String> {
    if client.language == LanguageCode::Cpp {
        return Some(format!(
            "client {} is a C++ client (language CPP, version {}): it does not implement \
             GET_CONSUMER_STATUS_FROM_CLIENT, so it was not asked",
            client.client_id, client.version
        ));
    }
    (client.version < MIN_CLIENT_VERSION).then(|| {
        format!(
            "client {} (language {}, version {}) is older than V3_0_7 and cannot answer \
             GET_CONSUMER_STATUS_FROM_CLIENT",
            client.client_id,
            client.language.name(),
            client.version
        )
    })
}

/// One member's offsets, or why there are none.
async fn ask(
    broker: &Broker,
    client: &ClientInfo,
    channel: &Channel,
    ask: &GetConsumerStatusRequestHeader,
) -> Result<protocol::body::QueueOffsetTable, String> {
    let wait = broker.config.broker.consumer_status_answer_timeout();
    let who = format!(
        "client {} (language {}, version {})",
        client.client_id,
        client.language.name(),
        client.version
    );
    let cmd = RemotingCommand::request(rq::GET_CONSUMER_STATUS_FROM_CLIENT, ask);
    match broker.client_requests.invoke(channel, cmd, wait).await {
        Ok(answer) if answer.code == response::SUCCESS => {
            GetConsumerStatusBody::decode(&answer.body)
                .map(|status| status.message_queue_table)
                .map_err(|e| format!("{who} answered with an unreadable body: {e}"))
        }
        Ok(answer) => Err(format!(
            "{who} refused GET_CONSUMER_STATUS_FROM_CLIENT: code {}, {}",
            answer.code,
            answer.remark.as_deref().unwrap_or("no remark")
        )),
        Err(e) => {
            broker
                .metrics
                .limits
                .refusals
                .count("consumerStatusAnswerTimeoutMillis");
            Err(format!(
                "{who} did not answer GET_CONSUMER_STATUS_FROM_CLIENT within {} ms \
                 (consumerStatusAnswerTimeoutMillis): {e}",
                wait.as_millis()
            ))
        }
    }
}

pub async fn consumer_status(broker: &Arc<Broker>, request: &RemotingCommand) -> HandlerResult {
    let h: GetConsumerStatusRequestHeader = request.header()?;
    let members = broker.clients.consumer_members(&h.group);
    if members.is_empty() {
        return error(
            request,
            response::SYSTEM_ERROR,
            format!(
                "No Any Consumer online in the consumer group: [{}]",
                h.group
            ),
        );
    }
    let only = h.client_addr.as_deref().filter(|c| !c.trim().is_empty());
    let question = GetConsumerStatusRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        client_addr: None,
    };
    let mut body = GetConsumerStatusBody::default();
    let mut asked = Vec::new();
    for (client, channel) in members
        .iter()
        .filter(|(c, _)| only.is_none_or(|o| o == c.client_id))
    {
        match never_answers(client) {
            Some(why) => {
                body.unanswered_table.insert(client.client_id.clone(), why);
            }
            None => asked.push((client, channel)),
        }
    }
    let answers = join_all(
        asked
            .iter()
            .map(|(client, channel)| ask(broker, client, channel, &question)),
    )
    .await;
    for ((client, _), answer) in asked.iter().zip(answers) {
        match answer {
            Ok(table) => {
                body.consumer_table.insert(client.client_id.clone(), table);
            }
            Err(why) => {
                tracing::warn!(client = %client.client_id, group = %h.group, "{why}");
                body.unanswered_table.insert(client.client_id.clone(), why);
            }
        }
    }
    Ok(success(request).with_body(body.encode()).into())
}
