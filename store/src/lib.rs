//! RocketMQ 4.9-compatible storage engine (see README.md).
