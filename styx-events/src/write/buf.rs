//! The byte buffer the text formats write into: short pieces (names,
//! numbers, punctuation) are copied with fixed-size moves instead of a
//! `memcpy` call each, which is most of what formatting an event costs.

use std::io;

/// Room kept past the flush threshold, so an event never finds the buffer
/// full in the middle (one event is at most a few hundred bytes; bigger
/// writes grow it).
const SLACK: usize = 16 << 10;

/// A growable byte buffer with fast short appends.
pub struct ByteBuf {
    /// Always initialized (zeros at first); `len` bytes of it are content.
    buf: Vec<u8>,
    len: usize,
}

impl Default for ByteBuf {
    fn default() -> ByteBuf {
        ByteBuf::with_capacity(0)
    }
}

impl ByteBuf {
    /// An empty buffer with room for `bytes` (and some slack).
    pub fn with_capacity(bytes: usize) -> ByteBuf {
        ByteBuf {
            buf: vec![0; bytes + SLACK],
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Forgets the content, keeping the room.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    #[inline(always)]
    fn room(&mut self, n: usize) {
        // 16 spare bytes let the short copies below write whole words.
        if self.len + n + 16 > self.buf.len() {
            self.grow(n);
        }
    }

    #[cold]
    fn grow(&mut self, n: usize) {
        let size = (self.buf.len() * 2).max(self.len + n + SLACK);
        self.buf.resize(size, 0);
    }

    #[inline(always)]
    /// Appends one byte.
    pub fn push(&mut self, byte: u8) {
        self.room(1);
        self.buf[self.len] = byte;
        self.len += 1;
    }

    #[inline(always)]
    /// Appends `s`; short pieces with word-sized moves.
    pub fn extend_from_slice(&mut self, s: &[u8]) {
        let n = s.len();
        self.room(n);
        let dst = &mut self.buf[self.len..];
        match n {
            // Two overlapping fixed-size moves cover any length in range.
            8..=16 => {
                dst[..8].copy_from_slice(&s[..8]);
                dst[n - 8..n].copy_from_slice(&s[n - 8..]);
            }
            4..=7 => {
                dst[..4].copy_from_slice(&s[..4]);
                dst[n - 4..n].copy_from_slice(&s[n - 4..]);
            }
            1..=3 => {
                dst[0] = s[0];
                dst[n / 2] = s[n / 2];
                dst[n - 1] = s[n - 1];
            }
            0 => {}
            _ => dst[..n].copy_from_slice(s),
        }
        self.len += n;
    }

    /// `v` in decimal, written in place (no intermediate buffer to copy
    /// from, whose fresh small stores would stall a wide load).
    #[inline(always)]
    pub fn dec(&mut self, v: u64) {
        let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
        self.room(20);
        let dst = &mut self.buf[self.len..self.len + n];
        let (mut v, mut i) = (v, n);
        while v >= 100 {
            let pair = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            dst[i] = PAIRS[pair];
            dst[i + 1] = PAIRS[pair + 1];
        }
        if v >= 10 {
            let pair = v as usize * 2;
            dst[0] = PAIRS[pair];
            dst[1] = PAIRS[pair + 1];
        } else {
            dst[0] = b'0' + v as u8;
        }
        self.len += n;
    }

    /// `0x…` in lowercase, as `{:#x}` writes it.
    #[inline]
    pub fn hex(&mut self, v: u64) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let digits = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
        let mut text = [b'0'; 18];
        text[1] = b'x';
        let mut rest = v;
        for slot in text[2..2 + digits].iter_mut().rev() {
            *slot = DIGITS[(rest & 0xf) as usize];
            rest >>= 4;
        }
        self.extend_from_slice(&text[..2 + digits]);
    }

    /// `v` as exactly `width` digits, zero-padded (`width` ≤ 20, `v` fits).
    #[inline(always)]
    pub fn dec_fixed(&mut self, v: u64, width: usize) {
        self.room(width);
        let dst = &mut self.buf[self.len..self.len + width];
        let mut v = v;
        for slot in dst.iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        self.len += width;
    }

    /// `n` copies of `byte`.
    pub fn fill(&mut self, n: usize, byte: u8) {
        self.room(n);
        self.buf[self.len..self.len + n].fill(byte);
        self.len += n;
    }
}

impl io::Write for ByteBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_match_std() {
        let mut bytes = ByteBuf::default();
        let mut want = String::new();
        for v in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            12345,
            999_999,
            1_000_000,
            u64::MAX / 3,
            u64::MAX,
        ] {
            bytes.dec(v);
            bytes.push(b' ');
            bytes.dec_fixed(v % 1_000_000, 6);
            bytes.push(b' ');
            want.push_str(&format!("{v} {:06} ", v % 1_000_000));
        }
        assert_eq!(bytes.as_slice(), want.as_bytes());
    }

    #[test]
    fn every_length_copies_exactly() {
        let source: Vec<u8> = (0..100).collect();
        let mut bytes = ByteBuf::with_capacity(0);
        let mut want = Vec::new();
        for n in 0..100 {
            bytes.extend_from_slice(&source[..n]);
            want.extend_from_slice(&source[..n]);
            bytes.push(0xff);
            want.push(0xff);
        }
        bytes.fill(3, b' ');
        want.extend_from_slice(b"   ");
        assert_eq!(bytes.as_slice(), &want[..]);
    }

    #[test]
    fn grows_past_its_slack() {
        let mut bytes = ByteBuf::with_capacity(0);
        let big = vec![7u8; 3 * SLACK];
        bytes.extend_from_slice(&big);
        bytes.extend_from_slice(b"end");
        assert_eq!(bytes.len(), big.len() + 3);
        assert_eq!(&bytes.as_slice()[big.len()..], b"end");
    }
}
