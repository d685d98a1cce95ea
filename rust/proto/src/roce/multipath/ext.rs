//! The multipath extension on the wire.
//!
//! **Hello** (requester to responder): a duplicate zero-length RDMA WRITE
//! Only with AckReq, PSN = the requester's oldest unacknowledged PSN minus
//! one (always before the responder's expected PSN), and a RETH whose
//! virtual address is [`HELLO_VA`] (`"sroceMP"` and a version byte) and
//! whose R_Key carries the sender's [`Caps`]; DMA length 0. Any RC
//! responder re-ACKs a duplicate WRITE without looking at its RETH (IBTA
//! C9-105; rxe checks the PSN before the opcode's access rights), so for a
//! peer without the extension the hello is the duplicate probe sroce
//! already sends (`docs/sessions.md`).
//!
//! **Extension packets** (only to a peer whose hello or hello ACK said it
//! reads them): BTH with opcode [`EXT_OPCODE`] (0xC0, the first of the
//! manufacturer-specific opcodes, transport bits 110), the peer's QPN and
//! P_Key 0xFFFF, then a 4-byte sroce extension header (SXH): `'S'`,
//! version 1, kind, 0; then by kind:
//!
//! | kind | BTH PSN | body after the SXH |
//! |---|---|---|
//! | 1 hello ACK | the hello's | caps (u32), reorder window in PSNs (u16), 0 (u16) |
//! | 2 SACK | last in-order PSN (as an ACK's) | AETH (as an ACK's), bitmap (32 bytes) |
//!
//! The SACK's bitmap: bit `i` (byte `i / 8`, bit `i % 8` counted from the
//! least significant) says the responder holds PSN `expected + i`
//! (`expected` = BTH PSN + 1; bit 0 is always clear: that PSN is the gap).
//! Other fields big-endian; the ICRC follows as in any RoCEv2 packet.

use super::super::aeth::Aeth;
use super::super::bth::DEFAULT_PKEY;
use super::super::error::Error;
use super::super::psn::Psn;
use super::super::reth::Reth;
use super::super::wire::{take, Reader, Writer, U24_MAX};

/// The opcode of sroce's extension packets (manufacturer-specific range).
pub const EXT_OPCODE: u8 = 0xC0;

/// The hello's RETH virtual address: `"sroceMP"` and version 1.
pub const HELLO_VA: u64 = u64::from_be_bytes(*b"sroceMP\x01");

/// First byte of the sroce extension header.
const SXH_MAGIC: u8 = b'S';
/// Version of the extension header.
const SXH_VERSION: u8 = 1;
/// The BTH's transport version bits.
const TVER_MASK: u8 = 0x0F;
/// Length of the sroce extension header.
const SXH_LEN: usize = 4;
/// Length of the BTH and the SXH.
const HEAD_LEN: usize = 16;
/// Length of a hello ACK's body.
const HELLO_ACK_BODY: usize = 8;
/// Length of a SACK's bitmap.
const SACK_BITMAP_LEN: usize = 32;
/// Transport bytes of a hello ACK (BTH, SXH, body).
pub const HELLO_ACK_LEN: usize = 24;
/// Transport bytes of a SACK (BTH, SXH, AETH, bitmap).
pub const SACK_LEN: usize = 52;
/// SXH kind of a hello ACK.
const KIND_HELLO_ACK: u8 = 1;
/// SXH kind of a SACK.
const KIND_SACK: u8 = 2;
/// How many PSNs a SACK's bitmap covers.
pub const SACK_SPAN: u32 = 256;

/// A SACK's bitmap: bit `i` for PSN `expected + i`, `i <`
/// [`SACK_SPAN`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SackBits(pub [u8; SACK_BITMAP_LEN]);

impl SackBits {
    /// No PSN held.
    pub const EMPTY: SackBits = SackBits([0; SACK_BITMAP_LEN]);

    /// Sets bit `i` (ignored from [`SACK_SPAN`] on).
    pub fn set(&mut self, i: u32) {
        let (byte, bit) = (i.checked_div(8), i.checked_rem(8));
        if let (Some(byte), Some(bit)) = (byte, bit) {
            if let Some(b) = usize::try_from(byte).ok().and_then(|k| self.0.get_mut(k)) {
                *b |= 1u8.checked_shl(bit).unwrap_or(0);
            }
        }
    }

    /// Whether bit `i` is set (false from [`SACK_SPAN`] on).
    pub fn is_set(&self, i: u32) -> bool {
        let (Some(byte), Some(bit)) = (i.checked_div(8), i.checked_rem(8)) else {
            return false;
        };
        usize::try_from(byte)
            .ok()
            .and_then(|k| self.0.get(k))
            .is_some_and(|b| b.checked_shr(bit).unwrap_or(0) & 1 != 0)
    }

    /// How many bits are set.
    pub fn count(&self) -> u32 {
        self.0.iter().map(|b| b.count_ones()).sum()
    }

    /// The bits with bit 0 cleared (the gap is never held).
    const fn without_gap(self) -> Self {
        let mut b = self.0;
        b[0] &= !1;
        SackBits(b)
    }
}

/// What a peer's multipath transport can do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Caps(pub u32);

impl Caps {
    /// Its responder holds requests that arrive out of order and sends
    /// SACKs (to a requester that reads them).
    pub const REORDER: Caps = Caps(1 << 0);
    /// Its requester reads SACKs and resends selectively.
    pub const SACK: Caps = Caps(1 << 1);
    /// What this implementation does.
    pub const ALL: Caps = Caps(Self::REORDER.0 | Self::SACK.0);

    /// Whether every capability of `other` is in `self`.
    pub const fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The RETH of a hello announcing `caps`.
pub const fn hello_reth(caps: Caps) -> Reth {
    Reth {
        va: HELLO_VA,
        rkey: caps.0,
        dma_len: 0,
    }
}

/// The capabilities a request announces, if it is a hello: a zero-length
/// RDMA WRITE Only whose RETH is [`hello_reth`]'s form. (The caller checks
/// the opcode and that the PSN is a duplicate.)
pub fn hello_caps(reth: &Reth, payload_len: u32) -> Option<Caps> {
    (reth.va == HELLO_VA && reth.dma_len == 0 && payload_len == 0).then_some(Caps(reth.rkey))
}

/// A hello ACK: the responder's answer to a hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HelloAck {
    /// The responder side's capabilities.
    pub caps: Caps,
    /// How many PSNs ahead of the expected one it holds.
    pub window: u16,
}

/// A selective acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sack {
    /// The responder's expected PSN (everything before it is acknowledged,
    /// as by an ACK with PSN `expected - 1`).
    pub expected: Psn,
    /// The AETH an ACK would carry (ACK syndrome, MSN).
    pub aeth: Aeth,
    /// Bit `i`: PSN `expected + i` is held (bit 0 always clear).
    pub held: SackBits,
}

impl Sack {
    /// The held PSNs, in order.
    pub fn held_psns(&self) -> impl Iterator<Item = Psn> + '_ {
        (1..SACK_SPAN)
            .filter(|&i| self.held.is_set(i))
            .map(|i| self.expected.wrapping_add(i))
    }
}

/// An extension packet's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtKind {
    /// Answer to a hello (BTH PSN: the hello's).
    HelloAck(HelloAck),
    /// Selective acknowledgement.
    Sack(Sack),
}

/// A parsed extension packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtPacket {
    /// The BTH's destination QP.
    pub dest_qp: u32,
    /// The BTH's PSN.
    pub psn: Psn,
    /// What it says.
    pub kind: ExtKind,
}

impl ExtPacket {
    /// Transport bytes (ICRC excluded) of the packet.
    pub const fn len(&self) -> usize {
        match self.kind {
            ExtKind::HelloAck(_) => HELLO_ACK_LEN,
            ExtKind::Sack(_) => SACK_LEN,
        }
    }

    /// Never empty (for clippy's `len` rule).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// A SACK to `dest_qp`.
    pub const fn sack(dest_qp: u32, sack: Sack) -> Self {
        ExtPacket {
            dest_qp,
            psn: sack.expected.wrapping_sub(1),
            kind: ExtKind::Sack(sack),
        }
    }

    /// A hello ACK to `dest_qp` answering the hello with PSN `psn`.
    pub const fn hello_ack(dest_qp: u32, psn: Psn, ack: HelloAck) -> Self {
        ExtPacket {
            dest_qp,
            psn,
            kind: ExtKind::HelloAck(ack),
        }
    }

    /// Writes the packet (without ICRC) to the front of `buf`; returns its
    /// length. Fails with [`Error::BufferTooSmall`] or
    /// [`Error::ValueOutOfRange`] (a QPN above 24 bits, a bad AETH).
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.len();
        let out = buf.get_mut(..n).ok_or(Error::BufferTooSmall)?;
        if self.dest_qp > U24_MAX {
            return Err(Error::ValueOutOfRange);
        }
        let mut w = Writer::new(out);
        // BTH: opcode, SE/M/pad/TVer 0, P_Key, reserved, QPN, AckReq 0, PSN.
        w.u8(EXT_OPCODE)?;
        w.u8(0)?;
        w.u16(DEFAULT_PKEY)?;
        w.u8(0)?;
        w.u24(self.dest_qp)?;
        w.u8(0)?;
        w.u24(self.psn.value())?;
        w.array([SXH_MAGIC, SXH_VERSION, self.kind_code(), 0])?;
        match self.kind {
            ExtKind::HelloAck(a) => {
                w.u32(a.caps.0)?;
                w.u16(a.window)?;
                w.u16(0)?;
            }
            ExtKind::Sack(s) => {
                w.u8(s.aeth.syndrome.to_u8()?)?;
                w.u24(s.aeth.msn)?;
                w.array(s.held.without_gap().0)?;
            }
        }
        Ok(n)
    }

    fn kind_code(&self) -> u8 {
        match self.kind {
            ExtKind::HelloAck(_) => KIND_HELLO_ACK,
            ExtKind::Sack(_) => KIND_SACK,
        }
    }

    /// Parses an extension packet from its transport bytes (ICRC
    /// excluded, already checked). Fails with [`Error::Truncated`],
    /// [`Error::UnknownOpcode`] (not [`EXT_OPCODE`], or an SXH of another
    /// version or kind) or [`Error::BadVersion`] (a BTH transport version
    /// other than 0).
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let (head, body) = take::<HEAD_LEN>(buf)?;
        let mut r = Reader::new(head);
        if r.u8()? != EXT_OPCODE {
            return Err(Error::UnknownOpcode);
        }
        if r.u8()? & TVER_MASK != 0 {
            return Err(Error::BadVersion);
        }
        let _pkey = r.u16()?;
        let _resv = r.u8()?;
        let dest_qp = r.u24()?;
        let _ack = r.u8()?;
        let psn = Psn::new(r.u24()?);
        let [magic, version, kind, _] = r.array::<SXH_LEN>()?;
        if magic != SXH_MAGIC || version != SXH_VERSION {
            return Err(Error::UnknownOpcode);
        }
        let kind = match kind {
            KIND_HELLO_ACK => {
                let (b, _) = take::<HELLO_ACK_BODY>(body)?;
                let mut r = Reader::new(b);
                ExtKind::HelloAck(HelloAck {
                    caps: Caps(r.u32()?),
                    window: r.u16()?,
                })
            }
            KIND_SACK => {
                let (aeth, rest) = Aeth::parse(body)?;
                let (bits, _) = take::<SACK_BITMAP_LEN>(rest)?;
                ExtKind::Sack(Sack {
                    expected: psn.wrapping_add(1),
                    aeth,
                    held: SackBits(*bits).without_gap(),
                })
            }
            _ => return Err(Error::UnknownOpcode),
        };
        Ok(ExtPacket { dest_qp, psn, kind })
    }
}

/// Whether a transport packet's first byte says it is an extension packet.
pub fn is_ext(transport: &[u8]) -> bool {
    transport.first() == Some(&EXT_OPCODE)
}

#[cfg(test)]
mod tests {
    use super::super::super::aeth::Syndrome;
    use super::super::super::opcode::Opcode;
    use super::*;

    fn bits(set: &[u32]) -> SackBits {
        let mut b = SackBits::EMPTY;
        for &i in set {
            b.set(i);
        }
        b
    }

    #[test]
    fn sack_bits() {
        let b = bits(&[0, 9, 255, 256]);
        assert!(b.is_set(0) && b.is_set(9) && b.is_set(255));
        assert!(!b.is_set(1) && !b.is_set(256) && !b.is_set(u32::MAX));
        assert_eq!(b.count(), 3);
        assert_eq!(b.0[1], 0b10);
        assert_eq!(b.0[31], 0x80);
    }

    #[test]
    fn hello_round_trip() {
        let r = hello_reth(Caps::ALL);
        assert_eq!(hello_caps(&r, 0), Some(Caps::ALL));
        assert_eq!(hello_caps(&r, 1), None);
        assert_eq!(hello_caps(&Reth { va: 0, ..r }, 0), None);
        assert_eq!(&HELLO_VA.to_be_bytes()[..7], b"sroceMP");
    }

    #[test]
    fn ext_packets_round_trip() {
        let sack = Sack {
            expected: Psn::new(0xFF_FFFF),
            aeth: Aeth {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: 77,
            },
            held: bits(&[1, 2, 5, 7, 255]),
        };
        let acks = [
            ExtPacket::sack(0x12_3456, sack),
            ExtPacket::hello_ack(
                3,
                Psn::new(9),
                HelloAck {
                    caps: Caps::ALL,
                    window: 128,
                },
            ),
        ];
        for p in acks {
            let mut buf = [0u8; 64];
            let n = p.write(&mut buf).unwrap();
            assert_eq!(n, p.len());
            assert!(is_ext(&buf[..n]));
            assert_eq!(ExtPacket::parse(&buf[..n]), Ok(p));
            for short in 0..n {
                assert_eq!(ExtPacket::parse(&buf[..short]), Err(Error::Truncated));
            }
            // No RoCEv2 opcode: every plain parser refuses it.
            assert!(Opcode::from_u8(buf[0]).is_err());
        }
        let ExtKind::Sack(s) = acks[0].kind else {
            unreachable!()
        };
        assert_eq!(acks[0].psn, Psn::new(0xFF_FFFE));
        let held: std::vec::Vec<u32> = s.held_psns().map(Psn::value).collect();
        assert_eq!(held, [0, 1, 4, 6, 254]);
    }

    #[test]
    fn bit_zero_is_never_held() {
        let p = ExtPacket::sack(
            1,
            Sack {
                expected: Psn::new(5),
                aeth: Aeth {
                    syndrome: Syndrome::Ack { credits: 0 },
                    msn: 0,
                },
                held: bits(&[0]),
            },
        );
        let mut buf = [0u8; 64];
        let n = p.write(&mut buf).unwrap();
        let ExtKind::Sack(s) = ExtPacket::parse(&buf[..n]).unwrap().kind else {
            unreachable!()
        };
        assert_eq!(s.held, SackBits::EMPTY);
    }

    #[test]
    fn foreign_packets_are_refused() {
        let mut buf = [0u8; 64];
        let n = ExtPacket::hello_ack(
            1,
            Psn::ZERO,
            HelloAck {
                caps: Caps::ALL,
                window: 1,
            },
        )
        .write(&mut buf)
        .unwrap();
        let mut v = buf;
        v[13] = 2;
        assert_eq!(ExtPacket::parse(&v[..n]), Err(Error::UnknownOpcode));
        let mut k = buf;
        k[14] = 3;
        assert_eq!(ExtPacket::parse(&k[..n]), Err(Error::UnknownOpcode));
        let mut t = buf;
        t[1] = 1;
        assert_eq!(ExtPacket::parse(&t[..n]), Err(Error::BadVersion));
        let mut o = buf;
        o[0] = 0x11;
        assert_eq!(ExtPacket::parse(&o[..n]), Err(Error::UnknownOpcode));
    }
}
