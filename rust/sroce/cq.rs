// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring shared with the owning process, filled by the
//! data path and drained by the process without a system call.

use super::{device::SroceDevice, limits};
use crate::rdma::{
    cq::{Cq, CqRequest, NotifyOn},
    device::Device,
    queue::KernelProducerQueue,
    rxe_abi::{CqResp, CQE_SIZE},
    ucontext::UContext,
    udata::UData,
    wc::{Completion, WcStatus},
};
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq, transmute::AsBytes};

/// No completion event armed.
const ARMED_NONE: u8 = 0;
/// Event on the next completion.
const ARMED_NEXT: u8 = 1;
/// Event on the next solicited completion.
const ARMED_SOLICITED: u8 = 2;

/// sroce's state of one completion queue.
///
/// The queue is behind an IRQ-safe lock because completions are produced
/// both from process context (posting, flushing) and from the receive path.
#[pin_data]
pub(crate) struct SroceCq {
    #[pin]
    queue: SpinLockIrq<KernelProducerQueue>,
    armed: AtomicU8,
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
    if req.user.is_none() {
        // Kernel consumers poll CQs with `poll_cq`, which arrives with them.
        return Err(EOPNOTSUPP);
    }
    dev.data().cqs.take()?;
    let queue = new_queue(req.entries, req.user).inspect_err(|_| dev.data().cqs.give())?;
    let capacity = queue.capacity();
    Ok((
        try_pin_init!(SroceCq {
            queue <- new_spinlock_irq!(queue, "sroce::cq"),
            armed: AtomicU8::new(ARMED_NONE),
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
    // Allocating, mapping and answering userspace may sleep: all of it
    // happens before taking the queue's lock.
    let mut resized = new_queue(entries, user)?;
    let capacity = resized.capacity();
    let old = {
        let mut queue = cq.data().queue.lock();
        queue.move_pending_into(&mut resized)?;
        core::mem::replace(&mut *queue, resized)
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

/// Posts a completion and raises the completion event if the CQ is armed
/// for it (`solicited`: the completion is of a solicited message; errors
/// count as solicited, as the IBTA requires). A full CQ is an overrun:
/// reported to the owner, and `ENOSPC` to the caller.
pub(crate) fn post(cq: &Cq<SroceDevice>, c: &Completion, solicited: bool) -> Result {
    let entry = c.to_uverbs();
    if cq.data().queue.lock().push(entry.as_bytes()).is_err() {
        cq.report_overrun();
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
