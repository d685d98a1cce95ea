// SPDX-License-Identifier: GPL-2.0

//! `struct ib_ucontext`: one user of the device (one open uverbs file).

use super::{
    bindings,
    device::{device_from_raw, Driver},
    object::core_object,
};
use kernel::error::from_result;

core_object!(
    /// A user context with the driver's per-context state.
    UContext,
    bindings::ib_ucontext,
    UContext
);

/// `ib_device_ops.alloc_ucontext`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_ucontext` bytes whose
/// `device` is a live `Device<T>`.
pub(super) unsafe extern "C" fn alloc<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: `uctx` is valid and its `device` is ours (function contract).
        let dev = unsafe { device_from_raw::<T>((*uctx).device) };
        let data = T::alloc_ucontext(dev)?;
        // SAFETY: a fresh object of `UContext<T>::SIZE` bytes.
        unsafe { UContext::<T>::init(uctx, data) };
        Ok(0)
    })
}

/// `ib_device_ops.dealloc_ucontext`.
///
/// # Safety
///
/// Called once by the core for a context `alloc` initialised.
pub(super) unsafe extern "C" fn dealloc<T: Driver>(uctx: *mut bindings::ib_ucontext) {
    // SAFETY: initialised by `alloc` and not used again.
    unsafe { UContext::<T>::drop_data(uctx) };
}

/// `ib_device_ops.disassociate_ucontext`: the device is going away while a
/// process still has it open.
///
/// Offering this callback is what lets the core tear a device down (on
/// `rdma link delete`, net device or namespace removal, `rmmod`) without
/// waiting for every process to close it: the core destroys the process's
/// verbs objects through the ordinary destroy callbacks first, and later
/// calls from the process fail with `EIO`. sroce has nothing else to revoke:
/// its ring mappings are plain pages the process keeps until it unmaps them.
///
/// # Safety
///
/// Called by the core for a live user context.
pub(super) unsafe extern "C" fn disassociate(_uctx: *mut bindings::ib_ucontext) {}
