//! Body (de)compression (`common/compression/ZlibCompressor.java`,
//! `UtilAll.uncompress`). Java producers compress bodies over 4 KiB with zlib (RFC 1950
//! framing) at level 5; the broker stores them untouched, so only clients and tools
//! inflate.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use thiserror::Error;

use super::sysflag::{CompressionType, MessageSysFlag};

/// Java producer default `rocketmq.message.compressLevel`.
pub const DEFAULT_LEVEL: u32 = 5;
/// Java producer default `compressMsgBodyOverHowmuch`.
pub const COMPRESS_OVER: usize = 4096;

#[derive(Debug, Error)]
pub enum DecompressError {
    #[error("inflated body exceeds the {0}-byte cap")]
    TooLarge(usize),
    #[error("corrupt zlib stream: {0}")]
    Corrupt(std::io::Error),
    #[error("{0:?} bodies cannot be decompressed by this build (only zlib)")]
    Unsupported(CompressionType),
}

/// Inflates a zlib stream, failing as soon as the output would exceed `max_out`
/// bytes, so a small hostile body cannot expand into gigabytes.
pub fn inflate_zlib(data: &[u8], max_out: usize) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(max_out));
    let limit = u64::try_from(max_out).unwrap_or(u64::MAX).saturating_add(1);
    ZlibDecoder::new(data)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(DecompressError::Corrupt)?;
    if out.len() > max_out {
        return Err(DecompressError::TooLarge(max_out));
    }
    Ok(out)
}

pub fn deflate_zlib(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        Compression::new(level),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// The plain body of a message: inflated when `sys_flag` says it is compressed,
/// borrowed unchanged otherwise.
pub fn plain_body(
    sys_flag: MessageSysFlag,
    body: &[u8],
    max_out: usize,
) -> Result<std::borrow::Cow<'_, [u8]>, DecompressError> {
    match sys_flag.compression() {
        None => Ok(body.into()),
        Some(CompressionType::Zlib) => inflate_zlib(body, max_out).map(Into::into),
        Some(other) => Err(DecompressError::Unsupported(other)),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn round_trip_and_cap() {
        let body = vec![b'x'; 100_000];
        let z = deflate_zlib(&body, DEFAULT_LEVEL);
        assert!(z.len() < 1_000);
        assert_eq!(
            z[0], 0x78,
            "zlib (RFC 1950) framing, as java.util.zip.Deflater writes"
        );
        assert_eq!(inflate_zlib(&z, 100_000).unwrap(), body);
        assert!(matches!(
            inflate_zlib(&z, 99_999),
            Err(DecompressError::TooLarge(99_999))
        ));
        let flags = MessageSysFlag(MessageSysFlag::COMPRESSED);
        assert_eq!(plain_body(flags, &z, 1 << 20).unwrap().as_ref(), &body[..]);
        assert_eq!(
            plain_body(MessageSysFlag(0), b"raw", 1).unwrap().as_ref(),
            b"raw"
        );
        assert!(matches!(
            plain_body(MessageSysFlag(0x101), &z, 1 << 20),
            Err(DecompressError::Unsupported(CompressionType::Lz4))
        ));
        assert!(matches!(
            inflate_zlib(b"not zlib", 100),
            Err(DecompressError::Corrupt(_))
        ));
    }

    #[test]
    fn bomb_is_capped() {
        // 64 MiB of zeros compresses to ~64 KiB; inflating with a 1 MiB cap stops early.
        let z = deflate_zlib(&vec![0; 64 << 20], 9);
        assert!(z.len() < 128 << 10);
        assert!(matches!(
            inflate_zlib(&z, 1 << 20),
            Err(DecompressError::TooLarge(_))
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(out) = inflate_zlib(&bytes, 4096) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn round_trip(body in proptest::collection::vec(any::<u8>(), 0..2048), level in 0u32..10) {
            prop_assert_eq!(inflate_zlib(&deflate_zlib(&body, level), body.len()).unwrap(), body);
        }
    }
}
