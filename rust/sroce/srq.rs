// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs shared with the owning
//! process, consumed by whichever of its queue pairs receives a message.

use super::{cq, device::SroceDevice, limits};
use crate::rdma::bh_lock::{new_spinlock_bh, SpinLockBh};
use crate::rdma::{
    device::Device,
    kwr::{RecvWrs, WqeLimits},
    qp::Qp,
    queue::{KernelRingProducer, MmapInfo, UserProducerQueue},
    rxe_abi::{CreateSrqResp, RECV_WQE_HEADER, SGE_SIZE},
    srq::{Srq, SrqAttrs, SrqRequest},
    ucontext::UContext,
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, MAX_SGE},
};
use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq};

/// The mutable part of a shared receive queue: several QPs take WQEs from
/// the ring, so taking is done under this lock (QP locks come first; the
/// receive softirq takes both, so it disables bottom halves).
struct SrqInner {
    attrs: SrqAttrs,
    ring: UserProducerQueue,
}

/// sroce's state of one shared receive queue.
#[pin_data]
pub(crate) struct SroceSrq {
    #[pin]
    inner: SpinLockBh<SrqInner>,
    /// A kernel consumer's posting into the ring (`None` for a process's
    /// SRQ); a spinlock, since posting may happen in atomic context.
    #[pin]
    post: SpinLockIrq<Option<KernelRingProducer>>,
    limits: WqeLimits,
}

/// What taking a WQE from a shared receive queue found.
pub(crate) enum Taken {
    /// Nothing is posted.
    Empty,
    /// The oldest posted WQE, now owned by the taking QP (in the place it
    /// gave).
    Wqe,
    /// The oldest posted WQE did not parse; it is retired and only its
    /// identifier is known.
    Malformed(u64),
}

/// Usable slots of `srq`'s ring: a bound for loops over its WQEs that
/// does not depend on the producer index the process writes.
pub(crate) fn capacity(srq: &Srq<SroceDevice>) -> u32 {
    srq.data().inner.lock().ring.capacity()
}

/// Takes the oldest posted WQE of `srq` into `dst`: copied out and its
/// slot handed back to the process at once, as a NIC does, so no other QP
/// can take it.
/// Raises the limit event (once, then disarmed) when fewer WQEs than the
/// armed limit are left.
pub(crate) fn take(srq: &Srq<SroceDevice>, dst: &mut Option<RecvWqe>) -> Taken {
    let mut inner = srq.data().inner.lock();
    let mut buf = [0u8; RECV_WQE_HEADER + SGE_SIZE * MAX_SGE];
    let Ok(n) = inner.ring.copy_oldest(&mut buf) else {
        return Taken::Empty;
    };
    let max_sge = (inner.attrs.max_sge as usize).min(MAX_SGE);
    let taken = match RecvWqe::parse_into(&buf[..n], max_sge, dst) {
        Ok(()) => Taken::Wqe,
        Err(_) => Taken::Malformed(RecvWqe::id(&buf[..n]).unwrap_or(0)),
    };
    inner.ring.retire();
    let limit = inner.attrs.limit;
    let reached = limit > 0 && inner.ring.pending() < limit;
    if reached {
        inner.attrs.limit = 0;
    }
    drop(inner);
    if reached {
        srq.report_limit_reached();
    }
    taken
}

/// Takes the oldest usable WQE of `srq` for a message arriving at `qp`.
/// WQEs that do not parse complete with `IBV_WC_LOC_QP_OP_ERR` on `qp`'s
/// receive CQ and the next is tried, at most a ring's worth: a process
/// that keeps advancing the producer index over garbage gets "no receive"
/// (an RNR NAK, or a dropped UD datagram), not a worker.
pub(crate) fn take_usable(
    qp: &Qp<SroceDevice>,
    srq: &Srq<SroceDevice>,
    dst: &mut Option<RecvWqe>,
) -> bool {
    *dst = None;
    for _ in 0..=capacity(srq) {
        match take(srq, dst) {
            Taken::Empty => return false,
            Taken::Wqe => return true,
            Taken::Malformed(wr_id) => {
                let c = Completion {
                    status: WcStatus::LocQpOpErr,
                    ..Completion::flushed(wr_id, WcOpcode::Recv, qp.data().qpn())
                };
                let _ = cq::post(qp.recv_cq(), qp, &c, false);
            }
        }
    }
    false
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    req: SrqRequest<'_, SroceDevice>,
) -> Result<(impl PinInit<SroceSrq, Error>, SrqAttrs)> {
    let uctx = req.user.as_ref().map(|(u, _)| *u);
    let a = req.attrs;
    if a.max_wr == 0
        || a.max_wr > limits::MAX_SRQ_WR
        || a.max_sge > limits::MAX_SRQ_SGE
        || a.limit > a.max_wr
    {
        return Err(EINVAL);
    }
    if let Some((_, udata)) = req.user.as_ref() {
        if udata.out_len() < core::mem::size_of::<CreateSrqResp>() {
            return Err(EINVAL);
        }
    }
    let sges = a.max_sge.max(1);
    let (ring, mi) =
        UserProducerQueue::new(a.max_wr, RECV_WQE_HEADER + sges as usize * SGE_SIZE, uctx)?;
    let post = ring.kernel_producer();
    let granted = SrqAttrs {
        max_wr: ring.capacity(),
        max_sge: (((ring.elem_size() - RECV_WQE_HEADER) / SGE_SIZE) as u32)
            .min(limits::MAX_SRQ_SGE),
        limit: a.limit,
    };
    dev.data().srqs.take()?;
    let resp = CreateSrqResp {
        mi: mi.into(),
        srq_num: 0,
        reserved: 0,
    };
    if let Some((_, udata)) = req.user.as_ref() {
        if let Err(e) = udata.write(&resp) {
            dev.data().srqs.give();
            return Err(e);
        }
    }
    Ok((
        try_pin_init!(SroceSrq {
            inner <- new_spinlock_bh!(
                SrqInner {
                    attrs: granted,
                    ring
                },
                "sroce::srq"
            ),
            post <- new_spinlock_irq!(post, "sroce::srq_post"),
            limits: WqeLimits {
                max_sge: granted.max_sge,
                max_inline: 0,
            },
        }),
        granted,
    ))
}

/// Posts a kernel consumer's receive work requests into the ring.
pub(crate) fn post_recv_wrs(srq: &Srq<SroceDevice>, wrs: &mut RecvWrs<'_>) -> Result {
    let d = srq.data();
    let mut guard = d.post.lock();
    let prod = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    while !wrs.is_empty() {
        prod.push_with(|slot| wrs.encode(slot, &d.limits))?;
        wrs.advance();
    }
    Ok(())
}

pub(crate) fn destroy(srq: &Srq<SroceDevice>) {
    srq.device().data().srqs.give();
}

/// Resizes the ring to at least `max_wr` WQEs (`ibv_modify_srq` with
/// `IBV_SRQ_MAX_WR`): the WQEs posted and not yet taken move to the new
/// ring in order; `EINVAL` if they do not fit, or if an armed limit would
/// exceed the new size. A process's SRQ learns the new ring's mapping
/// through `publish` first (its library maps it only if the call
/// succeeds); a kernel consumer's posting moves with the ring.
pub(crate) fn resize(
    srq: &Srq<SroceDevice>,
    max_wr: u32,
    uctx: Option<&UContext<SroceDevice>>,
    publish: impl FnOnce(MmapInfo) -> Result,
) -> Result<u32> {
    if max_wr == 0 || max_wr > limits::MAX_SRQ_WR {
        return Err(EINVAL);
    }
    let d = srq.data();
    // Allocating and mapping may sleep: done before the locks. The slot
    // size stays (max_sge does not change).
    let elem_size = d.inner.lock().ring.elem_size();
    let (mut ring, mi) = UserProducerQueue::new(max_wr, elem_size, uctx)?;
    let capacity = ring.capacity();
    if uctx.is_some() {
        // Writing to the process may fault: before any lock.
        publish(mi)?;
    }
    let mut inner = d.inner.lock();
    // Asking for fewer WQEs than the armed limit is an error (rxe too),
    // whatever the rounding up grants.
    if inner.attrs.limit > max_wr {
        return Err(EINVAL);
    }
    let old = if uctx.is_some() {
        inner.ring.move_pending_into(&mut ring)?;
        core::mem::replace(&mut inner.ring, ring)
    } else {
        // A kernel consumer posts under `post`, in any context: hold it
        // while the entries move and the producer moves to the new ring.
        let mut post = d.post.lock();
        inner.ring.move_pending_into(&mut ring)?;
        *post = ring.kernel_producer();
        drop(post);
        core::mem::replace(&mut inner.ring, ring)
    };
    inner.attrs.max_wr = capacity;
    drop(inner);
    // Unmapping the old ring may sleep; the process maps the new one.
    drop(old);
    Ok(capacity)
}

/// Arms the limit event at `limit` WQEs (0 disarms).
pub(crate) fn set_limit(srq: &Srq<SroceDevice>, limit: u32) -> Result {
    let mut inner = srq.data().inner.lock();
    if limit > inner.ring.capacity() {
        return Err(EINVAL);
    }
    inner.attrs.limit = limit;
    Ok(())
}

pub(crate) fn attrs(srq: &Srq<SroceDevice>) -> SrqAttrs {
    srq.data().inner.lock().attrs
}
