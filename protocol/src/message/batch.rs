//! SEND_BATCH_MESSAGE body (Java `MessageDecoder.encodeMessages` on the
//! client, `CommitLog.MessageExtEncoder.encode(MessageExtBatch)` on the broker).
//!
//! Entries are concatenated without a count prefix:
//! `TOTALSIZE i32 | MAGIC i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODY (i32 len) |
//! PROPERTIES (i16 len)`.

use thiserror::Error;

/// TOTALSIZE + MAGIC + BODYCRC + FLAG + body length + properties length.
pub const ENTRY_FIXED_LEN: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch, borrowed from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    /// The message's own properties (its `UNIQ_KEY`, `TAGS`, `KEYS`, ...).
    pub properties: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("batch entry at byte {at} needs {needed} bytes, {available} left")]
    Truncated {
        at: usize,
        needed: usize,
        available: usize,
    },
    #[error("batch entry at byte {at} has a negative {field} length")]
    NegativeLength { at: usize, field: &'static str },
    #[error("batch entry at byte {at} has properties that are not UTF-8")]
    InvalidUtf8 { at: usize },
    #[error("batch entry properties of {0} bytes exceed the i16 length")]
    PropertiesTooLong(usize),
    #[error("batch entry body of {0} bytes exceeds the i32 length")]
    BodyTooLong(usize),
    #[error("the batch holds no message")]
    Empty,
    #[error("batch entry at byte {at} says it is {declared} bytes long but is {actual}")]
    SizeMismatch {
        at: usize,
        declared: i32,
        actual: usize,
    },
}

impl BatchEntry<'_> {
    pub fn encoded_len(&self) -> usize {
        ENTRY_FIXED_LEN + self.body.len() + self.properties.len()
    }

    /// Appends this entry the way the Java client does (MAGIC and BODYCRC left 0).
    pub fn encode_to(&self, out: &mut Vec<u8>) -> Result<(), BatchError> {
        let props_len = i16::try_from(self.properties.len())
            .map_err(|_| BatchError::PropertiesTooLong(self.properties.len()))?;
        let total = i32::try_from(self.encoded_len())
            .map_err(|_| BatchError::BodyTooLong(self.body.len()))?;
        out.reserve(self.encoded_len());
        out.extend_from_slice(&total.to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&self.flag.to_be_bytes());
        out.extend_from_slice(&(self.body.len() as i32).to_be_bytes());
        out.extend_from_slice(self.body);
        out.extend_from_slice(&props_len.to_be_bytes());
        out.extend_from_slice(self.properties.as_bytes());
        Ok(())
    }
}

/// Encodes a whole batch body.
pub fn encode<'a>(
    entries: impl IntoIterator<Item = &'a BatchEntry<'a>>,
) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    for e in entries {
        e.encode_to(&mut out)?;
    }
    Ok(out)
}

/// Checks that `body` is a whole batch: at least one entry, every entry complete and its
/// TOTALSIZE equal to its length, nothing left over. Returns the number of entries. A
/// send flagged as a batch whose body fails this is refused before anything is stored.
pub fn validate(body: &[u8]) -> Result<usize, BatchError> {
    let mut entries = decode(body);
    let mut count = 0;
    loop {
        let at = entries.pos;
        let Some(entry) = entries.next() else { break };
        let entry = entry?;
        let declared = i32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        if usize::try_from(declared).ok() != Some(entry.encoded_len()) {
            return Err(BatchError::SizeMismatch {
                at,
                declared,
                actual: entry.encoded_len(),
            });
        }
        count += 1;
    }
    if count == 0 {
        return Err(BatchError::Empty);
    }
    Ok(count)
}

/// Iterates the entries of a batch body. Like the broker, TOTALSIZE, MAGIC and
/// BODYCRC are skipped unchecked (the broker recomputes each record's CRC); the two
/// length fields drive parsing and are checked against the bytes left. After the
/// first error the iterator ends.
pub fn decode(body: &[u8]) -> BatchEntries<'_> {
    BatchEntries { body, pos: 0 }
}

pub struct BatchEntries<'a> {
    body: &'a [u8],
    pos: usize,
}

impl<'a> BatchEntries<'a> {
    fn take(&mut self, at: usize, n: usize) -> Result<&'a [u8], BatchError> {
        let available = self.body.len() - self.pos;
        if n > available {
            return Err(BatchError::Truncated {
                at,
                needed: self.pos - at + n,
                available: self.body.len() - at,
            });
        }
        let s = &self.body[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn entry(&mut self) -> Result<BatchEntry<'a>, BatchError> {
        let at = self.pos;
        let head = self.take(at, 20)?;
        let flag = i32::from_be_bytes([head[12], head[13], head[14], head[15]]);
        let body_len = i32::from_be_bytes([head[16], head[17], head[18], head[19]]);
        let body_len = usize::try_from(body_len)
            .map_err(|_| BatchError::NegativeLength { at, field: "body" })?;
        let body = self.take(at, body_len)?;
        let props_len = self.take(at, 2)?;
        let props_len = i16::from_be_bytes([props_len[0], props_len[1]]);
        let props_len = usize::try_from(props_len).map_err(|_| BatchError::NegativeLength {
            at,
            field: "properties",
        })?;
        let properties = std::str::from_utf8(self.take(at, props_len)?)
            .map_err(|_| BatchError::InvalidUtf8 { at })?;
        Ok(BatchEntry {
            flag,
            body,
            properties,
        })
    }
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = Result<BatchEntry<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.body.len() {
            return None;
        }
        let item = self.entry();
        if item.is_err() {
            self.pos = self.body.len();
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn hand_written_entry() {
        let e = BatchEntry {
            flag: 5,
            body: b"ab",
            properties: "K\u{1}V",
        };
        let bytes = encode([&e]).unwrap();
        assert_eq!(
            bytes,
            [
                0, 0, 0, 27, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, b'a', b'b', 0, 3,
                b'K', 1, b'V'
            ]
        );
        assert_eq!(decode(&bytes).collect::<Result<Vec<_>, _>>().unwrap(), [e]);
    }

    #[test]
    fn validate_wants_a_whole_batch() {
        let e = BatchEntry {
            flag: 0,
            body: b"abc",
            properties: "K\u{1}V",
        };
        let bytes = encode([&e, &e]).unwrap();
        assert_eq!(validate(&bytes), Ok(2));
        assert_eq!(validate(b""), Err(BatchError::Empty));
        assert!(validate(b"plain message body").is_err());
        assert!(validate(&bytes[..bytes.len() - 1]).is_err());
        let mut wrong_size = bytes.clone();
        wrong_size[3] += 1;
        assert_eq!(
            validate(&wrong_size),
            Err(BatchError::SizeMismatch {
                at: 0,
                declared: 29,
                actual: 28
            })
        );
    }

    #[test]
    fn errors() {
        let e = BatchEntry {
            flag: 0,
            body: b"abc",
            properties: "",
        };
        let bytes = encode([&e, &e]).unwrap();
        let mut it = decode(&bytes[..bytes.len() - 1]);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(
            it.next(),
            Some(Err(BatchError::Truncated {
                at: 25,
                needed: 25,
                available: 24
            }))
        );
        assert_eq!(it.next(), None);

        let mut neg = bytes.clone();
        neg[16] = 0xFF;
        assert_eq!(
            decode(&neg).next(),
            Some(Err(BatchError::NegativeLength {
                at: 0,
                field: "body"
            }))
        );
        let big = "x".repeat(40_000);
        let e = BatchEntry {
            flag: 0,
            body: b"",
            properties: &big,
        };
        assert_eq!(encode([&e]), Err(BatchError::PropertiesTooLong(40_000)));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut seen = 0usize;
            for e in decode(&bytes).flatten() {
                seen += e.encoded_len();
            }
            prop_assert!(seen <= bytes.len());
        }

        #[test]
        fn round_trip(entries in proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..64), "\\PC{0,32}"), 0..6)
        ) {
            let entries: Vec<_> = entries.iter().map(|(flag, body, props)| BatchEntry {
                flag: *flag, body, properties: props,
            }).collect();
            let bytes = encode(&entries).unwrap();
            let back = decode(&bytes).collect::<Result<Vec<_>, _>>().unwrap();
            prop_assert_eq!(back, entries);
        }
    }
}
