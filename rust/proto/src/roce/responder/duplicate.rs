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
                // SEND or WRITE: acknowledge everything received, without
                // executing again, unless a READ or atomic came after the
                // duplicate: then no reply at all. The requester went back
                // to (at least) the duplicate, so it resends that READ or
                // atomic too, and its replayed response acknowledges the
                // duplicate implicitly. Every plain ACK would harm some
                // requester (rxe): one covering an atomic's PSN completes
                // the atomic without its result; one at a READ's PSNs
                // completes the READ short; and one from before the READ
                // (an older PSN) that reaches rxe while it takes that READ's
                // responses resets its response sequence, so its next
                // READ Response Middle fails the QP (rxe_comp.c
                // `check_ack`, a WARN and flushed work).
                let ack = self.duplicate_ack_psn(req.psn);
                if ack != self.epsn.wrapping_sub(1) {
                    return Reply::None;
                }
                Reply::Ack {
                    psn: ack,
                    aeth: ack_aeth(self.msn),
                }
            }
            _ => Reply::None,
        }
    }

    /// The PSN to acknowledge a duplicate SEND or WRITE with PSN `dup`:
    /// the last PSN received, or the one before the first READ/atomic
    /// resource that starts after `dup`, if that is earlier.
    fn duplicate_ack_psn(&self, dup: Psn) -> Psn {
        let last = self.epsn.wrapping_sub(1);
        let mut ack = last;
        let mut ack_dist = dup.distance_to(last);
        let limit = self.res_limit();
        for res in self.resources.as_ref().iter().take(limit).flatten() {
            let d = dup.distance_to(res.first_psn);
            // Starts after the duplicate and no later than the last PSN
            // received (within the duplicate half-window).
            let after_dup = d > 0 && d <= dup.distance_to(last) && d <= Psn::HALF;
            if after_dup && d.wrapping_sub(1) < ack_dist {
                ack_dist = d.wrapping_sub(1);
                ack = res.first_psn.wrapping_sub(1);
            }
        }
        ack
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
