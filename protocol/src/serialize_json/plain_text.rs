//! Where a run of plain JSON string text ends: at a quote, a backslash or a control
//! character (the only bytes a string scan has to stop at).

/// The high bit of each byte of `word` (read little-endian) that may be a quote, a
/// backslash or a control character. The lowest set bit is always exact: the
/// subtraction trick only misfires on bytes above a byte that really matched (a borrow
/// propagates upwards), which is why callers take `trailing_zeros` and nothing else.
#[inline]
pub(super) fn stop_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    control
        | zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(word ^ (ONES * u64::from(b'\\')))
}

/// Bytes that end a run of plain string text: quote, backslash, control characters.
/// A table makes the scan one load and one branch per byte.
pub(super) const STOPS_PLAIN_TEXT: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};
