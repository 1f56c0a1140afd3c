//! Shared by the `rocketmq-client-rust` suites (client flavours, retry/DLQ, delay,
//! broadcast/ordered, transactions): a nameserver plus one broker, and producers and
//! consumers pointed at them. Included with `#[path]` so each suite stays its own test
//! binary.

#![allow(dead_code, deprecated)]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use cheetah_string::CheetahString;
use e2e::NameServer;
use e2e::broker_harness::BrokerProcess;
use e2e::cli::rmqctl_json;
use e2e::nameserver::Options;
use rocketmq_client_rust::{
    ClientConfig, ClientRuntime, ClientRuntimeConfig, DefaultMQProducer, DefaultMQPullConsumer,
    DefaultMQPushConsumer, MessageQueueListener, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

static RUNTIME_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    RuntimeOwner::plan(RuntimeConfig::server_default("e2e-delivery"))
        .expect("runtime config")
        .build()
        .expect("runtime owner")
});

pub fn client_runtime(scope: &'static str) -> Arc<ClientRuntime> {
    ClientRuntime::try_new(
        RUNTIME_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .expect("client runtime")
}

/// A nameserver and one broker registered with it; the store lives in `dir` and
/// survives broker restarts.
pub struct Cluster {
    pub ns: NameServer,
    pub broker: BrokerProcess,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start(extra: &[(&str, &str)]) -> Self {
        let ns = NameServer::start(Options::default());
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = BrokerProcess::start_in(dir.path(), Some(ns.port), extra);
        Self { ns, broker, dir }
    }

    /// The broker's store directory, also a place for test files that outlive restarts.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.ns.port)
    }

    pub fn logs(&self) -> String {
        format!(
            "--- broker log ---\n{}\n--- nameserver log ---\n{}",
            self.broker.log(),
            self.ns.log()
        )
    }

    /// `Ok` once the connected members of `group` report every queue of `topic` at its
    /// max offset (`rmqctl consumer status`, GET_CONSUMER_STATUS_FROM_CLIENT): whatever
    /// they pulled of it has been through their listeners. `Err` says what differs.
    pub fn consumed_to_the_end(&self, group: &str, topic: &str) -> Result<(), String> {
        let stats = rmqctl_json(self.ns.port, &["topic", "status", "-t", topic]);
        let status = rmqctl_json(
            self.ns.port,
            &["consumer", "status", "-g", group, "-t", topic],
        );
        if stats.code != 0 || status.code != 0 {
            return Err(format!("{stats:?}\n{status:?}"));
        }
        let (stats, status) = (stats.json(), status.json());
        let mut reported: HashMap<i64, i64> = HashMap::new();
        for queues in status["clients"]
            .as_object()
            .into_iter()
            .flat_map(|c| c.values())
        {
            for q in queues.as_array().into_iter().flatten() {
                let (Some(id), Some(offset)) = (q["queueId"].as_i64(), q["offset"].as_i64()) else {
                    continue;
                };
                let at = reported.entry(id).or_insert(offset);
                *at = (*at).max(offset);
            }
        }
        let queues = stats["queues"].as_array().cloned().unwrap_or_default();
        let done = !queues.is_empty()
            && queues.iter().all(|q| {
                q["queueId"]
                    .as_i64()
                    .and_then(|id| reported.get(&id))
                    .is_some_and(|offset| Some(*offset) == q["maxOffset"].as_i64())
            });
        if done {
            Ok(())
        } else {
            Err(format!("{group} on {topic}: {status}\nqueues: {stats}"))
        }
    }

    /// Waits until [`Self::consumed_to_the_end`] holds for each of `topics`.
    pub async fn wait_consumed_to_the_end(&self, group: &str, topics: &[&str]) {
        for topic in topics {
            let what = format!("{group} to consume {topic} to the end");
            e2e::wait::eventually_ok(Duration::from_secs(30), &what, || async {
                self.consumed_to_the_end(group, topic)
            })
            .await;
        }
    }

    /// The broker's Prometheus text.
    pub async fn metrics(&self) -> String {
        let (status, body) = e2e::http::get(self.broker.http_port, "/metrics")
            .await
            .expect("GET /metrics");
        assert_eq!(status, 200);
        body
    }
}

pub use e2e::wait::runtime;

pub async fn within<T>(what: &str, limit: Duration, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

pub async fn producer(namesrv: &str, group: &'static str) -> DefaultMQProducer {
    let mut p = DefaultMQProducer::builder(client_runtime(group))
        .producer_group(group.to_owned())
        .name_server_addr(namesrv.to_owned())
        .send_msg_timeout(5_000)
        .build();
    within("producer start", Duration::from_secs(30), p.start())
        .await
        .expect("producer start");
    p
}

pub fn client_config(namesrv: &str, instance: &str) -> ClientConfig {
    ClientConfig::builder()
        .namesrv_addr(namesrv.to_owned())
        .instance_name(instance.to_owned())
        .build()
        .expect("client config")
}

/// Queue ids by `(instance, topic)`.
type Assignments = HashMap<(String, String), BTreeSet<i32>>;

/// The queue ids of each `(instance, topic)` as the instance's last rebalance assigned
/// them; every consumer made by [`push_consumer`] reports here.
static ASSIGNED: LazyLock<Mutex<Assignments>> = LazyLock::new(Mutex::default);

/// Records an instance's rebalance outcome in [`ASSIGNED`]. The client calls it once the
/// pull requests of the new queues are on their way.
struct ReportAssignment(&'static str);

impl MessageQueueListener for ReportAssignment {
    fn message_queue_changed(
        &self,
        topic: &str,
        _all: &HashSet<MessageQueue>,
        assigned: &HashSet<MessageQueue>,
    ) {
        let ids = assigned.iter().map(MessageQueue::queue_id).collect();
        ASSIGNED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((self.0.to_owned(), topic.to_owned()), ids);
    }
}

/// The queue ids of `topic` that push consumer `instance` was assigned last.
pub fn assigned(instance: &str, topic: &str) -> BTreeSet<i32> {
    ASSIGNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(instance.to_owned(), topic.to_owned()))
        .cloned()
        .unwrap_or_default()
}

/// Whether the last rebalances of `instances` share the `queues` queues of `topic` out
/// (clustering): each owns some, none is owned twice, none is left over.
pub fn shared_out(topic: &str, instances: &[&str], queues: usize) -> bool {
    let mut union = BTreeSet::new();
    let mut owned = 0;
    for instance in instances {
        let mine = assigned(instance, topic);
        if mine.is_empty() {
            return false;
        }
        owned += mine.len();
        union.extend(mine);
    }
    owned == queues && union.len() == queues
}

/// A push consumer reading from the first offset, one message per listener call;
/// `instance` keeps several consumers of one group in one process distinct clients, and
/// names it in [`assigned`].
pub fn push_consumer(
    namesrv: &str,
    group: &str,
    instance: &'static str,
    configure: impl FnOnce(
        rocketmq_client_rust::DefaultMQPushConsumerBuilder,
    ) -> rocketmq_client_rust::DefaultMQPushConsumerBuilder,
) -> DefaultMQPushConsumer {
    let builder = DefaultMQPushConsumer::builder(client_runtime(instance))
        .client_config(client_config(namesrv, instance))
        .consumer_group(group.to_owned())
        .name_server_addr(namesrv.to_owned())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(2)
        .consume_message_batch_max_size(1)
        .pull_batch_size(8)
        .message_queue_listener(Some(Arc::new(ReportAssignment(instance))));
    configure(builder).build()
}

pub async fn pull_consumer(namesrv: &str, group: &str) -> DefaultMQPullConsumer {
    let consumer = DefaultMQPullConsumer::builder(client_runtime("pull"))
        .consumer_group(group.to_owned())
        .name_server_addr(namesrv.to_owned())
        .consumer_pull_timeout(Duration::from_secs(5))
        .build()
        .expect("pull consumer");
    consumer.start().await.expect("pull consumer start");
    consumer
}

/// Every message currently stored in `topic` (all queues, from each queue's minimum),
/// through the pull consumer; an error (no route yet) reads as nothing.
pub async fn pull_all(consumer: &DefaultMQPullConsumer, topic: &str) -> Vec<MessageExt> {
    let Ok(queues) = consumer.fetch_subscribe_message_queues(topic).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for q in &queues {
        let (Ok(min), Ok(max)) = (consumer.min_offset(q).await, consumer.max_offset(q).await)
        else {
            continue;
        };
        let mut offset = min;
        while offset < max {
            let Ok(result) = consumer.pull(q, "*", offset, 32).await else {
                break;
            };
            let next = result.next_begin_offset() as i64;
            out.extend(result.msg_found_list().unwrap_or_default().iter().cloned());
            if next <= offset {
                break;
            }
            offset = next;
        }
    }
    out
}

pub fn msg(topic: &str, tag: &str, body: &[u8]) -> Message {
    Message::builder()
        .topic(topic)
        .tags(tag)
        .body_slice(body)
        .build_unchecked()
}

pub fn body_bytes(m: &MessageExt) -> Vec<u8> {
    m.body().map(|b| b.to_vec()).unwrap_or_default()
}

pub fn body_of(m: &MessageExt) -> String {
    String::from_utf8_lossy(&body_bytes(m)).into_owned()
}

pub fn prop(m: &MessageExt, name: &str) -> Option<String> {
    m.property(&CheetahString::from(name.to_owned()))
        .map(|v| v.to_string())
}

/// Waits until `cond` holds ([`e2e::wait::eventually_ok`]); `state` describes what was
/// seen when it did not in time.
pub async fn eventually(
    what: &str,
    limit: Duration,
    mut cond: impl FnMut() -> bool,
    state: impl Fn() -> String,
) {
    let state = &state;
    e2e::wait::eventually_ok(limit, what, || {
        let holds = cond();
        async move {
            if holds {
                Ok(())
            } else {
                Err(e2e::wait::Lazy(state))
            }
        }
    })
    .await;
}
