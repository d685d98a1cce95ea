// SPDX-License-Identifier: GPL-2.0

//! The threads that run queue pairs' passes when the receive softirq or
//! the posting process leaves one (packets queued behind others, timers,
//! refills): one per CPU online at load, shared by every device, at the
//! lowest real-time priority (`rdma::kthread_worker` says why: a woken
//! kworker waited up to a scheduler tick behind a spinning process). A QP
//! is given the thread running the fewest QPs when it is created and
//! keeps it, so its passes never run on two of them at once.
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
        PassThreadSeat { thread }
    }
}

/// A QP's place on a pass thread, counted while it lives.
pub(crate) struct PassThreadSeat {
    thread: Arc<PassThread>,
}

impl PassThreadSeat {
    /// The thread's worker, to bind the QP's work link to.
    pub(crate) fn worker(&self) -> Arc<KthreadWorker> {
        self.thread.worker.clone()
    }
}

impl Drop for PassThreadSeat {
    fn drop(&mut self) {
        self.thread.qps.fetch_sub(1, Ordering::Relaxed);
    }
}
