// SPDX-License-Identifier: GPL-2.0

//! Provider-specific command and response data (`struct ib_udata`).

use super::{bindings, device::Driver, ucontext::UContext};
use kernel::{
    prelude::*,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

/// The driver data of one verbs call from userspace: here, the provider
/// library's response buffer.
pub(crate) struct UData {
    raw: *mut bindings::ib_udata,
    outbuf: UserPtr,
    outlen: usize,
}

impl UData {
    /// Reads the user data of a callback; `None` for calls from kernel
    /// consumers, which pass no udata.
    ///
    /// # Safety
    ///
    /// `p` is NULL or a valid `ib_udata` the core passed to the callback.
    pub(super) unsafe fn from_raw(p: *mut bindings::ib_udata) -> Option<Self> {
        if p.is_null() {
            return None;
        }
        // SAFETY: valid per the function contract.
        let u = unsafe { &*p };
        Some(Self {
            raw: p,
            outbuf: UserPtr::from_ptr(u.outbuf),
            outlen: u.outlen,
        })
    }

    /// Writes a response struct, truncated to what userspace has room for
    /// (older libraries know shorter responses).
    pub(crate) fn write<T: AsBytes>(&self, v: &T) -> Result {
        let bytes = v.as_bytes();
        let n = self.outlen.min(bytes.len());
        UserSlice::new(self.outbuf, self.outlen)
            .writer()
            .write_slice(&bytes[..n])
    }

    /// The caller's user context and driver data for a callback's udata;
    /// `None` for calls from kernel consumers, which pass no udata.
    ///
    /// # Safety
    ///
    /// `p` is NULL or the `driver_udata` of a live `uverbs_attr_bundle` of a
    /// call on a device of driver `T` (every udata the core passes to a
    /// driver callback).
    pub(super) unsafe fn user_call<'a, T: Driver>(
        p: *mut bindings::ib_udata,
    ) -> Option<(&'a UContext<T>, Self)> {
        // SAFETY: forwarded from the caller.
        let udata = unsafe { Self::from_raw(p) }?;
        // SAFETY: the bundle's context is the caller's live user context of
        // this device, alive for the whole call.
        let uctx = unsafe { UContext::<T>::from_raw(udata.bundle_context()) };
        Some((uctx, udata))
    }

    /// The user context of the call this udata belongs to.
    ///
    /// # Safety
    ///
    /// The udata must be the `driver_udata` of a live `uverbs_attr_bundle`
    /// (true for every udata the core passes to a driver callback).
    pub(super) unsafe fn bundle_context(&self) -> *mut bindings::ib_ucontext {
        const {
            assert!(
                core::mem::offset_of!(
                    bindings::uverbs_attr_bundle__bindgen_ty_1__bindgen_ty_1,
                    driver_udata
                ) == 0
            )
        };
        let bundle = self
            .raw
            .cast::<bindings::uverbs_attr_bundle__bindgen_ty_1__bindgen_ty_1>();
        // SAFETY: `driver_udata` is the first field of the bundle (checked
        // above), which is live (caller).
        unsafe { (*bundle).context }
    }

    /// Bytes userspace has room for.
    pub(crate) fn out_len(&self) -> usize {
        self.outlen
    }
}
