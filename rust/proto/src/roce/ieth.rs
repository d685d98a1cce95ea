//! Invalidate Extended Transport Header (IETH), 4 bytes: the R_Key to
//! invalidate, carried by SEND with Invalidate.

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the IETH on the wire.
pub const IETH_LEN: usize = 4;

/// A decoded IETH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ieth {
    /// The R_Key the responder invalidates.
    pub rkey: u32,
}

impl Ieth {
    /// Length of the IETH on the wire.
    pub const LEN: usize = IETH_LEN;

    /// Parses an IETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<IETH_LEN>(buf)?;
        let rkey = Reader::new(h).u32()?;
        Ok((Ieth { rkey }, rest))
    }

    /// Writes the IETH to the front of `buf`, returning [`IETH_LEN`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        Writer::new(take_mut::<IETH_LEN>(buf)?).u32(self.rkey)?;
        Ok(IETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = Ieth { rkey: 0x0102_0304 };
        let mut buf = [0u8; IETH_LEN];
        assert_eq!(h.write(&mut buf), Ok(IETH_LEN));
        assert_eq!(buf, [1, 2, 3, 4]);
        assert_eq!(Ieth::parse(&buf), Ok((h, &[][..])));
        assert_eq!(Ieth::parse(&buf[..3]), Err(Error::Truncated));
        assert_eq!(h.write(&mut buf[..3]), Err(Error::BufferTooSmall));
    }
}
