// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables bottom halves while held (`spin_lock_bh()`),
//! which the kernel crate of 7.3 lacks: state that the receive softirq and
//! process context both take (a queue pair's data path) needs it, since a
//! softirq that interrupted a holder on the same CPU would spin forever.
//! Holders must not sleep.

use kernel::sync::lock::{Backend, Lock};

/// A spinlock taken with bottom halves disabled.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// The backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

/// Creates a [`SpinLockBh`] with a lock class of its own per call site.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::rdma::bh_lock::SpinLockBh::new(
            $inner,
            kernel::optional_name!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

// SAFETY: `lock` and `unlock` are `spin_lock_bh()`/`spin_unlock_bh()` on
// the same `spinlock_t`, which give exclusive access between them; the
// state is initialised by `init` before any other use (the `Backend`
// contract on the caller); `try_lock` returns `Some` only when it took the
// lock.
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: `ptr` is valid for writes and `name`/`key` are valid
        // (the caller's `Backend::init` contract).
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised spinlock (the caller's
        // contract); the kernel's and this crate's bindings describe the
        // same C type.
        unsafe { super::bindings::sroce_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller holds the lock, taken by `lock` or `try_lock`.
        unsafe { super::bindings::sroce_spin_unlock_bh(ptr.cast()) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: as in `lock`.
        let taken = unsafe { super::bindings::sroce_spin_trylock_bh(ptr.cast()) };
        taken.then_some(())
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised spinlock (the caller's contract).
        unsafe { kernel::bindings::spin_assert_is_held(ptr) }
    }
}

/// A held [`SpinLockBh`].
pub(crate) type SpinLockBhGuard<'a, T> = kernel::sync::lock::Guard<'a, T, SpinLockBhBackend>;

/// Whether the caller may take a [`SpinLockBh`]: not in a hard interrupt
/// or NMI, and with interrupts enabled (`local_bh_enable()` must not run
/// with them disabled). Kernel consumers post work requests from any of
/// these.
pub(crate) fn bottom_halves_can_be_disabled() -> bool {
    // SAFETY: reads the current CPU's context; no preconditions.
    unsafe { super::bindings::sroce_bh_lockable() }
}

/// Keeps the task on its CPU, not preempted, while it lives
/// (`preempt_disable()`): what follows an unlock of a [`SpinLockBh`] then
/// runs on the CPU that ran the softirqs the unlock let through, before
/// any other task there. Holders must not sleep.
pub(crate) struct NoPreemption {
    /// Not `Send`: enabled again on the CPU it was disabled on.
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl NoPreemption {
    /// Disables preemption until the value is dropped.
    pub(crate) fn new() -> Self {
        // SAFETY: no preconditions; balanced by `drop` on this task, which
        // cannot move to another CPU meanwhile.
        unsafe { super::bindings::sroce_preempt_disable() };
        Self {
            _not_send: core::marker::PhantomData,
        }
    }
}

impl Drop for NoPreemption {
    fn drop(&mut self) {
        // SAFETY: preemption was disabled by `new` on this task.
        unsafe { super::bindings::sroce_preempt_enable() };
    }
}
