// SPDX-License-Identifier: GPL-2.0

//! What the kernel crate's work items lack for deferred work that must be
//! finished before its owner goes: waiting for a queued or running
//! execution (`flush_work()`).

use kernel::workqueue::Work;

/// Waits until the last queueing of `work` has finished executing (returns
/// at once if it is idle). Process context; the caller must not hold
/// anything the work item takes.
pub(crate) fn flush<T: ?Sized, const ID: u64>(work: &Work<T, ID>) {
    // SAFETY: `work` is a live, initialised work item (a shared reference
    // to it exists); `flush_work` only waits on it.
    unsafe { kernel::bindings::flush_work(Work::raw_get(work)) };
}

/// The kernel's default unbound workqueue (`system_dfl_wq`). The kernel
/// crate of 7.3 only offers `system()` (`system_wq`), which this kernel
/// deprecates with a warning on first use.
pub(crate) fn system_dfl() -> &'static kernel::workqueue::Queue {
    // SAFETY: `system_dfl_wq` is created at boot, before any module loads,
    // and never destroyed; reading the pointer races with nothing.
    unsafe { kernel::workqueue::Queue::from_raw(kernel::bindings::system_dfl_wq) }
}
