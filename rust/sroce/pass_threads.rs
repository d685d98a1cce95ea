// SPDX-License-Identifier: GPL-2.0

//! The threads that run queue pairs' passes when the receive softirq or
//! the posting process leaves one (packets queued behind others, timers,
//! refills): one per CPU online at load, shared by every device, at the
//! lowest real-time priority (`rdma::kthread_worker` says why: a woken
//! kworker waited up to a scheduler tick behind a spinning process). A QP
//! is given the thread running the fewest QPs when it is created and
//! keeps it; the next thread in the list is its partner, which takes the
//! passes it hands to another CPU when its own thread sits on the handing
//! one (`rc::QpShared::hand_off`). Threads are not pinned: one stays on
//! the CPU it last ran on, which may be the posting process's. The QP's
//! lock keeps its passes one at a time.
//!
//! What needs to sleep (faulting in on-demand paged memory, building
//! session groups, dropping a retired connection) is not done on these
//! threads, where it would hold up other QPs: the pass thread hands the
//! QP to its work item on the kernel's unbound workqueue for that.

use crate::rdma::kthread_worker::KthreadWorker;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// More would only add idle threads: a pass is short and QPs share them.
const MAX_THREADS: u32 = 64;

/// One pass thread and how many QPs it runs.
struct PassThread {
    worker: Arc<KthreadWorker>,
    qps: AtomicU32,
}

impl PassThread {
    fn new(index: u32) -> Result<Arc<Self>> {
        let t = Self {
            worker: KthreadWorker::new_fifo_low(c"pass", index)?,
            qps: AtomicU32::new(0),
        };
        Ok(Arc::new(t, GFP_KERNEL)?)
    }
}

/// The module's pass threads: `first` and the `rest`.
pub(crate) struct PassThreads {
    first: Arc<PassThread>,
    rest: KVec<Arc<PassThread>>,
}

impl PassThreads {
    /// Starts one thread per online CPU (at least one, at most
    /// [`MAX_THREADS`]). Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let n = crate::rdma::kthread_worker::online_cpus().clamp(1, MAX_THREADS);
        let first = PassThread::new(0)?;
        let mut rest = KVec::with_capacity(n as usize - 1, GFP_KERNEL)?;
        for i in 1..n {
            rest.push(PassThread::new(i)?, GFP_KERNEL)?;
        }
        Ok(Arc::new(Self { first, rest }, GFP_KERNEL)?)
    }

    /// A seat for a new QP on the thread with the fewest QPs. Two QPs
    /// created at once may both pick the same one: a balance, not a rule.
    pub(crate) fn seat(&self) -> PassThreadSeat {
        let fewest = self.rest.iter().fold(&self.first, |best, t| {
            if t.qps.load(Ordering::Relaxed) < best.qps.load(Ordering::Relaxed) {
                t
            } else {
                best
            }
        });
        let thread = fewest.clone();
        thread.qps.fetch_add(1, Ordering::Relaxed);
        // The next thread in the list (the first after the last).
        let partner = Iterator::chain(core::iter::once(&self.first), self.rest.iter())
            .skip_while(|t| !Arc::ptr_eq(t, &thread))
            .nth(1)
            .unwrap_or(&self.first)
            .clone();
        PassThreadSeat { thread, partner }
    }
}

/// A QP's place on a pass thread, counted while it lives.
pub(crate) struct PassThreadSeat {
    thread: Arc<PassThread>,
    partner: Arc<PassThread>,
}

impl PassThreadSeat {
    /// The thread's worker, to bind the QP's work link to.
    pub(crate) fn worker(&self) -> Arc<KthreadWorker> {
        self.thread.worker.clone()
    }

    /// Another thread's worker (the same one if there is only one), to
    /// hand passes to when the QP's own thread runs on the caller's CPU.
    pub(crate) fn partner_worker(&self) -> Arc<KthreadWorker> {
        self.partner.worker.clone()
    }
}

impl Drop for PassThreadSeat {
    fn drop(&mut self) {
        self.thread.qps.fetch_sub(1, Ordering::Relaxed);
    }
}
