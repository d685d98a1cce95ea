//! Segmentation of one send work request into RC request packets: the
//! path MTU, the work request operations, and [`MessagePlan`], which
//! says for every PSN of a message which opcode, payload range and RETH
//! span its request packet carries.

use super::error::Error;
use super::opcode::Operation;

/// Path MTU (the kernel's `enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// Every MTU, smallest first.
    pub const ALL: [Mtu; 5] = [
        Mtu::Mtu256,
        Mtu::Mtu512,
        Mtu::Mtu1024,
        Mtu::Mtu2048,
        Mtu::Mtu4096,
    ];

    /// Decodes an `enum ib_mtu` value (1..=5).
    pub const fn from_ib(code: u8) -> Option<Self> {
        match code {
            1 => Some(Mtu::Mtu256),
            2 => Some(Mtu::Mtu512),
            3 => Some(Mtu::Mtu1024),
            4 => Some(Mtu::Mtu2048),
            5 => Some(Mtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest MTU not above `bytes` (at least 256 bytes are needed).
    pub const fn at_most(bytes: u32) -> Option<Self> {
        if bytes >= 4096 {
            Some(Mtu::Mtu4096)
        } else if bytes >= 2048 {
            Some(Mtu::Mtu2048)
        } else if bytes >= 1024 {
            Some(Mtu::Mtu1024)
        } else if bytes >= 512 {
            Some(Mtu::Mtu512)
        } else if bytes >= 256 {
            Some(Mtu::Mtu256)
        } else {
            None
        }
    }

    /// The `enum ib_mtu` value.
    pub const fn to_ib(self) -> u8 {
        self as u8
    }

    /// log2 of the MTU in bytes (8..=12).
    pub const fn shift(self) -> u32 {
        match self {
            Mtu::Mtu256 => 8,
            Mtu::Mtu512 => 9,
            Mtu::Mtu1024 => 10,
            Mtu::Mtu2048 => 11,
            Mtu::Mtu4096 => 12,
        }
    }

    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        1 << self.shift()
    }

    /// Packets needed for `len` bytes: `ceil(len / mtu)`, at least 1 (a
    /// zero-length message is one packet).
    pub const fn packets_for(self, len: u32) -> u32 {
        let full = len >> self.shift();
        let partial = len & (self.bytes().wrapping_sub(1)) != 0;
        if full == 0 {
            1
        } else if partial {
            // full < 2^24, cannot overflow.
            full.wrapping_add(1)
        } else {
            full
        }
    }
}

/// The transport operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WqeOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm,
    /// SEND with invalidate.
    SendWithInv,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data.
    WriteWithImm,
    /// RDMA READ.
    Read,
    /// Atomic compare and swap (8 bytes).
    CompareSwap,
    /// Atomic fetch and add (8 bytes).
    FetchAdd,
    /// Atomic write: 8 bytes stored at once, answered like a READ (by a
    /// response of its own), limited by `max_rd_atomic` (IBA 1.5).
    AtomicWrite,
    /// A local operation the device performs itself when the send queue
    /// reaches it (memory registration, local invalidate): no packets, no
    /// PSNs; it completes in order with the others.
    Local,
}

impl WqeOp {
    /// Every transport operation (all but [`WqeOp::Local`]).
    pub const ALL: [WqeOp; 9] = [
        WqeOp::Send,
        WqeOp::SendWithImm,
        WqeOp::SendWithInv,
        WqeOp::Write,
        WqeOp::WriteWithImm,
        WqeOp::Read,
        WqeOp::CompareSwap,
        WqeOp::FetchAdd,
        WqeOp::AtomicWrite,
    ];

    /// Decodes an `enum ib_uverbs_wr_opcode` value; `None` for opcodes
    /// that are not transport operations of an RC send queue handled here.
    pub const fn from_uverbs(opcode: u32) -> Option<Self> {
        match opcode {
            0 => Some(WqeOp::Write),
            1 => Some(WqeOp::WriteWithImm),
            2 => Some(WqeOp::Send),
            3 => Some(WqeOp::SendWithImm),
            4 => Some(WqeOp::Read),
            5 => Some(WqeOp::CompareSwap),
            6 => Some(WqeOp::FetchAdd),
            9 => Some(WqeOp::SendWithInv),
            15 => Some(WqeOp::AtomicWrite),
            _ => None,
        }
    }

    /// The `enum ib_uverbs_wc_opcode` value of its completion.
    pub const fn wc_opcode(self) -> u8 {
        match self {
            WqeOp::Send | WqeOp::SendWithImm | WqeOp::SendWithInv => 0,
            WqeOp::Write | WqeOp::WriteWithImm => 1,
            WqeOp::Read => 2,
            WqeOp::CompareSwap => 3,
            WqeOp::FetchAdd => 4,
            WqeOp::AtomicWrite => 9,
            // The driver knows which local operation it was.
            WqeOp::Local => 6,
        }
    }

    /// Whether this is an atomic operation.
    pub const fn is_atomic(self) -> bool {
        matches!(self, WqeOp::CompareSwap | WqeOp::FetchAdd)
    }

    /// Whether this is an RDMA READ or an atomic (atomic write included):
    /// an operation answered by a response of its own, limited by
    /// `max_rd_atomic`.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            WqeOp::Read | WqeOp::CompareSwap | WqeOp::FetchAdd | WqeOp::AtomicWrite
        )
    }

    /// Whether its operand is exactly 8 bytes (atomics, atomic write).
    pub const fn has_8_byte_operand(self) -> bool {
        matches!(
            self,
            WqeOp::CompareSwap | WqeOp::FetchAdd | WqeOp::AtomicWrite
        )
    }

    /// Whether an unacknowledged (UC) connection carries it: SEND and RDMA
    /// WRITE with or without immediate, and local operations.
    pub const fn is_unacknowledged_ok(self) -> bool {
        matches!(
            self,
            WqeOp::Send | WqeOp::SendWithImm | WqeOp::Write | WqeOp::WriteWithImm | WqeOp::Local
        )
    }

    /// Whether this is a SEND (consumes a receive WQE at the responder).
    pub const fn is_send(self) -> bool {
        matches!(self, WqeOp::Send | WqeOp::SendWithImm | WqeOp::SendWithInv)
    }

    /// Whether the device performs this itself, without packets.
    pub const fn is_local(self) -> bool {
        matches!(self, WqeOp::Local)
    }

    /// Whether this is an RDMA WRITE.
    pub const fn is_write(self) -> bool {
        matches!(self, WqeOp::Write | WqeOp::WriteWithImm)
    }

    /// The opcode operation for a request packet at `position` of a
    /// message of this operation (READ and atomics only have one).
    const fn operation(self, first: bool, last: bool) -> Operation {
        use Operation as O;
        match (self, first, last) {
            (WqeOp::Read, _, _) => O::RdmaReadRequest,
            (WqeOp::CompareSwap, _, _) => O::CompareSwap,
            (WqeOp::FetchAdd, _, _) => O::FetchAdd,
            (WqeOp::AtomicWrite, _, _) => O::AtomicWrite,
            (WqeOp::Send, true, true) => O::SendOnly,
            (WqeOp::SendWithImm, true, true) => O::SendOnlyWithImmediate,
            (WqeOp::SendWithInv, true, true) => O::SendOnlyWithInvalidate,
            (WqeOp::Write, true, true) => O::RdmaWriteOnly,
            (WqeOp::WriteWithImm, true, true) => O::RdmaWriteOnlyWithImmediate,
            (WqeOp::Send | WqeOp::SendWithImm | WqeOp::SendWithInv, true, false) => O::SendFirst,
            (WqeOp::Write | WqeOp::WriteWithImm, true, false) => O::RdmaWriteFirst,
            (WqeOp::Send | WqeOp::SendWithImm | WqeOp::SendWithInv, false, false) => O::SendMiddle,
            (WqeOp::Write | WqeOp::WriteWithImm, false, false) => O::RdmaWriteMiddle,
            (WqeOp::Send, false, true) => O::SendLast,
            (WqeOp::SendWithImm, false, true) => O::SendLastWithImmediate,
            (WqeOp::SendWithInv, false, true) => O::SendLastWithInvalidate,
            (WqeOp::Write, false, true) => O::RdmaWriteLast,
            (WqeOp::WriteWithImm, false, true) => O::RdmaWriteLastWithImmediate,
            // Never asked: a local operation has no packets.
            (WqeOp::Local, _, _) => O::Acknowledge,
        }
    }
}

/// The RETH a request packet carries, relative to the work request: the
/// driver writes `va = wqe.remote_addr + offset`, the work request's R_Key
/// and `dma_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RethSpan {
    /// Byte offset from the work request's remote address.
    pub offset: u32,
    /// DMA length to put in the RETH.
    pub dma_len: u32,
}

/// One request packet of a message, from [`MessagePlan::segment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// RC opcode operation.
    pub operation: Operation,
    /// PSN offset from the message's first PSN.
    pub index: u32,
    /// Byte offset of the payload within the local message buffer (for a
    /// READ request: of the first byte requested).
    pub offset: u32,
    /// Payload bytes carried (0 for READ requests and atomics).
    pub payload_len: u32,
    /// RETH to carry, if the opcode has one.
    pub reth: Option<RethSpan>,
    /// Whether to set the BTH AckReq bit.
    pub ack_req: bool,
}

/// How a message of one operation and length is cut into request packets
/// and how many PSNs it consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessagePlan {
    op: WqeOp,
    len: u32,
    mtu: Mtu,
    psns: u32,
}

impl MessagePlan {
    /// The largest message length, 2^31 bytes (IBTA).
    pub const MAX_LEN: u32 = 1 << 31;
    /// The most PSNs one message may consume, 2^22: a quarter of the
    /// circular PSN space, so that windows of outstanding PSNs stay well
    /// inside the unambiguous half (rejects only messages above 1 GiB at a
    /// 256-byte MTU).
    pub const MAX_PSNS: u32 = 1 << 22;
    /// Length of an atomic operation's operand.
    pub const ATOMIC_LEN: u32 = 8;

    /// Plans a message. Fails with [`Error::BadMessageLength`] if `len` is
    /// above [`MessagePlan::MAX_LEN`], needs more than
    /// [`MessagePlan::MAX_PSNS`] PSNs, or is not 8 for an atomic or an
    /// atomic write.
    pub const fn new(op: WqeOp, len: u32, mtu: Mtu) -> Result<Self, Error> {
        if len > Self::MAX_LEN
            || (op.has_8_byte_operand() && len != Self::ATOMIC_LEN)
            || (matches!(op, WqeOp::Local) && len != 0)
        {
            return Err(Error::BadMessageLength);
        }
        let psns = if op.has_8_byte_operand() {
            1
        } else if matches!(op, WqeOp::Local) {
            0
        } else {
            mtu.packets_for(len)
        };
        if psns > Self::MAX_PSNS {
            return Err(Error::BadMessageLength);
        }
        Ok(MessagePlan { op, len, mtu, psns })
    }

    /// The operation.
    pub const fn op(&self) -> WqeOp {
        self.op
    }

    /// The message length in bytes.
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether the message has no payload bytes.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The path MTU.
    pub const fn mtu(&self) -> Mtu {
        self.mtu
    }

    /// PSNs the message consumes: one per request packet for SEND and
    /// WRITE, one per response packet for READ (`ceil(len / mtu)`, at
    /// least 1), one for an atomic, none for a local operation.
    pub const fn psn_count(&self) -> u32 {
        self.psns
    }

    /// Request packets sent for the message when nothing is lost: the PSN
    /// count for SEND and WRITE, 1 for READ and atomics, 0 for a local
    /// operation.
    pub const fn packet_count(&self) -> u32 {
        if matches!(self.op, WqeOp::Local) {
            0
        } else if self.op.is_read_or_atomic() {
            1
        } else {
            self.psns
        }
    }

    /// The PSN offset of the request packet sent after the one at `index`
    /// (`psn_count()` once the message is fully sent).
    pub const fn next_index(&self, index: u32) -> u32 {
        if self.op.is_read_or_atomic() || index >= self.psns {
            self.psns
        } else {
            // index < psns <= 2^22: cannot overflow.
            index.wrapping_add(1)
        }
    }

    /// Byte offset of the data at PSN offset `index` (`index * mtu`,
    /// saturating at the message length).
    pub const fn offset_of(&self, index: u32) -> u32 {
        match index.checked_mul(self.mtu.bytes()) {
            Some(off) if off < self.len => off,
            _ => self.len,
        }
    }

    /// The request packet to send at PSN offset `index` from the first PSN,
    /// or `None` when `index >= psn_count()`.
    ///
    /// For SEND and WRITE this is packet `index` of the message. For READ
    /// any index is valid: index 0 is the original request, and a larger
    /// index is the request to send when retrying a READ whose first
    /// `index` response packets already arrived (RETH offset and length
    /// adjusted). AckReq is set on the last packet of a message, on every
    /// READ and atomic request, and on every `ack_interval`-th packet of a
    /// message (`0` disables the periodic requests).
    pub const fn segment(&self, index: u32, ack_interval: u32) -> Option<Segment> {
        if index >= self.psns {
            return None;
        }
        let offset = self.offset_of(index);
        let remaining = self.len.wrapping_sub(offset);
        let last_index = self.psns.wrapping_sub(1);
        if self.op.is_read_or_atomic() {
            // READ: a RETH for what is left; atomic write: a RETH for its
            // 8 bytes, which it carries; atomics: neither.
            let (reth, payload_len) = match self.op {
                WqeOp::Read => (
                    Some(RethSpan {
                        offset,
                        dma_len: remaining,
                    }),
                    0,
                ),
                WqeOp::AtomicWrite => (
                    Some(RethSpan {
                        offset: 0,
                        dma_len: Self::ATOMIC_LEN,
                    }),
                    Self::ATOMIC_LEN,
                ),
                _ => (None, 0),
            };
            return Some(Segment {
                operation: self.op.operation(true, true),
                index,
                offset,
                payload_len,
                reth,
                ack_req: true,
            });
        }
        let first = index == 0;
        let last = index == last_index;
        let mtu = self.mtu.bytes();
        let payload_len = if remaining < mtu { remaining } else { mtu };
        let reth = if first && self.op.is_write() {
            Some(RethSpan {
                offset: 0,
                dma_len: self.len,
            })
        } else {
            None
        };
        let periodic = match index.wrapping_add(1).checked_rem(ack_interval) {
            Some(r) => r == 0,
            None => false,
        };
        Some(Segment {
            operation: self.op.operation(first, last),
            index,
            offset,
            payload_len,
            reth,
            ack_req: last || periodic,
        })
    }

    /// The request packets of the message in order, as sent when nothing
    /// is lost.
    pub fn segments(&self, ack_interval: u32) -> impl Iterator<Item = Segment> {
        let plan = *self;
        let mut next = Some(0u32);
        core::iter::from_fn(move || {
            let index = next?;
            let seg = plan.segment(index, ack_interval)?;
            let n = plan.next_index(index);
            next = if n < plan.psns { Some(n) } else { None };
            Some(seg)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;
    use Operation as O;

    fn ops(op: WqeOp, len: u32, mtu: Mtu) -> Vec<(Operation, u32, u32, bool)> {
        MessagePlan::new(op, len, mtu)
            .unwrap()
            .segments(0)
            .map(|s| (s.operation, s.offset, s.payload_len, s.ack_req))
            .collect()
    }

    #[test]
    fn mtu() {
        for m in Mtu::ALL {
            assert_eq!(Mtu::from_ib(m.to_ib()), Some(m));
            assert_eq!(Mtu::at_most(m.bytes()), Some(m));
            assert_eq!(Mtu::at_most(m.bytes() + 1), Some(m));
        }
        assert_eq!(Mtu::from_ib(0), None);
        assert_eq!(Mtu::from_ib(6), None);
        assert_eq!(Mtu::at_most(255), None);
        assert_eq!(Mtu::at_most(9000), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::Mtu1024.bytes(), 1024);
        let m = Mtu::Mtu256;
        assert_eq!(m.packets_for(0), 1);
        assert_eq!(m.packets_for(1), 1);
        assert_eq!(m.packets_for(256), 1);
        assert_eq!(m.packets_for(257), 2);
        assert_eq!(m.packets_for(u32::MAX), 1 << 24);
    }

    #[test]
    fn send_segmentation() {
        let m = Mtu::Mtu256;
        assert_eq!(ops(WqeOp::Send, 0, m), [(O::SendOnly, 0, 0, true)]);
        assert_eq!(
            ops(WqeOp::SendWithImm, 256, m),
            [(O::SendOnlyWithImmediate, 0, 256, true)]
        );
        assert_eq!(
            ops(WqeOp::SendWithInv, 600, m),
            [
                (O::SendFirst, 0, 256, false),
                (O::SendMiddle, 256, 256, false),
                (O::SendLastWithInvalidate, 512, 88, true)
            ]
        );
        assert_eq!(
            ops(WqeOp::Send, 512, m),
            [(O::SendFirst, 0, 256, false), (O::SendLast, 256, 256, true)]
        );
    }

    #[test]
    fn write_segmentation() {
        let p = MessagePlan::new(WqeOp::WriteWithImm, 5000, Mtu::Mtu2048).unwrap();
        let s: Vec<Segment> = p.segments(0).collect();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].operation, O::RdmaWriteFirst);
        assert_eq!(
            s[0].reth,
            Some(RethSpan {
                offset: 0,
                dma_len: 5000
            })
        );
        assert_eq!(s[1].operation, O::RdmaWriteMiddle);
        assert_eq!(s[1].reth, None);
        assert_eq!(s[2].operation, O::RdmaWriteLastWithImmediate);
        assert_eq!((s[2].offset, s[2].payload_len), (4096, 904));
        assert_eq!(
            ops(WqeOp::Write, 0, Mtu::Mtu4096),
            [(O::RdmaWriteOnly, 0, 0, true)]
        );
    }

    #[test]
    fn read_and_atomic() {
        let p = MessagePlan::new(WqeOp::Read, 1000, Mtu::Mtu256).unwrap();
        assert_eq!((p.psn_count(), p.packet_count()), (4, 1));
        let s: Vec<Segment> = p.segments(0).collect();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].operation, O::RdmaReadRequest);
        assert!(s[0].ack_req);
        assert_eq!(
            s[0].reth,
            Some(RethSpan {
                offset: 0,
                dma_len: 1000
            })
        );
        // Retry after two response packets.
        let r = p.segment(2, 0).unwrap();
        assert_eq!(
            r.reth,
            Some(RethSpan {
                offset: 512,
                dma_len: 488
            })
        );
        assert_eq!(p.segment(4, 0), None);
        assert_eq!(p.next_index(0), 4);
        let p = MessagePlan::new(WqeOp::Read, 0, Mtu::Mtu256).unwrap();
        assert_eq!(p.psn_count(), 1);
        let a = MessagePlan::new(WqeOp::FetchAdd, 8, Mtu::Mtu256).unwrap();
        assert_eq!(a.psn_count(), 1);
        let s = a.segment(0, 0).unwrap();
        assert_eq!((s.operation, s.reth, s.payload_len), (O::FetchAdd, None, 0));
        assert_eq!(
            MessagePlan::new(WqeOp::CompareSwap, 4, Mtu::Mtu256),
            Err(Error::BadMessageLength)
        );
    }

    #[test]
    fn limits_and_ack_interval() {
        assert!(MessagePlan::new(WqeOp::Send, 1 << 31, Mtu::Mtu512).is_ok());
        assert_eq!(
            MessagePlan::new(WqeOp::Send, 1 << 31, Mtu::Mtu256),
            Err(Error::BadMessageLength)
        );
        assert_eq!(
            MessagePlan::new(WqeOp::Read, (1 << 31) + 1, Mtu::Mtu4096),
            Err(Error::BadMessageLength)
        );
        let p = MessagePlan::new(WqeOp::Write, 10 * 256, Mtu::Mtu256).unwrap();
        let acks: Vec<u32> = p
            .segments(4)
            .filter(|s| s.ack_req)
            .map(|s| s.index)
            .collect();
        assert_eq!(acks, [3, 7, 9]);
        assert_eq!(WqeOp::from_uverbs(9), Some(WqeOp::SendWithInv));
        assert_eq!(WqeOp::from_uverbs(7), None);
        assert_eq!(WqeOp::from_uverbs(15), Some(WqeOp::AtomicWrite));
        for op in WqeOp::ALL {
            // IBV_WC_SEND..IBV_WC_FETCH_ADD, IBV_WC_ATOMIC_WRITE.
            assert!(op.wc_opcode() <= 4 || op.wc_opcode() == 9);
        }
        // An atomic write carries its 8 bytes under a RETH for them.
        let p = MessagePlan::new(WqeOp::AtomicWrite, 8, Mtu::Mtu256).unwrap();
        let s = p.segment(0, 0).unwrap();
        assert_eq!((p.psn_count(), s.payload_len, s.ack_req), (1, 8, true));
        assert_eq!(
            s.reth,
            Some(RethSpan {
                offset: 0,
                dma_len: 8
            })
        );
        assert_eq!(
            MessagePlan::new(WqeOp::AtomicWrite, 16, Mtu::Mtu256),
            Err(Error::BadMessageLength)
        );
    }
}
