// SPDX-License-Identifier: GPL-2.0

//! IP addresses in wire (network) byte order.

use super::bindings;
use core::fmt;

/// An IPv4 or IPv6 address, bytes in network order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// Parses a dotted-quad IPv4 or a textual IPv6 address (the whole of
    /// `text`, no port, no scope), with the kernel's `in4_pton`/`in6_pton`.
    pub(crate) fn parse(text: &[u8]) -> Option<Self> {
        let len = kernel::ffi::c_int::try_from(text.len()).ok()?;
        let src = text.as_ptr().cast::<kernel::ffi::c_char>();
        let mut end = core::ptr::null::<kernel::ffi::c_char>();
        if text.contains(&b':') {
            let mut a = [0u8; 16];
            // SAFETY: `src` has `len` readable bytes, `a` 16 writable ones,
            // `end` is a valid out-pointer; delimiter -1 means "up to len".
            let ok = unsafe { bindings::in6_pton(src, len, a.as_mut_ptr(), -1, &mut end) };
            (ok == 1 && end == src.wrapping_add(text.len())).then_some(IpAddr::V6(a))
        } else {
            let mut a = [0u8; 4];
            // SAFETY: as above, with 4 writable bytes.
            let ok = unsafe { bindings::in4_pton(src, len, a.as_mut_ptr(), -1, &mut end) };
            (ok == 1 && end == src.wrapping_add(text.len())).then_some(IpAddr::V4(a))
        }
    }
}

impl IpAddr {
    /// The address a RoCE GID stands for: IPv4 for an IPv4-mapped GID
    /// (`::ffff:a.b.c.d`), else the GID itself as IPv6.
    pub(crate) fn from_gid(gid: &[u8; 16]) -> Self {
        if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
            IpAddr::V4([gid[12], gid[13], gid[14], gid[15]])
        } else {
            IpAddr::V6(*gid)
        }
    }

    /// The RoCE GID of the address (the inverse of [`Self::from_gid`]).
    pub(crate) fn gid(&self) -> [u8; 16] {
        match self {
            IpAddr::V4(a) => {
                let mut g = [0u8; 16];
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(a);
                g
            }
            IpAddr::V6(g) => *g,
        }
    }
}

impl fmt::Display for IpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddr::V4(a) => write!(f, "{}.{}.{}.{}", a[0], a[1], a[2], a[3]),
            IpAddr::V6(a) => {
                for (i, g) in a.chunks_exact(2).enumerate() {
                    let sep = if i == 0 { "" } else { ":" };
                    write!(f, "{sep}{:x}", u16::from_be_bytes([g[0], g[1]]))?;
                }
                Ok(())
            }
        }
    }
}
