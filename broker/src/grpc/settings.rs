//! The Settings the broker answers a client's Telemetry `Settings` with: the client's
//! own, merged with what the server decides (as the 5.x proxy's
//! `GrpcClientSettingsManager` does): the body size limit (`maxMessageSize`), the retry
//! backoff, and for consumers the group's FIFO flag (`consumeMessageOrderly`), the
//! receive batch size and the long-polling timeout, clamped to what the broker serves.

use std::time::Duration;

use grpc_api::v2::settings::PubSub;
use grpc_api::v2::{
    ClientType, CustomizedBackoff, ExponentialBackoff, Publishing, RetryPolicy, Settings,
    Subscription, retry_policy,
};

/// Server-side inputs of the merge.
#[derive(Debug, Clone)]
pub struct ServerSide {
    pub max_body_size: i32,
    /// The consumer group's `consumeMessageOrderly` (None: not a consumer, or unknown group).
    pub fifo: Option<bool>,
    /// The group's `retryMaxTimes`.
    pub max_attempts: i32,
    /// `messageDelayLevel`, the durations a redelivery waits (the customized backoff of
    /// 4.x-style retry).
    pub delay_levels: Vec<Duration>,
}

/// Messages per ReceiveMessage a push consumer is told to ask for (5.x proxy default).
pub const RECEIVE_BATCH_SIZE: i32 = 32;
/// Long-polling bounds: 5.x clamps the client's timeout into [5 s, 20 s] (`grpc.
/// clientLongPollingTimeout`), 30 s being the client's own default deadline.
pub const LONG_POLLING_MIN: Duration = Duration::from_secs(5);
pub const LONG_POLLING_MAX: Duration = Duration::from_secs(20);

fn pb(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

pub fn to_std(d: &prost_types::Duration) -> Duration {
    if d.seconds < 0 || d.nanos < 0 {
        return Duration::ZERO;
    }
    Duration::new(d.seconds as u64, d.nanos as u32)
}

/// The client's `settings` with the server's decisions applied.
pub fn merge(client: &Settings, server: &ServerSide) -> Settings {
    let mut out = client.clone();
    let producer = matches!(
        client
            .client_type
            .and_then(|t| ClientType::try_from(t).ok()),
        Some(ClientType::Producer)
    );
    let fifo = server.fifo.unwrap_or(false);
    out.backoff_policy = Some(if producer {
        RetryPolicy {
            max_attempts: client
                .backoff_policy
                .as_ref()
                .map_or(3, |p| p.max_attempts.clamp(1, 16)),
            strategy: Some(retry_policy::Strategy::ExponentialBackoff(
                ExponentialBackoff {
                    initial: Some(pb(Duration::from_millis(10))),
                    max: Some(pb(Duration::from_secs(1))),
                    multiplier: 2.0,
                },
            )),
        }
    } else if fifo {
        // FIFO redelivery is immediate in order; a fixed short backoff.
        RetryPolicy {
            max_attempts: server.max_attempts.max(1) + 1,
            strategy: Some(retry_policy::Strategy::CustomizedBackoff(
                CustomizedBackoff {
                    next: vec![pb(Duration::from_secs(1))],
                },
            )),
        }
    } else {
        RetryPolicy {
            max_attempts: server.max_attempts.max(1) + 1,
            strategy: Some(retry_policy::Strategy::CustomizedBackoff(
                CustomizedBackoff {
                    next: server.delay_levels.iter().copied().map(pb).collect(),
                },
            )),
        }
    });
    out.pub_sub = match client.pub_sub.clone() {
        Some(PubSub::Publishing(p)) => Some(PubSub::Publishing(Publishing {
            max_body_size: server.max_body_size,
            ..p
        })),
        Some(PubSub::Subscription(s)) => {
            let asked = s.long_polling_timeout.as_ref().map(to_std);
            Some(PubSub::Subscription(Subscription {
                fifo: Some(fifo),
                receive_batch_size: Some(s.receive_batch_size.unwrap_or(RECEIVE_BATCH_SIZE)),
                long_polling_timeout: Some(pb(asked
                    .unwrap_or(LONG_POLLING_MAX)
                    .clamp(LONG_POLLING_MIN, LONG_POLLING_MAX))),
                ..s
            }))
        }
        None => None,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpc_api::v2::Resource;

    fn server(fifo: Option<bool>) -> ServerSide {
        ServerSide {
            max_body_size: 4 << 20,
            fifo,
            max_attempts: 16,
            delay_levels: vec![Duration::from_secs(1), Duration::from_secs(5)],
        }
    }

    #[test]
    fn publishing_gets_the_body_limit_and_an_exponential_backoff() {
        let client = Settings {
            client_type: Some(ClientType::Producer as i32),
            pub_sub: Some(PubSub::Publishing(Publishing {
                topics: vec![Resource {
                    resource_namespace: String::new(),
                    name: "t".into(),
                }],
                max_body_size: 0,
                validate_message_type: true,
            })),
            ..Default::default()
        };
        let out = merge(&client, &server(None));
        let Some(PubSub::Publishing(p)) = out.pub_sub else {
            panic!("publishing kept")
        };
        assert_eq!(p.max_body_size, 4 << 20);
        assert_eq!(p.topics.len(), 1);
        assert!(matches!(
            out.backoff_policy.unwrap().strategy,
            Some(retry_policy::Strategy::ExponentialBackoff(_))
        ));
    }

    #[test]
    fn subscription_gets_fifo_batch_and_clamped_long_polling() {
        for (asked, expect) in [
            (Some(Duration::from_secs(60)), LONG_POLLING_MAX),
            (Some(Duration::from_millis(10)), LONG_POLLING_MIN),
            (Some(Duration::from_secs(10)), Duration::from_secs(10)),
            (None, LONG_POLLING_MAX),
        ] {
            let client = Settings {
                client_type: Some(ClientType::SimpleConsumer as i32),
                pub_sub: Some(PubSub::Subscription(Subscription {
                    long_polling_timeout: asked.map(pb),
                    ..Default::default()
                })),
                ..Default::default()
            };
            let out = merge(&client, &server(Some(true)));
            let Some(PubSub::Subscription(s)) = out.pub_sub else {
                panic!("subscription kept")
            };
            assert_eq!(s.fifo, Some(true));
            assert_eq!(s.receive_batch_size, Some(RECEIVE_BATCH_SIZE));
            assert_eq!(to_std(&s.long_polling_timeout.unwrap()), expect);
            assert_eq!(out.backoff_policy.unwrap().max_attempts, 17);
        }
    }
}
