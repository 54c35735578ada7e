//! LEB128 varints and zigzag: small numbers in few bytes. Hand-written
//! because they sit on the hot path of every record: `get` takes the one-
//! and two-byte varints, most of them, on a short path.

use crate::write::buf::ByteBuf;

/// Appends `value` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub fn put(out: &mut ByteBuf, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Maps signed deltas to unsigned so that small magnitudes of either sign
/// stay small: 0, -1, 1, -2 … become 0, 1, 2, 3 ….
#[inline]
pub fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// Undoes [`zigzag`].
#[inline]
pub fn unzigzag(value: u64) -> u64 {
    (value >> 1) ^ (value & 1).wrapping_neg()
}

/// Reads a varint at `*pos`, advancing it; None if the bytes end first or
/// the varint is longer than a u64 can hold.
#[inline(always)]
pub fn get(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *bytes.get(*pos)?;
    if first < 0x80 {
        *pos += 1;
        return Some(first.into());
    }
    // Two bytes (up to 16383) are common too: time deltas, addresses.
    if let Some(&second) = bytes.get(*pos + 1) {
        if second < 0x80 {
            *pos += 2;
            return Some(u64::from(first & 0x7f) | u64::from(second) << 7);
        }
    }
    *pos += 1;
    get_long(bytes, pos, first)
}

/// The rest of a varint of two bytes or more.
#[inline]
fn get_long(bytes: &[u8], pos: &mut usize, first: u8) -> Option<u64> {
    let mut value = u64::from(first & 0x7f);
    let mut shift = 7;
    loop {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for value in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut buf = ByteBuf::default();
            put(&mut buf, value);
            let mut pos = 0;
            assert_eq!(get(buf.as_slice(), &mut pos), Some(value));
            assert_eq!(pos, buf.len());
            assert_eq!(unzigzag(zigzag(value)), value);
        }
        let mut buf = ByteBuf::default();
        put(&mut buf, u64::MAX);
        assert_eq!(buf.len(), 10);
    }

    #[test]
    fn small_deltas_of_either_sign_are_one_byte() {
        for delta in [0i64, 1, -1, 63, -64] {
            let mut buf = ByteBuf::default();
            put(&mut buf, zigzag(delta as u64));
            assert_eq!(buf.len(), 1, "{delta}");
        }
    }

    #[test]
    fn cut_and_overlong_varints_are_refused() {
        let mut pos = 0;
        assert_eq!(get(&[0x80, 0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get(&[0xff; 11], &mut pos), None);
    }
}
