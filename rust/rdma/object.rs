// SPDX-License-Identifier: GPL-2.0

//! Verbs objects the RDMA core allocates for a provider (user context, PD,
//! CQ, ...): the core's C struct at offset 0, then the driver's data.
//!
//! The core allocates `size_ib_*` zeroed bytes, calls the driver's create
//! callback, and frees the memory after the destroy callback. The driver's
//! data is therefore written in the create callback and dropped in the
//! destroy callback; [`CoreObject`] is the one place that does both.

use core::mem::{offset_of, size_of};
use kernel::types::Opaque;

/// A core object `C` carrying driver data `D`.
///
/// # Invariants
///
/// `core` is at offset 0; `data` is initialised from the end of a
/// successful create callback until the destroy callback drops it.
#[repr(C)]
pub(crate) struct CoreObject<C, D> {
    core: Opaque<C>,
    data: D,
}

impl<C, D> CoreObject<C, D> {
    /// Bytes the core must allocate (`size_ib_*` in `ib_device_ops`).
    pub(super) const SIZE: usize = {
        assert!(offset_of!(Self, core) == 0);
        // The core's kzalloc aligns to 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        size_of::<Self>()
    };

    /// The driver's data.
    pub(crate) fn data(&self) -> &D {
        &self.data
    }

    /// Borrows the object behind a core pointer.
    ///
    /// # Safety
    ///
    /// `p` must point to the `C` of a live `CoreObject<C, D>` whose data is
    /// initialised, for `'a`.
    pub(super) unsafe fn from_raw<'a>(p: *mut C) -> &'a Self {
        // SAFETY: `core` is at offset 0 (type invariant); the caller
        // guarantees liveness and initialisation.
        unsafe { &*p.cast::<Self>() }
    }

    /// Writes the driver's data into a freshly allocated object.
    ///
    /// # Safety
    ///
    /// `p` must point to the `C` of an allocation of [`Self::SIZE`] bytes
    /// whose data is not initialised.
    pub(super) unsafe fn init(p: *mut C, data: D) {
        let this = p.cast::<Self>();
        // SAFETY: the allocation is large and aligned enough (caller).
        unsafe { (&raw mut (*this).data).write(data) };
    }

    /// Drops the driver's data before the core frees the object.
    ///
    /// # Safety
    ///
    /// `p` must point to an object whose data is initialised and is not used
    /// afterwards.
    pub(super) unsafe fn drop_data(p: *mut C) {
        let this = p.cast::<Self>();
        // SAFETY: initialised and not used again (caller).
        unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
    }
}
