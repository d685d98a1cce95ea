//! Duplicate requests (PSN before the expected one): READ and atomic
//! replay from the responder resources, re-ACKs of SEND and WRITE.

use super::{
    ack_aeth, ReadAtomicResource, Reply, Request, ResourceKind, ResourceStore, ResponderWith,
};
use crate::roce::opcode::Operation;
use crate::roce::psn::Psn;
use crate::roce::reth::Reth;
use crate::roce::segment::{MessagePlan, WqeOp};

impl<S: ResourceStore> ResponderWith<S> {
    /// The reply to a duplicate request (PSN before the expected one).
    pub(super) fn duplicate(&mut self, req: &Request) -> Reply {
        use Operation as O;
        match req.operation {
            O::RdmaReadRequest => {
                let Some(Reth {
                    va,
                    rkey,
                    dma_len: len,
                }) = req.reth
                else {
                    return Reply::None;
                };
                let Some((slot, res, i)) = self.find(req.psn) else {
                    return Reply::None;
                };
                let ResourceKind::Read {
                    va: va0,
                    rkey: rkey0,
                    len: len0,
                } = res.kind
                else {
                    return Reply::None;
                };
                let Ok(plan) = MessagePlan::new(WqeOp::Read, len0, self.cfg.mtu) else {
                    return Reply::None;
                };
                let off = plan.offset_of(i);
                let consistent = rkey == rkey0
                    && Some(va) == va0.checked_add(u64::from(off))
                    && len == len0.wrapping_sub(off);
                if !consistent {
                    return Reply::None;
                }
                self.queue_replay(slot, i);
                Reply::Read
            }
            O::AtomicWrite => match self.find(req.psn) {
                Some((
                    slot,
                    ReadAtomicResource {
                        kind: ResourceKind::AtomicWrite,
                        ..
                    },
                    0,
                )) => {
                    self.queue_replay(slot, 0);
                    Reply::Read
                }
                _ => Reply::None,
            },
            O::CompareSwap | O::FetchAdd => match self.find(req.psn) {
                Some((
                    _,
                    ReadAtomicResource {
                        kind: ResourceKind::Atomic { orig },
                        ..
                    },
                    0,
                )) => Reply::AtomicAck {
                    psn: req.psn,
                    aeth: ack_aeth(self.msn),
                    orig,
                },
                _ => Reply::None,
            },
            O::SendFirst
            | O::SendMiddle
            | O::SendLast
            | O::SendLastWithImmediate
            | O::SendLastWithInvalidate
            | O::SendOnly
            | O::SendOnlyWithImmediate
            | O::SendOnlyWithInvalidate
            | O::RdmaWriteFirst
            | O::RdmaWriteMiddle
            | O::RdmaWriteLast
            | O::RdmaWriteLastWithImmediate
            | O::RdmaWriteOnly
            | O::RdmaWriteOnlyWithImmediate => {
                // SEND or WRITE: not executed again, acknowledged with its
                // own PSN, unless a READ or atomic came after it: then no
                // reply at all. The requester went back to (at least) the
                // duplicate, so it resends that READ or atomic too, and its
                // replayed response acknowledges the duplicate implicitly.
                // Every plain ACK there would harm some requester (rxe): one
                // covering an atomic's PSN completes the atomic without its
                // result; one at a READ's PSNs completes the READ short; and
                // one from before the READ (an older PSN) that reaches rxe
                // while it takes that READ's responses resets its response
                // sequence, so its next READ Response Middle fails the QP
                // (rxe_comp.c `check_ack`, a WARN and flushed work).
                //
                // Why its own PSN and not the last one received (as rxe
                // answers): a duplicate means the requester went back, and an
                // ACK beyond what it has sent again completes the message it
                // is resending under its feet. rxe's requester then never
                // sends again when its send queue is small (ibv_rc_pingpong's
                // two slots: its WQE index, one lap ahead, equals the producer
                // index, and with the completer past its PSN it never
                // retries). An ACK for the duplicate's own PSN acknowledges
                // only what the requester has resent, so every message
                // completes after its last packet went out again.
                if self.read_or_atomic_after(req.psn) {
                    return Reply::None;
                }
                Reply::Ack {
                    psn: req.psn,
                    aeth: ack_aeth(self.msn),
                }
            }
            _ => Reply::None,
        }
    }

    /// Whether a READ or atomic resource starts after the duplicate PSN
    /// `dup`, among the PSNs received (the duplicate half-window).
    fn read_or_atomic_after(&self, dup: Psn) -> bool {
        let received = dup.distance_to(self.epsn.wrapping_sub(1));
        self.resources
            .as_ref()
            .iter()
            .take(self.res_limit())
            .flatten()
            .any(|res| {
                let d = dup.distance_to(res.first_psn);
                d > 0 && d <= received && d <= Psn::HALF
            })
    }

    /// The newest resource whose PSN range holds `psn`: its slot, the
    /// resource and the PSN's offset in it.
    fn find(&self, psn: Psn) -> Option<(usize, ReadAtomicResource, u32)> {
        let limit = self.res_limit();
        let mut best: Option<(usize, ReadAtomicResource, u32)> = None;
        let mut best_age = u32::MAX;
        let slots = self.resources.as_ref().iter().take(limit).enumerate();
        for (slot, res) in slots.filter_map(|(k, r)| Some((k, r.as_ref()?))) {
            let i = res.first_psn.distance_to(psn);
            // Age: how far behind the expected PSN the resource starts;
            // only resources in the duplicate half-window count.
            let age = res.first_psn.distance_to(self.epsn);
            if i < res.psn_count && age <= Psn::HALF && age < best_age {
                best = Some((slot, *res, i));
                best_age = age;
            }
        }
        best
    }
}
