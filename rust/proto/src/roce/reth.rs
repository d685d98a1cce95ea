//! RDMA Extended Transport Header (RETH), 16 bytes.
//!
//! ```text
//! bytes 0-7    virtual address
//! bytes 8-11   R_Key
//! bytes 12-15  DMA length
//! ```

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the RETH on the wire.
pub const RETH_LEN: usize = 16;

/// A decoded RETH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA operation, in bytes.
    pub dma_len: u32,
}

impl Reth {
    /// Length of the RETH on the wire.
    pub const LEN: usize = RETH_LEN;

    /// Parses a RETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<RETH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let va = r.u64()?;
        let rkey = r.u32()?;
        let dma_len = r.u32()?;
        Ok((Reth { va, rkey, dma_len }, rest))
    }

    /// Writes the RETH to the front of `buf`, returning [`RETH_LEN`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::new(take_mut::<RETH_LEN>(buf)?);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.dma_len)?;
        Ok(RETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x090a_0b0c,
            dma_len: 0x0d0e_0f10,
        };
        let mut buf = [0u8; RETH_LEN + 1];
        assert_eq!(h.write(&mut buf), Ok(RETH_LEN));
        assert_eq!(
            &buf[..RETH_LEN],
            &core::array::from_fn::<u8, 16, _>(|i| i as u8 + 1)
        );
        assert_eq!(Reth::parse(&buf), Ok((h, &[0u8][..])));
        assert_eq!(Reth::parse(&buf[..15]), Err(Error::Truncated));
        assert_eq!(h.write(&mut buf[..15]), Err(Error::BufferTooSmall));
    }
}
