//! Datagram Extended Transport Header (DETH), 8 bytes, in every UD packet.
//!
//! ```text
//! bytes 0-3  Q_Key
//! byte  4    reserved
//! bytes 5-7  source QP
//! ```

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the DETH on the wire.
pub const DETH_LEN: usize = 8;

/// A decoded DETH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP, 24 bits.
    pub src_qp: u32,
}

impl Deth {
    /// Length of the DETH on the wire.
    pub const LEN: usize = DETH_LEN;

    /// Parses a DETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<DETH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let qkey = r.u32()?;
        let _reserved = r.u8()?;
        let src_qp = r.u24()?;
        Ok((Deth { qkey, src_qp }, rest))
    }

    /// Writes the DETH to the front of `buf`, returning [`DETH_LEN`].
    /// `src_qp` must fit in 24 bits ([`Error::ValueOutOfRange`]).
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut w = Writer::new(take_mut::<DETH_LEN>(buf)?);
        w.u32(self.qkey)?;
        w.u8(0)?;
        w.u24(self.src_qp)?;
        Ok(DETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let d = Deth {
            qkey: 0x1234_5678,
            src_qp: 0xabcdef,
        };
        let mut buf = [0xffu8; DETH_LEN];
        assert_eq!(d.write(&mut buf), Ok(DETH_LEN));
        assert_eq!(buf, [0x12, 0x34, 0x56, 0x78, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(Deth::parse(&buf), Ok((d, &[][..])));
        assert_eq!(Deth::parse(&buf[..7]), Err(Error::Truncated));
        let bad = Deth {
            src_qp: 0x0100_0000,
            ..d
        };
        assert_eq!(bad.write(&mut buf), Err(Error::ValueOutOfRange));
    }
}
