//! Message and pull sysFlag bits (`common/sysflag/MessageSysFlag.java`,
//! `common/sysflag/PullSysFlag.java`).

use std::net::SocketAddr;

/// A message's `sysFlag`: in the send header, in every CommitLog record and in pull
/// results. Unknown bits are kept as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MessageSysFlag(pub i32);

/// Bits 2–3 of [`MessageSysFlag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionType {
    /// An ordinary message (also a transaction's half message once in the half topic).
    Not,
    Prepared,
    Commit,
    Rollback,
}

/// Bits 8–10 of [`MessageSysFlag`] (4.9.4+). Older producers leave them 0 and always
/// use zlib, so 0 reads as [`CompressionType::Zlib`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionType {
    Lz4,
    Zstd,
    Zlib,
}

impl MessageSysFlag {
    pub const COMPRESSED: i32 = 0x1;
    pub const MULTI_TAGS: i32 = 0x2;
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// Mask of the transaction type field (same value as the rollback type).
    pub const TRANSACTION_MASK: i32 = 0xC;
    pub const BORNHOST_V6: i32 = 0x10;
    pub const STOREHOST_V6: i32 = 0x20;
    pub const NEED_UNWRAP: i32 = 0x40;
    pub const INNER_BATCH: i32 = 0x80;
    pub const COMPRESSION_LZ4: i32 = 0x100;
    pub const COMPRESSION_ZSTD: i32 = 0x200;
    pub const COMPRESSION_ZLIB: i32 = 0x300;
    pub const COMPRESSION_MASK: i32 = 0x700;

    pub const fn bits(self) -> i32 {
        self.0
    }

    pub const fn contains(self, bits: i32) -> bool {
        self.0 & bits == bits
    }

    pub const fn with(self, bits: i32) -> Self {
        Self(self.0 | bits)
    }

    pub const fn without(self, bits: i32) -> Self {
        Self(self.0 & !bits)
    }

    pub const fn is_compressed(self) -> bool {
        self.contains(Self::COMPRESSED)
    }

    pub const fn born_host_v6(self) -> bool {
        self.contains(Self::BORNHOST_V6)
    }

    pub const fn store_host_v6(self) -> bool {
        self.contains(Self::STOREHOST_V6)
    }

    pub const fn transaction_type(self) -> TransactionType {
        match self.0 & Self::TRANSACTION_MASK {
            Self::TRANSACTION_PREPARED_TYPE => TransactionType::Prepared,
            Self::TRANSACTION_COMMIT_TYPE => TransactionType::Commit,
            Self::TRANSACTION_ROLLBACK_TYPE => TransactionType::Rollback,
            _ => TransactionType::Not,
        }
    }

    /// `MessageSysFlag.resetTransactionValue`.
    pub const fn with_transaction_type(self, t: TransactionType) -> Self {
        let bits = match t {
            TransactionType::Not => Self::TRANSACTION_NOT_TYPE,
            TransactionType::Prepared => Self::TRANSACTION_PREPARED_TYPE,
            TransactionType::Commit => Self::TRANSACTION_COMMIT_TYPE,
            TransactionType::Rollback => Self::TRANSACTION_ROLLBACK_TYPE,
        };
        Self((self.0 & !Self::TRANSACTION_MASK) | bits)
    }

    /// Compression of the body, `None` when the body is not compressed. LZ4 / ZSTD are
    /// reported so callers can refuse them; only zlib is decoded by this crate.
    pub const fn compression(self) -> Option<CompressionType> {
        if !self.is_compressed() {
            return None;
        }
        Some(match self.0 & Self::COMPRESSION_MASK {
            Self::COMPRESSION_LZ4 => CompressionType::Lz4,
            Self::COMPRESSION_ZSTD => CompressionType::Zstd,
            _ => CompressionType::Zlib,
        })
    }

    /// Sets the IPv6 bits to match the two hosts, as the broker does before storing
    /// (`MessageExtBrokerInner.setBornHostV6Flag` / `setStoreHostAddressV6Flag`). The
    /// record length depends on these bits, so call this before `record_len`.
    pub const fn with_host_families(self, born: &SocketAddr, store: &SocketAddr) -> Self {
        let mut bits = self.0 & !(Self::BORNHOST_V6 | Self::STOREHOST_V6);
        if born.is_ipv6() {
            bits |= Self::BORNHOST_V6;
        }
        if store.is_ipv6() {
            bits |= Self::STOREHOST_V6;
        }
        Self(bits)
    }

    /// Length of the born host field in a record: 4 address bytes + i32 port, or 16 + 4.
    pub const fn born_host_len(self) -> usize {
        if self.born_host_v6() { 20 } else { 8 }
    }

    pub const fn store_host_len(self) -> usize {
        if self.store_host_v6() { 20 } else { 8 }
    }
}

impl From<i32> for MessageSysFlag {
    fn from(v: i32) -> Self {
        Self(v)
    }
}

/// `sysFlag` of a PULL_MESSAGE request (`PullSysFlag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PullSysFlag(pub i32);

impl PullSysFlag {
    /// The request carries `commitOffset`, to be stored for the group.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may park the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// The request carries a subscription expression to use instead of the stored one.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Class filter mode (filter server; not supported by 4.9 brokers without it).
    pub const CLASS_FILTER: i32 = 0x8;
    /// LITE_PULL_MESSAGE: reply with the raw stored messages only.
    pub const LITE_PULL: i32 = 0x10;

    pub const fn build(
        commit_offset: bool,
        suspend: bool,
        subscription: bool,
        class_filter: bool,
    ) -> Self {
        let mut bits = 0;
        if commit_offset {
            bits |= Self::COMMIT_OFFSET;
        }
        if suspend {
            bits |= Self::SUSPEND;
        }
        if subscription {
            bits |= Self::SUBSCRIPTION;
        }
        if class_filter {
            bits |= Self::CLASS_FILTER;
        }
        Self(bits)
    }

    pub const fn has_commit_offset(self) -> bool {
        self.0 & Self::COMMIT_OFFSET != 0
    }

    pub const fn has_suspend(self) -> bool {
        self.0 & Self::SUSPEND != 0
    }

    pub const fn has_subscription(self) -> bool {
        self.0 & Self::SUBSCRIPTION != 0
    }

    pub const fn has_class_filter(self) -> bool {
        self.0 & Self::CLASS_FILTER != 0
    }

    pub const fn is_lite_pull(self) -> bool {
        self.0 & Self::LITE_PULL != 0
    }

    /// `PullSysFlag.clearCommitOffsetFlag`: a slave must not store the offset.
    pub const fn without_commit_offset(self) -> Self {
        Self(self.0 & !Self::COMMIT_OFFSET)
    }
}

impl From<i32> for PullSysFlag {
    fn from(v: i32) -> Self {
        Self(v)
    }
}

macro_rules! flag_field_value {
    ($($t:ty),*) => {$(
        impl crate::header::FieldValue for $t {
            fn parse(text: &str) -> Option<Self> {
                <i32 as crate::header::FieldValue>::parse(text).map(Self)
            }
            fn render(&self) -> String {
                self.0.to_string()
            }
        }
    )*};
}

flag_field_value!(MessageSysFlag, PullSysFlag);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_type_round_trip() {
        for t in [
            TransactionType::Not,
            TransactionType::Prepared,
            TransactionType::Commit,
            TransactionType::Rollback,
        ] {
            let f = MessageSysFlag(MessageSysFlag::COMPRESSED | MessageSysFlag::TRANSACTION_MASK)
                .with_transaction_type(t);
            assert_eq!(f.transaction_type(), t);
            assert!(f.is_compressed());
        }
    }

    #[test]
    fn compression_bits() {
        assert_eq!(MessageSysFlag(0).compression(), None);
        assert_eq!(
            MessageSysFlag(0x1).compression(),
            Some(CompressionType::Zlib)
        );
        assert_eq!(
            MessageSysFlag(0x101).compression(),
            Some(CompressionType::Lz4)
        );
        assert_eq!(
            MessageSysFlag(0x201).compression(),
            Some(CompressionType::Zstd)
        );
        assert_eq!(
            MessageSysFlag(0x301).compression(),
            Some(CompressionType::Zlib)
        );
        assert_eq!(MessageSysFlag(0x300).compression(), None);
    }

    #[test]
    fn host_families() {
        let v4: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let v6: SocketAddr = "[::1]:10911".parse().unwrap();
        let f = MessageSysFlag(MessageSysFlag::STOREHOST_V6).with_host_families(&v6, &v4);
        assert_eq!(f.bits(), MessageSysFlag::BORNHOST_V6);
        assert_eq!((f.born_host_len(), f.store_host_len()), (20, 8));
    }

    #[test]
    fn pull_flags() {
        let f = PullSysFlag::build(true, true, true, false);
        assert_eq!(f.0, 0x7);
        assert!(f.has_commit_offset() && f.has_suspend() && f.has_subscription());
        assert!(!f.without_commit_offset().has_commit_offset());
        assert!(!f.has_class_filter() && !f.is_lite_pull());
    }
}
