//! `rmqctl` and `rmq-bench` are built on `remoting::client`, the async RocketMQ 4.x
//! remoting client shared with the broker, the operator and the tests, which speaks only
//! the public protocol. This library holds what the two tools share besides it.

pub mod security_args;
