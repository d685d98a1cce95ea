// SPDX-License-Identifier: GPL-2.0

//! `struct ib_pd`: protection domains.

use super::{
    bindings,
    device::{device_from_raw, Driver},
    object::core_object,
};
use kernel::error::from_result;

core_object!(
    /// A protection domain with the driver's per-PD state.
    Pd,
    bindings::ib_pd,
    Pd
);

/// `ib_device_ops.alloc_pd`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_pd` bytes whose
/// `device` is a live `Device<T>`.
pub(super) unsafe extern "C" fn alloc<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: `pd` is valid and its `device` is ours (function contract).
        let dev = unsafe { device_from_raw::<T>((*pd).device) };
        let data = T::alloc_pd(dev)?;
        // SAFETY: a fresh object of `Pd<T>::SIZE` bytes.
        unsafe { Pd::<T>::init(pd, data) };
        Ok(0)
    })
}

/// `ib_device_ops.dealloc_pd`. The core only calls it once nothing uses
/// the PD any more.
///
/// # Safety
///
/// Called once by the core for a PD `alloc` initialised.
pub(super) unsafe extern "C" fn dealloc<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: `pd` is live and initialised (function contract).
    let dev = unsafe { device_from_raw::<T>((*pd).device) };
    // SAFETY: as above.
    T::dealloc_pd(dev, unsafe { Pd::<T>::from_raw(pd) }.data());
    // SAFETY: initialised by `alloc` and not used again.
    unsafe { Pd::<T>::drop_data(pd) };
    0
}
