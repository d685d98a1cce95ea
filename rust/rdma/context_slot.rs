// SPDX-License-Identifier: GPL-2.0

//! A static slot for the context of a C registration whose callbacks carry
//! no context argument (link types, pernet operations, genetlink families).

use core::{
    ffi::c_void,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{prelude::*, sync::Arc};

/// Holds at most one `Arc<T>` (as a raw pointer) while a registration
/// exists.
///
/// # Invariants
///
/// The pointer is NULL or comes from `Arc::into_raw` of the `Arc<T>` given
/// to [`ContextSlot::install`], of the `T` its users name.
pub(crate) struct ContextSlot(AtomicPtr<c_void>);

impl ContextSlot {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// Stores `ctx`; `EBUSY` if the slot is taken (one registration at a
    /// time).
    pub(crate) fn install<T: Send + Sync>(&self, ctx: Arc<T>) -> Result {
        let raw = Arc::into_raw(ctx).cast_mut().cast::<c_void>();
        if self
            .0
            .compare_exchange(
                core::ptr::null_mut(),
                raw,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `raw` came from `Arc::into_raw` above and was not stored.
            drop(unsafe { Arc::<T>::from_raw(raw.cast::<T>()) });
            return Err(EBUSY);
        }
        Ok(())
    }

    /// Borrows the context, if installed.
    ///
    /// # Safety
    ///
    /// `T` is the installed type, and the caller guarantees `release` does
    /// not run during `'a` (typically: a callback the registration's C side
    /// waits for before unregistering returns).
    pub(crate) unsafe fn get<'a, T>(&self) -> Option<&'a T> {
        let raw = self.0.load(Ordering::Acquire);
        // SAFETY: non-NULL pointers are live `Arc<T>`s (type invariant) kept
        // alive for `'a` (caller).
        (!raw.is_null()).then(|| unsafe { &*raw.cast::<T>() })
    }

    /// Takes the context back and drops it; nothing if the slot is empty.
    ///
    /// # Safety
    ///
    /// `T` is the installed type, and no borrow from [`Self::get`] is alive.
    pub(crate) unsafe fn release<T>(&self) {
        let raw = self.0.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: the pointer `install` stored (type invariant), taken
            // back exactly once (the swap), with no borrows alive (caller).
            drop(unsafe { Arc::<T>::from_raw(raw.cast::<T>()) });
        }
    }
}
