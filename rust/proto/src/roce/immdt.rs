//! Immediate Data extension header (ImmDt), 4 bytes.
//!
//! Immediate data is opaque to the transport: it is carried exactly as the
//! sender's verbs consumer supplied it and handed to the receiver unchanged.
//! Linux models it as a `__be32` (the four bytes are already in network
//! order), so it is kept here as raw wire bytes, never byte-swapped.

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the ImmDt header on the wire.
pub const IMMDT_LEN: usize = 4;

/// Immediate data: four opaque bytes in wire (network) order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImmDt(pub [u8; IMMDT_LEN]);

impl ImmDt {
    /// Length of the ImmDt header on the wire.
    pub const LEN: usize = IMMDT_LEN;

    /// From the in-memory value of a Linux `__be32` (e.g.
    /// `ib_send_wr.ex.imm_data`): its bytes are copied as they lie in
    /// memory, which is already network order. No byte swap happens.
    pub const fn from_be32_raw(v: u32) -> Self {
        ImmDt(v.to_ne_bytes())
    }

    /// To the in-memory value of a Linux `__be32` (e.g. `ib_wc.ex.imm_data`),
    /// the inverse of [`ImmDt::from_be32_raw`].
    pub const fn to_be32_raw(self) -> u32 {
        u32::from_ne_bytes(self.0)
    }

    /// From a host-order integer, stored big-endian on the wire.
    pub const fn from_host(v: u32) -> Self {
        ImmDt(v.to_be_bytes())
    }

    /// The wire bytes read as a big-endian integer, in host order.
    pub const fn to_host(self) -> u32 {
        u32::from_be_bytes(self.0)
    }

    /// Parses an ImmDt from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<IMMDT_LEN>(buf)?;
        Ok((ImmDt(Reader::new(h).array()?), rest))
    }

    /// Writes the ImmDt to the front of `buf`, returning [`IMMDT_LEN`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        Writer::new(take_mut::<IMMDT_LEN>(buf)?).array(self.0)?;
        Ok(IMMDT_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_bytes() {
        let i = ImmDt([0xde, 0xad, 0xbe, 0xef]);
        let mut buf = [0u8; IMMDT_LEN];
        assert_eq!(i.write(&mut buf), Ok(IMMDT_LEN));
        assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(ImmDt::parse(&buf), Ok((i, &[][..])));
        assert_eq!(i.to_host(), 0xdead_beef);
        assert_eq!(ImmDt::from_host(0xdead_beef), i);
        // A __be32 holding 0xdeadbeef has the bytes de ad be ef in memory.
        let be32 = u32::from_ne_bytes([0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(ImmDt::from_be32_raw(be32), i);
        assert_eq!(i.to_be32_raw(), be32);
        assert_eq!(ImmDt::parse(&buf[..3]), Err(Error::Truncated));
    }
}
