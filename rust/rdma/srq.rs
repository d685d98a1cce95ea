// SPDX-License-Identifier: GPL-2.0

//! `struct ib_srq`: shared receive queues.

use super::{
    bindings,
    device::{device_from_raw, Device, Driver},
    object::core_object,
    queue::MmapInfo,
    rxe_abi::{MmInfo, ModifySrqCmd},
    ucontext::UContext,
    udata::{write_at, UData},
};
use kernel::{error::from_result, prelude::*};

core_object!(
    /// A shared receive queue with the driver's per-SRQ state.
    Srq,
    bindings::ib_srq,
    Srq
);

impl<T: Driver> Srq<T> {
    /// The SRQ's device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: `device` of a live SRQ is its live device.
        unsafe { device_from_raw::<T>((*self.core_ptr()).device) }
    }

    /// Tells the SRQ's owner that fewer WQEs than the armed limit are left
    /// (`IB_EVENT_SRQ_LIMIT_REACHED`). Process context.
    pub(crate) fn report_limit_reached(&self) {
        let srq = self.core_ptr();
        // SAFETY: a live SRQ; the core sets `event_handler` (or leaves it
        // NULL) and `srq_context` before the SRQ can be used and keeps them
        // while it lives; the handler takes an event on our stack.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                let mut ev = bindings::ib_event {
                    device: (*srq).device,
                    event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                    ..Default::default()
                };
                ev.element.srq = srq;
                handler(&mut ev, (*srq).srq_context);
            }
        }
    }
}

/// Sizes and the low-watermark of a shared receive queue.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SrqAttrs {
    /// Receive work requests.
    pub(crate) max_wr: u32,
    /// Scatter/gather entries per work request.
    pub(crate) max_sge: u32,
    /// Raise `IB_EVENT_SRQ_LIMIT_REACHED` when fewer than this many WRs are
    /// left (0: disarmed).
    pub(crate) limit: u32,
}

/// A request to create a shared receive queue.
pub(crate) struct SrqRequest<'a, T: Driver> {
    /// Requested sizes (at least these) and initial limit.
    pub(crate) attrs: SrqAttrs,
    /// The creating process's context and provider data; `None` for kernel
    /// consumers.
    pub(crate) user: Option<(&'a UContext<T>, UData)>,
}

/// `ib_device_ops.create_srq`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_srq` bytes whose
/// `device` is a live `Device<T>`, a valid `init`, and `udata` NULL or the
/// udata of a live bundle.
pub(super) unsafe extern "C" fn create<T: Driver>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid per the function contract.
        let (init, dev) = unsafe { (&mut *init, device_from_raw::<T>((*srq).device)) };
        if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: the core passes NULL or the udata of a live call.
        let user = unsafe { UData::user_call::<T>(udata) };
        let req = SrqRequest {
            attrs: SrqAttrs {
                max_wr: init.attr.max_wr,
                max_sge: init.attr.max_sge,
                limit: init.attr.srq_limit,
            },
            user,
        };
        let (data, granted) = T::create_srq(dev, req)?;
        // SAFETY: a fresh object of `Srq<T>::SIZE` bytes.
        unsafe { Srq::<T>::init_pinned(srq, data)? };
        init.attr.max_wr = granted.max_wr;
        init.attr.max_sge = granted.max_sge;
        Ok(0)
    })
}

/// `ib_device_ops.destroy_srq`. The core only calls it once no queue pair
/// uses the SRQ.
///
/// # Safety
///
/// Called once by the core for an SRQ `create` initialised.
pub(super) unsafe extern "C" fn destroy<T: Driver>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    T::destroy_srq(unsafe { Srq::<T>::from_raw(srq) });
    // SAFETY: initialised by `create` and not used again.
    unsafe { Srq::<T>::drop_data(srq) };
    0
}

/// `ib_device_ops.modify_srq`.
///
/// # Safety
///
/// Called by the core for a live SRQ with a valid `attr`.
pub(super) unsafe extern "C" fn modify<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: live and initialised; `attr` valid (function contract).
        let (this, attr) = unsafe { (Srq::<T>::from_raw(srq), &*attr) };
        let resize = mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0;
        let set_limit = mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0;
        if resize && set_limit && attr.srq_limit > attr.max_wr {
            // Checked before anything changes.
            return Err(EINVAL);
        }
        if resize {
            // SAFETY: the core passes NULL or the udata of a live call.
            let user = unsafe { UData::user_call::<T>(udata) };
            // The rxe library names where the new mapping goes.
            let answer_at = match &user {
                Some((_, u)) => Some(u.read::<ModifySrqCmd>()?.mmap_info_addr),
                None => None,
            };
            let publish = |mi: MmapInfo| match answer_at {
                Some(addr) => write_at(addr, &MmInfo::from(mi)),
                None => Ok(()),
            };
            T::resize_srq(this, attr.max_wr, user.as_ref().map(|(u, _)| *u), publish)?;
        }
        if set_limit {
            T::set_srq_limit(this, attr.srq_limit)?;
        }
        Ok(0)
    })
}

/// `ib_device_ops.query_srq`.
///
/// # Safety
///
/// Called by the core for a live SRQ with a valid out-pointer.
pub(super) unsafe extern "C" fn query<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised; `attr` valid (function contract).
    let (this, out) = unsafe { (Srq::<T>::from_raw(srq), &mut *attr) };
    let a = T::srq_attrs(this);
    out.max_wr = a.max_wr;
    out.max_sge = a.max_sge;
    out.srq_limit = a.limit;
    0
}

/// `ib_device_ops.post_srq_recv`: kernel consumers' receive work requests.
///
/// # Safety
///
/// Called by the core for a live SRQ; `wr` is a valid list and `bad_wr` a
/// valid out-pointer.
pub(super) unsafe extern "C" fn post_recv<T: Driver>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Srq::<T>::from_raw(srq) };
    // SAFETY: a valid chain for this call (function contract).
    let mut wrs = unsafe { super::kwr::RecvWrs::new(wr) };
    match T::post_srq_recv_wrs(this, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: a valid out-pointer (function contract).
            unsafe { *bad_wr = if wrs.is_empty() { wr } else { wrs.position() } };
            e.to_errno()
        }
    }
}
