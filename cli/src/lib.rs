//! `rmqctl` and `rmq-bench` are built on [`client`], a small async RocketMQ 4.x
//! remoting client that speaks only the public protocol.

pub mod client;
pub mod security_args;
