// SPDX-License-Identifier: GPL-2.0

//! A kernel thread that runs queued work items one at a time
//! (`kthread_worker`, `include/linux/kthread.h`), at the lowest real-time
//! priority.
//!
//! Why not a workqueue: a woken kworker is a fair-class task, and a kernel
//! that preempts lazily (x86 since 7.x) lets a running fair task, such as
//! a process spinning on its completion queue, keep the CPU until it
//! enters the kernel or the next tick; the item waits that long. A
//! `SCHED_FIFO` thread preempts fair tasks when it wakes, as the kernel's
//! own data pumps do (DRM's vblank workers, SPI message pumps, the crypto
//! engine). It only runs while it has items, and the fair class keeps its
//! reserved share of every CPU (the fair deadline server).

use super::bindings;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{cpu::CpuId, error::from_err_ptr, prelude::*, sync::Arc, types::Opaque};

/// The number of CPUs online now.
pub(crate) fn online_cpus() -> u32 {
    // SAFETY: reads the online mask's weight; no precondition.
    unsafe { bindings::sroce_num_online_cpus() }
}

/// A kernel thread that runs [`KthreadWork`] items, at `SCHED_FIFO`
/// priority 1 (`sched_set_fifo_low`).
///
/// Dropping it runs the items still queued, then stops the thread: that
/// waits, so the last reference must be dropped in process context.
///
/// # Invariants
///
/// `raw` is a worker made by `kthread_create_worker_on_node` whose thread
/// runs until `drop` destroys it.
pub(crate) struct KthreadWorker {
    raw: NonNull<bindings::kthread_worker>,
}

// SAFETY: the worker's state is guarded by its own lock; queueing and
// flushing may be done from any thread.
unsafe impl Send for KthreadWorker {}
// SAFETY: as for `Send`: every operation through `&self` takes the
// worker's lock.
unsafe impl Sync for KthreadWorker {}

impl KthreadWorker {
    /// Starts a worker thread named `sroce_<role>/<index>` at the lowest
    /// real-time priority. Process context.
    pub(crate) fn new_fifo_low(role: &CStr, index: u32) -> Result<Arc<Self>> {
        // SAFETY: the format takes a string and an unsigned int, which are
        // passed; both outlive the call (the name is copied).
        let raw = from_err_ptr(unsafe {
            bindings::kthread_create_worker_on_node(
                0,
                bindings::NUMA_NO_NODE,
                c"sroce_%s/%u".as_char_ptr(),
                role.as_char_ptr(),
                index,
            )
        })?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: `raw` is a live worker whose thread was just created and
        // not woken yet: its priority is set before it runs anything.
        unsafe {
            bindings::sched_set_fifo_low((*raw.as_ptr()).task);
            bindings::wake_up_process((*raw.as_ptr()).task);
        }
        // On failure the worker is destroyed by `drop`.
        Ok(Arc::new(Self { raw }, GFP_KERNEL)?)
    }

    /// Whether the worker's thread would run on another CPU than `cpu`
    /// if woken now: it may not run on `cpu`, or it runs (or last ran) on
    /// another one. A hint: it may move at any time.
    pub(crate) fn elsewhere(&self, cpu: CpuId) -> bool {
        // SAFETY: the worker and its thread are live (type invariant);
        // the helper only reads the task's CPU and allowed mask.
        unsafe { bindings::sroce_kthread_worker_elsewhere(self.as_raw(), cpu.as_u32()) }
    }

    fn as_raw(&self) -> *mut bindings::kthread_worker {
        self.raw.as_ptr()
    }
}

impl Drop for KthreadWorker {
    fn drop(&mut self) {
        // SAFETY: the worker is live (type invariant) and no item can be
        // queued on it any more: every `KthreadWork` holds a reference.
        unsafe { bindings::kthread_destroy_worker(self.as_raw()) };
    }
}

/// An item that runs on a [`KthreadWorker`], as the kernel crate's
/// `WorkItem` runs on a workqueue.
pub(crate) trait KthreadWorkItem<const ID: u64 = 0>:
    HasKthreadWork<ID> + Send + Sync + Sized + 'static
{
    /// Runs the item with the reference its queueing took.
    fn run(this: Arc<Self>);
}

/// A type with a [`KthreadWork`] field; `ID` tells its fields apart when
/// it has several (each queued on its own worker).
///
/// # Safety
///
/// `raw_get_work` returns a pointer to a field of type
/// `KthreadWork<Self, ID>` inside `*ptr`, and `work_container_of` is its
/// inverse. Implement it with [`impl_has_kthread_work!`].
pub(crate) unsafe trait HasKthreadWork<const ID: u64 = 0>: Sized {
    /// The work field of the item at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points at a live `Self`.
    unsafe fn raw_get_work(ptr: *mut Self) -> *mut KthreadWork<Self, ID>;

    /// The item whose work field is at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points at the work field of a live `Self`.
    unsafe fn work_container_of(ptr: *mut KthreadWork<Self, ID>) -> *mut Self;
}

/// Implements [`HasKthreadWork`] for a struct with a `KthreadWork<Self,
/// ID>` field (`ID` 0 if omitted).
macro_rules! impl_has_kthread_work {
    (impl HasKthreadWork for $self:ty { self.$field:ident }) => {
        $crate::rdma::kthread_worker::impl_has_kthread_work! {
            impl HasKthreadWork<0> for $self { self.$field }
        }
    };
    (impl HasKthreadWork<$id:literal> for $self:ty { self.$field:ident }) => {
        // SAFETY: both functions only compile if the field is a
        // `KthreadWork<Self, ID>`, and `container_of!` inverts
        // `addr_of_mut!`.
        unsafe impl $crate::rdma::kthread_worker::HasKthreadWork<$id> for $self {
            #[inline]
            unsafe fn raw_get_work(
                ptr: *mut Self,
            ) -> *mut $crate::rdma::kthread_worker::KthreadWork<Self, $id> {
                // SAFETY: the caller promises `ptr` is live.
                unsafe { ::core::ptr::addr_of_mut!((*ptr).$field) }
            }

            #[inline]
            unsafe fn work_container_of(
                ptr: *mut $crate::rdma::kthread_worker::KthreadWork<Self, $id>,
            ) -> *mut Self {
                // SAFETY: the caller promises `ptr` is this field of a
                // live `Self`.
                unsafe { ::kernel::container_of!(ptr, Self, $field) }
            }
        }
    };
}
pub(crate) use impl_has_kthread_work;

/// The queue link of an item of type `T`, bound for its whole life to one
/// [`KthreadWorker`]: a `kthread_work` must never be queued on two
/// workers (each guards the link with its own lock).
///
/// # Invariants
///
/// `raw` was initialised by `kthread_init_work` with [`Self::run_raw`];
/// it is only ever queued on `worker`.
#[repr(C)]
#[pin_data]
pub(crate) struct KthreadWork<T, const ID: u64 = 0> {
    // First: the worker hands the callback a pointer to it.
    #[pin]
    raw: Opaque<bindings::kthread_work>,
    worker: Arc<KthreadWorker>,
    _item: PhantomData<T>,
}

// SAFETY: the link is only touched under the worker's lock; the item type
// is `Send + Sync` where it is queued.
unsafe impl<T: Send + Sync, const ID: u64> Send for KthreadWork<T, ID> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send + Sync, const ID: u64> Sync for KthreadWork<T, ID> {}

impl<T: KthreadWorkItem<ID>, const ID: u64> KthreadWork<T, ID> {
    /// A link for items run by `worker`.
    pub(crate) fn new(worker: Arc<KthreadWorker>) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `kthread_init_work` initialises the whole link.
            raw <- Opaque::ffi_init(|w| unsafe {
                bindings::sroce_kthread_init_work(w, Some(Self::run_raw))
            }),
            worker,
            _item: PhantomData,
        })
    }

    /// Queues `item` on its worker, which runs [`KthreadWorkItem::run`]
    /// with this reference. If it is queued already (not yet running),
    /// nothing changes and the reference is dropped. Any context.
    pub(crate) fn enqueue(item: Arc<T>) -> bool {
        let ptr = Arc::into_raw(item).cast_mut();
        // SAFETY: `ptr` is a live `T` (its reference is held until the
        // item runs or is dropped below).
        let work = unsafe { <T as HasKthreadWork<ID>>::raw_get_work(ptr) };
        // SAFETY: `work` is the item's live link, initialised and only
        // ever queued on its own worker (type invariant), which outlives
        // it (the link holds a reference).
        let queued =
            unsafe { bindings::kthread_queue_work((*work).worker.as_raw(), (*work).raw.get()) };
        if !queued {
            // SAFETY: the reference leaked above was not taken by a
            // queueing; it is given back.
            drop(unsafe { Arc::from_raw(ptr) });
        }
        queued
    }

    /// Whether the item's worker thread would run on another CPU than the
    /// caller's ([`KthreadWorker::elsewhere`]; a hint: either may move).
    pub(crate) fn worker_elsewhere(&self) -> bool {
        self.worker.elsewhere(CpuId::current())
    }

    /// Waits until the item's last queueing has run (returns at once if it
    /// is idle). Process context; the caller must not hold anything the
    /// item takes.
    pub(crate) fn flush(&self) {
        // SAFETY: the link is live and initialised; flushing only waits.
        unsafe { bindings::kthread_flush_work(self.raw.get()) };
    }

    /// The worker's callback.
    ///
    /// # Safety
    ///
    /// `work` is the link of a live `T`, queued by [`Self::enqueue`].
    unsafe extern "C" fn run_raw(work: *mut bindings::kthread_work) {
        // `raw` is the first field of a `repr(C)` struct.
        let work = work.cast::<KthreadWork<T, ID>>();
        // SAFETY: the worker only runs links queued by `enqueue`: `work`
        // is the link of a `T` whose reference it leaked.
        let item = unsafe { <T as HasKthreadWork<ID>>::work_container_of(work) };
        // SAFETY: that leaked reference is taken back here, once per
        // queueing.
        <T as KthreadWorkItem<ID>>::run(unsafe { Arc::from_raw(item) });
    }
}
