//! Whole transport packets: the UDP payload of a RoCEv2 packet.
//!
//! ```text
//! BTH | extension headers (per opcode, in wire order) | payload | pad | ICRC
//! ```
//!
//! [`Packet::parse`] validates and splits a received packet;
//! [`Headers::write`] and [`build`] lay out a packet to send, leaving the
//! ICRC trailer zeroed for [`icrc::generate`](super::icrc::generate).

use super::aeth::Aeth;
use super::atomic_ack_eth::AtomicAckEth;
use super::atomic_eth::AtomicEth;
use super::bth::Bth;
use super::deth::Deth;
use super::error::Error;
use super::feth::Feth;
use super::icrc::ICRC_LEN;
use super::ieth::Ieth;
use super::immdt::ImmDt;
use super::opcode::{ExtHeader, Opcode};
use super::reth::Reth;

/// Largest BTH pad count.
pub const MAX_PAD: usize = 3;

/// Pad bytes needed after `payload_len` payload bytes for 4-byte alignment.
pub const fn pad_len(payload_len: usize) -> u8 {
    // Value in 0..=3, so the cast cannot truncate.
    (payload_len.wrapping_neg() & MAX_PAD) as u8
}

/// Total transport packet length (headers, payload, pad and ICRC) for
/// `opcode` and `payload_len`, or [`Error::ValueOutOfRange`] on overflow.
pub const fn packet_len(opcode: Opcode, payload_len: usize) -> Result<usize, Error> {
    let fixed = opcode.header_len().wrapping_add(ICRC_LEN);
    let pad = pad_len(payload_len) as usize;
    match payload_len.checked_add(pad) {
        Some(body) => match body.checked_add(fixed) {
            Some(total) => Ok(total),
            None => Err(Error::ValueOutOfRange),
        },
        None => Err(Error::ValueOutOfRange),
    }
}

/// Stores a parsed header in its slot and returns the bytes after it.
fn store<'b, T>(
    slot: &mut Option<T>,
    parsed: Result<(T, &'b [u8]), Error>,
) -> Result<&'b [u8], Error> {
    let (value, rest) = parsed?;
    *slot = Some(value);
    Ok(rest)
}

/// The BTH and every extension header a packet may carry.
///
/// After parsing, exactly the headers the opcode requires are `Some`. For
/// building, exactly those must be `Some` (others give
/// [`Error::UnexpectedHeader`], missing ones [`Error::MissingHeader`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Headers {
    /// Base transport header.
    pub bth: Bth,
    /// Datagram ETH (UD).
    pub deth: Option<Deth>,
    /// FLUSH ETH.
    pub feth: Option<Feth>,
    /// RDMA ETH.
    pub reth: Option<Reth>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEth>,
    /// ACK ETH.
    pub aeth: Option<Aeth>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// Immediate data.
    pub immdt: Option<ImmDt>,
    /// Invalidate ETH.
    pub ieth: Option<Ieth>,
}

impl Headers {
    /// Headers with the given BTH and no extension header.
    pub const fn new(bth: Bth) -> Self {
        Headers {
            bth,
            deth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        }
    }

    /// Length of the BTH plus the extension headers the opcode requires.
    pub const fn header_len(&self) -> usize {
        self.bth.opcode.header_len()
    }

    /// Whether the header `h` is present.
    pub const fn has(&self, h: ExtHeader) -> bool {
        match h {
            ExtHeader::Deth => self.deth.is_some(),
            ExtHeader::Feth => self.feth.is_some(),
            ExtHeader::Reth => self.reth.is_some(),
            ExtHeader::AtomicEth => self.atomic_eth.is_some(),
            ExtHeader::Aeth => self.aeth.is_some(),
            ExtHeader::AtomicAckEth => self.atomic_ack_eth.is_some(),
            ExtHeader::ImmDt => self.immdt.is_some(),
            ExtHeader::Ieth => self.ieth.is_some(),
        }
    }

    /// Parses the BTH and the extension headers its opcode requires from
    /// the front of `buf`, returning them and the rest (payload, pad, ICRC).
    ///
    /// Fails with [`Error::Truncated`], [`Error::BadVersion`],
    /// [`Error::UnknownOpcode`] or [`Error::InvalidForTransport`].
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (bth, mut rest) = Bth::parse(buf)?;
        let info = bth.opcode.info()?;
        let mut h = Headers::new(bth);
        for ext in info.headers.iter() {
            rest = match ext {
                ExtHeader::Deth => store(&mut h.deth, Deth::parse(rest))?,
                ExtHeader::Feth => store(&mut h.feth, Feth::parse(rest))?,
                ExtHeader::Reth => store(&mut h.reth, Reth::parse(rest))?,
                ExtHeader::AtomicEth => store(&mut h.atomic_eth, AtomicEth::parse(rest))?,
                ExtHeader::Aeth => store(&mut h.aeth, Aeth::parse(rest))?,
                ExtHeader::AtomicAckEth => store(&mut h.atomic_ack_eth, AtomicAckEth::parse(rest))?,
                ExtHeader::ImmDt => store(&mut h.immdt, ImmDt::parse(rest))?,
                ExtHeader::Ieth => store(&mut h.ieth, Ieth::parse(rest))?,
            };
        }
        Ok((h, rest))
    }

    /// Given the length of what follows the headers (payload, pad and ICRC,
    /// as returned by [`Headers::parse`]), the payload length without pad.
    ///
    /// Fails with [`Error::Truncated`] (no room for the ICRC),
    /// [`Error::UnexpectedPayload`] or [`Error::BadPad`].
    pub fn payload_len(&self, after_headers: usize) -> Result<usize, Error> {
        let body = after_headers
            .checked_sub(ICRC_LEN)
            .ok_or(Error::Truncated)?;
        if body != 0 && !self.bth.opcode.operation().has_payload() {
            return Err(Error::UnexpectedPayload);
        }
        body.checked_sub(usize::from(self.bth.pad_count))
            .ok_or(Error::BadPad)
    }

    /// Writes the BTH and extension headers to the front of `buf` for a
    /// packet carrying `payload_len` payload bytes; returns the header
    /// length.
    ///
    /// The BTH pad count written is computed from `payload_len` (the
    /// `bth.pad_count` field is ignored). Fails with
    /// [`Error::InvalidForTransport`], [`Error::MissingHeader`],
    /// [`Error::UnexpectedHeader`], [`Error::UnexpectedPayload`],
    /// [`Error::ValueOutOfRange`] or [`Error::BufferTooSmall`].
    pub fn write(&self, payload_len: usize, buf: &mut [u8]) -> Result<usize, Error> {
        let info = self.bth.opcode.info()?;
        if payload_len != 0 && !info.payload {
            return Err(Error::UnexpectedPayload);
        }
        for h in ExtHeader::WIRE_ORDER {
            match (info.headers.contains(h), self.has(h)) {
                (true, false) => return Err(Error::MissingHeader),
                (false, true) => return Err(Error::UnexpectedHeader),
                _ => {}
            }
        }
        let header_len = self.header_len();
        let out = buf.get_mut(..header_len).ok_or(Error::BufferTooSmall)?;
        let bth = Bth {
            pad_count: pad_len(payload_len),
            ..self.bth
        };
        let mut at = bth.write(out)?;
        for h in info.headers.iter() {
            let out = out.get_mut(at..).ok_or(Error::BufferTooSmall)?;
            let n = match h {
                ExtHeader::Deth => self.deth.map(|v| v.write(out)),
                ExtHeader::Feth => self.feth.map(|v| v.write(out)),
                ExtHeader::Reth => self.reth.map(|v| v.write(out)),
                ExtHeader::AtomicEth => self.atomic_eth.map(|v| v.write(out)),
                ExtHeader::Aeth => self.aeth.map(|v| v.write(out)),
                ExtHeader::AtomicAckEth => self.atomic_ack_eth.map(|v| v.write(out)),
                ExtHeader::ImmDt => self.immdt.map(|v| v.write(out)),
                ExtHeader::Ieth => self.ieth.map(|v| v.write(out)),
            }
            .ok_or(Error::MissingHeader)??;
            at = at.checked_add(n).ok_or(Error::BufferTooSmall)?;
        }
        Ok(at)
    }
}

/// A parsed transport packet borrowing the received bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The BTH and extension headers.
    pub headers: Headers,
    /// The payload, without pad bytes.
    pub payload: &'a [u8],
    /// The ICRC trailer value (read little-endian; see
    /// [`icrc`](super::icrc)). Not verified by [`Packet::parse`].
    pub icrc: u32,
}

impl<'a> Packet<'a> {
    /// Parses a whole transport packet (the UDP payload: BTH through ICRC).
    ///
    /// Rejects truncated packets, a nonzero transport version, unknown
    /// opcodes, opcodes invalid for their transport, payload on opcodes
    /// that carry none, and a pad count larger than the payload. The ICRC
    /// is only extracted; check it with [`icrc::verify`](super::icrc::verify).
    pub fn parse(buf: &'a [u8]) -> Result<Self, Error> {
        let (headers, rest) = Headers::parse(buf)?;
        let payload_len = headers.payload_len(rest.len())?;
        let (payload, pad_and_icrc) = rest.split_at_checked(payload_len).ok_or(Error::BadPad)?;
        let (_pad, icrc) = pad_and_icrc
            .split_last_chunk::<ICRC_LEN>()
            .ok_or(Error::Truncated)?;
        Ok(Packet {
            headers,
            payload,
            icrc: u32::from_le_bytes(*icrc),
        })
    }
}

/// Lays out a whole transport packet in `buf`: headers (see
/// [`Headers::write`]), `payload`, zeroed pad and a zeroed ICRC trailer.
/// Returns the total length; the ICRC occupies its last [`ICRC_LEN`]
/// bytes.
pub fn build(headers: &Headers, payload: &[u8], buf: &mut [u8]) -> Result<usize, Error> {
    let total = packet_len(headers.bth.opcode, payload.len())?;
    let out = buf.get_mut(..total).ok_or(Error::BufferTooSmall)?;
    let header_len = headers.write(payload.len(), out)?;
    let (payload_out, tail) = out
        .get_mut(header_len..)
        .and_then(|b| b.split_at_mut_checked(payload.len()))
        .ok_or(Error::BufferTooSmall)?;
    payload_out.copy_from_slice(payload);
    tail.fill(0);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::super::aeth::Syndrome;
    use super::super::opcode::{Operation, Transport};
    use super::super::psn::Psn;
    use super::*;

    fn bth(t: Transport, op: Operation) -> Bth {
        Bth::new(Opcode::new(t, op), 0x12_3456, Psn::new(7))
    }

    #[test]
    fn scapy_uc_send_only() {
        // UDP payload of scapy's RoCE example packet (UC SEND Only, pad 2).
        let pkt = [
            0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, // BTH
            0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01,
            0xbe, 0x88, 0x5e, 0x50, // payload (18)
            0x00, 0x00, // pad
            0x78, 0xf3, 0x53, 0xf3, // ICRC
        ];
        let p = Packet::parse(&pkt).unwrap();
        assert_eq!(
            p.headers.bth.opcode,
            Opcode::new(Transport::Uc, Operation::SendOnly)
        );
        assert_eq!(p.headers.bth.pad_count, 2);
        assert!(p.headers.bth.mig_req);
        assert_eq!(p.headers.bth.dest_qp, 211);
        assert_eq!(p.headers.bth.psn, Psn::new(13_571_856));
        assert_eq!(p.payload, &pkt[12..30]);
        assert_eq!(p.icrc, 0xf353_f378);
        assert_eq!(p.headers, Headers::new(p.headers.bth));
    }

    #[test]
    fn build_then_parse() {
        let mut h = Headers::new(bth(Transport::Rc, Operation::RdmaWriteOnlyWithImmediate));
        h.reth = Some(Reth {
            va: 1,
            rkey: 2,
            dma_len: 5,
        });
        h.immdt = Some(ImmDt([9, 8, 7, 6]));
        let mut buf = [0xAAu8; 64];
        let n = build(&h, b"hello", &mut buf).unwrap();
        assert_eq!(n, 12 + 16 + 4 + 5 + 3 + 4);
        assert_eq!(&buf[n - 7..n], &[0; 7]);
        let p = Packet::parse(&buf[..n]).unwrap();
        assert_eq!(p.payload, b"hello");
        assert_eq!(p.headers.bth.pad_count, 3);
        assert_eq!(p.headers.reth, h.reth);
        assert_eq!(p.headers.immdt, h.immdt);
        assert_eq!(
            build(&h, b"hello", &mut buf[..n - 1]),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn builder_checks_headers() {
        let mut h = Headers::new(bth(Transport::Rc, Operation::Acknowledge));
        let mut buf = [0u8; 64];
        assert_eq!(build(&h, &[], &mut buf), Err(Error::MissingHeader));
        h.aeth = Some(Aeth {
            syndrome: Syndrome::Ack { credits: 3 },
            msn: 1,
        });
        assert_eq!(build(&h, &[], &mut buf), Ok(20));
        assert_eq!(build(&h, &[1], &mut buf), Err(Error::UnexpectedPayload));
        h.reth = Some(Reth::default());
        assert_eq!(build(&h, &[], &mut buf), Err(Error::UnexpectedHeader));
        let h = Headers::new(bth(Transport::Ud, Operation::SendFirst));
        assert_eq!(build(&h, &[], &mut buf), Err(Error::InvalidForTransport));
    }

    #[test]
    fn parse_rejections() {
        let mut h = Headers::new(bth(Transport::Rc, Operation::SendOnly));
        let mut buf = [0u8; 64];
        let n = build(&h, &[1, 2], &mut buf).unwrap();
        assert_eq!(n, 12 + 4 + 4);
        assert!(Packet::parse(&buf[..n]).is_ok());
        // No room for the ICRC.
        assert_eq!(Packet::parse(&buf[..15]), Err(Error::Truncated));
        assert_eq!(Packet::parse(&buf[..5]), Err(Error::Truncated));
        // Pad count larger than payload+pad.
        let mut bad = buf;
        bad[1] = 0x30;
        assert_eq!(Packet::parse(&bad[..16]), Err(Error::BadPad));
        // Transport version.
        let mut bad = buf;
        bad[1] |= 0x01;
        assert_eq!(Packet::parse(&bad[..n]), Err(Error::BadVersion));
        // Unknown opcode and invalid-for-transport opcode.
        let mut bad = buf;
        bad[0] = 0x1f;
        assert_eq!(Packet::parse(&bad[..n]), Err(Error::UnknownOpcode));
        bad[0] = 0x6c; // UD RDMA READ request
        assert_eq!(Packet::parse(&bad[..n]), Err(Error::InvalidForTransport));
        bad[0] = 0x44; // RD SEND only
        assert_eq!(Packet::parse(&bad[..n]), Err(Error::InvalidForTransport));
        // Payload on an opcode without payload.
        h.bth.opcode = Opcode::new(Transport::Rc, Operation::RdmaReadRequest);
        h.reth = Some(Reth::default());
        let n = build(&h, &[], &mut buf).unwrap();
        assert!(Packet::parse(&buf[..n]).is_ok());
        assert_eq!(Packet::parse(&buf[..n + 4]), Err(Error::UnexpectedPayload));
        assert_eq!(Packet::parse(&buf[..n - 5]), Err(Error::Truncated));
    }

    #[test]
    fn lengths() {
        assert_eq!(pad_len(0), 0);
        assert_eq!(pad_len(1), 3);
        assert_eq!(pad_len(2), 2);
        assert_eq!(pad_len(3), 1);
        assert_eq!(pad_len(4), 0);
        assert_eq!(pad_len(usize::MAX), 1);
        let o = Opcode::new(Transport::Ud, Operation::SendOnlyWithImmediate);
        assert_eq!(packet_len(o, 1), Ok(12 + 8 + 4 + 4 + 4));
        assert_eq!(packet_len(o, usize::MAX), Err(Error::ValueOutOfRange));
        assert_eq!(packet_len(o, usize::MAX - 2), Err(Error::ValueOutOfRange));
    }
}
