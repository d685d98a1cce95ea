//! FLUSH Extended Transport Header (FETH), 4 bytes, carried by FLUSH
//! requests (memory placement extensions) before the RETH.
//!
//! ```text
//! bits 31..6  reserved
//! bits  5..4  selectivity level
//! bits  3..0  placement type
//! ```

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the FETH on the wire.
pub const FETH_LEN: usize = 4;

const PLT_MASK: u32 = 0x0F;
const SEL_SHIFT: u32 = 4;
const SEL_MASK: u32 = 0x03;

/// A decoded FETH. Reserved bits are ignored on parse and written as zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Feth {
    /// Placement type, 4 bits (bit 0 global visibility, bit 1 persistence).
    pub placement_type: u8,
    /// Selectivity level, 2 bits (0 = memory region range, 1 = whole MR).
    pub selectivity_level: u8,
}

impl Feth {
    /// Length of the FETH on the wire.
    pub const LEN: usize = FETH_LEN;

    /// Parses a FETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<FETH_LEN>(buf)?;
        let v = Reader::new(h).u32()?;
        let [_, _, _, plt] = (v & PLT_MASK).to_be_bytes();
        let [_, _, _, sel] = ((v >> SEL_SHIFT) & SEL_MASK).to_be_bytes();
        let feth = Feth {
            placement_type: plt,
            selectivity_level: sel,
        };
        Ok((feth, rest))
    }

    /// Writes the FETH to the front of `buf`, returning [`FETH_LEN`].
    /// Fields wider than their bit widths give [`Error::ValueOutOfRange`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let plt = u32::from(self.placement_type);
        let sel = u32::from(self.selectivity_level);
        if plt > PLT_MASK || sel > SEL_MASK {
            return Err(Error::ValueOutOfRange);
        }
        let mut w = Writer::new(take_mut::<FETH_LEN>(buf)?);
        w.u32((sel << SEL_SHIFT) | plt)?;
        Ok(FETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = Feth {
            placement_type: 0x9,
            selectivity_level: 2,
        };
        let mut buf = [0u8; FETH_LEN];
        assert_eq!(f.write(&mut buf), Ok(FETH_LEN));
        assert_eq!(buf, [0, 0, 0, 0x29]);
        assert_eq!(Feth::parse(&buf), Ok((f, &[][..])));
        assert_eq!(
            Feth::parse(&[0xff, 0xff, 0xff, 0xc0]).unwrap().0,
            Feth::default()
        );
        let bad = Feth {
            placement_type: 0x10,
            selectivity_level: 0,
        };
        assert_eq!(bad.write(&mut buf), Err(Error::ValueOutOfRange));
        let bad = Feth {
            placement_type: 0,
            selectivity_level: 4,
        };
        assert_eq!(bad.write(&mut buf), Err(Error::ValueOutOfRange));
    }
}
