//! The history the fault checker records (each send's outcome) and its check against
//! what a consumer reads after healing: lost, moved, duplicated, reordered, phantom.

use std::collections::{BTreeMap, HashMap};

use e2e::Client;
use e2e::broker_harness::pull_queue;

use super::{QUEUES, TOPIC};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// SEND_OK at this queue offset.
    Acked(i64),
    /// Any other answer (not acknowledged; may or may not be stored).
    Refused(i32),
    /// No answer in time (may or may not be stored).
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Sent {
    pub producer: usize,
    pub outcome: Outcome,
    /// For an acknowledged send: the port of the broker that acknowledged it and the
    /// physical offset its message id names.
    pub at: Option<(u16, i64)>,
}

pub fn key(producer: usize, seq: u64) -> String {
    format!("k-p{producer}-{seq}")
}

/// The CommitLog offset in a message id (its last 16 hex digits).
pub fn physical_of(msg_id: &str) -> Option<i64> {
    i64::from_str_radix(msg_id.get(msg_id.len().checked_sub(16)?..)?, 16).ok()
}

pub fn parse_key(body: &[u8]) -> Option<(usize, u64)> {
    let s = std::str::from_utf8(body).ok()?.strip_prefix("k-p")?;
    let (p, seq) = s.split_once('-')?;
    Some((p.parse().ok()?, seq.parse().ok()?))
}

/// Every record of every queue of the topic on the broker at `addr`:
/// key → [(queue, queue offset)], and each queue's keys in queue order.
pub async fn read_all(addr: &str) -> (HashMap<Vec<u8>, Vec<(i32, i64)>>, Vec<Vec<Vec<u8>>>) {
    let c = Client::connect_addr(addr).await.unwrap();
    let mut seen: HashMap<Vec<u8>, Vec<(i32, i64)>> = HashMap::new();
    let mut order = Vec::new();
    for q in 0..QUEUES {
        let mut in_queue = Vec::new();
        for rec in pull_queue(&c, "Checker", TOPIC, q).await {
            seen.entry(rec.body.clone())
                .or_default()
                .push((q, rec.queue_offset));
            in_queue.push(rec.body);
        }
        order.push(in_queue);
    }
    (seen, order)
}

#[derive(Debug, Default)]
pub struct Report {
    pub sent: usize,
    pub acked: usize,
    pub refused: usize,
    pub unknown: usize,
    pub read: usize,
    pub lost: Vec<String>,
    pub moved: Vec<String>,
    pub duplicated: Vec<String>,
    pub reordered: Vec<String>,
    pub phantom: Vec<String>,
}

pub fn check(
    history: &HashMap<String, Sent>,
    seen: &HashMap<Vec<u8>, Vec<(i32, i64)>>,
    order: &[Vec<Vec<u8>>],
) -> Report {
    let mut r = Report {
        sent: history.len(),
        ..Report::default()
    };
    for (k, s) in history {
        match s.outcome {
            Outcome::Acked(offset) => {
                r.acked += 1;
                match seen.get(k.as_bytes()).map(Vec::as_slice) {
                    None | Some([]) => r.lost.push(k.clone()),
                    Some([(_, at)]) if *at != offset => {
                        r.moved
                            .push(format!("{k}: acked at {offset}, read at {at}"));
                    }
                    _ => {}
                }
            }
            Outcome::Refused(_) => r.refused += 1,
            Outcome::Unknown => r.unknown += 1,
        }
    }
    for (body, at) in seen {
        r.read += at.len();
        let name = String::from_utf8_lossy(body).into_owned();
        if at.len() > 1 {
            r.duplicated.push(format!("{name} at {at:?}"));
        }
        let known = parse_key(body).is_some() && history.contains_key(name.as_str());
        if !known && body.as_slice() != b"hello" {
            r.phantom.push(name);
        }
    }
    // Within a queue, a producer's acknowledged keys appear in the order it sent them.
    for keys in order {
        let mut last: BTreeMap<usize, u64> = BTreeMap::new();
        for body in keys {
            let Some((p, seq)) = parse_key(body) else {
                continue;
            };
            let acked = history
                .get(&key(p, seq))
                .is_some_and(|s| matches!(s.outcome, Outcome::Acked(_)) && s.producer == p);
            if !acked {
                continue;
            }
            if let Some(prev) = last.insert(p, seq)
                && prev > seq
            {
                r.reordered.push(format!("p{p}: {seq} read after {prev}"));
            }
        }
    }
    r
}
