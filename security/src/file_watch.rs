//! Polling of the files a server reloads when their content changes (the ACL file, the
//! TLS certificates): one check every interval, run on the blocking pool because it reads
//! files, until the server shuts down.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Runs `check` every `interval` (at least 100 ms) until `cancel`.
pub fn spawn_poll<F>(
    interval: Duration,
    cancel: CancellationToken,
    check: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() + Clone + Send + 'static,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            let _ = tokio::task::spawn_blocking(check.clone()).await;
        }
    })
}
