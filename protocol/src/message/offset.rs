//! Offset newtypes shared by the codec, the store and the broker.
//!
//! RocketMQ passes all of these around as bare `long`s; keeping them apart here stops a
//! CommitLog byte offset from being used as a ConsumeQueue index (or the reverse).

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! offset_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl $name {
            pub const ZERO: Self = Self(0);

            pub const fn get(self) -> i64 {
                self.0
            }

            /// `None` on overflow, so a corrupt length can never wrap an offset around.
            pub fn checked_add(self, delta: i64) -> Option<Self> {
                self.0.checked_add(delta).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<i64> for $name {
            fn from(v: i64) -> Self {
                Self(v)
            }
        }

        impl From<$name> for i64 {
            fn from(v: $name) -> i64 {
                v.0
            }
        }

        impl $crate::header::FieldValue for $name {
            fn parse(text: &str) -> Option<Self> {
                <i64 as $crate::header::FieldValue>::parse(text).map(Self)
            }
            fn render(&self) -> String {
                self.0.to_string()
            }
        }
    };
}

offset_newtype!(
    /// Byte offset in the global CommitLog stream (the record's `PHYSICALOFFSET`, the
    /// first field of a ConsumeQueue unit, `commitLogOffset` in headers).
    PhysicalOffset
);

offset_newtype!(
    /// Logical index of a message in one `topic-queueId` ConsumeQueue (the record's
    /// `QUEUEOFFSET`, `queueOffset` in pull / send headers).
    QueueOffset
);

offset_newtype!(
    /// A consumer group's committed position in a queue (`consumerOffset.json`,
    /// `commitOffset` / `QUERY_CONSUMER_OFFSET`). Same unit as [`QueueOffset`] but a
    /// different fact: where a group will resume, not where a message is.
    ConsumerOffset
);

impl From<ConsumerOffset> for QueueOffset {
    fn from(v: ConsumerOffset) -> Self {
        Self(v.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::FieldValue;

    #[test]
    fn display_serde_and_field_value() {
        let p = PhysicalOffset(1_073_741_824);
        assert_eq!(p.to_string(), "1073741824");
        assert_eq!(serde_json::to_string(&p).unwrap(), "1073741824");
        assert_eq!(
            serde_json::from_str::<QueueOffset>("-1").unwrap(),
            QueueOffset(-1)
        );
        assert_eq!(QueueOffset::parse("42"), Some(QueueOffset(42)));
        assert_eq!(QueueOffset::parse("4x"), None);
        assert_eq!(ConsumerOffset(7).render(), "7");
        assert!(PhysicalOffset(1) < PhysicalOffset(2));
        assert_eq!(PhysicalOffset(i64::MAX).checked_add(1), None);
        assert_eq!(QueueOffset(3).checked_add(2), Some(QueueOffset(5)));
    }
}
