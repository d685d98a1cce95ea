// SPDX-License-Identifier: GPL-2.0

//! A QP's request packets in order across CPUs.
//!
//! A pass sends under the QP's lock, with bottom halves off, so what it
//! sends waits in the sending CPU's queues (veth's per-CPU backlog) until
//! that CPU lets go of the lock and runs its softirqs; a pass in the
//! receive softirq sends into the backlog its CPU is working through. A
//! pass on another CPU that sends meanwhile has its later PSNs delivered
//! first: the responder NAKs them and go-back-N resends what was still
//! queued, whose stale copies then overflow the responder's queue
//! (`docs/performance.md`, "Request packets in order across CPUs"). rxe
//! sends from its work item with bottom halves on, each packet delivered
//! as it leaves.
//!
//! So:
//! - a pass in the receive softirq ([`PassContext::Receive`]) sends no
//!   request packets while any the QP sent are unacknowledged (they may
//!   still be queued somewhere): it leaves them to process context, the
//!   pass whose unlock it runs in (same CPU, answered after the unlock)
//!   or else the QP's pass thread. With nothing in flight it sends (a
//!   ping-pong's next message, posted while the softirq pass held the QP,
//!   goes out without a hop), unmarked: a process that posts again before
//!   that CPU delivered can still overtake it (one NAK, rare);
//! - a pass in process context ([`PassContext::Task`]) that sent marks the
//!   QP as delivering from its CPU until its unlock has run that CPU's
//!   softirqs (preemption off until the mark is cleared); a pass on
//!   another CPU meanwhile leaves its new packets to the pass the
//!   delivering CPU runs when done ([`super::answer_doorbell`]).
//!
//! The doorbell flag carries both hand-overs. A kernel consumer's doorbell
//! ([`PassContext::Consumer`], any context) is held off by a delivery as
//! a task's is, but what it sends is not marked. READ responses follow
//! the same mark: the receive softirq sends them only while no CPU is
//! delivering, and only when all that are queued fit in its pass (what
//! it sends waits in its CPU's backlog, and a pass on another CPU must
//! not send the rest meanwhile); else process context sends them all
//! (`super::responses_leave`). ACKs are not covered (they are
//! cumulative). The mark is best effort: softirqs deferred to ksoftirqd
//! deliver after it is cleared.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::cpu::CpuId;

/// Where a pass runs, which decides what it may send.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PassContext {
    /// The receive softirq: request packets are left to process context
    /// while others are in flight.
    Receive,
    /// Process context (a process's doorbell, a pass thread, the work
    /// item): what the pass sent is marked as delivering until its unlock
    /// returned.
    Task,
    /// A kernel consumer's doorbell, in whatever context it posts from:
    /// held off by a delivery, its own sends unmarked.
    Consumer,
}

/// Which CPU, if any, is delivering what a pass of the QP sent.
pub(crate) struct Delivery {
    /// The CPU's number plus one; 0 when none is.
    cpu: AtomicU32,
}

/// A delivery begun by [`Delivery::begin`], ended by [`Delivery::end`].
#[must_use]
pub(crate) struct Delivering(u32);

impl Delivery {
    /// No delivery.
    pub(crate) const fn new() -> Self {
        Self {
            cpu: AtomicU32::new(0),
        }
    }

    fn this_cpu() -> u32 {
        CpuId::current().as_u32() + 1
    }

    /// Marks this CPU as delivering what the pass sent: called with the
    /// QP locked (the next holder sees it), in process context. None if
    /// another CPU still is (this pass then sent no new requests: replies,
    /// or another QP of the device sent; the other delivery stays
    /// marked).
    pub(crate) fn begin(&self) -> Option<Delivering> {
        // The lock keeps the task on this CPU until the unlock.
        let mark = Self::this_cpu();
        // (Never this CPU's own: a mark is cleared before its unlock's
        // caller returns.)
        self.cpu
            .compare_exchange(0, mark, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| Delivering(mark))
    }

    /// Ends the delivery once the unlock returned, still on its CPU.
    pub(crate) fn end(&self, d: Delivering) {
        let _ = self
            .cpu
            .compare_exchange(d.0, 0, Ordering::SeqCst, Ordering::Relaxed);
    }

    /// Whether another CPU is delivering what a pass of the QP sent.
    pub(crate) fn elsewhere(&self) -> bool {
        let cpu = self.cpu.load(Ordering::SeqCst);
        cpu != 0 && cpu != Self::this_cpu()
    }

    /// Whether any CPU is (this one: the receive softirq runs inside the
    /// unlock of the pass that sent, which answers once it returns).
    pub(crate) fn any(&self) -> bool {
        self.cpu.load(Ordering::SeqCst) != 0
    }
}
