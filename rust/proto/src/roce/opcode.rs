//! The BTH opcode and the per-opcode table of facts: which extension
//! headers follow the BTH (and in which order), whether the packet carries
//! payload, whether it is a request or a response, and where it sits in a
//! multi-packet message.
//!
//! An opcode byte is `transport (bits 7..5) | operation (bits 4..0)`.

use super::aeth::AETH_LEN;
use super::atomic_ack_eth::ATOMIC_ACK_ETH_LEN;
use super::atomic_eth::ATOMIC_ETH_LEN;
use super::bth::BTH_LEN;
use super::deth::DETH_LEN;
use super::error::Error;
use super::feth::FETH_LEN;
use super::ieth::IETH_LEN;
use super::immdt::IMMDT_LEN;
use super::reth::RETH_LEN;

/// The transport service, bits 7..5 of the opcode.
///
/// Opcodes with transport bits 0x80 and above (CNP, XRC, vendor specific)
/// are not supported and decode as [`Error::UnknownOpcode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transport {
    /// Reliable Connected.
    Rc = 0x00,
    /// Unreliable Connected.
    Uc = 0x20,
    /// Reliable Datagram: decodes, but no RD opcode is supported (RoCE has
    /// no RDETH), so every RD opcode is [`Error::InvalidForTransport`].
    Rd = 0x40,
    /// Unreliable Datagram.
    Ud = 0x60,
}

impl Transport {
    /// Mask of the transport bits in an opcode byte.
    pub const MASK: u8 = 0xE0;
    /// Every transport, in opcode order.
    pub const ALL: [Transport; 4] = [Transport::Rc, Transport::Uc, Transport::Rd, Transport::Ud];

    /// The transport's bits, already shifted into opcode position.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// Decodes the transport bits of an opcode byte (lower bits ignored).
    pub const fn from_opcode(raw: u8) -> Result<Self, Error> {
        match raw & Self::MASK {
            0x00 => Ok(Transport::Rc),
            0x20 => Ok(Transport::Uc),
            0x40 => Ok(Transport::Rd),
            0x60 => Ok(Transport::Ud),
            _ => Err(Error::UnknownOpcode),
        }
    }
}

/// The operation, bits 4..0 of the opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Operation {
    /// SEND First.
    SendFirst = 0x00,
    /// SEND Middle.
    SendMiddle = 0x01,
    /// SEND Last.
    SendLast = 0x02,
    /// SEND Last with Immediate.
    SendLastWithImmediate = 0x03,
    /// SEND Only.
    SendOnly = 0x04,
    /// SEND Only with Immediate.
    SendOnlyWithImmediate = 0x05,
    /// RDMA WRITE First.
    RdmaWriteFirst = 0x06,
    /// RDMA WRITE Middle.
    RdmaWriteMiddle = 0x07,
    /// RDMA WRITE Last.
    RdmaWriteLast = 0x08,
    /// RDMA WRITE Last with Immediate.
    RdmaWriteLastWithImmediate = 0x09,
    /// RDMA WRITE Only.
    RdmaWriteOnly = 0x0A,
    /// RDMA WRITE Only with Immediate.
    RdmaWriteOnlyWithImmediate = 0x0B,
    /// RDMA READ Request.
    RdmaReadRequest = 0x0C,
    /// RDMA READ Response First.
    RdmaReadResponseFirst = 0x0D,
    /// RDMA READ Response Middle.
    RdmaReadResponseMiddle = 0x0E,
    /// RDMA READ Response Last.
    RdmaReadResponseLast = 0x0F,
    /// RDMA READ Response Only.
    RdmaReadResponseOnly = 0x10,
    /// Acknowledge.
    Acknowledge = 0x11,
    /// ATOMIC Acknowledge.
    AtomicAcknowledge = 0x12,
    /// CmpSwap (atomic compare and swap).
    CompareSwap = 0x13,
    /// FetchAdd (atomic fetch and add).
    FetchAdd = 0x14,
    /// SEND Last with Invalidate.
    SendLastWithInvalidate = 0x16,
    /// SEND Only with Invalidate.
    SendOnlyWithInvalidate = 0x17,
    /// FLUSH (memory placement extension; BTH + FETH + RETH).
    Flush = 0x1C,
    /// ATOMIC WRITE (memory placement extension; BTH + RETH + 8 bytes).
    AtomicWrite = 0x1D,
}

impl Operation {
    /// Mask of the operation bits in an opcode byte.
    pub const MASK: u8 = 0x1F;

    /// Every operation, in code order.
    pub const ALL: [Operation; 25] = [
        Operation::SendFirst,
        Operation::SendMiddle,
        Operation::SendLast,
        Operation::SendLastWithImmediate,
        Operation::SendOnly,
        Operation::SendOnlyWithImmediate,
        Operation::RdmaWriteFirst,
        Operation::RdmaWriteMiddle,
        Operation::RdmaWriteLast,
        Operation::RdmaWriteLastWithImmediate,
        Operation::RdmaWriteOnly,
        Operation::RdmaWriteOnlyWithImmediate,
        Operation::RdmaReadRequest,
        Operation::RdmaReadResponseFirst,
        Operation::RdmaReadResponseMiddle,
        Operation::RdmaReadResponseLast,
        Operation::RdmaReadResponseOnly,
        Operation::Acknowledge,
        Operation::AtomicAcknowledge,
        Operation::CompareSwap,
        Operation::FetchAdd,
        Operation::SendLastWithInvalidate,
        Operation::SendOnlyWithInvalidate,
        Operation::Flush,
        Operation::AtomicWrite,
    ];

    /// The operation's 5-bit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Decodes the operation bits of an opcode byte (upper bits ignored).
    pub const fn from_opcode(raw: u8) -> Result<Self, Error> {
        Ok(match raw & Self::MASK {
            0x00 => Operation::SendFirst,
            0x01 => Operation::SendMiddle,
            0x02 => Operation::SendLast,
            0x03 => Operation::SendLastWithImmediate,
            0x04 => Operation::SendOnly,
            0x05 => Operation::SendOnlyWithImmediate,
            0x06 => Operation::RdmaWriteFirst,
            0x07 => Operation::RdmaWriteMiddle,
            0x08 => Operation::RdmaWriteLast,
            0x09 => Operation::RdmaWriteLastWithImmediate,
            0x0A => Operation::RdmaWriteOnly,
            0x0B => Operation::RdmaWriteOnlyWithImmediate,
            0x0C => Operation::RdmaReadRequest,
            0x0D => Operation::RdmaReadResponseFirst,
            0x0E => Operation::RdmaReadResponseMiddle,
            0x0F => Operation::RdmaReadResponseLast,
            0x10 => Operation::RdmaReadResponseOnly,
            0x11 => Operation::Acknowledge,
            0x12 => Operation::AtomicAcknowledge,
            0x13 => Operation::CompareSwap,
            0x14 => Operation::FetchAdd,
            0x16 => Operation::SendLastWithInvalidate,
            0x17 => Operation::SendOnlyWithInvalidate,
            0x1C => Operation::Flush,
            0x1D => Operation::AtomicWrite,
            _ => return Err(Error::UnknownOpcode),
        })
    }

    /// Extension headers this operation carries after the BTH, excluding
    /// the DETH that every UD packet adds (see [`Opcode::ext_headers`]).
    pub const fn ext_headers(self) -> ExtHeaders {
        use ExtHeader as H;
        let none = ExtHeaders::EMPTY;
        match self {
            Operation::SendFirst
            | Operation::SendMiddle
            | Operation::SendLast
            | Operation::SendOnly
            | Operation::RdmaWriteMiddle
            | Operation::RdmaWriteLast
            | Operation::RdmaReadResponseMiddle => none,
            Operation::SendLastWithImmediate
            | Operation::SendOnlyWithImmediate
            | Operation::RdmaWriteLastWithImmediate => none.with(H::ImmDt),
            Operation::RdmaWriteFirst
            | Operation::RdmaWriteOnly
            | Operation::RdmaReadRequest
            | Operation::AtomicWrite => none.with(H::Reth),
            Operation::RdmaWriteOnlyWithImmediate => none.with(H::Reth).with(H::ImmDt),
            Operation::RdmaReadResponseFirst
            | Operation::RdmaReadResponseLast
            | Operation::RdmaReadResponseOnly
            | Operation::Acknowledge => none.with(H::Aeth),
            Operation::AtomicAcknowledge => none.with(H::Aeth).with(H::AtomicAckEth),
            Operation::CompareSwap | Operation::FetchAdd => none.with(H::AtomicEth),
            Operation::SendLastWithInvalidate | Operation::SendOnlyWithInvalidate => {
                none.with(H::Ieth)
            }
            Operation::Flush => none.with(H::Feth).with(H::Reth),
        }
    }

    /// Whether packets of this operation may carry payload (possibly
    /// zero-length). Packets of the other operations must carry none.
    pub const fn has_payload(self) -> bool {
        !matches!(
            self,
            Operation::RdmaReadRequest
                | Operation::Acknowledge
                | Operation::AtomicAcknowledge
                | Operation::CompareSwap
                | Operation::FetchAdd
                | Operation::Flush
        )
    }

    /// Whether this is a response (sent by the responder): RDMA READ
    /// responses and (atomic) acknowledges.
    pub const fn is_response(self) -> bool {
        matches!(
            self,
            Operation::RdmaReadResponseFirst
                | Operation::RdmaReadResponseMiddle
                | Operation::RdmaReadResponseLast
                | Operation::RdmaReadResponseOnly
                | Operation::Acknowledge
                | Operation::AtomicAcknowledge
        )
    }

    /// Whether this is a request (sent by the requester).
    pub const fn is_request(self) -> bool {
        !self.is_response()
    }

    /// Where a packet of this operation sits within its message.
    pub const fn position(self) -> Position {
        match self {
            Operation::SendFirst | Operation::RdmaWriteFirst | Operation::RdmaReadResponseFirst => {
                Position::First
            }
            Operation::SendMiddle
            | Operation::RdmaWriteMiddle
            | Operation::RdmaReadResponseMiddle => Position::Middle,
            Operation::SendLast
            | Operation::SendLastWithImmediate
            | Operation::SendLastWithInvalidate
            | Operation::RdmaWriteLast
            | Operation::RdmaWriteLastWithImmediate
            | Operation::RdmaReadResponseLast => Position::Last,
            Operation::SendOnly
            | Operation::SendOnlyWithImmediate
            | Operation::SendOnlyWithInvalidate
            | Operation::RdmaWriteOnly
            | Operation::RdmaWriteOnlyWithImmediate
            | Operation::RdmaReadRequest
            | Operation::RdmaReadResponseOnly
            | Operation::Acknowledge
            | Operation::AtomicAcknowledge
            | Operation::CompareSwap
            | Operation::FetchAdd
            | Operation::Flush
            | Operation::AtomicWrite => Position::Only,
        }
    }

    /// Whether this operation is allowed on `transport` by this
    /// implementation: RC allows all, UC only SEND and RDMA WRITE (no
    /// invalidate, READ, atomics or FLUSH), UD only SEND Only (with or
    /// without immediate), RD nothing.
    pub const fn valid_for(self, transport: Transport) -> bool {
        match transport {
            Transport::Rc => true,
            Transport::Uc => (self as u8) <= (Operation::RdmaWriteOnlyWithImmediate as u8),
            Transport::Ud => matches!(self, Operation::SendOnly | Operation::SendOnlyWithImmediate),
            Transport::Rd => false,
        }
    }
}

/// Where a packet sits within a (possibly multi-packet) message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The message's only packet.
    Only,
}

impl Position {
    /// `true` for [`Position::First`] and [`Position::Only`].
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// `true` for [`Position::Last`] and [`Position::Only`].
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// One kind of extension header that may follow the BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// Datagram ETH (UD): Q_Key and source QP.
    Deth,
    /// FLUSH ETH.
    Feth,
    /// RDMA ETH: virtual address, R_Key, DMA length.
    Reth,
    /// Atomic ETH.
    AtomicEth,
    /// ACK ETH: syndrome and MSN.
    Aeth,
    /// Atomic ACK ETH: original remote data.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH: R_Key to invalidate.
    Ieth,
}

impl ExtHeader {
    /// All extension headers in the order they appear on the wire.
    pub const WIRE_ORDER: [ExtHeader; 8] = [
        ExtHeader::Deth,
        ExtHeader::Feth,
        ExtHeader::Reth,
        ExtHeader::AtomicEth,
        ExtHeader::Aeth,
        ExtHeader::AtomicAckEth,
        ExtHeader::ImmDt,
        ExtHeader::Ieth,
    ];

    /// Length of this header on the wire, in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            ExtHeader::Deth => DETH_LEN,
            ExtHeader::Feth => FETH_LEN,
            ExtHeader::Reth => RETH_LEN,
            ExtHeader::AtomicEth => ATOMIC_ETH_LEN,
            ExtHeader::Aeth => AETH_LEN,
            ExtHeader::AtomicAckEth => ATOMIC_ACK_ETH_LEN,
            ExtHeader::ImmDt => IMMDT_LEN,
            ExtHeader::Ieth => IETH_LEN,
        }
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of extension headers; iterate it to get them in wire order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExtHeaders(u8);

impl ExtHeaders {
    /// The empty set.
    pub const EMPTY: ExtHeaders = ExtHeaders(0);

    /// This set plus `h`.
    pub const fn with(self, h: ExtHeader) -> Self {
        ExtHeaders(self.0 | h.bit())
    }

    /// Whether `h` is in the set.
    pub const fn contains(self, h: ExtHeader) -> bool {
        self.0 & h.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Total wire length of the headers in the set, in bytes.
    pub const fn wire_len(self) -> usize {
        let mut total = 0usize;
        let mut rest: &[ExtHeader] = &ExtHeader::WIRE_ORDER;
        while let [h, tail @ ..] = rest {
            if self.contains(*h) {
                // At most 8 headers of at most 28 bytes: cannot overflow.
                total = total.wrapping_add(h.wire_len());
            }
            rest = tail;
        }
        total
    }

    /// The headers in the set, in wire order.
    pub fn iter(self) -> impl Iterator<Item = ExtHeader> {
        ExtHeader::WIRE_ORDER
            .into_iter()
            .filter(move |h| self.contains(*h))
    }
}

/// A decoded BTH opcode: transport plus operation.
///
/// Decoding ([`Opcode::from_u8`]) only checks that both parts are known;
/// whether the combination is allowed is checked by [`Opcode::info`] /
/// [`Opcode::is_valid`] (and by the packet parser).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Opcode {
    transport: Transport,
    operation: Operation,
}

/// Facts about a valid opcode, from [`Opcode::info`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// Extension headers following the BTH (DETH included for UD).
    pub headers: ExtHeaders,
    /// Whether the packet may carry payload.
    pub payload: bool,
    /// Whether the packet is a response (otherwise a request).
    pub response: bool,
    /// Position within the message.
    pub position: Position,
}

impl Opcode {
    /// Combines a transport and an operation (validity is not checked).
    pub const fn new(transport: Transport, operation: Operation) -> Self {
        Opcode {
            transport,
            operation,
        }
    }

    /// Decodes an opcode byte; fails with [`Error::UnknownOpcode`] if the
    /// transport or operation bits are not known.
    pub const fn from_u8(raw: u8) -> Result<Self, Error> {
        let transport = match Transport::from_opcode(raw) {
            Ok(t) => t,
            Err(e) => return Err(e),
        };
        match Operation::from_opcode(raw) {
            Ok(operation) => Ok(Opcode::new(transport, operation)),
            Err(e) => Err(e),
        }
    }

    /// The opcode byte.
    pub const fn to_u8(self) -> u8 {
        self.transport.bits() | self.operation.code()
    }

    /// The transport part.
    pub const fn transport(self) -> Transport {
        self.transport
    }

    /// The operation part.
    pub const fn operation(self) -> Operation {
        self.operation
    }

    /// Whether the operation is allowed on the transport (see
    /// [`Operation::valid_for`]).
    pub const fn is_valid(self) -> bool {
        self.operation.valid_for(self.transport)
    }

    /// Extension headers that follow the BTH, DETH included for UD.
    pub const fn ext_headers(self) -> ExtHeaders {
        let h = self.operation.ext_headers();
        match self.transport {
            Transport::Ud => h.with(ExtHeader::Deth),
            _ => h,
        }
    }

    /// BTH plus extension headers, in bytes.
    pub const fn header_len(self) -> usize {
        // At most 12 + 8 * 28: cannot overflow.
        BTH_LEN.wrapping_add(self.ext_headers().wire_len())
    }

    /// Facts for this opcode, or [`Error::InvalidForTransport`].
    pub const fn info(self) -> Result<OpcodeInfo, Error> {
        if !self.is_valid() {
            return Err(Error::InvalidForTransport);
        }
        Ok(OpcodeInfo {
            headers: self.ext_headers(),
            payload: self.operation.has_payload(),
            response: self.operation.is_response(),
            position: self.operation.position(),
        })
    }

    /// Every valid opcode.
    pub fn all_valid() -> impl Iterator<Item = Opcode> {
        Transport::ALL.into_iter().flat_map(|t| {
            Operation::ALL
                .into_iter()
                .map(move |op| Opcode::new(t, op))
                .filter(|o| o.is_valid())
        })
    }
}

impl TryFrom<u8> for Opcode {
    type Error = Error;

    fn try_from(raw: u8) -> Result<Self, Error> {
        Opcode::from_u8(raw)
    }
}

impl From<Opcode> for u8 {
    fn from(o: Opcode) -> u8 {
        o.to_u8()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn byte_round_trip_for_all_256() {
        let mut known = 0;
        for raw in 0..=255u8 {
            if let Ok(o) = Opcode::from_u8(raw) {
                assert_eq!(o.to_u8(), raw);
                known += 1;
            }
        }
        assert_eq!(known, 4 * Operation::ALL.len());
        for op in Operation::ALL {
            assert_eq!(Operation::from_opcode(op.code()), Ok(op));
        }
    }

    #[test]
    fn well_known_codes() {
        let rc = |op| Opcode::new(Transport::Rc, op).to_u8();
        assert_eq!(rc(Operation::SendOnly), 0x04);
        assert_eq!(rc(Operation::RdmaReadRequest), 0x0C);
        assert_eq!(rc(Operation::Acknowledge), 0x11);
        assert_eq!(rc(Operation::SendOnlyWithInvalidate), 0x17);
        assert_eq!(rc(Operation::Flush), 0x1C);
        assert_eq!(rc(Operation::AtomicWrite), 0x1D);
        assert_eq!(
            Opcode::new(Transport::Uc, Operation::SendOnly).to_u8(),
            0x24
        );
        assert_eq!(
            Opcode::new(Transport::Ud, Operation::SendOnlyWithImmediate).to_u8(),
            0x65
        );
        assert_eq!(Opcode::from_u8(0x81), Err(Error::UnknownOpcode)); // CNP
        assert_eq!(Opcode::from_u8(0x15), Err(Error::UnknownOpcode)); // RESYNC
        assert_eq!(Opcode::from_u8(0x1F), Err(Error::UnknownOpcode));
    }

    #[test]
    fn transport_validity() {
        let valid: Vec<u8> = Opcode::all_valid().map(Opcode::to_u8).collect();
        assert_eq!(valid.len(), 25 + 12 + 2);
        assert!(valid.contains(&0x64) && valid.contains(&0x65));
        assert!(!valid.contains(&0x60)); // UD SEND First
        assert!(!valid.contains(&0x2C)); // UC READ
        assert!(!valid.contains(&0x33)); // UC CmpSwap
        assert!(!valid.contains(&0x37)); // UC SEND Only with Invalidate
        assert!(!valid.iter().any(|&o| o & 0xE0 == 0x40)); // RD
        assert_eq!(
            Opcode::new(Transport::Ud, Operation::RdmaWriteOnly).info(),
            Err(Error::InvalidForTransport)
        );
    }

    #[test]
    fn header_tables() {
        use ExtHeader as H;
        let hdrs = |t, op| -> Vec<ExtHeader> { Opcode::new(t, op).ext_headers().iter().collect() };
        assert_eq!(hdrs(Transport::Rc, Operation::SendFirst), []);
        assert_eq!(
            hdrs(Transport::Rc, Operation::RdmaWriteOnlyWithImmediate),
            [H::Reth, H::ImmDt]
        );
        assert_eq!(
            hdrs(Transport::Rc, Operation::AtomicAcknowledge),
            [H::Aeth, H::AtomicAckEth]
        );
        assert_eq!(hdrs(Transport::Rc, Operation::Flush), [H::Feth, H::Reth]);
        assert_eq!(
            hdrs(Transport::Ud, Operation::SendOnlyWithImmediate),
            [H::Deth, H::ImmDt]
        );
        assert_eq!(hdrs(Transport::Rc, Operation::RdmaReadResponseMiddle), []);
        assert_eq!(
            hdrs(Transport::Rc, Operation::SendOnlyWithInvalidate),
            [H::Ieth]
        );
        assert_eq!(
            Opcode::new(Transport::Rc, Operation::CompareSwap).header_len(),
            40
        );
        assert_eq!(
            Opcode::new(Transport::Rc, Operation::Acknowledge).header_len(),
            16
        );
        assert_eq!(
            Opcode::new(Transport::Ud, Operation::SendOnly).header_len(),
            20
        );
        assert_eq!(
            Opcode::new(Transport::Rc, Operation::RdmaWriteOnlyWithImmediate).header_len(),
            32
        );
    }

    #[test]
    fn facts() {
        let i = Opcode::new(Transport::Rc, Operation::RdmaReadResponseFirst)
            .info()
            .unwrap();
        assert!(i.payload && i.response);
        assert_eq!(i.position, Position::First);
        assert!(i.position.starts_message() && !i.position.ends_message());
        let i = Opcode::new(Transport::Rc, Operation::RdmaReadRequest)
            .info()
            .unwrap();
        assert!(!i.payload && !i.response);
        assert_eq!(i.position, Position::Only);
        assert!(Operation::AtomicWrite.has_payload());
        assert!(!Operation::Flush.has_payload());
        assert_eq!(Operation::SendLastWithInvalidate.position(), Position::Last);
        assert_eq!(Operation::RdmaWriteMiddle.position(), Position::Middle);
    }
}
