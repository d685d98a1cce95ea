// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC-32 (`crc32_le()`, architecture-accelerated where the
//! CPU allows), as the protocol core's [`Crc32`] engine.

use super::bindings;
use crate::roce::icrc::Crc32;

/// `crc32_le()`: reflected IEEE polynomial, no pre/post inversion.
pub(crate) struct KernelCrc32;

impl Crc32 for KernelCrc32 {
    fn update(&mut self, crc: u32, data: &[u8]) -> u32 {
        // SAFETY: `data` is a valid slice of `data.len()` bytes.
        unsafe { bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
    }
}
