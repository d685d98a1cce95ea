//! The Global Route Header (GRH), 40 bytes: the network header of RoCE v1
//! (IBA annex A16), where it follows the Ethernet header (Ethertype
//! 0x8915) and precedes the BTH.
//!
//! ```text
//! bits 0-3    IPVer, 6
//! bits 4-11   TClass
//! bits 12-31  FlowLabel
//! bytes 4-5   PayLen: bytes after the GRH, ICRC included
//! byte  6     NxtHdr, 0x1B (an IBA transport header follows)
//! byte  7     HopLmt
//! bytes 8-23  SGID
//! bytes 24-39 DGID
//! ```
//!
//! The layout is that of an IPv6 header, which is why a RoCEv2 receiver
//! can place its IPv6 header where a GRH goes and why the ICRC masks the
//! same fields of both (see [`super::icrc::Icrc::new_roce_v1`]).

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the GRH on the wire.
pub const GRH_LEN: usize = 40;

/// IPVer of every GRH.
pub const GRH_IP_VERSION: u8 = 6;

/// NxtHdr of a GRH followed by an IBA transport header (BTH).
pub const GRH_NEXT_HEADER_IBA: u8 = 0x1B;

/// Largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0x000F_FFFF;

/// A decoded GRH (IPVer 6, NxtHdr 0x1B implied).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Grh {
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Bytes after the GRH up to and including the ICRC.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
}

impl Grh {
    /// Parses a GRH from the front of `buf`, returning it and the rest.
    ///
    /// Fails with [`Error::Truncated`], or [`Error::BadGrh`] if IPVer is
    /// not 6 or NxtHdr is not 0x1B (not an IBA transport packet).
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<GRH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let word = r.u32()?;
        let payload_len = r.u16()?;
        let next_header = r.u8()?;
        let hop_limit = r.u8()?;
        let sgid = r.array::<16>()?;
        let dgid = r.array::<16>()?;
        if (word >> 28) as u8 != GRH_IP_VERSION || next_header != GRH_NEXT_HEADER_IBA {
            return Err(Error::BadGrh);
        }
        let grh = Grh {
            traffic_class: (word >> 20) as u8,
            flow_label: word & FLOW_LABEL_MAX,
            payload_len,
            hop_limit,
            sgid,
            dgid,
        };
        Ok((grh, rest))
    }

    /// Writes the GRH to the front of `buf`, returning [`GRH_LEN`].
    /// `flow_label` must fit in 20 bits ([`Error::ValueOutOfRange`]).
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        if self.flow_label > FLOW_LABEL_MAX {
            return Err(Error::ValueOutOfRange);
        }
        let mut w = Writer::new(take_mut::<GRH_LEN>(buf)?);
        let word = (u32::from(GRH_IP_VERSION) << 28)
            | (u32::from(self.traffic_class) << 20)
            | self.flow_label;
        w.u32(word)?;
        w.u16(self.payload_len)?;
        w.u8(GRH_NEXT_HEADER_IBA)?;
        w.u8(self.hop_limit)?;
        w.array(self.sgid)?;
        w.array(self.dgid)?;
        Ok(GRH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Grh {
        Grh {
            traffic_class: 0xA5,
            flow_label: 0x1_2345,
            payload_len: 0x0102,
            hop_limit: 64,
            sgid: [0x11; 16],
            dgid: [0x22; 16],
        }
    }

    #[test]
    fn round_trip() {
        let g = sample();
        let mut buf = [0u8; GRH_LEN + 3];
        assert_eq!(g.write(&mut buf), Ok(GRH_LEN));
        assert_eq!(
            buf[..8],
            [0x6A, 0x51, 0x23, 0x45, 0x01, 0x02, 0x1B, 64],
            "IPVer 6, TClass 0xA5, FlowLabel 0x12345, PayLen, NxtHdr, HopLmt"
        );
        assert_eq!(buf[8..24], [0x11; 16]);
        assert_eq!(buf[24..40], [0x22; 16]);
        let (back, rest) = Grh::parse(&buf).unwrap();
        assert_eq!(back, g);
        assert_eq!(rest.len(), 3);
    }

    #[test]
    fn refusals() {
        let g = sample();
        let mut buf = [0u8; GRH_LEN];
        g.write(&mut buf).unwrap();
        assert_eq!(Grh::parse(&buf[..GRH_LEN - 1]), Err(Error::Truncated));
        let mut udp = buf;
        udp[6] = 17; // a RoCEv2 IPv6 header: UDP follows
        assert_eq!(Grh::parse(&udp), Err(Error::BadGrh));
        let mut v4 = buf;
        v4[0] = 0x45;
        assert_eq!(Grh::parse(&v4), Err(Error::BadGrh));
        let wide = Grh {
            flow_label: FLOW_LABEL_MAX + 1,
            ..g
        };
        assert_eq!(wide.write(&mut buf), Err(Error::ValueOutOfRange));
        assert_eq!(g.write(&mut buf[..GRH_LEN - 1]), Err(Error::BufferTooSmall));
    }
}
