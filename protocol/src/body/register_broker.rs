//! `RegisterBrokerBody` (`common/protocol/body/RegisterBrokerBody.java`):
//! the REGISTER_BROKER body, as fastjson JSON or in the zlib-compressed binary form a
//! broker with `compressedRegister=true` sends.
//!
//! Compressed layout (all integers big-endian i32), inside one zlib stream:
//!
//! ```text
//! len + DataVersion JSON | topicCount | topicCount × (len + TopicConfig line) |
//! len + filterServerList JSON
//! ```

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde::{Deserialize, Serialize};

use super::fastjson;
use super::lenient;
use super::{BodyError, DataVersion, TopicConfig, TopicConfigSerializeWrapper};

/// Largest inflated size accepted for a compressed body. A 16 MiB frame could otherwise
/// inflate to gigabytes; 64 MiB is far above a broker with 100k topics (~5 MiB).
pub const DEFAULT_MAX_INFLATED: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub filter_server_list: Vec<String>,
}

impl RegisterBrokerBody {
    /// The JSON body, or the compressed binary form when `compress`.
    pub fn encode(&self, compress: bool) -> Vec<u8> {
        if compress {
            self.encode_compressed()
        } else {
            super::encode(self)
        }
    }

    pub fn decode(bytes: &[u8], compressed: bool) -> Result<Self, BodyError> {
        Self::decode_with_limit(bytes, compressed, DEFAULT_MAX_INFLATED)
    }

    /// Like [`Self::decode`], inflating at most `max_inflated` bytes.
    pub fn decode_with_limit(
        bytes: &[u8],
        compressed: bool,
        max_inflated: usize,
    ) -> Result<Self, BodyError> {
        if compressed {
            Self::decode_compressed(bytes, max_inflated)
        } else {
            fastjson::from_slice(bytes)
        }
    }

    fn encode_compressed(&self) -> Vec<u8> {
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut plain = Vec::new();
        put_chunk(&mut plain, &super::encode(&wrapper.data_version));
        let count = i32::try_from(wrapper.topic_config_table.len()).unwrap_or(i32::MAX);
        plain.extend_from_slice(&count.to_be_bytes());
        for config in wrapper.topic_config_table.values().take(count as usize) {
            put_chunk(&mut plain, config.encode_line().as_bytes());
        }
        put_chunk(&mut plain, &super::encode(&self.filter_server_list));
        // Java uses `Deflater.BEST_COMPRESSION`. Writing into a Vec cannot fail.
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
        let _ = encoder.write_all(&plain);
        encoder.finish().unwrap_or_default()
    }

    fn decode_compressed(bytes: &[u8], max_inflated: usize) -> Result<Self, BodyError> {
        let mut plain = Vec::new();
        ZlibDecoder::new(bytes)
            .take(max_inflated as u64 + 1)
            .read_to_end(&mut plain)
            .map_err(|e| BodyError::Compressed(e.to_string()))?;
        if plain.len() > max_inflated {
            return Err(BodyError::InflatedTooLarge(max_inflated));
        }
        let mut cursor = Cursor { rest: &plain };
        let data_version: DataVersion = fastjson::from_slice(cursor.chunk()?)?;
        let count = cursor.int()?;
        if count < 0 {
            return Err(BodyError::Compressed(format!(
                "negative topic count {count}"
            )));
        }
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version,
            ..Default::default()
        };
        for _ in 0..count {
            let line = std::str::from_utf8(cursor.chunk()?)
                .map_err(|e| BodyError::Compressed(e.to_string()))?;
            // Java skips lines that do not split into exactly five fields.
            if let Some(config) = TopicConfig::decode_line(line) {
                wrapper
                    .topic_config_table
                    .insert(config.topic_name.clone(), config);
            }
        }
        let filter_server_list = fastjson::from_slice(cursor.chunk()?)?;
        Ok(Self {
            topic_config_serialize_wrapper: wrapper,
            filter_server_list,
        })
    }
}

fn put_chunk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as i32).to_be_bytes());
    out.extend_from_slice(data);
}

struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn int(&mut self) -> Result<i32, BodyError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<4>() else {
            return Err(BodyError::Compressed("truncated length field".into()));
        };
        self.rest = rest;
        Ok(i32::from_be_bytes(*head))
    }

    /// A length-prefixed chunk; the length is checked against what is left before use.
    fn chunk(&mut self) -> Result<&'a [u8], BodyError> {
        let len = self.int()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.rest.len())
            .ok_or_else(|| {
                BodyError::Compressed(format!(
                    "chunk length {len} exceeds the {} bytes left",
                    self.rest.len()
                ))
            })?;
        let (chunk, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests;
