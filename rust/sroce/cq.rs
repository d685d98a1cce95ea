// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring shared with the owning process, filled by the
//! data path and drained by the process without a system call.

use super::{device::SroceDevice, limits};
use crate::rdma::{
    cq::{Cq, CqRequest, KernelCqRing, NotifyOn, WcOut},
    device::Device,
    qp::Qp,
    queue::KernelProducerQueue,
    rxe_abi::{CqResp, CQE_SIZE},
    ucontext::UContext,
    udata::UData,
    wc::{Completion, WcStatus},
};
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq, transmute::AsBytes};

/// No completion event armed.
const ARMED_NONE: u8 = 0;
/// Event on the next completion.
const ARMED_NEXT: u8 = 1;
/// Event on the next solicited completion.
const ARMED_SOLICITED: u8 = 2;

/// Where a CQ's completions go.
enum CqRing {
    /// A ring mapped into the owning process, in the uverbs layout.
    User(KernelProducerQueue),
    /// A kernel consumer's ring, drained by `poll_cq`.
    Kernel(KernelCqRing),
}

impl CqRing {
    fn len(&self) -> u32 {
        match self {
            Self::User(q) => q.len(),
            Self::Kernel(r) => r.len(),
        }
    }
}

/// sroce's state of one completion queue.
///
/// The queue is behind an IRQ-safe lock because completions are produced
/// both from process context (posting, flushing) and from the receive path,
/// and kernel consumers poll from any context.
#[pin_data]
pub(crate) struct SroceCq {
    #[pin]
    queue: SpinLockIrq<CqRing>,
    armed: AtomicU8,
    /// The CQ overran: it is in the error state for good (the owner was
    /// told once); completions for it are dropped.
    overrun: AtomicBool,
}

/// Checks a requested CQ size against the device's limit.
fn check_entries(entries: u32) -> Result {
    if entries == 0 || entries > limits::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Makes the queue for `entries` and tells the process where to map it.
fn new_queue(
    entries: u32,
    user: Option<(&UContext<SroceDevice>, UData)>,
) -> Result<KernelProducerQueue> {
    let uctx = user.as_ref().map(|(u, _)| *u);
    let (queue, mi) = KernelProducerQueue::new(entries, CQE_SIZE, uctx)?;
    if let Some((_, udata)) = &user {
        if udata.out_len() < core::mem::size_of::<CqResp>() {
            return Err(EINVAL);
        }
        udata.write(&CqResp { mi: mi.into() })?;
    }
    Ok(queue)
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    req: CqRequest<'_, SroceDevice>,
) -> Result<(impl PinInit<SroceCq, Error>, u32)> {
    check_entries(req.entries)?;
    dev.data().cqs.take()?;
    let queue = if req.user.is_some() {
        new_queue(req.entries, req.user).map(CqRing::User)
    } else {
        KernelCqRing::new(req.entries).map(CqRing::Kernel)
    }
    .inspect_err(|_| dev.data().cqs.give())?;
    let capacity = match &queue {
        CqRing::User(q) => q.capacity(),
        CqRing::Kernel(r) => r.capacity(),
    };
    Ok((
        try_pin_init!(SroceCq {
            queue <- new_spinlock_irq!(queue, "sroce::cq"),
            armed: AtomicU8::new(ARMED_NONE),
            overrun: AtomicBool::new(false),
        }),
        capacity,
    ))
}

pub(crate) fn destroy(cq: &Cq<SroceDevice>) {
    cq.device().data().cqs.give();
}

pub(crate) fn resize(
    cq: &Cq<SroceDevice>,
    entries: u32,
    user: Option<(&UContext<SroceDevice>, UData)>,
) -> Result<u32> {
    check_entries(entries)?;
    if user.is_none() {
        // Only user CQs come here (`resize_user_cq`).
        return Err(EOPNOTSUPP);
    }
    // Allocating, mapping and answering userspace may sleep: all of it
    // happens before taking the queue's lock.
    let mut resized = new_queue(entries, user)?;
    let capacity = resized.capacity();
    let old = {
        let mut queue = cq.data().queue.lock();
        let CqRing::User(q) = &mut *queue else {
            return Err(EOPNOTSUPP);
        };
        q.move_pending_into(&mut resized)?;
        core::mem::replace(q, resized)
    };
    // Unmapping the old ring may sleep too; the process has switched to the
    // new one described in the response.
    drop(old);
    Ok(capacity)
}

pub(crate) fn req_notify(cq: &Cq<SroceDevice>, on: NotifyOn) -> bool {
    let armed = match on {
        NotifyOn::NextCompletion => ARMED_NEXT,
        NotifyOn::Solicited => ARMED_SOLICITED,
    };
    // Next-completion is the stronger request: never weaken an armed one.
    let _ = cq
        .data()
        .armed
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
            (cur != ARMED_NEXT).then_some(armed)
        });
    cq.data().queue.lock().len() > 0
}

/// Moves a kernel consumer's completions into its array.
pub(crate) fn poll(cq: &Cq<SroceDevice>, out: &mut WcOut<'_>) {
    if let CqRing::Kernel(r) = &mut *cq.data().queue.lock() {
        r.drain_into(out);
    }
}

/// Posts a completion of `qp`'s work and raises the completion event if the CQ is armed
/// for it (`solicited`: the completion is of a solicited message; errors
/// count as solicited, as the IBTA requires).
///
/// A full CQ is an overrun (IBTA 11.4.2.1 / 10.10.2.3): the CQ enters the
/// error state for good, its owner gets one `IB_EVENT_CQ_ERR`, and every
/// QP that completes to it from then on is moved to the error state (with
/// `IB_EVENT_QP_FATAL`) by its next pass. Completions for an overrun CQ
/// are dropped without further events, so a process that keeps work
/// coming costs nothing per completion. Returns `ENOSPC` then.
pub(crate) fn post(
    cq: &Cq<SroceDevice>,
    qp: &Qp<SroceDevice>,
    c: &Completion,
    solicited: bool,
) -> Result {
    let d = cq.data();
    if d.overrun.load(Ordering::Acquire) {
        qp.data().cq_overrun();
        return Err(ENOSPC);
    }
    let pushed = match &mut *d.queue.lock() {
        CqRing::User(q) => q.push(c.to_uverbs().as_bytes()),
        CqRing::Kernel(r) => r.push(c, qp.handle()),
    };
    if pushed.is_err() {
        if !d.overrun.swap(true, Ordering::AcqRel) {
            cq.report_overrun();
        }
        qp.data().cq_overrun();
        return Err(ENOSPC);
    }
    let urgent = solicited || c.status != WcStatus::Success;
    let fire = cq
        .data()
        .armed
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |armed| match armed {
            ARMED_NEXT => Some(ARMED_NONE),
            ARMED_SOLICITED if urgent => Some(ARMED_NONE),
            _ => None,
        })
        .is_ok();
    if fire {
        cq.notify();
    }
    Ok(())
}
