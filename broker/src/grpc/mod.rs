//! The RocketMQ 5.x gRPC endpoint: `apache.rocketmq.v2.MessagingService` served by the
//! broker itself on `grpcServerPort`, on the same store and registries as the 4.x
//! remoting protocol (Apache RocketMQ 5.x serves it from a separate proxy).
//!
//! The endpoint sits beside [`crate::transport`]: it owns its listener and translates
//! each call into what the broker already does for a 4.x request (a SEND_MESSAGE through
//! the one put path, an END_TRANSACTION, a HEART_BEAT into the client registry), so both
//! protocols obey the same rules. A 5.x client is one "session" keyed by its
//! `x-mq-client-id`: a registry [`crate::services::clients::Channel`] whose pushes (the
//! transaction checker's CHECK_TRANSACTION_STATE) reach the client over its Telemetry
//! stream as `RecoverOrphanedTransactionCommand`.

mod answers;
mod auth;
mod consumer;
mod message_codec;
mod metadata;
mod request_budget;
mod route;
mod send;
pub mod server;
mod service;
mod session;
mod settings;
mod status;
mod telemetry;
mod transaction;
