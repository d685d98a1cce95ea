// SPDX-License-Identifier: GPL-2.0

//! Page faults of on-demand paged memory in a QP's data path.
//!
//! The data path runs in the receive softirq or under the QP's spinlock,
//! where a page cannot be faulted in. When an access finds a page of an
//! on-demand region absent (`rdma::mr_odp::NOT_PRESENT`), the part of the
//! QP that made it stops, with nothing done that would have to be undone:
//! - the responder pauses on the request (or READ response) that faulted
//!   (`roce::responder`'s `Outcome::PageFault`, `hold_read_response`): the
//!   packet stays queued, later ones wait behind it, the requester sees a
//!   delay, never a NAK;
//! - the requester takes back the request packet it could not build
//!   (`SendQueue::hold`) and sends nothing until the fault is resolved;
//! - the completer places a response's data before the engine takes the
//!   response (`SendQueue::placement`), so a response whose page is absent
//!   waits queued;
//! - a UD QP leaves the send WQE in its ring, or the received datagram
//!   queued with its receive WQE.
//!
//! The QP's work item, in process context and without the QP's lock,
//! faults the memory in (the core's HMM fault) and lets the waiting part
//! go on. Other QPs are not held up: each has its own work item. Memory
//! that cannot be faulted in (not mapped) fails the operation as an
//! access to unregistered memory does: a remote access error NAK for a
//! peer's request, a local protection error for a local buffer.

use crate::rdma::{device::Device, qp::Qp};
use crate::sroce::{device::SroceDevice, io::counters::Counter};
use kernel::prelude::*;

/// Memory a part of the QP found absent: `len` bytes at `iova` of the
/// region with key `key` (a region's own key, never a window's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageFault {
    pub(crate) key: u32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    pub(crate) write: bool,
}

/// The parts of a QP that may wait for a page fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Waiter {
    /// RC/UC responder: a request or a READ response.
    Responder,
    /// RC/UC requester: a request packet's data.
    Requester,
    /// RC completer: a READ response's or atomic's local buffer.
    Completer,
    /// UD: a send WQE's data.
    UdSend,
    /// UD: a receive WQE's buffer.
    UdReceive,
}

const WAITERS: usize = Waiter::UdReceive as usize + 1;

/// Where a waiter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not waiting.
    Idle,
    /// Waiting for this memory to be faulted in.
    Pending(PageFault),
    /// This memory could not be faulted in: the access that finds it
    /// absent again (the one that waited, tried again in the pass right
    /// after) fails.
    Failed(PageFault),
}

/// The page faults a QP waits for, one per [`Waiter`].
pub(crate) struct PageFaults([State; WAITERS]);

impl PageFaults {
    /// None.
    pub(crate) const fn new() -> Self {
        Self([State::Idle; WAITERS])
    }

    /// Forgets every fault (the connection that waited is gone).
    pub(crate) fn clear(&mut self) {
        self.0.fill(State::Idle);
    }

    /// `w` stopped on `fault`. If that memory could not be faulted in
    /// before, that is the answer instead: `false`, and the caller fails
    /// the operation.
    pub(crate) fn wait(&mut self, w: Waiter, fault: PageFault) -> bool {
        let s = &mut self.0[w as usize];
        if *s == State::Failed(fault) {
            *s = State::Idle;
            return false;
        }
        *s = State::Pending(fault);
        true
    }

    /// Forgets the faults that could not be resolved: the pass after the
    /// resolution tried what waited for them again (and failed it if the
    /// memory was still absent), so a later access to that memory gets a
    /// fault of its own.
    pub(crate) fn forget_failed(&mut self) {
        for s in &mut self.0 {
            if matches!(s, State::Failed(_)) {
                *s = State::Idle;
            }
        }
    }

    /// Whether `w` waits for a fault to be resolved.
    pub(crate) fn is_waiting(&self, w: Waiter) -> bool {
        matches!(self.0[w as usize], State::Pending(_))
    }

    /// Whether any part waits (the work item has faults to resolve).
    pub(crate) fn any(&self) -> bool {
        self.0.iter().any(|s| matches!(s, State::Pending(_)))
    }

    /// The faults waited for.
    fn pending(&self) -> [Option<PageFault>; WAITERS] {
        self.0.map(|s| match s {
            State::Pending(f) => Some(f),
            _ => None,
        })
    }

    /// `fault`, which `w` waited for, was resolved (`ok`) or could not be
    /// (then the next access that finds it absent fails). Ignored if `w`
    /// no longer waits for it (the connection was replaced meanwhile).
    fn resolved(&mut self, w: usize, fault: PageFault, ok: bool) -> bool {
        let Some(s) = self.0.get_mut(w) else {
            return false;
        };
        if *s != State::Pending(fault) {
            return false;
        }
        *s = if ok {
            State::Idle
        } else {
            State::Failed(fault)
        };
        true
    }
}

/// Bytes faulted in at once beyond the access that faulted (if mapped):
/// a message's later packets then find their pages present instead of
/// each stopping the QP.
const FAULT_AHEAD: u64 = 256 * 1024;

/// Attempts at a fault the core reports as transient (the range kept
/// changing under it, no memory) before the operation fails.
const FAULT_ATTEMPTS: u32 = 3;

/// Faults `f`'s memory in, and what follows it where mapped. Process
/// context; sleeps.
fn fault_in(dev: &Device<SroceDevice>, f: &PageFault) -> Result {
    let mut attempt = 1;
    loop {
        // What follows too, where it is mapped; else just what was asked.
        let r = dev
            .fault_in(f.key, f.iova, f.len.max(FAULT_AHEAD), f.write)
            .or_else(|_| dev.fault_in(f.key, f.iova, f.len, f.write));
        match r {
            Err(e) if (e == EBUSY || e == ENOMEM || e == EAGAIN) && attempt < FAULT_ATTEMPTS => {
                attempt += 1;
                kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
            }
            r => return r,
        }
    }
}

/// The work item's first step: faults in the memory the QP's parts wait
/// for, then lets them go on. Process context; takes the QP's lock.
pub(crate) fn resolve(qp: &Qp<SroceDevice>) {
    let wanted = {
        let inner = qp.data().lock();
        if !inner.faults.any() {
            return;
        }
        inner.faults.pending()
    };
    let dev = qp.device();
    let counters = &dev.data().io.counters;
    let mut done = [None; WAITERS];
    for (slot, f) in done.iter_mut().zip(wanted) {
        let Some(f) = f else { continue };
        let ok = fault_in(dev, &f).is_ok();
        counters.inc(if ok {
            Counter::OdpPageFaults
        } else {
            Counter::OdpFaultErrors
        });
        *slot = Some((f, ok));
    }
    let mut inner = qp.data().lock();
    for (w, r) in done.iter().enumerate() {
        let Some((f, ok)) = *r else { continue };
        if !inner.faults.resolved(w, f, ok) {
            continue;
        }
        // The engines that stopped go on; the other parts only look at
        // whether they still wait.
        if let Some(rc) = inner.rc.as_mut() {
            if w == Waiter::Responder as usize {
                rc.resume_responder();
            } else if w == Waiter::Requester as usize {
                rc.resume_requester();
            }
        }
    }
}
