//! The bench message body: a marker, the wall-clock time the message was sent (µs since
//! the epoch), then filler. The consumer mode computes end-to-end latency from it; bodies without
//! the marker (other producers' messages) are counted but not timed.

const MAGIC: &[u8; 4] = b"RMQB";
/// Marker + timestamp.
pub const HEADER_LEN: usize = 12;

pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A body of `size` bytes (at least [`HEADER_LEN`]) stamped with `sent_us`.
pub fn body(size: usize, sent_us: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(size.max(HEADER_LEN));
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&sent_us.to_be_bytes());
    b.resize(size.max(HEADER_LEN), b'x');
    b
}

/// The timestamp of a bench body.
pub fn stamp(body: &[u8]) -> Option<u64> {
    let ts = body.get(4..HEADER_LEN)?;
    if body.get(..4)? != MAGIC {
        return None;
    }
    let mut b = [0; 8];
    b.copy_from_slice(ts);
    Some(u64::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_foreign_bodies_are_ignored() {
        let b = body(1024, 42);
        assert_eq!(b.len(), 1024);
        assert_eq!(stamp(&b), Some(42));
        assert_eq!(body(3, 7).len(), HEADER_LEN);
        assert_eq!(stamp(b"hello world, not ours"), None);
        assert_eq!(stamp(b"RMQB"), None);
    }
}
