//! Message ids: the broker's offset msgId and the client's `UNIQ_KEY`.
//!
//! * Offset msgId (`MessageDecoder.createMessageId` / `decodeMessageId`): uppercase hex
//!   of the store host (4 or 16 address bytes + i32 port) and the i64 CommitLog offset;
//!   32 hex chars for IPv4, 56 for IPv6.
//! * UNIQ_KEY (`MessageClientIDSetter`): uppercase hex of
//!   `ip | pid as i16 | class loader hash i32 | ms since month start i32 | counter i16`;
//!   32 hex chars for IPv4, 56 for IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use thiserror::Error;

use super::offset::PhysicalOffset;
use super::record::RecordView;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsgIdError {
    #[error("message id has {0} characters, expected 32 (IPv4) or 56 (IPv6)")]
    Length(usize),
    #[error("message id contains a non-hex character")]
    NotHex,
    #[error("message id port {0} is out of range")]
    Port(i32),
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xF)]));
    }
}

/// Hex text to bytes; either case is accepted (Java upper-cases before decoding).
fn unhex<const N: usize>(text: &str) -> Result<[u8; N], MsgIdError> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return Err(MsgIdError::Length(digits.len()));
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(MsgIdError::NotHex),
    };
    let mut out = [0; N];
    for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *o = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Ok(out)
}

fn ip_octets(ip: &IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}

/// The offset msgId of the record stored at `offset` by the broker at `store_host`.
pub fn offset_msg_id(store_host: SocketAddr, offset: PhysicalOffset) -> String {
    let mut bytes = Vec::with_capacity(28);
    ip_octets(&store_host.ip(), &mut bytes);
    bytes.extend_from_slice(&i32::from(store_host.port()).to_be_bytes());
    bytes.extend_from_slice(&offset.0.to_be_bytes());
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, &bytes);
    out
}

/// Splits an offset msgId into the store host and CommitLog offset, e.g. to serve
/// VIEW_MESSAGE_BY_ID.
pub fn parse_offset_msg_id(id: &str) -> Result<(SocketAddr, PhysicalOffset), MsgIdError> {
    match id.len() {
        32 => {
            let b: [u8; 16] = unhex(id)?;
            finish_offset_id(Ipv4Addr::new(b[0], b[1], b[2], b[3]).into(), &b[4..])
        }
        56 => {
            let b: [u8; 28] = unhex(id)?;
            let mut a = [0; 16];
            a.copy_from_slice(&b[..16]);
            finish_offset_id(Ipv6Addr::from(a).into(), &b[16..])
        }
        n => Err(MsgIdError::Length(n)),
    }
}

/// `rest` is exactly the 4 port bytes and the 8 offset bytes.
fn finish_offset_id(ip: IpAddr, rest: &[u8]) -> Result<(SocketAddr, PhysicalOffset), MsgIdError> {
    let port = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let port = u16::try_from(port).map_err(|_| MsgIdError::Port(port))?;
    let mut off = [0; 8];
    off.copy_from_slice(&rest[4..12]);
    Ok((
        SocketAddr::new(ip, port),
        PhysicalOffset(i64::from_be_bytes(off)),
    ))
}

impl RecordView<'_> {
    /// This record's offset msgId, straight from its STOREHOST and PHYSICALOFFSET bytes.
    pub fn offset_msg_id(&self) -> String {
        let mut out = String::with_capacity(56);
        push_hex(&mut out, self.store_host_bytes());
        push_hex(&mut out, &self.physical_offset().0.to_be_bytes());
        out
    }
}

/// A parsed `UNIQ_KEY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqKey {
    pub ip: IpAddr,
    /// Low 16 bits of the producer's pid.
    pub pid: i16,
    pub class_loader_hash: i32,
    /// Milliseconds between the start of the producer's current month and the send.
    /// Java writes it with a wrapping `(int)` cast and reads it back zero-extended, so
    /// it is unsigned here (31 days need more than `i32::MAX` ms).
    pub since_month_start_ms: u32,
    pub counter: i16,
}

impl UniqKey {
    pub fn parse(id: &str) -> Result<Self, MsgIdError> {
        match id.len() {
            32 => {
                let b: [u8; 16] = unhex(id)?;
                let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]).into();
                Ok(Self::from_tail(ip, &b[4..]))
            }
            56 => {
                let b: [u8; 28] = unhex(id)?;
                let mut a = [0; 16];
                a.copy_from_slice(&b[..16]);
                Ok(Self::from_tail(Ipv6Addr::from(a).into(), &b[16..]))
            }
            n => Err(MsgIdError::Length(n)),
        }
    }

    /// `tail` is exactly pid (2) + hash (4) + time (4) + counter (2) bytes.
    fn from_tail(ip: IpAddr, t: &[u8]) -> Self {
        Self {
            ip,
            pid: i16::from_be_bytes([t[0], t[1]]),
            class_loader_hash: i32::from_be_bytes([t[2], t[3], t[4], t[5]]),
            since_month_start_ms: u32::from_be_bytes([t[6], t[7], t[8], t[9]]),
            counter: i16::from_be_bytes([t[10], t[11]]),
        }
    }

    fn prefix_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(22);
        ip_octets(&self.ip, &mut b);
        b.extend_from_slice(&self.pid.to_be_bytes());
        b.extend_from_slice(&self.class_loader_hash.to_be_bytes());
        b
    }

    /// Approximate send time (`MessageClientIDSetter.getNearlyTimeFromID`): the offset
    /// is applied to the start of the month of `now_ms`, or of the previous month when
    /// that would lie in the future. Months are taken in UTC here; Java uses the
    /// producer's local zone, so the result can be off by the zone offset.
    pub fn approx_born_time_ms(&self, now_ms: i64) -> i64 {
        let start = month_start_utc_ms(now_ms);
        let delta = i64::from(self.since_month_start_ms);
        if start + delta >= now_ms {
            month_start_utc_ms(start - 1) + delta
        } else {
            start + delta
        }
    }
}

impl std::fmt::Display for UniqKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut b = self.prefix_bytes();
        b.extend_from_slice(&self.since_month_start_ms.to_be_bytes());
        b.extend_from_slice(&self.counter.to_be_bytes());
        let mut s = String::with_capacity(b.len() * 2);
        push_hex(&mut s, &b);
        f.write_str(&s)
    }
}

/// Generates `UNIQ_KEY`s for one producer process, like `MessageClientIDSetter`: a
/// fixed hex prefix, the time since the start of the current (UTC) month and a
/// wrapping 16-bit counter.
#[derive(Debug, Clone)]
pub struct UniqKeyGenerator {
    prefix_hex: String,
    month_start_ms: i64,
    next_month_start_ms: i64,
    counter: i16,
}

impl UniqKeyGenerator {
    pub fn new(ip: IpAddr, pid: u32, class_loader_hash: i32) -> Self {
        let key = UniqKey {
            ip,
            pid: pid as i16,
            class_loader_hash,
            since_month_start_ms: 0,
            counter: 0,
        };
        let mut prefix_hex = String::with_capacity(44);
        push_hex(&mut prefix_hex, &key.prefix_bytes());
        Self {
            prefix_hex,
            month_start_ms: i64::MIN,
            next_month_start_ms: i64::MIN,
            counter: 0,
        }
    }

    pub fn generate_at(&mut self, now_ms: i64) -> String {
        if now_ms >= self.next_month_start_ms || now_ms < self.month_start_ms {
            self.month_start_ms = month_start_utc_ms(now_ms);
            self.next_month_start_ms = next_month_start_utc_ms(now_ms);
        }
        let delta = (now_ms - self.month_start_ms) as u32;
        let counter = self.counter;
        self.counter = self.counter.wrapping_add(1);
        let mut s = String::with_capacity(self.prefix_hex.len() + 12);
        s.push_str(&self.prefix_hex);
        push_hex(&mut s, &delta.to_be_bytes());
        push_hex(&mut s, &counter.to_be_bytes());
        s
    }

    pub fn generate(&mut self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.generate_at(now)
    }
}

const DAY_MS: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`]: (year, month 1..=12, day 1..=31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn month_start_utc_ms(ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(ms.div_euclid(DAY_MS));
    days_from_civil(y, m, 1) * DAY_MS
}

fn next_month_start_utc_ms(ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(ms.div_euclid(DAY_MS));
    let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(y, m, 1) * DAY_MS
}

#[cfg(test)]
#[path = "msg_id_tests.rs"]
mod tests;
