//! Op-queue bookkeeping of the checker (`TransactionalMessageServiceImpl.fillOpRemoveMap`
//! and `calculateOpOffset`): which half offsets are decided, and how far the op queue
//! has been fully accounted for.
//!
//! An op record marks one half queue offset done. Op records for half offsets the
//! checker already passed only need their own position remembered ("done ops"); the
//! others wait in the removal map until the checker reaches their half offset. The op
//! progress saved for `CID_RMQ_SYS_TRANS` is the first op offset not yet done, so after
//! a restart every op record that still matters is read again.

use std::collections::{BTreeMap, BTreeSet};

use protocol::message::QueueOffset;

#[derive(Debug, Default)]
pub struct OpState {
    /// Half offset at or after the half progress → the op record that marks it.
    removed: BTreeMap<QueueOffset, QueueOffset>,
    /// Op records whose half offset the checker has passed.
    done_ops: BTreeSet<QueueOffset>,
}

impl OpState {
    /// Accounts one op record read at `op_offset`. `half` is its body (`None` when not a
    /// number: such a record decides nothing and is simply done).
    pub fn record(
        &mut self,
        op_offset: QueueOffset,
        half: Option<QueueOffset>,
        half_progress: QueueOffset,
    ) {
        match half {
            Some(h) if h >= half_progress => {
                // Two op records for one half offset (a commit retried after a lost
                // answer): the later one is done at once.
                if let Some(previous) = self.removed.insert(h, op_offset) {
                    self.done_ops.insert(previous.min(op_offset));
                    self.removed.insert(h, previous.max(op_offset));
                }
            }
            _ => {
                self.done_ops.insert(op_offset);
            }
        }
    }

    /// True when `half` is decided; its op record then counts as done.
    pub fn take(&mut self, half: QueueOffset) -> bool {
        match self.removed.remove(&half) {
            Some(op) => {
                self.done_ops.insert(op);
                true
            }
            None => false,
        }
    }

    pub fn is_decided(&self, half: QueueOffset) -> bool {
        self.removed.contains_key(&half)
    }

    /// The checker moved its half progress to `half_progress`: op records for offsets
    /// below it are done whether or not the scan looked at them.
    pub fn passed(&mut self, half_progress: QueueOffset) {
        let keep = self.removed.split_off(&half_progress);
        self.done_ops.extend(self.removed.values().copied());
        self.removed = keep;
    }

    /// Decided half offsets the checker has not reached yet.
    pub fn pending(&self) -> usize {
        self.removed.len()
    }

    /// `calculateOpOffset`: the first op offset from `start` that is not done.
    pub fn op_progress(&self, start: QueueOffset) -> QueueOffset {
        let mut next = start;
        for done in self.done_ops.range(start..) {
            if *done != next {
                break;
            }
            next = QueueOffset(next.0 + 1);
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i64) -> QueueOffset {
        QueueOffset(n)
    }

    #[test]
    fn ops_behind_the_half_progress_are_done_at_once() {
        let mut s = OpState::default();
        // Op queue from offset 10: halves 3 (passed), 5, 7, garbage, 6.
        s.record(q(10), Some(q(3)), q(5));
        s.record(q(11), Some(q(5)), q(5));
        s.record(q(12), Some(q(7)), q(5));
        s.record(q(13), None, q(5));
        s.record(q(14), Some(q(6)), q(5));
        assert_eq!(s.op_progress(q(10)), q(11));
        assert_eq!(s.pending(), 3);
        assert!(s.take(q(5)));
        assert!(!s.take(q(5)));
        assert_eq!(s.op_progress(q(10)), q(12));
        assert!(s.is_decided(q(6)));
        // The checker stops at half 6 without looking at it: nothing more is done.
        s.passed(q(6));
        assert_eq!(s.op_progress(q(10)), q(12));
        // It later passes 6 and 7.
        s.passed(q(8));
        assert_eq!(s.pending(), 0);
        assert_eq!(s.op_progress(q(10)), q(15));
    }

    #[test]
    fn a_repeated_op_for_one_half_is_done_at_once() {
        let mut s = OpState::default();
        s.record(q(0), Some(q(4)), q(0));
        s.record(q(1), Some(q(4)), q(0));
        assert_eq!(s.pending(), 1);
        assert_eq!(s.op_progress(q(0)), q(1));
        assert!(s.take(q(4)));
        assert_eq!(s.op_progress(q(0)), q(2));
    }

    #[test]
    fn progress_stops_at_the_first_gap() {
        let mut s = OpState::default();
        s.record(q(2), Some(q(0)), q(1));
        s.record(q(4), Some(q(0)), q(1));
        assert_eq!(s.op_progress(q(2)), q(3));
        assert_eq!(s.op_progress(q(0)), q(0));
    }
}
