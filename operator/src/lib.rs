//! `rmq-operator`: runs rmq-rs (RocketMQ-compatible) nameservers, brokers and topics on
//! Kubernetes from three custom resources (`NameServer`, `Broker`, `Topic`).
//!
//! Layout: [`crd`] holds the API types (the CRDs are generated from them), [`builders`]
//! are pure desired-state functions, [`reconcile`] applies them, [`admin`] speaks the
//! RocketMQ admin protocol, [`controller`] wires everything up.

pub mod admin;
pub mod builders;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod crd_apply;
pub mod failover;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod reconcile;
pub mod render;
pub mod restart_plan;
