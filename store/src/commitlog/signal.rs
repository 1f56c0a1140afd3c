//! Wake-ups for readers tailing the CommitLog (the reput / dispatch service): the writer
//! publishes the new end offset after every append; waiters block (thread) or await
//! (task) until the end moves past the offset they have consumed. Publishing costs one
//! atomic store plus one load when nobody waits.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use protocol::message::PhysicalOffset;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct AppendSignal {
    max: AtomicI64,
    waiters: AtomicUsize,
    closed: AtomicBool,
    lock: Mutex<()>,
    cond: Condvar,
    notify: Notify,
}

impl AppendSignal {
    pub(crate) fn new(max: PhysicalOffset) -> Self {
        Self {
            max: AtomicI64::new(max.0),
            ..Self::default()
        }
    }

    /// The last published end of the CommitLog.
    pub fn max_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.max.load(Ordering::SeqCst))
    }

    /// Appenders publish after leaving the put lock, possibly out of order: the end only
    /// moves forward.
    pub(crate) fn publish(&self, max: PhysicalOffset) {
        self.max.fetch_max(max.0, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.wake_all();
        }
    }

    /// Recovery: the end is wherever the valid prefix ends, even if lower than before.
    pub(crate) fn reset(&self, max: PhysicalOffset) {
        self.max.store(max.0, Ordering::SeqCst);
    }

    /// Wakes everybody for good (shutdown).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn wake_all(&self) {
        drop(self.lock.lock());
        self.cond.notify_all();
        self.notify.notify_waiters();
    }

    fn ready(&self, offset: PhysicalOffset) -> bool {
        self.max.load(Ordering::SeqCst) > offset.0 || self.closed.load(Ordering::SeqCst)
    }

    /// Blocks until the CommitLog end is past `offset`, the signal is closed, or `timeout`
    /// elapses. Returns whether the end is past `offset`.
    pub fn wait_beyond_timeout(&self, offset: PhysicalOffset, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        while !self.ready(offset) {
            if self.cond.wait_until(&mut guard, deadline).timed_out() {
                break;
            }
        }
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        self.max.load(Ordering::SeqCst) > offset.0
    }

    /// Resolves once the CommitLog end is past `offset` or the signal is closed.
    pub async fn wait_beyond(&self, offset: PhysicalOffset) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ready(offset) {
                break;
            }
            notified.await;
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn thread_and_task_waiters_wake_on_publish() {
        let signal = Arc::new(AppendSignal::new(PhysicalOffset(0)));
        assert!(!signal.wait_beyond_timeout(PhysicalOffset(0), Duration::from_millis(5)));
        let s = Arc::clone(&signal);
        let waiter = std::thread::spawn(move || {
            s.wait_beyond_timeout(PhysicalOffset(10), Duration::from_secs(30))
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let s = Arc::clone(&signal);
        let task = rt.spawn(async move { s.wait_beyond(PhysicalOffset(10)).await });
        // Time itself: room for both waiters to block before the publishes, so these wake
        // them (a blocked waiter shows nowhere to wait on).
        std::thread::sleep(Duration::from_millis(20));
        signal.publish(PhysicalOffset(5));
        signal.publish(PhysicalOffset(11));
        assert!(waiter.join().unwrap());
        rt.block_on(task).unwrap();
        signal.close();
        assert!(!signal.wait_beyond_timeout(PhysicalOffset(100), Duration::from_secs(30)));
    }
}
