// SPDX-License-Identifier: GPL-2.0

//! Driver-specific attributes in the RDMA core's resource dumps
//! (`rdma resource show qp -dd`): `ib_device_ops.fill_res_qp_entry`.

use super::{bindings, device::Driver, qp::Qp};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{prelude::*, str::CStr};

/// The netlink message of one resource entry, for driver attributes.
///
/// # Invariants
///
/// `msg` is the live message the core is filling for the duration of the
/// callback that made this value.
pub(crate) struct DriverAttrs<'a> {
    msg: NonNull<bindings::sk_buff>,
    _msg: PhantomData<&'a mut bindings::sk_buff>,
}

impl DriverAttrs<'_> {
    fn check(ret: kernel::ffi::c_int) -> Result {
        // The helpers return nonzero when the message is full.
        if ret == 0 {
            Ok(())
        } else {
            Err(EMSGSIZE)
        }
    }

    /// A `u32` attribute `name`.
    pub(crate) fn put_u32(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: a live message (type invariant) and a NUL-terminated name.
        Self::check(unsafe {
            bindings::rdma_nl_put_driver_u32(self.msg.as_ptr(), name.as_char_ptr(), v)
        })
    }

    /// A `u32` attribute `name`, shown in hex.
    pub(crate) fn put_u32_hex(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: as in `put_u32`.
        Self::check(unsafe {
            bindings::rdma_nl_put_driver_u32_hex(self.msg.as_ptr(), name.as_char_ptr(), v)
        })
    }

    /// A string attribute `name`.
    pub(crate) fn put_str(&mut self, name: &CStr, v: &CStr) -> Result {
        // SAFETY: as in `put_u32`; both strings are NUL-terminated.
        Self::check(unsafe {
            bindings::rdma_nl_put_driver_string(
                self.msg.as_ptr(),
                name.as_char_ptr(),
                v.as_char_ptr(),
            )
        })
    }
}

/// `ib_device_ops.fill_res_qp_entry`.
///
/// # Safety
///
/// Called by the RDMA core with a live message and a live, initialised QP
/// of driver `T`.
pub(super) unsafe extern "C" fn fill_qp_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    let Some(msg) = NonNull::new(msg) else {
        return EINVAL.to_errno();
    };
    // Driver attributes go in a nested RDMA_NLDEV_ATTR_DRIVER table.
    // SAFETY: the core's live message (function contract).
    let nest = unsafe {
        bindings::sroce_nla_nest_start(
            msg.as_ptr(),
            bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as kernel::ffi::c_int,
        )
    };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    // INVARIANT: the core's message, live for this call.
    let mut attrs = DriverAttrs {
        msg,
        _msg: PhantomData,
    };
    // SAFETY: live and initialised (function contract).
    let qp = unsafe { Qp::<T>::from_raw(qp) };
    let r = T::fill_qp_attrs(qp, &mut attrs);
    // SAFETY: `nest` was opened above in this message and is closed once.
    unsafe {
        match r {
            Ok(()) => bindings::sroce_nla_nest_end(msg.as_ptr(), nest),
            Err(_) => bindings::sroce_nla_nest_cancel(msg.as_ptr(), nest),
        }
    }
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
