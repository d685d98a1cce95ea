// SPDX-License-Identifier: GPL-2.0

//! `struct ib_qp`: queue pairs, their attributes and state transitions.

use super::bh_lock::{new_spinlock_bh, SpinLockBh};
use super::{
    attr::IbMtu,
    av::AddressVector,
    bindings,
    cq::Cq,
    device::{device_from_raw, Device, Driver, PORT},
    kwr::{RecvWrs, SendWrs},
    object::core_object,
    pd::Pd,
    srq::Srq,
    ucontext::UContext,
    udata::UData,
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::from_result, new_condvar, prelude::*, sync::CondVar};

core_object!(
    /// A queue pair with the driver's per-QP state.
    Qp,
    bindings::ib_qp,
    Qp
);

impl<T: Driver> Qp<T> {
    /// The QP's device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: `device` of a live QP is its live device.
        unsafe { device_from_raw::<T>((*self.core_ptr()).device) }
    }

    /// The completion queue of the QP's sends.
    pub(crate) fn send_cq(&self) -> &Cq<T> {
        // SAFETY: the core sets `send_cq` at creation and holds the CQ (its
        // use count) until the QP is destroyed.
        unsafe { Cq::<T>::from_raw((*self.core_ptr()).send_cq) }
    }

    /// The completion queue of the QP's receives.
    pub(crate) fn recv_cq(&self) -> &Cq<T> {
        // SAFETY: as for `send_cq`.
        unsafe { Cq::<T>::from_raw((*self.core_ptr()).recv_cq) }
    }

    /// The QP's protection domain.
    pub(crate) fn pd(&self) -> &Pd<T> {
        // SAFETY: the core sets `pd` at creation and holds the PD (its use
        // count) until the QP is destroyed.
        unsafe { Pd::<T>::from_raw((*self.core_ptr()).pd) }
    }

    /// Reports a catastrophic error of the QP to its owner
    /// (`IB_EVENT_QP_FATAL`), e.g. after its completion queue overran.
    pub(crate) fn report_fatal(&self) {
        let qp = self.core_ptr();
        // SAFETY: a live QP; `event_handler` is set by the core for user QPs
        // and by kernel consumers, and takes an event on our stack.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                let mut ev = bindings::ib_event {
                    device: (*qp).device,
                    event: bindings::ib_event_type_IB_EVENT_QP_FATAL,
                    ..Default::default()
                };
                ev.element.qp = qp;
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }

    /// The handle a kernel consumer's completions name the QP by.
    pub(crate) fn handle(&self) -> QpHandle {
        QpHandle(self.core_ptr())
    }

    /// The shared receive queue the QP receives from, if it has one.
    pub(crate) fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: the core sets `srq` (or leaves it NULL) at creation and
        // holds the SRQ (its use count) until the QP is destroyed, so a
        // non-NULL pointer is a live, initialised SRQ while the QP lives.
        unsafe {
            let p = (*self.core_ptr()).srq;
            (!p.is_null()).then(|| Srq::<T>::from_raw(p))
        }
    }
}

/// Names a QP in a kernel consumer's work completion (`ib_wc.qp`). Only
/// ever handed back to the consumer, never dereferenced here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpHandle(*mut bindings::ib_qp);

// SAFETY: an opaque address, only copied into completions.
unsafe impl Send for QpHandle {}
// SAFETY: as above.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    /// No QP (an unused slot).
    pub(crate) const NONE: Self = Self(core::ptr::null_mut());

    pub(super) fn as_raw(self) -> *mut bindings::ib_qp {
        self.0
    }
}

/// The way deferred work (a pass thread, a work item, a timer, the
/// receive softirq) of the driver reaches its QP: valid from the end of
/// `create_qp` until `destroy_qp`, which revokes it and waits for its
/// users before the QP's memory goes.
///
/// The driver keeps the link in its per-QP state and names it in
/// [`Driver::qp_link`]; this layer attaches and revokes it, so a link can
/// only ever point at its own, live QP.
///
/// # Invariants
///
/// When `state.qp` holds a pointer, it is the `ib_qp` of a live `Qp<T>`
/// whose driver data names this link; `revoke` sets it to `None` and then
/// waits until `state.users` (the `with` calls that read the pointer
/// before) is zero, before the QP is freed.
#[pin_data]
pub(crate) struct QpLink<T: Driver> {
    #[pin]
    state: SpinLockBh<LinkState>,
    /// Signalled when the last user leaves a revoked link.
    #[pin]
    idle: CondVar,
    _p: PhantomData<T>,
}

struct LinkState {
    qp: Option<NonNull<bindings::ib_qp>>,
    users: usize,
}

// SAFETY: the pointer is only dereferenced while the QP is live (type
// invariant), and `Qp<T>` is usable from any thread.
unsafe impl<T: Driver> Send for QpLink<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for QpLink<T> {}

impl<T: Driver> QpLink<T> {
    /// A link to no QP yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- new_spinlock_bh!(LinkState { qp: None, users: 0 }, "sroce::qp_link"),
            idle <- new_condvar!("sroce::qp_link_idle"),
            _p: PhantomData,
        })
    }

    /// Runs `f` on the QP unless it was destroyed; the QP's destruction
    /// waits until `f` returns. Any context (`f` decides whether it may
    /// sleep).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Qp<T>) -> R) -> Option<R> {
        let p = {
            let mut s = self.state.lock();
            let p = s.qp?;
            s.users += 1;
            p
        };
        // SAFETY: the pointer is a live QP until `users` drops back (type
        // invariant: `revoke` waits for it).
        let r = f(unsafe { Qp::<T>::from_raw(p.as_ptr()) });
        let mut s = self.state.lock();
        s.users -= 1;
        if s.users == 0 && s.qp.is_none() {
            self.idle.notify_all();
        }
        Some(r)
    }

    fn attach(&self, qp: *mut bindings::ib_qp) {
        self.state.lock().qp = NonNull::new(qp);
    }

    /// Detaches the QP and waits for the users that still hold it.
    /// Process context.
    fn revoke(&self) {
        let mut s = self.state.lock();
        s.qp = None;
        while s.users != 0 {
            self.idle.wait(&mut s);
        }
    }
}

/// Transport service of a queue pair.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1) of a kernel consumer (the MAD
    /// layer): unreliable datagrams with the fixed number 1.
    Gsi,
}

impl QpType {
    fn from_raw(t: bindings::ib_qp_type) -> Option<Self> {
        match t {
            bindings::ib_qp_type_IB_QPT_RC => Some(Self::Rc),
            bindings::ib_qp_type_IB_QPT_UC => Some(Self::Uc),
            bindings::ib_qp_type_IB_QPT_UD => Some(Self::Ud),
            bindings::ib_qp_type_IB_QPT_GSI => Some(Self::Gsi),
            _ => None,
        }
    }

    fn to_raw(self) -> bindings::ib_qp_type {
        match self {
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
        }
    }
}

/// Queue pair states (IBTA vol. 1, 10.3.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum QpState {
    /// Freshly created or reset.
    #[default]
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained.
    Sqd,
    /// Send queue error.
    Sqe,
    /// Error: everything outstanding is flushed.
    Err,
}

impl QpState {
    fn from_raw(s: bindings::ib_qp_state) -> Option<Self> {
        Some(match s {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    fn to_raw(self) -> bindings::ib_qp_state {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// Queue sizes of a queue pair.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct QpCaps {
    /// Send work requests.
    pub(crate) max_send_wr: u32,
    /// Receive work requests.
    pub(crate) max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub(crate) max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub(crate) max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// A request to create a queue pair.
pub(crate) struct QpRequest<'a, T: Driver> {
    /// Transport service.
    pub(crate) qp_type: QpType,
    /// Requested queue sizes (at least these).
    pub(crate) caps: QpCaps,
    /// Whether every send work request completes with a CQE.
    pub(crate) signal_all: bool,
    /// Whether receives come from a shared receive queue.
    pub(crate) has_srq: bool,
    /// The creating process's context and provider data; `None` for kernel
    /// consumers.
    pub(crate) user: Option<(&'a UContext<T>, UData)>,
}

/// What creation settled on.
pub(crate) struct QpCreated {
    /// The queue pair number.
    pub(crate) qpn: u32,
    /// The queue sizes granted.
    pub(crate) caps: QpCaps,
}

/// The attributes one `modify_qp` call changes; `None` leaves one as is.
#[derive(Default)]
pub(crate) struct QpAttrChange {
    /// New state (validated against the current one by the core's rules).
    pub(crate) state: Option<QpState>,
    /// Whether to raise an event when the send queue has drained.
    pub(crate) en_sqd_async_notify: Option<bool>,
    /// Remote access allowed (`IB_ACCESS_REMOTE_*`).
    pub(crate) access_flags: Option<u32>,
    /// Q_Key (UD).
    pub(crate) qkey: Option<u32>,
    /// Primary path (connected QPs).
    pub(crate) av: Option<AddressVector>,
    /// Path MTU.
    pub(crate) path_mtu: Option<IbMtu>,
    /// Local ACK timeout exponent (4.096 us × 2^timeout; 0 = infinite).
    pub(crate) timeout: Option<u8>,
    /// Retries on timeout or sequence error.
    pub(crate) retry_cnt: Option<u8>,
    /// Retries on RNR NAK (7 = forever).
    pub(crate) rnr_retry: Option<u8>,
    /// Expected PSN of the next request received.
    pub(crate) rq_psn: Option<u32>,
    /// Outstanding RDMA READ/atomic as initiator.
    pub(crate) max_rd_atomic: Option<u8>,
    /// RNR NAK timer code sent to peers.
    pub(crate) min_rnr_timer: Option<u8>,
    /// PSN of the next request sent.
    pub(crate) sq_psn: Option<u32>,
    /// Outstanding RDMA READ/atomic as responder.
    pub(crate) max_dest_rd_atomic: Option<u8>,
    /// Destination QP number.
    pub(crate) dest_qpn: Option<u32>,
}

/// The attributes of a queue pair, as `query_qp` reports them.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttrs {
    /// Current state.
    pub(crate) state: QpState,
    /// Whether an SQ-drained event was requested.
    pub(crate) en_sqd_async_notify: bool,
    /// Whether the send queue is still draining (in SQD).
    pub(crate) sq_draining: bool,
    /// Remote access allowed.
    pub(crate) access_flags: u32,
    /// Q_Key.
    pub(crate) qkey: u32,
    /// Primary path.
    pub(crate) av: Option<AddressVector>,
    /// Path MTU.
    pub(crate) path_mtu: IbMtu,
    /// Local ACK timeout exponent.
    pub(crate) timeout: u8,
    /// Retries on timeout.
    pub(crate) retry_cnt: u8,
    /// Retries on RNR NAK.
    pub(crate) rnr_retry: u8,
    /// Next expected request PSN.
    pub(crate) rq_psn: u32,
    /// Outstanding RDMA READ/atomic as initiator.
    pub(crate) max_rd_atomic: u8,
    /// RNR NAK timer code.
    pub(crate) min_rnr_timer: u8,
    /// Next request PSN.
    pub(crate) sq_psn: u32,
    /// Outstanding RDMA READ/atomic as responder.
    pub(crate) max_dest_rd_atomic: u8,
    /// Destination QP number.
    pub(crate) dest_qpn: u32,
    /// Queue sizes.
    pub(crate) caps: QpCaps,
    /// Transport service.
    pub(crate) qp_type: Option<QpType>,
    /// Whether every send completes with a CQE.
    pub(crate) signal_all: bool,
}

/// `ib_device_ops.create_qp`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_qp` bytes whose
/// `device` is a live `Device<T>`, valid `init`, and `udata` NULL (kernel
/// consumers) or the udata of a live bundle.
pub(super) unsafe extern "C" fn create<T: Driver>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid per the function contract.
        let (init, dev) = unsafe { (&mut *init, device_from_raw::<T>((*qp).device)) };
        let qp_type = QpType::from_raw(init.qp_type).ok_or(EOPNOTSUPP)?;
        if init.create_flags != 0 || !init.rwq_ind_tbl.is_null() || !init.xrcd.is_null() {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: the core passes NULL or the udata of a live call.
        let user = unsafe { UData::user_call::<T>(udata) };
        let req = QpRequest {
            qp_type,
            caps: QpCaps::from_raw(&init.cap),
            signal_all: init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            has_srq: !init.srq.is_null(),
            user,
        };
        let (data, created) = T::create_qp(dev, req)?;
        // SAFETY: a fresh object of `Qp<T>::SIZE` bytes.
        unsafe { Qp::<T>::init_pinned(qp, data)? };
        // SAFETY: initialised just above.
        let this = unsafe { Qp::<T>::from_raw(qp) };
        // INVARIANT (of `QpLink`): `destroy` revokes it before the QP goes.
        T::qp_link(this.data()).attach(qp);
        created.caps.write_to(&mut init.cap);
        // SAFETY: the QP number is the driver's to set before returning.
        unsafe { (*qp).qp_num = created.qpn };
        Ok(0)
    })
}

/// `ib_device_ops.destroy_qp`.
///
/// # Safety
///
/// Called once by the core for a QP `create` initialised.
pub(super) unsafe extern "C" fn destroy<T: Driver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Qp::<T>::from_raw(qp) };
    T::destroy_qp(this);
    // Waits for deferred work that is using the QP right now.
    T::qp_link(this.data()).revoke();
    // SAFETY: initialised by `create` and not used again.
    unsafe { Qp::<T>::drop_data(qp) };
    0
}

/// Attribute mask bits sroce does not support: alternate paths (automatic
/// path migration) and rate limits.
const UNSUPPORTED_MASK: u32 =
    bindings::ib_qp_attr_mask_IB_QP_ALT_PATH | bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT;

/// `ib_device_ops.modify_qp`.
///
/// # Safety
///
/// Called by the core for a live QP with a valid `attr`.
pub(super) unsafe extern "C" fn modify<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: kernel::ffi::c_int,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: live and initialised; `attr` valid (function contract).
        let (this, attr) = unsafe { (Qp::<T>::from_raw(qp), &*attr) };
        let mask = u32::try_from(mask).map_err(|_| EINVAL)?;
        let has = |bit: u32| mask & bit != 0;
        if has(UNSUPPORTED_MASK) {
            return Err(EOPNOTSUPP);
        }
        let current = T::qp_attrs(this);
        let qp_type = current.qp_type.ok_or(EINVAL)?;
        let cur_state = if has(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE) {
            let s = QpState::from_raw(attr.cur_qp_state).ok_or(EINVAL)?;
            // The caller's idea of the current state must be right.
            if s != current.state {
                return Err(EINVAL);
            }
            s
        } else {
            current.state
        };
        let next = if has(bindings::ib_qp_attr_mask_IB_QP_STATE) {
            QpState::from_raw(attr.qp_state).ok_or(EINVAL)?
        } else {
            cur_state
        };
        // SAFETY: a pure function of its arguments.
        let ok = unsafe {
            bindings::ib_modify_qp_is_ok(cur_state.to_raw(), next.to_raw(), qp_type.to_raw(), mask)
        };
        if !ok {
            return Err(EINVAL);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_PORT) && attr.port_num != PORT {
            return Err(EINVAL);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX) && attr.pkey_index != 0 {
            return Err(EINVAL);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_CAP) {
            // Resizing a QP's queues is not supported.
            return Err(EOPNOTSUPP);
        }
        let opt = |bit: u32| has(bit);
        let change = QpAttrChange {
            state: opt(bindings::ib_qp_attr_mask_IB_QP_STATE).then_some(next),
            en_sqd_async_notify: opt(bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY)
                .then_some(attr.en_sqd_async_notify != 0),
            access_flags: opt(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS)
                .then(|| u32::try_from(attr.qp_access_flags).map_err(|_| EINVAL))
                .transpose()?,
            qkey: opt(bindings::ib_qp_attr_mask_IB_QP_QKEY).then_some(attr.qkey),
            av: opt(bindings::ib_qp_attr_mask_IB_QP_AV)
                .then(|| AddressVector::from_ah_attr(&attr.ah_attr))
                .transpose()?,
            path_mtu: opt(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU)
                .then(|| IbMtu::from_raw(attr.path_mtu).ok_or(EINVAL))
                .transpose()?,
            timeout: opt(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT).then_some(attr.timeout),
            retry_cnt: opt(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT).then_some(attr.retry_cnt),
            rnr_retry: opt(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY).then_some(attr.rnr_retry),
            rq_psn: opt(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN).then_some(attr.rq_psn),
            max_rd_atomic: opt(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
                .then_some(attr.max_rd_atomic),
            min_rnr_timer: opt(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER)
                .then_some(attr.min_rnr_timer),
            sq_psn: opt(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN).then_some(attr.sq_psn),
            max_dest_rd_atomic: opt(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
                .then_some(attr.max_dest_rd_atomic),
            dest_qpn: opt(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN).then_some(attr.dest_qp_num),
        };
        T::modify_qp(this, &change)?;
        Ok(0)
    })
}

/// `ib_device_ops.query_qp`.
///
/// # Safety
///
/// Called by the core for a live QP with valid out-pointers.
pub(super) unsafe extern "C" fn query<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: kernel::ffi::c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised; out-pointers valid (function contract).
    let (this, out, init) = unsafe { (Qp::<T>::from_raw(qp), &mut *attr, &mut *init) };
    let a = T::qp_attrs(this);
    out.qp_state = a.state.to_raw();
    out.cur_qp_state = a.state.to_raw();
    out.path_mtu = a.path_mtu as u32;
    out.qkey = a.qkey;
    out.rq_psn = a.rq_psn;
    out.sq_psn = a.sq_psn;
    out.dest_qp_num = a.dest_qpn;
    out.qp_access_flags = i32::try_from(a.access_flags).unwrap_or(0);
    a.caps.write_to(&mut out.cap);
    if let Some(av) = &a.av {
        av.write_ah_attr(PORT, &mut out.ah_attr);
    }
    out.pkey_index = 0;
    out.en_sqd_async_notify = u8::from(a.en_sqd_async_notify);
    out.sq_draining = u8::from(a.sq_draining);
    out.max_rd_atomic = a.max_rd_atomic;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic;
    out.min_rnr_timer = a.min_rnr_timer;
    out.port_num = PORT;
    out.timeout = a.timeout;
    out.retry_cnt = a.retry_cnt;
    out.rnr_retry = a.rnr_retry;

    a.caps.write_to(&mut init.cap);
    init.sq_sig_type = if a.signal_all {
        bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        bindings::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    if let Some(t) = a.qp_type {
        init.qp_type = t.to_raw();
    }
    init.port_num = PORT;
    // SAFETY: the core set these when it created the QP; they stay valid.
    unsafe {
        init.send_cq = (*qp).send_cq;
        init.recv_cq = (*qp).recv_cq;
        init.srq = (*qp).srq;
    }
    0
}

/// `ib_device_ops.post_send`. Processes post through the send queue ring
/// and then ring this doorbell (`IB_USER_VERBS_CMD_POST_SEND` with no work
/// requests, as rxe's userspace does); kernel consumers pass their work
/// requests, which the driver writes into its kernel ring.
///
/// # Safety
///
/// Called by the core for a live QP; `wr` is NULL or a valid list and
/// `bad_wr` a valid out-pointer.
pub(super) unsafe extern "C" fn post_send<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Qp::<T>::from_raw(qp) };
    if wr.is_null() {
        return from_result(|| {
            T::post_send(this)?;
            Ok(0)
        });
    }
    // SAFETY: a live QP; the type is set by the core at creation.
    let qp_type = unsafe { (*qp).qp_type };
    let ud =
        qp_type == bindings::ib_qp_type_IB_QPT_UD || qp_type == bindings::ib_qp_type_IB_QPT_GSI;
    // SAFETY: a valid chain for this call (function contract); the core
    // embeds UD and GSI requests in `ib_ud_wr`.
    let mut wrs = unsafe { SendWrs::<T>::new(wr, ud) };
    match T::post_send_wrs(this, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: a valid out-pointer (function contract).
            unsafe { *bad_wr = if wrs.is_empty() { wr } else { wrs.position() } };
            e.to_errno()
        }
    }
}

/// `ib_device_ops.post_recv`: kernel consumers' receive work requests
/// (processes post through the receive ring).
///
/// # Safety
///
/// Called by the core for a live QP; `wr` is a valid list and `bad_wr` a
/// valid out-pointer.
pub(super) unsafe extern "C" fn post_recv<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    // SAFETY: live and initialised (function contract).
    let this = unsafe { Qp::<T>::from_raw(qp) };
    // SAFETY: a valid chain for this call (function contract).
    let mut wrs = unsafe { RecvWrs::new(wr) };
    match T::post_recv_wrs(this, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: a valid out-pointer (function contract).
            unsafe { *bad_wr = if wrs.is_empty() { wr } else { wrs.position() } };
            e.to_errno()
        }
    }
}
