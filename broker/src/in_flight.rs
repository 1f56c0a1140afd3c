//! The bounds on requests in progress (`maxInFlightPerConnection`, `maxInFlightTotal`)
//! and on the bytes they and the answers not yet written hold
//! (`maxInFlightBytesPerConnection`, `maxInFlightBytesTotal`: a permit may weigh more
//! than one unit). A plain counter with a cap: nothing ever waits for a permit (a request
//! over the bound is answered SYSTEM_BUSY at once), so a semaphore's wait queue, and the
//! lock it takes on every release, would be pure cost on the request path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub struct InFlightLimit {
    max: usize,
    used: AtomicUsize,
}

/// One request in progress; dropping it frees its units.
#[derive(Debug)]
pub struct InFlightPermit(Arc<InFlightLimit>, usize);

impl InFlightLimit {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            used: AtomicUsize::new(0),
        })
    }

    /// A permit while fewer than the cap are out, else `None`.
    pub fn try_acquire(self: &Arc<Self>) -> Option<InFlightPermit> {
        self.try_acquire_units(1)
    }

    /// A permit of `units` while they fit under the cap, else `None`. When nothing is out
    /// any weight is admitted, so one request larger than the cap is served alone
    /// rather than never.
    pub fn try_acquire_units(self: &Arc<Self>, units: usize) -> Option<InFlightPermit> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used > 0 && used.saturating_add(units) > self.max {
                return None;
            }
            match self.used.compare_exchange_weak(
                used,
                used.saturating_add(units),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(InFlightPermit(Arc::clone(self), units)),
                Err(now) => used = now,
            }
        }
    }

    /// A permit of `units` whether they fit or not: for bytes already held that can only
    /// be accounted, not refused (an answer waiting to be written). Requests asking
    /// afterwards are refused until the units are freed.
    pub fn acquire_units(self: &Arc<Self>, units: usize) -> InFlightPermit {
        self.used.fetch_add(units, Ordering::Acquire);
        InFlightPermit(Arc::clone(self), units)
    }

    /// Whether more than the cap is out.
    pub fn is_over(&self) -> bool {
        self.in_use() > self.max
    }

    /// Permits out now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

impl InFlightPermit {
    /// Takes `other`'s units into this permit; both must come from the same limit.
    pub fn absorb(&mut self, mut other: InFlightPermit) {
        debug_assert!(Arc::ptr_eq(&self.0, &other.0), "permits of two limits");
        self.1 += std::mem::take(&mut other.1);
    }
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        self.0.used.fetch_sub(self.1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_frees_on_drop() {
        let limit = InFlightLimit::new(2);
        let a = limit.try_acquire().expect("first");
        let b = limit.try_acquire().expect("second");
        assert!(limit.try_acquire().is_none());
        assert_eq!(limit.in_use(), 2);
        drop(a);
        let c = limit.try_acquire().expect("freed slot");
        assert!(limit.try_acquire().is_none());
        drop((b, c));
        assert_eq!(limit.in_use(), 0);
    }

    #[test]
    fn weighted_permits_fit_under_the_cap_or_come_alone() {
        let limit = InFlightLimit::new(100);
        let a = limit.try_acquire_units(60).expect("fits");
        assert!(limit.try_acquire_units(41).is_none());
        let b = limit.try_acquire_units(40).expect("fits exactly");
        drop((a, b));
        // Alone, a request over the cap is still served.
        let big = limit.try_acquire_units(500).expect("alone");
        assert!(limit.try_acquire_units(1).is_none());
        drop(big);
        assert_eq!(limit.in_use(), 0);
    }

    #[test]
    fn held_bytes_are_accounted_past_the_cap() {
        let limit = InFlightLimit::new(100);
        let a = limit.acquire_units(150);
        assert!(limit.is_over());
        assert!(limit.try_acquire_units(1).is_none());
        drop(a);
        assert!(!limit.is_over());
        assert_eq!(limit.in_use(), 0);
    }

    #[test]
    fn zero_cap_still_admits_one() {
        let limit = InFlightLimit::new(0);
        let p = limit.try_acquire();
        assert!(p.is_some());
        assert!(limit.try_acquire().is_none());
    }

    #[test]
    fn concurrent_acquirers_never_exceed_the_cap() {
        let limit = InFlightLimit::new(3);
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (limit, peak) = (Arc::clone(&limit), Arc::clone(&peak));
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        if let Some(p) = limit.try_acquire() {
                            peak.fetch_max(limit.in_use(), Ordering::Relaxed);
                            drop(p);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert!(peak.load(Ordering::Relaxed) <= 3);
        assert_eq!(limit.in_use(), 0);
    }
}
