//! The RocketMQ 5.x gRPC API (`apache.rocketmq.v2` of apache/rocketmq-apis): messages, the
//! `MessagingService` server trait and a client over any tower service.
//!
//! The `.proto` files are vendored verbatim under `proto/`; `src/generated/` is produced from them
//! by `scripts/gen-grpc.sh` (protox + tonic-prost-build, no system `protoc`) and checked in, so
//! the normal build never runs the code generator.

/// `apache.rocketmq.v2`: everything in definition.proto, service.proto and admin.proto.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs,
    rustdoc::all
)]
pub mod v2 {
    include!("generated/apache.rocketmq.v2.rs");
}

pub use prost;
pub use prost_types;
pub use tonic;
