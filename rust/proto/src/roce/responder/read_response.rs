//! RDMA READ responses, built one packet at a time from the responder
//! resources.
//!
//! A READ's responses are not sent in one go: the resource keeps the
//! offset of the next one ([`ReadAtomicResource::next_response`]) and the
//! driver takes packets with [`ResponderWith::next_read_response`] as its
//! budget allows, so a multi-gigabyte READ (or a peer replaying one) never
//! holds the QP's work item for long. A duplicate READ for a resource whose
//! responses are already queued does not queue a second copy: it only
//! moves the queued position back to the PSN asked for, if that is
//! earlier. So at most one response stream per resource is queued
//! (`max_dest_rd_atomic` in all), and a burst of duplicates costs about one
//! replay rather than one per duplicate.

use super::{ack_aeth, ReadAtomicResource, ResourceKind, ResourceStore, ResponderWith};
use crate::roce::aeth::Aeth;
use crate::roce::opcode::{Operation, Position};
use crate::roce::psn::Psn;
use crate::roce::segment::{MessagePlan, WqeOp};

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
    /// R_Key to read it under.
    pub rkey: u32,
    /// Payload bytes.
    pub len: u32,
    /// AETH (First, Last, Only).
    pub aeth: Option<Aeth>,
    /// Response packets of the same READ after this one (a sender may
    /// gather them with it).
    pub following: u32,
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
            rkey: self.rkey,
            len: if left < mtu { left } else { mtu },
            aeth,
            following: n.wrapping_sub(1).wrapping_sub(i),
        })
    }

    /// The response packets in order.
    pub fn packets(&self) -> impl Iterator<Item = ReadResponsePacket> {
        let r = *self;
        (0..r.packet_count()).filter_map(move |k| r.packet(k))
    }
}

impl<S: ResourceStore> ResponderWith<S> {
    /// Whether READ responses are queued (then only duplicate READs are
    /// taken; other requests get [`super::Decision::Defer`]).
    pub fn read_responses_queued(&self) -> bool {
        !self.error && self.reads_queued > 0
    }

    /// Whether every queued READ response packet (of all queued READs
    /// and replays) fits in `budget` packets: a driver that may not leave
    /// part of them to a sender elsewhere asks before it starts.
    pub fn read_responses_fit(&self, budget: u32) -> bool {
        if !self.read_responses_queued() {
            return true;
        }
        let mut left = budget;
        for res in self.resources.as_ref().iter().flatten() {
            let Some(next) = res.next_response else {
                continue;
            };
            match left.checked_sub(res.psn_count.saturating_sub(next)) {
                Some(l) => left = l,
                None => return false,
            }
        }
        true
    }

    /// The next queued READ response packet, or `None` when none is
    /// queued. The oldest READ goes first, so responses leave in PSN
    /// order. Data is read when the driver builds the packet.
    pub fn next_read_response(&mut self) -> Option<ReadResponsePacket> {
        if self.paused {
            return None;
        }
        while self.read_responses_queued() {
            let Some(k) = self.oldest_queued() else {
                self.reads_queued = 0;
                return None;
            };
            let (mtu, msn) = (self.cfg.mtu, self.msn);
            let slot = self.resources.as_mut().get_mut(k)?.as_mut()?;
            let next = slot.next_response.unwrap_or(u32::MAX);
            let packet = match slot.kind {
                ResourceKind::Read { va, rkey, len } => MessagePlan::new(WqeOp::Read, len, mtu)
                    .ok()
                    .and_then(|plan| {
                        ReadReply {
                            first_psn: slot.first_psn,
                            va,
                            rkey,
                            plan,
                            start: next,
                            msn,
                        }
                        .packet(0)
                    }),
                // An atomic write's response: READ Response Only, empty.
                ResourceKind::AtomicWrite => Some(ReadResponsePacket {
                    psn: slot.first_psn,
                    operation: Operation::RdmaReadResponseOnly,
                    va: 0,
                    rkey: 0,
                    len: 0,
                    aeth: Some(ack_aeth(msn)),
                    following: 0,
                }),
                ResourceKind::Atomic { .. } => None,
            };
            let after = next.saturating_add(1);
            if packet.is_some() && after < slot.psn_count {
                slot.next_response = Some(after);
            } else {
                slot.next_response = None;
                self.reads_queued = self.reads_queued.saturating_sub(1);
            }
            if packet.is_some() {
                return packet;
            }
        }
        None
    }

    /// The driver could not build `p`, the packet
    /// [`ResponderWith::next_read_response`] just returned, because its
    /// data is not present (an on-demand paged region): it is queued
    /// again, first, and the responder pauses until
    /// [`ResponderWith::resume`] (see [`super::Reply::Paused`]). A packet of
    /// no queued READ (its resource replaced meanwhile) is forgotten.
    pub fn hold_read_response(&mut self, p: &ReadResponsePacket) {
        let found = self.resources.as_ref().iter().position(|r| {
            r.is_some_and(|r| {
                matches!(
                    r.kind,
                    ResourceKind::Read { .. } | ResourceKind::AtomicWrite
                ) && r.first_psn.distance_to(p.psn) < r.psn_count
            })
        });
        let Some(k) = found else { return };
        let i = self
            .resources
            .as_ref()
            .get(k)
            .and_then(|r| r.as_ref())
            .map_or(0, |r| r.first_psn.distance_to(p.psn));
        self.queue_replay(k, i);
        self.paused = true;
    }

    /// Queues the responses of the READ in `slot` from PSN offset `i` (a
    /// duplicate asked for them). If they are queued already, they restart
    /// at `i` when that is earlier; no second stream is queued.
    pub(super) fn queue_replay(&mut self, slot: usize, i: u32) {
        let Some(Some(res)) = self.resources.as_mut().get_mut(slot) else {
            return;
        };
        match res.next_response {
            Some(next) => res.next_response = Some(next.min(i)),
            None => {
                res.next_response = Some(i);
                self.reads_queued = self.reads_queued.saturating_add(1);
            }
        }
    }

    /// The slot of the oldest resource with queued responses.
    fn oldest_queued(&self) -> Option<usize> {
        let epsn = self.epsn;
        let mut best: Option<(usize, u32)> = None;
        for (k, res) in self.resources.as_ref().iter().enumerate() {
            let Some(ReadAtomicResource {
                first_psn,
                next_response: Some(_),
                ..
            }) = res
            else {
                continue;
            };
            let age = first_psn.distance_to(epsn);
            let older = match best {
                Some((_, a)) => age > a,
                None => true,
            };
            if older {
                best = Some((k, age));
            }
        }
        best.map(|(k, _)| k)
    }
}
