use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

const INVISIBLE: i64 = 1_000;

fn q(o: i64) -> QueueOffset {
    QueueOffset(o)
}

#[test]
fn deadlines_redeliver_with_the_next_attempt() {
    let mut s = QueueState::new(q(10));
    assert_eq!(s.deliver(q(10), 1, INVISIBLE), 1);
    assert_eq!(s.deliver(q(11), 2, INVISIBLE), 1);
    assert_eq!(s.cursor(), q(12));
    assert!(s.expired(INVISIBLE - 1).is_empty());
    assert_eq!(s.expired(INVISIBLE), vec![(q(10), 1), (q(11), 1)]);
    assert_eq!(s.deliver(q(10), 3, 2 * INVISIBLE), 2);
    assert_eq!(s.cursor(), q(12));
    assert_eq!(s.expired(INVISIBLE), vec![(q(11), 1)]);
    // The first delivery's handle no longer acks; the second's does.
    assert_eq!(s.ack(q(10), 1), AckOutcome::Stale);
    assert_eq!(s.ack(q(10), 3), AckOutcome::Acked);
    assert_eq!(s.ack(q(10), 3), AckOutcome::AlreadyDone);
    assert_eq!(s.committed(), q(11));
}

#[test]
fn out_of_order_acks_commit_the_lowest_unacked() {
    let mut s = QueueState::new(q(0));
    for o in 0..5 {
        s.deliver(q(o), o as u64 + 1, INVISIBLE);
    }
    assert_eq!(s.committed(), q(0));
    assert_eq!(s.ack(q(3), 4), AckOutcome::Acked);
    assert_eq!(s.ack(q(1), 2), AckOutcome::Acked);
    assert_eq!(s.committed(), q(0));
    assert_eq!(s.ack(q(0), 1), AckOutcome::Acked);
    assert_eq!(s.committed(), q(2));
    assert_eq!(s.ack(q(2), 3), AckOutcome::Acked);
    assert_eq!(s.committed(), q(4));
    assert_eq!(s.ack(q(4), 5), AckOutcome::Acked);
    assert_eq!(s.committed(), q(5));
    // Never delivered: a forged or foreign handle.
    assert_eq!(s.ack(q(5), 6), AckOutcome::Stale);
}

#[test]
fn change_invisible_needs_the_newest_handle_and_keeps_old_acks() {
    let mut s = QueueState::new(q(0));
    s.deliver(q(0), 1, INVISIBLE);
    let e = s.change_invisible(q(0), 1, 2, 5 * INVISIBLE).unwrap();
    assert_eq!((e.delivery, e.generation, e.attempt), (1, 2, 1));
    assert!(s.expired(2 * INVISIBLE).is_empty());
    // The replaced handle may not change it again, the new one may.
    assert!(s.change_invisible(q(0), 1, 3, 9 * INVISIBLE).is_none());
    assert!(s.change_invisible(q(0), 2, 3, 6 * INVISIBLE).is_some());
    // Any handle of the delivery acks.
    assert_eq!(s.ack(q(0), 1), AckOutcome::Acked);
}

#[test]
fn fifo_blocks_while_a_message_is_invisible() {
    let mut s = QueueState::new(q(0));
    assert!(!s.blocks_fifo(0));
    s.deliver(q(0), 1, INVISIBLE);
    assert!(s.blocks_fifo(INVISIBLE - 1));
    assert!(!s.blocks_fifo(INVISIBLE));
    assert_eq!(s.start_forwarding(q(0), None), Some(1));
    assert!(
        s.blocks_fifo(INVISIBLE * 10),
        "a message being dead-lettered still blocks"
    );
    assert!(s.expired(INVISIBLE * 10).is_empty());
    assert_eq!(s.ack(q(0), 1), AckOutcome::Stale);
    s.forwarding_failed(q(0), INVISIBLE * 10);
    assert_eq!(s.expired(INVISIBLE * 10), vec![(q(0), 1)]);
    assert_eq!(
        s.start_forwarding(q(0), Some(2)),
        None,
        "another delivery's handle"
    );
    assert_eq!(s.start_forwarding(q(0), Some(1)), Some(1));
    s.remove(q(0));
    assert_eq!(s.committed(), q(1));
}

#[derive(Debug, Clone)]
enum Op {
    /// Pop up to n fresh messages (some skipped by the filter).
    Pop {
        n: u8,
        skip: u8,
    },
    /// Ack the i-th outstanding handle (mod their number), possibly an old one.
    Ack(usize),
    Change(usize),
    Tick(u16),
    Redeliver,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..5, 0u8..3).prop_map(|(n, skip)| Op::Pop { n, skip }),
        any::<usize>().prop_map(Op::Ack),
        any::<usize>().prop_map(Op::Change),
        (0u16..1500).prop_map(Op::Tick),
        Just(Op::Redeliver),
        Just(Op::Restart),
    ]
}

proptest! {
    /// Against a model of what the consumer acked: the committed offset is always the
    /// lowest offset neither acked nor skipped, and a restart from it loses nothing.
    #[test]
    fn committed_offset_is_the_lowest_unacked(ops in proptest::collection::vec(op(), 1..80)) {
        let mut s = QueueState::new(q(0));
        let mut now = 0i64;
        let mut next_id = 1u64;
        // Offsets done for good (acked or skipped), and the handles handed out.
        let mut done: BTreeSet<i64> = BTreeSet::new();
        let mut handles: Vec<(i64, u64, u64)> = Vec::new();
        let mut end = 0i64; // offsets handed out or skipped so far: [0, end)
        for op in ops {
            match op {
                Op::Pop { n, skip } => {
                    let mut o = s.cursor().get();
                    prop_assert_eq!(o, end);
                    for _ in 0..skip {
                        done.insert(o);
                        o += 1;
                    }
                    s.advance(q(o));
                    for _ in 0..n {
                        s.deliver(q(o), next_id, now + INVISIBLE);
                        handles.push((o, next_id, next_id));
                        next_id += 1;
                        o += 1;
                    }
                    end = o;
                }
                Op::Ack(i) if !handles.is_empty() => {
                    let (o, d, _) = handles[i % handles.len()];
                    if s.ack(q(o), d) == AckOutcome::Acked {
                        done.insert(o);
                    }
                }
                Op::Change(i) if !handles.is_empty() => {
                    let (o, d, g) = handles[i % handles.len()];
                    if s.change_invisible(q(o), g, next_id, now + 2 * INVISIBLE).is_some() {
                        handles.push((o, d, next_id));
                        next_id += 1;
                    }
                }
                Op::Tick(ms) => now += i64::from(ms),
                Op::Redeliver => {
                    for (o, _) in s.expired(now) {
                        s.deliver(o, next_id, now + INVISIBLE);
                        handles.push((o.get(), next_id, next_id));
                        next_id += 1;
                    }
                }
                Op::Restart => {
                    // In-flight state is lost; the committed offset survives.
                    s = QueueState::new(s.committed());
                    handles.clear();
                    // Messages at or past it are delivered again: no longer done.
                    let c = s.cursor().get();
                    done.retain(|o| *o < c);
                    end = c;
                }
                Op::Ack(_) | Op::Change(_) => {}
            }
            let lowest_open = (0..).find(|o| !done.contains(o)).unwrap();
            prop_assert_eq!(s.committed().get(), lowest_open);
            prop_assert!(s.committed() <= s.cursor());
            // Nothing below the committed offset is still owed to a consumer.
            prop_assert!((0..s.committed().get()).all(|o| done.contains(&o)));
        }
    }
}
