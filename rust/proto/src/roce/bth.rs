//! Base Transport Header (BTH), 12 bytes, present in every packet.
//!
//! ```text
//! byte 0      opcode
//! byte 1      SE(7) M(6) PadCnt(5..4) TVer(3..0)
//! bytes 2-3   P_Key
//! byte 4      resv8a; in RoCEv2 FECN(7) BECN(6), rest reserved
//! bytes 5-7   destination QP
//! byte 8      AckReq(7), rest reserved
//! bytes 9-11  PSN
//! ```

use super::error::Error;
use super::opcode::Opcode;
use super::psn::Psn;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the BTH on the wire.
pub const BTH_LEN: usize = 12;

/// Offset within the BTH of the resv8a (FECN/BECN) byte, which the ICRC
/// treats as variant (masked to all ones).
pub const BTH_RESV8A_OFFSET: usize = 4;

/// Largest 24-bit queue pair number.
pub const QPN_MAX: u32 = 0x00FF_FFFF;

/// The default P_Key (default partition, full membership).
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// The only transport header version defined (TVer).
pub const TRANSPORT_VERSION: u8 = 0;

const SE: u8 = 0x80;
const MIGREQ: u8 = 0x40;
const PAD_SHIFT: u32 = 4;
const PAD_MASK: u8 = 0x03;
const TVER_MASK: u8 = 0x0F;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACKREQ: u8 = 0x80;

/// A decoded BTH. Reserved bits are ignored on parse and written as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Opcode (transport + operation).
    pub opcode: Opcode,
    /// Solicited event (SE).
    pub solicited: bool,
    /// Migration request (M).
    pub mig_req: bool,
    /// Pad count, 0..=3 bytes appended to the payload for 4-byte alignment.
    pub pad_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// RoCEv2 Forward ECN notification (resv8a bit 7).
    pub fecn: bool,
    /// RoCEv2 Backward ECN notification (resv8a bit 6).
    pub becn: bool,
    /// Destination QP, 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request (A).
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// Length of the BTH on the wire.
    pub const LEN: usize = BTH_LEN;

    /// A BTH with the given opcode, destination QP and PSN, the default
    /// P_Key and every flag clear.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> Self {
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// Parses a BTH from the front of `buf`, returning it and the rest.
    ///
    /// Fails with [`Error::Truncated`], [`Error::UnknownOpcode`] or
    /// [`Error::BadVersion`]. Whether the opcode is valid for its transport
    /// is not checked here (see [`Opcode::info`]).
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<BTH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let opcode = r.u8()?;
        let flags = r.u8()?;
        let pkey = r.u16()?;
        let resv8a = r.u8()?;
        let dest_qp = r.u24()?;
        let ack = r.u8()?;
        let psn = r.u24()?;
        if flags & TVER_MASK != TRANSPORT_VERSION {
            return Err(Error::BadVersion);
        }
        let bth = Bth {
            opcode: Opcode::from_u8(opcode)?,
            solicited: flags & SE != 0,
            mig_req: flags & MIGREQ != 0,
            pad_count: (flags >> PAD_SHIFT) & PAD_MASK,
            pkey,
            fecn: resv8a & FECN != 0,
            becn: resv8a & BECN != 0,
            dest_qp,
            ack_req: ack & ACKREQ != 0,
            psn: Psn::new(psn),
        };
        Ok((bth, rest))
    }

    /// Writes the BTH to the front of `buf`, returning [`BTH_LEN`].
    ///
    /// Fails with [`Error::BufferTooSmall`], or [`Error::ValueOutOfRange`] if
    /// `pad_count > 3` or `dest_qp` does not fit in 24 bits.
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        if self.pad_count > PAD_MASK {
            return Err(Error::ValueOutOfRange);
        }
        let out = take_mut::<BTH_LEN>(buf)?;
        let flag = |set: bool, bit: u8| if set { bit } else { 0 };
        let mut w = Writer::new(out);
        w.u8(self.opcode.to_u8())?;
        w.u8(flag(self.solicited, SE)
            | flag(self.mig_req, MIGREQ)
            | (self.pad_count << PAD_SHIFT)
            | TRANSPORT_VERSION)?;
        w.u16(self.pkey)?;
        w.u8(flag(self.fecn, FECN) | flag(self.becn, BECN))?;
        w.u24(self.dest_qp)?;
        w.u8(flag(self.ack_req, ACKREQ))?;
        w.u24(self.psn.value())?;
        Ok(BTH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::super::opcode::{Operation, Transport};
    use super::*;

    fn sample() -> Bth {
        Bth {
            opcode: Opcode::new(Transport::Uc, Operation::SendOnly),
            solicited: false,
            mig_req: true,
            pad_count: 2,
            pkey: 0xFFFF,
            fecn: false,
            becn: true,
            dest_qp: 211,
            ack_req: true,
            psn: Psn::new(13_571_856),
        }
    }

    #[test]
    fn known_bytes() {
        let mut buf = [0u8; 13];
        assert_eq!(sample().write(&mut buf), Ok(BTH_LEN));
        assert_eq!(
            buf,
            [0x24, 0x60, 0xff, 0xff, 0x40, 0, 0, 0xd3, 0x80, 0xcf, 0x17, 0x10, 0]
        );
        let (b, rest) = Bth::parse(&buf).unwrap();
        assert_eq!(b, sample());
        assert_eq!(rest, [0]);
    }

    #[test]
    fn reserved_bits_ignored() {
        let mut buf = [0u8; BTH_LEN];
        sample().write(&mut buf).unwrap();
        buf[4] |= 0x3f;
        buf[8] |= 0x7f;
        assert_eq!(Bth::parse(&buf).unwrap().0, sample());
    }

    #[test]
    fn errors() {
        let mut buf = [0u8; BTH_LEN];
        sample().write(&mut buf).unwrap();
        assert_eq!(Bth::parse(&buf[..11]), Err(Error::Truncated));
        let mut bad = buf;
        bad[1] |= 0x01;
        assert_eq!(Bth::parse(&bad), Err(Error::BadVersion));
        let mut bad = buf;
        bad[0] = 0x81;
        assert_eq!(Bth::parse(&bad), Err(Error::UnknownOpcode));
        assert_eq!(sample().write(&mut [0u8; 11]), Err(Error::BufferTooSmall));
        let mut b = sample();
        b.pad_count = 4;
        assert_eq!(b.write(&mut buf), Err(Error::ValueOutOfRange));
        let mut b = sample();
        b.dest_qp = QPN_MAX + 1;
        assert_eq!(b.write(&mut buf), Err(Error::ValueOutOfRange));
    }
}
