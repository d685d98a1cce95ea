// SPDX-License-Identifier: GPL-2.0

//! `struct ib_cq`: completion queues.

use super::{
    bindings,
    device::{device_from_raw, Device, Driver},
    object::core_object,
    qp::QpHandle,
    ucontext::UContext,
    udata::UData,
    wc::Completion,
};
use core::marker::PhantomData;
use kernel::{error::from_result, prelude::*};

core_object!(
    /// A completion queue with the driver's per-CQ state.
    Cq,
    bindings::ib_cq,
    Cq
);

/// What a completion notification was requested for (`ibv_req_notify_cq`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NotifyOn {
    /// The next completion.
    NextCompletion,
    /// The next solicited completion (or error).
    Solicited,
}

/// A request to create a completion queue.
pub(crate) struct CqRequest<'a, T: Driver> {
    /// Entries asked for (at least this many must fit).
    pub(crate) entries: u32,
    /// The creating process's context and provider data; `None` for kernel
    /// consumers.
    pub(crate) user: Option<(&'a UContext<T>, UData)>,
}

impl<T: Driver> Cq<T> {
    /// The CQ's device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: `device` of a live CQ is its live device.
        unsafe { device_from_raw::<T>((*self.core_ptr()).device) }
    }

    /// Tells the consumer that completions are waiting: wakes the CQ's
    /// completion channel (user CQs) or calls the kernel consumer's handler.
    /// Call it when the CQ was armed, once per arming.
    pub(crate) fn notify(&self) {
        let cq = self.core_ptr();
        // SAFETY: a live CQ; the core sets `comp_handler` (or leaves it NULL)
        // before the CQ can produce completions and keeps it while it lives.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }

    /// Reports a completion queue overrun to the CQ's owner
    /// (`IB_EVENT_CQ_ERR`).
    pub(crate) fn report_overrun(&self) {
        let cq = self.core_ptr();
        // SAFETY: a live CQ; `event_handler` is set by the core for user CQs
        // and by kernel consumers, and takes an event on our stack.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                let mut ev = bindings::ib_event {
                    device: (*cq).device,
                    event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                ev.element.cq = cq;
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }

    /// Tells the core how many entries the CQ holds.
    fn set_capacity(&self, cqe: u32) {
        // SAFETY: `cqe` is a plain field the driver owns while the CQ lives;
        // the core only reads it.
        unsafe { (*self.core_ptr()).cqe = i32::try_from(cqe).unwrap_or(i32::MAX) };
    }
}

/// One completion of a kernel consumer's CQ, and the QP it names.
#[derive(Clone, Copy)]
struct KernelWc {
    c: Completion,
    qp: QpHandle,
}

/// A kernel consumer's completion queue: kernel memory only, filled by the
/// data path and drained by `poll_cq`.
pub(crate) struct KernelCqRing {
    slots: KVVec<KernelWc>,
    head: usize,
    len: usize,
}

impl KernelCqRing {
    /// A ring of `entries` completions.
    pub(crate) fn new(entries: u32) -> Result<Self> {
        let empty = KernelWc {
            c: Completion::flushed(0, super::wc::WcOpcode::Send, 0),
            qp: QpHandle::NONE,
        };
        Ok(Self {
            slots: KVVec::from_elem(empty, entries.max(1) as usize, GFP_KERNEL)?,
            head: 0,
            len: 0,
        })
    }

    /// Completions it holds at most.
    pub(crate) fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Completions not yet polled.
    pub(crate) fn len(&self) -> u32 {
        self.len as u32
    }

    /// Appends a completion of `qp`; `ENOSPC` when full.
    pub(crate) fn push(&mut self, c: &Completion, qp: QpHandle) -> Result {
        let cap = self.slots.len();
        if self.len == cap {
            return Err(ENOSPC);
        }
        let i = (self.head + self.len) % cap;
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = KernelWc { c: *c, qp };
        }
        self.len += 1;
        Ok(())
    }

    /// Moves the oldest completions into `out` until it is full or the ring
    /// is empty.
    pub(crate) fn drain_into(&mut self, out: &mut WcOut<'_>) {
        let cap = self.slots.len();
        while self.len > 0 && out.n < out.cap {
            let e = &self.slots[self.head];
            // SAFETY: `n < cap` entries of the caller's array (invariant of
            // `WcOut`).
            e.c.write_ib_wc(e.qp, unsafe { &mut *out.wc.add(out.n) });
            out.n += 1;
            self.head = (self.head + 1) % cap;
            self.len -= 1;
        }
    }
}

/// The consumer's array `poll_cq` fills.
///
/// # Invariants
///
/// `wc` points to `cap` writable `ib_wc`s for `'a`; `n <= cap` are filled.
pub(crate) struct WcOut<'a> {
    wc: *mut bindings::ib_wc,
    cap: usize,
    n: usize,
    _p: PhantomData<&'a mut bindings::ib_wc>,
}

/// `ib_device_ops.poll_cq`.
///
/// # Safety
///
/// Called by the core (any context) for a live kernel CQ with an array of
/// `num_entries` work completions.
pub(super) unsafe extern "C" fn poll<T: Driver>(
    cq: *mut bindings::ib_cq,
    num_entries: kernel::ffi::c_int,
    wc: *mut bindings::ib_wc,
) -> kernel::ffi::c_int {
    let Ok(cap) = usize::try_from(num_entries) else {
        return EINVAL.to_errno();
    };
    if wc.is_null() {
        return 0;
    }
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Cq::<T>::from_raw(cq) };
    // INVARIANT: the caller's array of `cap` entries.
    let mut out = WcOut {
        wc,
        cap,
        n: 0,
        _p: PhantomData,
    };
    T::poll_cq(this, &mut out);
    out.n as kernel::ffi::c_int
}

/// `ib_device_ops.create_cq`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_cq` bytes whose
/// `device` is a live `Device<T>`, valid `attr`, and `attrs` NULL (kernel
/// consumers) or a live bundle.
pub(super) unsafe extern "C" fn create<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid per the function contract.
        let (attr, dev) = unsafe { (&*attr, device_from_raw::<T>((*cq).device)) };
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let user = if attrs.is_null() {
            None
        } else {
            // SAFETY: `attrs` is a live bundle, so its `driver_udata` is the
            // udata of a live call.
            unsafe {
                UData::user_call::<T>(
                    &raw mut (*attrs).__bindgen_anon_1.__bindgen_anon_1.driver_udata,
                )
            }
        };
        let req = CqRequest {
            // `attr.comp_vector` is checked by the core; completion events
            // are raised on the CPU that produces the completion.
            entries: attr.cqe,
            user,
        };
        let (init, capacity) = T::create_cq(dev, req)?;
        // SAFETY: a fresh object of `Cq<T>::SIZE` bytes.
        unsafe { Cq::<T>::init_pinned(cq, init)? };
        // SAFETY: initialised just above.
        unsafe { Cq::<T>::from_raw(cq) }.set_capacity(capacity);
        Ok(0)
    })
}

/// `ib_device_ops.destroy_cq`. The core only calls it once no queue pair
/// uses the CQ.
///
/// # Safety
///
/// Called once by the core for a CQ `create` initialised.
pub(super) unsafe extern "C" fn destroy<T: Driver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    T::destroy_cq(unsafe { Cq::<T>::from_raw(cq) });
    // SAFETY: initialised by `create` and not used again.
    unsafe { Cq::<T>::drop_data(cq) };
    0
}

/// `ib_device_ops.resize_user_cq`.
///
/// # Safety
///
/// Called by the core for a live user CQ with valid udata.
pub(super) unsafe extern "C" fn resize<T: Driver>(
    cq: *mut bindings::ib_cq,
    entries: kernel::ffi::c_uint,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: live and initialised (function contract).
        let this = unsafe { Cq::<T>::from_raw(cq) };
        // SAFETY: the core passes NULL or the udata of a live call.
        let user = unsafe { UData::user_call::<T>(udata) };
        let capacity = T::resize_cq(this, entries, user)?;
        this.set_capacity(capacity);
        Ok(0)
    })
}

/// `ib_device_ops.req_notify_cq`.
///
/// # Safety
///
/// Called by the core for a live CQ.
pub(super) unsafe extern "C" fn req_notify<T: Driver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Cq::<T>::from_raw(cq) };
    let on = if flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    {
        NotifyOn::Solicited
    } else {
        NotifyOn::NextCompletion
    };
    let report_missed = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
    let pending = T::req_notify_cq(this, on);
    // A positive return tells the caller completions may already be there.
    i32::from(report_missed && pending)
}
