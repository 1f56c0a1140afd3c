//! POP consumption metrics, registered into the broker's registry by `crate::metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Default)]
pub struct PopMetrics {
    /// Messages delivered by POP and neither acked nor done yet.
    pub in_flight: Gauge,
    /// Pops parked waiting for messages.
    pub parked: Gauge,
    /// Messages delivered again after their invisible time passed unacked.
    pub redeliveries: Counter,
    /// Messages moved to `%DLQ%<group>` (max attempts reached, or the consumer asked).
    pub dlq_forwards: Counter,
    /// Messages delivered by POP, first deliveries and redeliveries.
    pub delivered: Counter,
    pub acks: Counter,
}

impl PopMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "rocketmq_pop_in_flight",
            "Messages popped by 5.x consumers and not acked yet (popMaxInFlightTotal)",
            self.in_flight.clone(),
        );
        r.register(
            "rocketmq_pop_parked",
            "Pops waiting for messages (popMaxParkedTotal)",
            self.parked.clone(),
        );
        r.register(
            "rocketmq_pop_redeliveries",
            "Popped messages delivered again because their invisible time passed unacked",
            self.redeliveries.clone(),
        );
        r.register(
            "rocketmq_pop_dlq_forwards",
            "Popped messages moved to %DLQ%<group> (max delivery attempts, or forwarded by the consumer)",
            self.dlq_forwards.clone(),
        );
        r.register(
            "rocketmq_pop_delivered",
            "Messages delivered by POP, redeliveries included",
            self.delivered.clone(),
        );
        r.register(
            "rocketmq_pop_acks",
            "Popped messages acked",
            self.acks.clone(),
        );
    }
}
