// SPDX-License-Identifier: GPL-2.0

//! `struct ib_ah`: address handles (destinations of UD sends).

use super::{
    av::AddressVector,
    bindings,
    device::{device_from_raw, Device, Driver, PORT},
    object::core_object,
    pd::Pd,
    udata::UData,
};
use kernel::{error::from_result, prelude::*};

core_object!(
    /// An address handle with the driver's per-AH state.
    Ah,
    bindings::ib_ah,
    Ah
);

impl<T: Driver> Ah<T> {
    /// The AH's device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: `device` of a live AH is its live device.
        unsafe { device_from_raw::<T>((*self.core_ptr()).device) }
    }
}

/// `ib_device_ops.create_ah` and `create_user_ah`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_ah` bytes whose
/// `device` is a live `Device<T>`, a valid `init` whose `ah_attr` is
/// resolved, and `udata` NULL or the udata of a user call.
pub(super) unsafe extern "C" fn create<T: Driver>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid per the function contract.
        let (init, dev) = unsafe { (&*init, device_from_raw::<T>((*ah).device)) };
        if init.ah_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: non-NULL and valid for the call (function contract).
        let av = AddressVector::from_ah_attr(unsafe { &*init.ah_attr })?;
        // SAFETY: NULL or the caller's udata.
        let udata = unsafe { UData::from_raw(udata) };
        // SAFETY: the core sets `pd` before calling and holds the PD (its
        // use count) while the AH exists.
        let pd = unsafe { Pd::<T>::from_raw((*ah).pd) };
        let data = T::create_ah(dev, pd, av, udata)?;
        // SAFETY: a fresh object of `Ah<T>::SIZE` bytes.
        unsafe { Ah::<T>::init(ah, data) };
        Ok(0)
    })
}

/// `ib_device_ops.destroy_ah`.
///
/// # Safety
///
/// Called once by the core for an AH `create` initialised.
pub(super) unsafe extern "C" fn destroy<T: Driver>(
    ah: *mut bindings::ib_ah,
    _flags: u32,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    T::destroy_ah(unsafe { Ah::<T>::from_raw(ah) });
    // SAFETY: initialised by `create` and not used again.
    unsafe { Ah::<T>::drop_data(ah) };
    0
}

/// `ib_device_ops.query_ah`.
///
/// # Safety
///
/// Called by the core for a live AH with a valid out-pointer.
pub(super) unsafe extern "C" fn query<T: Driver>(
    ah: *mut bindings::ib_ah,
    attr: *mut bindings::rdma_ah_attr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised; `attr` valid (function contract).
    let (this, out) = unsafe { (Ah::<T>::from_raw(ah), &mut *attr) };
    T::ah_address(this).write_ah_attr(PORT, out);
    0
}
