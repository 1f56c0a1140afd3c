//! The Telemetry stream (two-way): the client sends its `Settings` (the 5.x clients wait
//! for the answer before they start) and the broker answers with the merged settings
//! ([`super::settings`]); the stream then carries what the broker pushes to the client:
//! transaction check-backs (the transaction checker's CHECK_TRANSACTION_STATE on the
//! client's registry channel) as `RecoverOrphanedTransactionCommand`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use grpc_api::v2::settings::PubSub;
use grpc_api::v2::telemetry_command::Command;
use grpc_api::v2::{RecoverOrphanedTransactionCommand, Settings, TelemetryCommand};
use protocol::RemotingCommand;
use protocol::code::request as rq;
use protocol::header::CheckTransactionStateRequestHeader;
use tokio::sync::mpsc;

use super::metadata::CallMeta;
use super::session::{Session, StreamSlot};
use super::settings::{self, ServerSide};
use super::{message_codec, status, transaction};
use crate::services::Broker;

pub type TelemetryStream =
    Pin<Box<dyn Stream<Item = Result<TelemetryCommand, tonic::Status>> + Send + 'static>>;

/// Answers queued for the client on one stream.
const OUT_QUEUE: usize = 16;

/// The server's side of the merge for `client`'s settings.
fn server_side(broker: &Broker, client: &Settings) -> ServerSide {
    let group = match &client.pub_sub {
        Some(PubSub::Subscription(s)) => s.group.as_ref().map(|g| g.name.clone()),
        _ => None,
    };
    let group_config = group.as_deref().and_then(|g| broker.groups.get(g));
    let levels = broker.config.store.delay_levels().ok();
    ServerSide {
        max_body_size: i32::try_from(broker.config.store.max_message_size).unwrap_or(i32::MAX),
        // The 5.x group flag `consumeMessageOrderly` (`rmqctl group create --fifo`); a
        // group unknown here is a concurrent one.
        fifo: group.as_ref().map(|_| {
            group_config
                .as_ref()
                .is_some_and(|g| g.consume_message_orderly)
        }),
        // Retries; the merge adds the first delivery (5.x's `maxDeliveryAttempts`), the
        // count POP moves a message to the DLQ after.
        max_attempts: group_config.map_or(16, |g| g.retry_max_times),
        delay_levels: levels
            .map(|l| {
                (1..=l.max_level())
                    .map(|i| Duration::from_millis(l.deliver_timestamp(i, 0).max(0) as u64))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The merged settings for `client`, remembered on the session.
pub fn answer_settings(broker: &Broker, session: &Session, client: &Settings) -> TelemetryCommand {
    let merged = settings::merge(client, &server_side(broker, client));
    session.remember(client);
    TelemetryCommand {
        status: Some(status::ok()),
        command: Some(Command::Settings(merged)),
    }
}

/// A check-back pushed on the registry channel, as the 5.x command.
fn check_back(cmd: &RemotingCommand) -> Option<TelemetryCommand> {
    if cmd.code != rq::CHECK_TRANSACTION_STATE {
        return None;
    }
    let h: CheckTransactionStateRequestHeader = cmd.header().ok()?;
    let message = message_codec::from_record(&cmd.body)?;
    Some(TelemetryCommand {
        status: Some(status::ok()),
        command: Some(Command::RecoverOrphanedTransactionCommand(
            RecoverOrphanedTransactionCommand {
                message: Some(message),
                transaction_id: transaction::encode_id(
                    h.commit_log_offset,
                    h.tran_state_table_offset,
                ),
            },
        )),
    })
}

/// Serves one Telemetry stream of `meta`'s client.
// tonic's Status is what every MessagingService method answers with.
#[allow(clippy::result_large_err)]
pub fn serve(
    broker: Arc<Broker>,
    session: Arc<Session>,
    meta: CallMeta,
    mut inbound: tonic::Streaming<TelemetryCommand>,
) -> Result<TelemetryStream, tonic::Status> {
    let max = broker.config.broker.grpc_max_telemetry_streams_per_client as usize;
    let Some(slot) = StreamSlot::take(&session, max) else {
        broker
            .metrics
            .limits
            .refusals
            .count("grpcMaxTelemetryStreamsPerClient");
        return Err(tonic::Status::resource_exhausted(format!(
            "client {} has {max} Telemetry streams open already \
             (grpcMaxTelemetryStreamsPerClient)",
            meta.client_id
        )));
    };
    let (tx, rx) = mpsc::channel::<Result<TelemetryCommand, tonic::Status>>(OUT_QUEUE);
    let close = session.channel.close.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let session = Arc::clone(&_slot.0);
        // One stream at a time drains the push queue; another waits for it.
        let mut pushes: Option<tokio::sync::MutexGuard<'_, mpsc::Receiver<RemotingCommand>>> = None;
        loop {
            tokio::select! {
                _ = close.cancelled() => break,
                _ = tx.closed() => break,
                guard = session.pushes.lock(), if pushes.is_none() => pushes = Some(guard),
                pushed = async {
                    match pushes.as_mut() {
                        Some(p) => p.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    let Some(cmd) = pushed else { break };
                    if let Some(out) = check_back(&cmd)
                        && tx.send(Ok(out)).await.is_err()
                    {
                        break;
                    }
                }
                incoming = inbound.message() => match incoming {
                    Ok(Some(TelemetryCommand { command: Some(Command::Settings(s)), .. })) => {
                        let out = answer_settings(&broker, &session, &s);
                        if tx.send(Ok(out)).await.is_err() {
                            break;
                        }
                    }
                    // Thread stack traces, verification results, orphan-transaction
                    // answers sent here: nothing to do (decisions arrive by EndTransaction).
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(client = %meta.client_id, error = %e, "telemetry stream ended");
                        break;
                    }
                }
            }
        }
    });
    Ok(Box::pin(tokio_stream_from(rx)))
}

/// The receiving end of `rx` as a stream.
fn tokio_stream_from<T: Send + 'static>(
    mut rx: mpsc::Receiver<T>,
) -> impl Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
