// SPDX-License-Identifier: GPL-2.0

//! Provider-specific command and response data (`struct ib_udata`).

use super::{bindings, device::Driver, ucontext::UContext};
use kernel::{
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// Writes `v` at `addr` in the calling process's memory (for the rxe
/// commands that name an address to answer at).
pub(crate) fn write_at<T: AsBytes>(addr: u64, v: &T) -> Result {
    let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
    UserSlice::new(UserPtr::from_addr(addr), core::mem::size_of::<T>())
        .writer()
        .write(v)
}

/// The driver data of one verbs call from userspace: here, the provider
/// library's response buffer.
pub(crate) struct UData {
    raw: *mut bindings::ib_udata,
    inbuf: UserPtr,
    inlen: usize,
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
            inbuf: UserPtr::from_ptr(u.inbuf.cast_mut()),
            inlen: u.inlen,
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

    /// Reads the provider's command struct; `EINVAL` if the library sent
    /// less (every rxe command struct has been the same size since it
    /// existed).
    pub(crate) fn read<T: FromBytes>(&self) -> Result<T> {
        if self.inlen < core::mem::size_of::<T>() {
            return Err(EINVAL);
        }
        UserSlice::new(self.inbuf, core::mem::size_of::<T>())
            .reader()
            .read()
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
