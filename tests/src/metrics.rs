//! Reading a process's Prometheus text (`/metrics`), and waiting on what it shows.

use std::time::Duration;

use crate::wait::eventually_ok;

/// The value of the sample `series` (the metric name with its labels exactly as exposed,
/// e.g. `rocketmq_delay_messages_waiting{level="2"}`), or `None` while it is absent or
/// the endpoint does not answer.
pub async fn sample(http_port: u16, series: &str) -> Option<f64> {
    let (status, text) = crate::http::get(http_port, "/metrics").await.ok()?;
    if status != 200 {
        return None;
    }
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The sum of every sample of the family `name` (all its label sets); `None` while the
/// endpoint does not answer.
pub async fn family_sum(http_port: u16, name: &str) -> Option<f64> {
    let (status, text) = crate::http::get(http_port, "/metrics").await.ok()?;
    if status != 200 {
        return None;
    }
    Some(
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// Waits until the broker has dispatched its whole CommitLog to the ConsumeQueues and
/// the index (`rocketmq_storage_dispatch_behind_bytes` is 0): whatever it stored before
/// is pullable and found by key.
pub async fn wait_dispatched(http_port: u16, within: Duration) {
    eventually_ok(within, "the broker to dispatch its CommitLog", || async {
        match sample(http_port, "rocketmq_storage_dispatch_behind_bytes").await {
            Some(0.0) => Ok(()),
            other => Err(format!("{other:?} bytes behind")),
        }
    })
    .await;
}

/// Waits until the broker's transaction checker has completed `rounds` more rounds than
/// when this was called (`rocketmq_transaction_check_rounds_total`); all but the first
/// of them started after the call.
pub async fn wait_check_rounds(http_port: u16, rounds: u32, within: Duration) {
    const SERIES: &str = "rocketmq_transaction_check_rounds_total";
    let start = sample(http_port, SERIES).await.unwrap_or(0.0);
    let want = start + f64::from(rounds);
    eventually_ok(within, "transaction checker rounds", || async {
        let now = sample(http_port, SERIES).await.unwrap_or(0.0);
        if now >= want {
            Ok(())
        } else {
            Err(format!("{now} rounds, waiting for {want}"))
        }
    })
    .await;
}

/// Waits until every delay level has walked its whole schedule queue
/// (`rocketmq_delay_messages_waiting` is 0 for all levels): every delayed message and
/// retry stored before is in its real topic's CommitLog.
pub async fn wait_delays_delivered(http_port: u16, within: Duration) {
    eventually_ok(within, "the schedule queues to be delivered", || async {
        match family_sum(http_port, "rocketmq_delay_messages_waiting").await {
            Some(0.0) => Ok(()),
            other => Err(format!("{other:?} messages waiting")),
        }
    })
    .await;
}
