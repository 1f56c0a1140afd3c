//! The adversarial suite: every attack shape a hostile client, peer or scraper has been
//! seen to try, replayed against real processes with nothing but sockets. Each test
//! asserts the three things an attack must never take away: the process is alive, other
//! clients are served, and memory stays within the bound the test states. The limits
//! each test exercises are the ones `docs/security.md`'s threat model lists, and
//! [`coverage`] checks that every one of them is exercised here.
#![allow(clippy::unwrap_used)]

mod admin_bursts;
mod admin_secret;
mod attack_round3;
mod attack_round4;
mod bad_input;
mod batch;
mod broker_limits;
mod checker;
mod common;
mod compressed_batch;
mod coverage;
mod grpc_attacks;
mod grpc_budget;
mod grpc_h2_floods;
mod grpc_limits;
mod grpc_round2;
mod identity;
mod listeners;
mod memory;
mod nameserver;
mod nameserver_limits;
mod redteam;
mod registration;
mod registries;
mod sql92;
mod waiting_requests;
