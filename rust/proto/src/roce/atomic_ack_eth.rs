//! Atomic Acknowledge Extended Transport Header (AtomicAckETH), 8 bytes:
//! the original remote data, returned by ATOMIC Acknowledge after the AETH.

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the AtomicAckETH on the wire.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;

/// A decoded AtomicAckETH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicAckEth {
    /// The remote 64-bit value before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Length of the AtomicAckETH on the wire.
    pub const LEN: usize = ATOMIC_ACK_ETH_LEN;

    /// Parses an AtomicAckETH from the front of `buf`, returning it and the
    /// rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<ATOMIC_ACK_ETH_LEN>(buf)?;
        let orig = Reader::new(h).u64()?;
        Ok((AtomicAckEth { orig }, rest))
    }

    /// Writes the AtomicAckETH to the front of `buf`, returning
    /// [`ATOMIC_ACK_ETH_LEN`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        Writer::new(take_mut::<ATOMIC_ACK_ETH_LEN>(buf)?).u64(self.orig)?;
        Ok(ATOMIC_ACK_ETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = AtomicAckEth {
            orig: 0x8877_6655_4433_2211,
        };
        let mut buf = [0u8; ATOMIC_ACK_ETH_LEN];
        assert_eq!(h.write(&mut buf), Ok(ATOMIC_ACK_ETH_LEN));
        assert_eq!(buf, [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(AtomicAckEth::parse(&buf), Ok((h, &[][..])));
        assert_eq!(AtomicAckEth::parse(&buf[..7]), Err(Error::Truncated));
    }
}
