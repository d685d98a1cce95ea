//! A small software CRC-32 (IEEE 802.3 / Ethernet polynomial, reflected),
//! the same function as Linux's `crc32_le()`.
//!
//! Used by host tests and available as a fallback engine; the kernel driver
//! plugs in the kernel's own `crc32_le()` through [`Crc32`] instead.

use super::icrc::Crc32;

/// The reflected CRC-32 polynomial (0x04C11DB7 bit-reversed).
pub const POLY: u32 = 0xEDB8_8320;

/// Byte-at-a-time lookup table, computed at compile time.
static TABLE: [u32; 256] = make_table();

const fn make_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0usize;
    while i < table.len() {
        let mut c = i as u32;
        let mut k = 0u32;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k = k.wrapping_add(1);
        }
        // Evaluated only at compile time, and `i < table.len()` anyway.
        #[allow(clippy::indexing_slicing)]
        {
            table[i] = c;
        }
        i = i.wrapping_add(1);
    }
    table
}

/// Bit-at-a-time CRC update, usable in `const` context (slow; prefer
/// [`update`] at run time).
///
/// Like Linux `crc32_le(crc, data, len)`: no initial or final inversion is
/// applied here; the caller seeds with `!0` and inverts the result.
pub const fn update_bitwise(mut crc: u32, mut data: &[u8]) -> u32 {
    while let [b, rest @ ..] = data {
        crc ^= *b as u32;
        let mut k = 0u32;
        while k < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            k = k.wrapping_add(1);
        }
        data = rest;
    }
    crc
}

/// Table-driven CRC update with the same contract as [`update_bitwise`]
/// (and Linux `crc32_le()`).
pub fn update(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        let [low, ..] = crc.to_le_bytes();
        // `usize::from(u8)` is always < 256: the fallback is never taken.
        let t = TABLE.get(usize::from(low ^ b)).copied().unwrap_or(0);
        crc = (crc >> 8) ^ t;
    }
    crc
}

/// The standard IEEE CRC-32 of `data` (seed `!0`, final inversion), as
/// computed by zlib, Ethernet and `crc32fast::hash`.
pub fn checksum(data: &[u8]) -> u32 {
    !update(!0, data)
}

/// The software engine as a [`Crc32`] implementation.
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftCrc32;

impl Crc32 for SoftCrc32 {
    fn update(&mut self, crc: u32, data: &[u8]) -> u32 {
        update(crc, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        // The standard CRC-32/ISO-HDLC check value.
        assert_eq!(checksum(b"123456789"), 0xCBF4_3926);
        assert_eq!(!update_bitwise(!0, b"123456789"), 0xCBF4_3926);
        assert_eq!(checksum(b""), 0);
    }

    #[test]
    fn table_matches_bitwise() {
        let data: std::vec::Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
        for seed in [0, !0, 0x1234_5678] {
            assert_eq!(update(seed, &data), update_bitwise(seed, &data));
        }
    }

    #[test]
    fn incremental() {
        let (a, b) = b"hello, world".split_at(5);
        assert_eq!(update(update(!0, a), b), update(!0, b"hello, world"));
    }
}
