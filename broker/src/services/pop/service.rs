//! [`PopService`]: the POP state of every (group, topic, queue) and the operations on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use protocol::message::{ConsumerOffset, QueueOffset};
use store::lookup::GetMessageStatus;

use super::handle::ReceiptHandle;
use super::queue::QueueState;
use super::types::{PopError, PopRequest, Popped};
use super::{MAX_INVISIBLE_MS, MAX_POP_BATCH};
use crate::names::perm;
use crate::services::Broker;
use crate::services::filter::MessageFilter;

/// (group, topic, queue id).
pub(super) type Key = (String, String, i32);

#[derive(Default)]
pub(super) struct Table {
    queues: BTreeMap<Key, QueueState>,
    per_topic: HashMap<(String, String), usize>,
    pub(super) total: usize,
}

impl Table {
    /// Runs `f` on the queue's state, keeping the in-flight counts right.
    pub(super) fn with<R>(&mut self, key: &Key, f: impl FnOnce(&mut QueueState) -> R) -> Option<R> {
        let state = self.queues.get_mut(key)?;
        let before = state.in_flight_count();
        let r = f(state);
        let after = state.in_flight_count();
        let count = self
            .per_topic
            .entry((key.0.clone(), key.1.clone()))
            .or_default();
        *count = (*count + after).saturating_sub(before);
        self.total = (self.total + after).saturating_sub(before);
        Some(r)
    }
}

/// What the pop checks resolved.
struct Plan {
    queues: Vec<i32>,
    filter: MessageFilter,
    fifo: bool,
    max_attempts: u32,
}

/// The result of one pass over the queues.
#[derive(Default)]
struct Pass {
    messages: Vec<Popped>,
    /// Due for the DLQ: (queue, offset, attempts).
    to_dlq: Vec<(i32, QueueOffset, u32)>,
    /// Queues that may get new messages, at their cursor.
    open: Vec<(i32, QueueOffset)>,
    /// Nothing delivered because of this cap.
    capped: Option<&'static str>,
    next_deadline: Option<i64>,
}

pub struct PopService {
    pub(super) table: Mutex<Table>,
    ids: AtomicU64,
    rotation: AtomicUsize,
    parked: AtomicUsize,
}

impl Default for PopService {
    fn default() -> Self {
        Self::new()
    }
}

impl PopService {
    pub fn new() -> Self {
        // Ids seeded by the clock: handles issued before a restart match no new entry.
        let seed = u64::try_from(crate::now_ms()).unwrap_or(0) << 12;
        Self {
            table: Mutex::new(Table::default()),
            ids: AtomicU64::new(seed),
            rotation: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
        }
    }

    pub(super) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether `group` consumes by POP here: 4.x pulls and offset commits of it would
    /// move the committed offset under its in-flight messages.
    pub fn has_group(&self, group: &str) -> bool {
        let t = self.table.lock();
        let from = (group.to_owned(), String::new(), i32::MIN);
        t.queues
            .range(from..)
            .next()
            .is_some_and(|((g, _, _), _)| g == group)
    }

    /// The refusal remark for a 4.x PULL_MESSAGE or UPDATE_CONSUMER_OFFSET of `group`.
    pub fn refusal_for_4x(&self, group: &str) -> Option<String> {
        self.has_group(group).then(|| {
            format!(
                "consumer group {group} consumes by POP (RocketMQ 5.x clients) on this broker; \
                 a 4.x pull or offset commit would move its committed offset under its \
                 in-flight messages. Use another group for 4.x consumers"
            )
        })
    }

    /// Messages in flight across the broker.
    pub fn in_flight(&self) -> usize {
        self.table.lock().total
    }

    /// Pops up to `max_messages`, waiting up to `poll` when none is there.
    pub async fn pop(
        &self,
        broker: &Broker,
        req: &PopRequest<'_>,
    ) -> Result<Vec<Popped>, PopError> {
        let plan = self.plan(broker, req)?;
        let hold = if broker.live.long_polling_enable.load(Ordering::Relaxed) {
            req.poll.min(broker.config.broker.max_suspend())
        } else {
            Duration::ZERO
        };
        let until = Instant::now() + hold;
        /// Passes in a row a visible message may trigger without a wait.
        const MAX_RECHECKS: u32 = 4;
        let mut rechecks = 0;
        loop {
            if !broker.acts_as_master() {
                return Err(PopError::NoPermission(format!(
                    "broker {} is not the master of its group: POP is served by the master",
                    broker.config.broker.broker_name
                )));
            }
            let pass = self.pass(broker, req, &plan);
            for (queue_id, offset, attempts) in pass.to_dlq.iter().copied() {
                let key = (req.group.to_owned(), req.topic.to_owned(), queue_id);
                if let Err(e) = self
                    .forward(broker, &key, offset, attempts, plan.max_attempts)
                    .await
                {
                    tracing::warn!(group = %req.group, topic = %req.topic, queue_id, %offset, error = %e, "dead letter copy failed; retried when due");
                }
            }
            if !pass.messages.is_empty() {
                return Ok(pass.messages);
            }
            if let Some(key) = pass.capped {
                broker.metrics.limits.refusals.count(key);
                return Err(PopError::Limit {
                    key,
                    remark: format!(
                        "too many POP messages in flight ({key}); ack or wait for the invisible time to pass"
                    ),
                });
            }
            let now = Instant::now();
            if now >= until || broker.shutdown.is_cancelled() {
                return Ok(Vec::new());
            }
            let _slot = self.park_slot(broker)?;
            let waits: Vec<_> = pass
                .open
                .iter()
                .map(|(q, at)| {
                    broker
                        .pull_hold
                        .park(req.topic, *q, *at, plan.filter.clone())
                })
                .collect();
            // A message may have arrived between the pass and parking. Rechecked a few
            // times at most: a unit the store lists but cannot serve must not spin.
            if rechecks < MAX_RECHECKS
                && pass
                    .open
                    .iter()
                    .any(|(q, at)| broker.store.has_visible_message(req.topic, *q, *at))
            {
                rechecks += 1;
                continue;
            }
            rechecks = 0;
            let mut wait = until - now;
            if let Some(deadline) = pass.next_deadline {
                let ms = u64::try_from(deadline.saturating_sub(crate::now_ms())).unwrap_or(0);
                wait = wait.min(Duration::from_millis(ms + 1));
            }
            let woken = async {
                if waits.is_empty() {
                    std::future::pending::<()>().await;
                } else {
                    let _ = futures::future::select_all(waits).await;
                }
            };
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(wait) => {}
                _ = broker.shutdown.cancelled() => return Ok(Vec::new()),
            }
        }
    }

    fn park_slot<'a>(&'a self, broker: &'a Broker) -> Result<ParkSlot<'a>, PopError> {
        let max = broker.config.broker.pop_max_parked_total as usize;
        let n = self.parked.fetch_add(1, Ordering::AcqRel);
        let slot = ParkSlot {
            service: self,
            broker,
        };
        broker.metrics.pop.parked.inc();
        if n >= max {
            drop(slot);
            broker.metrics.limits.refusals.count("popMaxParkedTotal");
            return Err(PopError::Limit {
                key: "popMaxParkedTotal",
                remark: format!(
                    "POLLING_FULL: {max} pops are already waiting for messages (popMaxParkedTotal)"
                ),
            });
        }
        Ok(slot)
    }

    /// The checks of `PopMessageProcessor.processRequest`, in its order.
    fn plan(&self, broker: &Broker, req: &PopRequest<'_>) -> Result<Plan, PopError> {
        if !perm::is_readable(broker.live.broker_permission()) {
            return Err(PopError::NoPermission(format!(
                "the broker[{}] pulling message is forbidden",
                broker.config.broker.broker_ip1
            )));
        }
        if req.max_messages == 0 || req.max_messages > MAX_POP_BATCH {
            return Err(PopError::BadRequest(format!(
                "a pop takes 1 to {MAX_POP_BATCH} messages, asked {}",
                req.max_messages
            )));
        }
        let invisible = i64::try_from(req.invisible.as_millis()).unwrap_or(i64::MAX);
        if invisible <= 0 || invisible > MAX_INVISIBLE_MS {
            return Err(PopError::BadRequest(format!(
                "invisible time {invisible} ms is outside (0, {MAX_INVISIBLE_MS}] ms"
            )));
        }
        let topic = broker
            .topics
            .get(req.topic)
            .ok_or_else(|| PopError::TopicNotExist(req.topic.to_owned()))?;
        if !perm::is_readable(topic.perm) {
            return Err(PopError::NoPermission(format!(
                "the topic[{}] peeking message is forbidden",
                req.topic
            )));
        }
        let queues: Vec<i32> = match req.queue_id {
            Some(q) if q < 0 || q >= topic.read_queue_nums => {
                return Err(PopError::BadRequest(format!(
                    "queueId[{q}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                    req.topic, topic.read_queue_nums
                )));
            }
            Some(q) => vec![q],
            None => (0..topic.read_queue_nums).collect(),
        };
        let auto = broker
            .live
            .auto_create_subscription_group
            .load(Ordering::Relaxed);
        let group = broker
            .groups
            .find_or_create(req.group, auto)
            .ok_or_else(|| PopError::GroupNotExist(req.group.to_owned()))?;
        if !group.consume_enable {
            return Err(PopError::NoPermission(format!(
                "subscription group no permission, {}",
                req.group
            )));
        }
        let filter = super::filter::build(broker, req.expression_type, req.expression)
            .map_err(|(code, remark)| PopError::Filter(code, remark))?;
        Ok(Plan {
            queues,
            filter,
            fifo: group.consume_message_orderly,
            // 5.x: `maxDeliveryAttempts`, retryMaxTimes retries after the first delivery.
            max_attempts: u32::try_from(group.retry_max_times)
                .unwrap_or(0)
                .saturating_add(1),
        })
    }

    /// Where a queue new to the POP state starts: the committed offset, else (as
    /// QUERY_CONSUMER_OFFSET answers a new 4.x group) the queue's start while its first
    /// message is still in memory, else its end.
    fn start_offset(broker: &Broker, key: &Key) -> QueueOffset {
        let (group, topic, q) = (&key.0, &key.1, key.2);
        if let Some(o) = broker.offsets.query(group, topic, q)
            && o.get() >= 0
        {
            return QueueOffset(o.get());
        }
        let store = &broker.store;
        let min = store.min_offset_in_queue(topic, q);
        let start =
            if min.get() <= 0 && !store.check_in_disk_by_consume_offset(topic, q, QueueOffset(0)) {
                min
            } else {
                store.max_offset_in_queue(topic, q)
            };
        broker
            .offsets
            .commit(group, topic, q, ConsumerOffset(start.get()));
        start
    }

    /// One pass over the queues: redeliveries, then new messages, under the table lock.
    fn pass(&self, broker: &Broker, req: &PopRequest<'_>, plan: &Plan) -> Pass {
        let b = &broker.config.broker;
        let now = crate::now_ms();
        let invisible = i64::try_from(req.invisible.as_millis()).unwrap_or(i64::MAX);
        let deadline = now.saturating_add(invisible);
        let mut pass = Pass::default();
        let n = plan.queues.len();
        let first = self.rotation.fetch_add(1, Ordering::Relaxed);
        let mut t = self.table.lock();
        for i in 0..n {
            if pass.messages.len() >= req.max_messages {
                break;
            }
            let queue_id = plan.queues[(first + i) % n];
            let key: Key = (req.group.to_owned(), req.topic.to_owned(), queue_id);
            if !t.queues.contains_key(&key) {
                let start = Self::start_offset(broker, &key);
                t.queues.insert(key.clone(), QueueState::new(start));
            }
            let topic_count = t
                .per_topic
                .get(&(key.0.clone(), key.1.clone()))
                .copied()
                .unwrap_or(0);
            let room_topic =
                (b.pop_max_in_flight_per_group_topic as usize).saturating_sub(topic_count);
            let room_total = (b.pop_max_in_flight_total as usize).saturating_sub(t.total);
            let want = req.max_messages - pass.messages.len();
            t.with(&key, |state| {
                let committed = state.committed();
                if plan.fifo && state.blocks_fifo(now) {
                    pass.next_deadline = min_opt(pass.next_deadline, state.next_deadline());
                    return;
                }
                let mut taken = 0;
                for (offset, attempts) in state.expired(now) {
                    if taken >= want {
                        break;
                    }
                    if attempts >= plan.max_attempts {
                        if state.start_forwarding(offset, None).is_some() {
                            pass.to_dlq.push((queue_id, offset, attempts));
                        }
                        continue;
                    }
                    match read_one(broker, req.topic, queue_id, offset) {
                        Read::Found(record) => {
                            let id = self.next_id();
                            let attempt = state.deliver(offset, id, deadline);
                            broker.metrics.pop.redeliveries.inc();
                            pass.messages.push(
                                self.popped(
                                    broker, &key, record, offset, attempt, id, now, invisible,
                                ),
                            );
                            taken += 1;
                        }
                        Read::Gone => state.remove(offset),
                        Read::Unreadable => {}
                    }
                }
                let room = (want - taken).min(room_topic).min(room_total);
                if room == 0 {
                    if want > taken && pass.messages.is_empty() {
                        pass.capped = Some(if room_topic == 0 {
                            "popMaxInFlightPerGroupTopic"
                        } else {
                            "popMaxInFlightTotal"
                        });
                    }
                } else {
                    let cursor = state.cursor();
                    let r = broker.store.get_message(
                        req.topic,
                        queue_id,
                        cursor,
                        room,
                        Some(&plan.filter),
                    );
                    let mut got = 0;
                    if r.status == GetMessageStatus::Found {
                        for (record, offset) in r.messages.into_iter().zip(r.queue_offsets) {
                            let id = self.next_id();
                            let attempt = state.deliver(offset, id, deadline);
                            pass.messages.push(
                                self.popped(
                                    broker, &key, record, offset, attempt, id, now, invisible,
                                ),
                            );
                            got += 1;
                        }
                    }
                    match r.status {
                        // Filtered out, or no longer stored (retention): done.
                        GetMessageStatus::Found
                        | GetMessageStatus::NoMatchedMessage
                        | GetMessageStatus::OffsetTooSmall
                        | GetMessageStatus::MessageWasRemoving => {
                            state.advance(r.next_begin_offset)
                        }
                        _ => {}
                    }
                    if got < room {
                        pass.open.push((queue_id, state.cursor()));
                    }
                }
                pass.next_deadline = min_opt(pass.next_deadline, state.next_deadline());
                commit_if_moved(broker, &key, committed, state.committed());
            });
        }
        broker.metrics.pop.in_flight.set(t.total as i64);
        broker
            .metrics
            .pop
            .delivered
            .inc_by(pass.messages.len() as u64);
        pass
    }

    #[allow(clippy::too_many_arguments)]
    fn popped(
        &self,
        broker: &Broker,
        key: &Key,
        record: Bytes,
        offset: QueueOffset,
        attempt: u32,
        id: u64,
        now: i64,
        invisible: i64,
    ) -> Popped {
        Popped {
            record,
            queue_id: key.2,
            offset,
            attempt,
            handle: ReceiptHandle {
                broker_name: broker.config.broker.broker_name.clone(),
                topic: key.1.clone(),
                queue_id: key.2,
                offset,
                pop_time_ms: now,
                invisible_ms: invisible,
                delivery: id,
                generation: id,
            },
        }
    }

    /// Drops the state of a deleted topic or group.
    pub fn forget(&self, group: Option<&str>, topic: Option<&str>) {
        let mut t = self.table.lock();
        t.queues.retain(|(g, tp, _), _| {
            !(group.is_none_or(|x| x == g) && topic.is_none_or(|x| x == tp))
        });
        let mut per_topic = HashMap::new();
        for ((g, tp, _), s) in &t.queues {
            *per_topic.entry((g.clone(), tp.clone())).or_default() += s.in_flight_count();
        }
        t.total = per_topic.values().sum();
        t.per_topic = per_topic;
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

pub(super) fn commit_if_moved(broker: &Broker, key: &Key, before: QueueOffset, after: QueueOffset) {
    if before != after {
        broker
            .offsets
            .commit(&key.0, &key.1, key.2, ConsumerOffset(after.get()));
    }
}

pub(super) enum Read {
    Found(Bytes),
    /// Below the queue's minimum: removed by retention.
    Gone,
    /// Not readable now; tried again later.
    Unreadable,
}

pub(super) fn read_one(broker: &Broker, topic: &str, queue_id: i32, offset: QueueOffset) -> Read {
    let r = broker.store.get_message(topic, queue_id, offset, 1, None);
    match r.status {
        GetMessageStatus::Found => match (r.messages.into_iter().next(), r.queue_offsets.first()) {
            (Some(m), Some(o)) if *o == offset => Read::Found(m),
            _ => Read::Unreadable,
        },
        GetMessageStatus::OffsetTooSmall => Read::Gone,
        _ => Read::Unreadable,
    }
}

/// A parked pop's share of `popMaxParkedTotal`.
struct ParkSlot<'a> {
    service: &'a PopService,
    broker: &'a Broker,
}

impl Drop for ParkSlot<'_> {
    fn drop(&mut self) {
        self.service.parked.fetch_sub(1, Ordering::AcqRel);
        self.broker.metrics.pop.parked.dec();
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
