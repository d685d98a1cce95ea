//! RDMA READ responses: the packets of one READ response (or the replayed
//! part of one), built one at a time.

use super::ack_aeth;
use crate::roce::aeth::Aeth;
use crate::roce::opcode::{Operation, Position};
use crate::roce::psn::Psn;
use crate::roce::segment::MessagePlan;

/// The RDMA READ responses to send for one READ request (or the replayed
/// part of one).
///
/// Responses must leave in PSN order: the driver sends all of them before
/// any reply to a later request (an ACK overtaking them would make the
/// requester retransmit). Data is read when each packet is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadReply {
    pub(super) first_psn: Psn,
    pub(super) va: u64,
    pub(super) rkey: u32,
    pub(super) plan: MessagePlan,
    pub(super) start: u32,
    pub(super) msn: u32,
}

/// One RDMA READ response packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadResponsePacket {
    /// BTH PSN.
    pub psn: Psn,
    /// RDMA READ Response First, Middle, Last or Only.
    pub operation: Operation,
    /// Address to read the payload from.
    pub va: u64,
    /// Payload bytes.
    pub len: u32,
    /// AETH (First, Last, Only).
    pub aeth: Option<Aeth>,
}

impl ReadReply {
    /// R_Key the data is read under.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Number of response packets.
    pub const fn packet_count(&self) -> u32 {
        self.plan.psn_count().saturating_sub(self.start)
    }

    /// The `k`-th response packet, or `None` past the end.
    ///
    /// Opcodes follow each packet's position in the original READ, also
    /// when replaying from its middle (as rxe does): a replay from PSN
    /// offset `i > 0` starts with Middle or Last.
    pub fn packet(&self, k: u32) -> Option<ReadResponsePacket> {
        let i = match self.start.checked_add(k) {
            Some(i) if i < self.plan.psn_count() => i,
            _ => return None,
        };
        let n = self.plan.psn_count();
        let position = if n == 1 {
            Position::Only
        } else if i == 0 {
            Position::First
        } else if i == n.wrapping_sub(1) {
            Position::Last
        } else {
            Position::Middle
        };
        let operation = match position {
            Position::Only => Operation::RdmaReadResponseOnly,
            Position::First => Operation::RdmaReadResponseFirst,
            Position::Middle => Operation::RdmaReadResponseMiddle,
            Position::Last => Operation::RdmaReadResponseLast,
        };
        let offset = self.plan.offset_of(i);
        let left = self.plan.len().wrapping_sub(offset);
        let mtu = self.plan.mtu().bytes();
        let aeth = match position {
            Position::Middle => None,
            _ => Some(ack_aeth(self.msn)),
        };
        Some(ReadResponsePacket {
            psn: self.first_psn.wrapping_add(i),
            operation,
            // The driver checked va..va+len under the R_Key, so this
            // cannot wrap for a valid request.
            va: self.va.wrapping_add(u64::from(offset)),
            len: if left < mtu { left } else { mtu },
            aeth,
        })
    }

    /// The response packets in order.
    pub fn packets(&self) -> impl Iterator<Item = ReadResponsePacket> {
        let r = *self;
        (0..r.packet_count()).filter_map(move |k| r.packet(k))
    }
}
