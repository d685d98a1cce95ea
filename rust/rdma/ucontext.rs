// SPDX-License-Identifier: GPL-2.0

//! `struct ib_ucontext`: one user of the device (one open uverbs file).

use super::{
    bindings,
    device::{device_from_raw, Driver},
};
use kernel::{error::from_result, types::Opaque};

/// A user context: the core's `ib_ucontext` at offset 0, then the driver's
/// per-context state. The core allocates and frees it; the driver's state is
/// written in `alloc` and dropped in `dealloc`.
#[repr(C)]
pub(crate) struct UContext<T: Driver> {
    ib: Opaque<bindings::ib_ucontext>,
    data: T::UContext,
}

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
    const { assert!(core::mem::offset_of!(UContext<T>, ib) == 0) };
    from_result(|| {
        // SAFETY: `uctx` is valid and its `device` is ours (function contract).
        let dev = unsafe { device_from_raw::<T>((*uctx).device) };
        let data = T::alloc_ucontext(dev)?;
        let p = uctx.cast::<UContext<T>>();
        // SAFETY: the object is `UContext<T>`-sized and uninitialised here.
        unsafe { (&raw mut (*p).data).write(data) };
        Ok(0)
    })
}

/// `ib_device_ops.dealloc_ucontext`.
///
/// # Safety
///
/// Called once by the core for a context `alloc` initialised.
pub(super) unsafe extern "C" fn dealloc<T: Driver>(uctx: *mut bindings::ib_ucontext) {
    let p = uctx.cast::<UContext<T>>();
    // SAFETY: `data` was initialised by `alloc` and is not used again.
    unsafe { core::ptr::drop_in_place(&raw mut (*p).data) };
}
