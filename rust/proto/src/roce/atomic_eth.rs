//! Atomic Extended Transport Header (AtomicETH), 28 bytes, carried by
//! CmpSwap and FetchAdd requests.
//!
//! ```text
//! bytes 0-7    virtual address
//! bytes 8-11   R_Key
//! bytes 12-19  swap (CmpSwap) or add (FetchAdd) data
//! bytes 20-27  compare data (CmpSwap; ignored by FetchAdd)
//! ```

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the AtomicETH on the wire.
pub const ATOMIC_ETH_LEN: usize = 28;

/// A decoded AtomicETH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicEth {
    /// Remote virtual address (must be 8-byte aligned; not checked here).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap data (CmpSwap) or add data (FetchAdd).
    pub swap_add: u64,
    /// Compare data (CmpSwap).
    pub compare: u64,
}

impl AtomicEth {
    /// Length of the AtomicETH on the wire.
    pub const LEN: usize = ATOMIC_ETH_LEN;

    /// Parses an AtomicETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<ATOMIC_ETH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let va = r.u64()?;
        let rkey = r.u32()?;
        let swap_add = r.u64()?;
        let compare = r.u64()?;
        let eth = AtomicEth {
            va,
            rkey,
            swap_add,
            compare,
        };
        Ok((eth, rest))
    }

    /// Writes the AtomicETH to the front of `buf`, returning
    /// [`ATOMIC_ETH_LEN`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::new(take_mut::<ATOMIC_ETH_LEN>(buf)?);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u64(self.swap_add)?;
        w.u64(self.compare)?;
        Ok(ATOMIC_ETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = AtomicEth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x090a_0b0c,
            swap_add: 0x0d0e_0f10_1112_1314,
            compare: 0x1516_1718_191a_1b1c,
        };
        let mut buf = [0u8; ATOMIC_ETH_LEN];
        assert_eq!(h.write(&mut buf), Ok(ATOMIC_ETH_LEN));
        assert_eq!(buf, core::array::from_fn::<u8, 28, _>(|i| i as u8 + 1));
        assert_eq!(AtomicEth::parse(&buf), Ok((h, &[][..])));
        assert_eq!(AtomicEth::parse(&buf[..27]), Err(Error::Truncated));
        assert_eq!(h.write(&mut buf[..27]), Err(Error::BufferTooSmall));
    }
}
