// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: numbers, rings shared with the owning process, attributes
//! and the state machine (transitions are checked by the RDMA core's table
//! in the `rdma` layer; value ranges here).

use super::{
    cq,
    device::SroceDevice,
    limits,
    rc::{self, QpShared, RcState},
    rc_sessions::SessionOverride,
    ud_sessions::UdSessions,
};
use crate::net::route::RouteCache;
use crate::rdma::{
    attr::IbMtu,
    bh_lock::{self, new_spinlock_bh, SpinLockBh, SpinLockBhGuard},
    device::{Device, PORT},
    kwr::{RecvWrs, SendWrs, WqeLimits},
    qp::{Qp, QpAttrChange, QpAttrs, QpCaps, QpCreated, QpLink, QpRequest, QpState, QpType},
    queue::{KernelRingProducer, UserProducerQueue},
    rxe_abi::{CreateQpResp, RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, SendWqe, WQE_ID_LEN},
};
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use kernel::{
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Arc, Mutex, SpinLockIrq},
};

/// PSNs are 24 bits.
const PSN_MASK: u32 = 0x00ff_ffff;
/// Access flags a QP may grant: local write and remote write/read/atomic.
const QP_ACCESS_MASK: u32 = 0xf;

/// The rings a process shares with a queue pair.
pub(crate) struct Rings {
    pub(crate) send: UserProducerQueue,
    /// `None` when receives come from a shared receive queue.
    pub(crate) recv: Option<UserProducerQueue>,
}

impl Rings {
    /// Work requests posted and not yet taken by the kernel: (send, receive).
    fn outstanding(&self) -> (u32, u32) {
        (
            self.send.pending(),
            self.recv.as_ref().map_or(0, UserProducerQueue::pending),
        )
    }
}

/// The mutable part of a queue pair, behind one spinlock that the receive
/// softirq takes too: attributes change, queues are flushed and the data
/// path runs under it. Nothing under it sleeps: what needs to (sockets of
/// a session group, a new connection's memory) is built before it is
/// taken and dropped after it is released.
pub(crate) struct QpInner {
    pub(crate) attrs: QpAttrs,
    pub(crate) rings: Rings,
    /// The RC connection and its engines, from RTR until error or reset.
    pub(crate) rc: Option<KBox<RcState>>,
    /// The administrator's override of the session group (`QP_SET`).
    pub(crate) sessions_override: SessionOverride,
    /// A UD QP's session groups, one per destination.
    pub(crate) ud_sessions: UdSessions,
    /// The routes of the flows this QP sent on last.
    pub(crate) routes: RouteCache,
    /// A connection that ended under the lock (the error state), dropped
    /// in process context: its session group's ports are sockets.
    pub(crate) retired: Option<KBox<RcState>>,
    /// Where a UD (or GSI) QP's pass stages the WQE it works on.
    pub(crate) ud_stage: Option<KBox<super::ud::WqeStage>>,
    /// What the data path waits for, of on-demand paged memory.
    pub(crate) faults: super::odp::PageFaults,
}

impl QpInner {
    /// What must be dropped outside the lock, taken out of it.
    pub(crate) fn take_retired(&mut self) -> Option<KBox<RcState>> {
        self.retired.take()
    }
}

/// sroce's state of one queue pair.
#[pin_data]
pub(crate) struct SroceQp {
    qpn: u32,
    /// Never reused (unlike `qpn`): what a type 2 memory window is bound to.
    serial: u64,
    qp_type: QpType,
    /// Serialises the control operations (modify, session override),
    /// which prepare what they install while the data path runs.
    #[pin]
    control: Mutex<()>,
    #[pin]
    inner: SpinLockBh<QpInner>,
    /// What the receive path and deferred passes share; in the device's QP
    /// table while the QP exists.
    shared: Arc<QpShared>,
    /// Kernel consumers' posting into the send and receive rings (`None`
    /// for a process's QP). Posting may happen in atomic context, so it
    /// takes these spinlocks, never the QP's mutex.
    #[pin]
    sq_post: SpinLockIrq<Option<KernelRingProducer>>,
    #[pin]
    rq_post: SpinLockIrq<Option<KernelRingProducer>>,
    send_limits: WqeLimits,
    recv_limits: WqeLimits,
    /// The QP state (`QpState as u8`), readable without the mutex by
    /// kernel posting; written with the state under the mutex.
    state: AtomicU8,
    /// A completion of this QP found its CQ overrun: the next pass moves
    /// the QP to the error state (see [`cq::post`]).
    cq_overrun: AtomicBool,
}

impl SroceQp {
    /// The QP number.
    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The QP's serial number (see [`SroceDevice::next_qp_serial`]).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The QP's service type.
    pub(crate) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The shared state.
    pub(crate) fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }

    /// The link the rdma layer attaches.
    pub(crate) fn link(&self) -> &QpLink<SroceDevice> {
        self.shared.link()
    }

    /// Locks the QP's state.
    pub(crate) fn lock(&self) -> SpinLockBhGuard<'_, QpInner> {
        self.inner.lock()
    }

    /// Locks the QP's state unless another context holds it.
    pub(crate) fn try_lock(&self) -> Option<SpinLockBhGuard<'_, QpInner>> {
        self.inner.try_lock()
    }

    /// Serialises a control operation with the others (process context).
    pub(crate) fn control(&self) -> kernel::sync::MutexGuard<'_, ()> {
        self.control.lock()
    }

    /// Notes that a CQ of the QP overran (callable with the QP locked or
    /// from any context); the next pass then moves the QP to the error
    /// state.
    pub(crate) fn cq_overrun(&self) {
        if !self.cq_overrun.swap(true, Ordering::AcqRel) {
            self.shared.schedule();
        }
    }

    /// Publishes the state for kernel posting; call with the QP locked
    /// after the state changed.
    pub(crate) fn publish_state(&self, s: QpState) {
        self.state.store(s as u8, Ordering::Release);
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }
}

/// Bytes of a send WQE slot that holds `sge` entries or `inline` bytes.
fn send_wqe_size(caps: &QpCaps) -> usize {
    SEND_WQE_HEADER + (caps.max_send_sge as usize * SGE_SIZE).max(caps.max_inline_data as usize)
}

fn check_caps(req: &QpRequest<'_, SroceDevice>) -> Result {
    let c = &req.caps;
    if c.max_send_wr > limits::MAX_QP_WR
        || c.max_send_sge > limits::MAX_SGE
        || c.max_inline_data > limits::MAX_INLINE_DATA
    {
        return Err(EINVAL);
    }
    if !req.has_srq && (c.max_recv_wr > limits::MAX_QP_WR || c.max_recv_sge > limits::MAX_SGE) {
        return Err(EINVAL);
    }
    Ok(())
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    req: QpRequest<'_, SroceDevice>,
) -> Result<(impl PinInit<SroceQp, Error>, QpCreated)> {
    match req.qp_type {
        QpType::Rc | QpType::Uc | QpType::Ud => {}
        // QP1 belongs to the kernel's MAD layer.
        QpType::Gsi if req.user.is_none() => {}
        _ => return Err(EOPNOTSUPP),
    }
    check_caps(&req)?;
    let uctx = req.user.as_ref().map(|(u, _)| *u);
    if let Some((_, udata)) = req.user.as_ref() {
        if udata.out_len() < core::mem::size_of::<CreateQpResp>() {
            return Err(EINVAL);
        }
    }

    let (send, sq_mi) =
        UserProducerQueue::new(req.caps.max_send_wr.max(1), send_wqe_size(&req.caps), uctx)?;
    let fit = send.elem_size() - SEND_WQE_HEADER;
    let mut caps = QpCaps {
        max_send_wr: send.capacity(),
        max_send_sge: ((fit / SGE_SIZE) as u32).min(limits::MAX_SGE),
        max_inline_data: (fit as u32).min(limits::MAX_INLINE_DATA),
        ..QpCaps::default()
    };
    let (recv, rq_mi) = if req.has_srq {
        (None, Default::default())
    } else {
        let sges = req.caps.max_recv_sge.max(1);
        let (q, mi) = UserProducerQueue::new(
            req.caps.max_recv_wr.max(1),
            RECV_WQE_HEADER + sges as usize * SGE_SIZE,
            uctx,
        )?;
        caps.max_recv_wr = q.capacity();
        caps.max_recv_sge =
            (((q.elem_size() - RECV_WQE_HEADER) / SGE_SIZE) as u32).min(limits::MAX_SGE);
        (Some(q), mi)
    };
    let sq_post = send.kernel_producer();
    let rq_post = recv.as_ref().and_then(UserProducerQueue::kernel_producer);

    let ud_stage = match req.qp_type {
        QpType::Ud | QpType::Gsi => Some(super::ud::WqeStage::new()?),
        _ => None,
    };
    let shared = QpShared::new(dev.data().pass_threads.seat())?;
    let qpn = if req.qp_type == QpType::Gsi {
        limits::GSI_QPN
    } else {
        dev.data().alloc_qpn()?
    };
    let resp = CreateQpResp {
        rq_mi: rq_mi.into(),
        sq_mi: sq_mi.into(),
    };
    let answered = match req.user.as_ref() {
        Some((_, udata)) => udata.write(&resp),
        None => Ok(()),
    };
    if let Err(e) = answered.and_then(|()| dev.data().insert_qp(qpn, shared.clone())) {
        dev.data().free_qpn(qpn);
        return Err(e);
    }
    let attrs = QpAttrs {
        caps,
        qp_type: Some(req.qp_type),
        signal_all: req.signal_all,
        path_mtu: IbMtu::Mtu1024,
        ..QpAttrs::default()
    };
    let serial = dev.data().next_qp_serial();
    Ok((
        try_pin_init!(SroceQp {
            qpn,
            serial,
            qp_type: req.qp_type,
            control <- new_mutex!((), "sroce::qp_control"),
            inner <- new_spinlock_bh!(
                QpInner {
                    attrs,
                    rings: Rings { send, recv },
                    rc: None,
                    sessions_override: SessionOverride::default(),
                    ud_sessions: UdSessions::default(),
                    routes: RouteCache::new(),
                    retired: None,
                    ud_stage,
                    faults: super::odp::PageFaults::new(),
                },
                "sroce::qp"
            ),
            shared,
            sq_post <- new_spinlock_irq!(sq_post, "sroce::qp_sq_post"),
            rq_post <- new_spinlock_irq!(rq_post, "sroce::qp_rq_post"),
            send_limits: WqeLimits {
                max_sge: caps.max_send_sge,
                max_inline: caps.max_inline_data,
            },
            recv_limits: WqeLimits {
                max_sge: caps.max_recv_sge,
                max_inline: 0,
            },
            state: AtomicU8::new(QpState::Reset as u8),
            cq_overrun: AtomicBool::new(false),
        }),
        QpCreated { qpn, caps },
    ))
}

/// Posts a kernel consumer's send work requests into the send ring and
/// runs them as a process's WQEs: at once if the QP is idle and the
/// caller's context allows (not a hard interrupt, interrupts enabled),
/// else in a pass on the QP's thread.
pub(crate) fn post_send_wrs(qp: &Qp<SroceDevice>, wrs: &mut SendWrs<'_, SroceDevice>) -> Result {
    let d = qp.data();
    let state = d.state();
    if state == QpState::Reset as u8 || state == QpState::Init as u8 || state == QpState::Rtr as u8
    {
        return Err(EINVAL);
    }
    let posted = {
        let mut guard = d.sq_post.lock();
        let prod = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
        let mut r = Ok(());
        while !wrs.is_empty() {
            let ah_num = wrs.ah().map_or(0, |ah| ah.data().num());
            r = prod.push_with(|slot| wrs.encode(slot, &d.send_limits, ah_num));
            if r.is_err() {
                break;
            }
            wrs.advance();
        }
        r
    };
    // Even after a failure, what was posted before it must run.
    if !(bh_lock::bottom_halves_can_be_disabled() && rc::try_pass(qp)) {
        d.shared.schedule();
    }
    posted
}

/// Posts a kernel consumer's receive work requests into the receive ring.
pub(crate) fn post_recv_wrs(qp: &Qp<SroceDevice>, wrs: &mut RecvWrs<'_>) -> Result {
    let d = qp.data();
    if d.state() == QpState::Reset as u8 {
        return Err(EINVAL);
    }
    let mut guard = d.rq_post.lock();
    // No receive ring: the QP receives from an SRQ (or is a process's).
    let prod = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    while !wrs.is_empty() {
        prod.push_with(|slot| wrs.encode(slot, &d.recv_limits))?;
        wrs.advance();
    }
    drop(guard);
    if d.state() == QpState::Err as u8 {
        // A pass flushes what is posted in the error state.
        d.shared.schedule();
    }
    Ok(())
}

pub(crate) fn destroy(qp: &Qp<SroceDevice>) {
    let dev = qp.device();
    // No packet reaches the QP from here on; queued work finds its link
    // revoked once this returns.
    dev.data().remove_qp(qp.data().qpn);
    qp.data().shared.close();
    let (rc, retired, ud) = {
        let mut inner = qp.data().inner.lock();
        (
            inner.rc.take(),
            inner.take_retired(),
            core::mem::take(&mut inner.ud_sessions),
        )
    };
    // Session groups release their ports (sockets) here, unlocked.
    drop((rc, retired, ud));
    dev.data().free_qpn(qp.data().qpn);
}

/// The send doorbell of a user QP (the `write()` of an empty POST_SEND,
/// process context): the caller's own context runs a pass of the QP, so a
/// message leaves without waiting for a worker to wake up (rxe 7.3 queues
/// its requester's work item here; its comment still speaks of process
/// context); a stream's pass goes to the QP's pass thread when that runs
/// on another CPU ([`super::rc::doorbell_leaves_pass`]). If the QP is
/// busy (a pass on its thread, the receive softirq or another doorbell
/// holds it), the holder may have looked at the ring before these WQEs
/// were in it: it runs one more pass when it lets go
/// ([`super::rc::answer_doorbell`]), and a pass on the QP's thread is
/// scheduled too, for a holder that is not a pass.
pub(crate) fn post_send(qp: &Qp<SroceDevice>) -> Result {
    // The published state: refusing needs no lock.
    let state = qp.data().state();
    if state == QpState::Reset as u8 || state == QpState::Init as u8 || state == QpState::Rtr as u8
    {
        return Err(EINVAL);
    }
    let Some(mut inner) = qp.data().inner.try_lock() else {
        // The holder runs a pass for these WQEs when it lets go, if it is
        // running one; the QP's thread covers any other holder.
        qp.data().shared.ring_doorbell();
        qp.data().shared.schedule();
        return Ok(());
    };
    if super::rc::doorbell_leaves_pass(qp, &mut inner) {
        return Ok(());
    }
    let sent_before = super::rc::sent_so_far(qp);
    let r = match inner.attrs.state {
        QpState::Reset | QpState::Init | QpState::Rtr => Err(EINVAL),
        QpState::Err => {
            // Work posted in the error state completes flushed.
            flush(qp, &mut inner.rings);
            Ok(())
        }
        _ => {
            super::rc::run_pass(qp, &mut inner, super::rc::PassContext::Task);
            Ok(())
        }
    };
    let retired = inner.take_retired();
    // A process's doorbell: its pass's packets are delivered by the unlock.
    super::rc::unlock_after_pass(qp, inner, sent_before);
    drop(retired);
    super::rc::answer_doorbell(qp, super::rc::PassContext::Task);
    r
}

/// Moves the QP to the error state if one of its CQs overran (an overrun
/// CQ stays in the error state, so every later pass finds it so too),
/// telling the owner with `IB_EVENT_QP_FATAL`. A pass calls it first,
/// with the QP locked.
pub(crate) fn check_cq_overrun(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    let d = qp.data();
    if !d.cq_overrun.load(Ordering::Acquire) || inner.attrs.state == QpState::Err {
        return;
    }
    inner.attrs.state = QpState::Err;
    d.publish_state(QpState::Err);
    rc::enter_error(qp, inner);
    qp.report_fatal();
}

/// Checks value ranges the state table does not cover.
fn check_change(dev: &Device<SroceDevice>, c: &QpAttrChange) -> Result {
    let atomics_ok = |v: Option<u8>| v.is_none_or(|n| u32::from(n) <= limits::MAX_QP_RD_ATOM);
    let five_bits = |v: Option<u8>| v.is_none_or(|n| n <= 31);
    let three_bits = |v: Option<u8>| v.is_none_or(|n| n <= 7);
    if !atomics_ok(c.max_rd_atomic)
        || !atomics_ok(c.max_dest_rd_atomic)
        || !five_bits(c.timeout)
        || !five_bits(c.min_rnr_timer)
        || !three_bits(c.retry_cnt)
        || !three_bits(c.rnr_retry)
        || c.access_flags.is_some_and(|f| f & !QP_ACCESS_MASK != 0)
        || c.dest_qpn.is_some_and(|n| n > PSN_MASK)
    {
        return Err(EINVAL);
    }
    if let Some(mtu) = c.path_mtu {
        // The path MTU may not exceed what the port carries now.
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        let active = limits::ib_mtu_for(ndev.mtu()).ok_or(EINVAL)?;
        if mtu as u32 > active as u32 {
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// Sets the attributes `c` changes.
fn apply_change(a: &mut QpAttrs, c: &QpAttrChange) {
    if let Some(s) = c.state {
        a.state = s;
    }
    macro_rules! apply {
        ($($field:ident),*) => { $(if let Some(v) = c.$field { a.$field = v; })* };
    }
    apply!(
        en_sqd_async_notify,
        access_flags,
        qkey,
        path_mtu,
        timeout,
        retry_cnt,
        rnr_retry,
        max_rd_atomic,
        min_rnr_timer,
        max_dest_rd_atomic,
        dest_qpn
    );
    if let Some(av) = c.av {
        a.av = Some(av);
    }
    if let Some(p) = c.rq_psn {
        a.rq_psn = p & PSN_MASK;
    }
    if let Some(p) = c.sq_psn {
        a.sq_psn = p & PSN_MASK;
    }
}

pub(crate) fn modify(qp: &Qp<SroceDevice>, c: &QpAttrChange) -> Result {
    check_change(qp.device(), c)?;
    let d = qp.data();
    // Modifications are serialised: what is built below from the
    // attributes read here is still what they will be.
    let _control = d.control();
    let connect = {
        let inner = d.inner.lock();
        let mut a = inner.attrs;
        let entering_rtr = c.state == Some(QpState::Rtr) && a.state != QpState::Rtr;
        apply_change(&mut a, c);
        let connected = matches!(a.qp_type, Some(QpType::Rc | QpType::Uc));
        (entering_rtr && connected).then_some((a, inner.sessions_override))
    };
    // A connection's memory and session sockets are allocated sleeping,
    // before the data path's lock is taken.
    let connection = connect.map(|(a, ov)| RcState::new(qp.device(), d.qpn, &a, &ov));
    let mut guard = d.inner.lock();
    let dropped = modify_locked(qp, &mut guard, c, connection);
    let retired = guard.take_retired();
    drop(guard);
    // Released unlocked: session groups hold sockets.
    let (r, old, ud) = dropped;
    drop((old, ud, retired));
    r
}

/// What a modification leaves to drop outside the lock: its result, a
/// connection and a UD QP's session groups.
type Dropped = (Result, Option<KBox<RcState>>, UdSessions);

/// Applies `c` with the QP locked; `connection` is the connection built
/// for a transition to RTR. Not inlined: with what it calls (the error
/// state's flushes) and `modify`'s copies of the attributes, one frame
/// came near `CONFIG_FRAME_WARN` (`tools/check-frames.sh`).
#[inline(never)]
fn modify_locked(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    c: &QpAttrChange,
    connection: Option<Result<KBox<RcState>>>,
) -> Dropped {
    let a = &mut inner.attrs;
    let entering_error = c.state == Some(QpState::Err) && a.state != QpState::Err;
    let entering_rts = c.state == Some(QpState::Rts) && a.state != QpState::Rts;
    apply_change(a, c);
    let mut old = None;
    match connection {
        Some(Ok(s)) => {
            old = inner.rc.replace(s);
            // Faults the old connection waited for are its own.
            inner.faults.clear();
        }
        Some(Err(e)) => {
            // The attributes are applied but the QP cannot connect:
            // leave it in the error state, as a failed transition
            // would in hardware.
            inner.attrs.state = QpState::Err;
            qp.data().publish_state(QpState::Err);
            rc::enter_error(qp, inner);
            return (Err(e), old, UdSessions::default());
        }
        None => {}
    }
    let a = &mut inner.attrs;
    if entering_rts {
        if let Some(s) = inner.rc.as_mut() {
            s.ready_to_send(a);
        }
    }
    if entering_error {
        rc::enter_error(qp, inner);
    }
    let a = &mut inner.attrs;
    let mut ud = UdSessions::default();
    if a.state == QpState::Reset {
        old = old.or(inner.rc.take());
        ud = core::mem::take(&mut inner.ud_sessions);
        // A reset QP forgets its connection.
        let keep = (a.caps, a.qp_type, a.signal_all);
        *a = QpAttrs {
            caps: keep.0,
            qp_type: keep.1,
            signal_all: keep.2,
            path_mtu: IbMtu::Mtu1024,
            ..QpAttrs::default()
        };
        inner.faults.clear();
        super::ud::forget_held(inner);
        // What arrived for the old connection (pieces of a datagram held
        // for their last one are scheduled by nothing).
        qp.data().shared().discard_rx();
    }
    qp.data().publish_state(inner.attrs.state);
    (Ok(()), old, ud)
}

pub(crate) fn attrs(qp: &Qp<SroceDevice>) -> QpAttrs {
    let inner = qp.data().inner.lock();
    let mut a = inner.attrs;
    let (send_outstanding, _) = inner.rings.outstanding();
    a.sq_draining = a.state == QpState::Sqd && send_outstanding > 0;
    a
}

/// Completes every posted, unprocessed work request with a flush error, as
/// a QP entering the error state must (IBTA 10.3.1): sends on the send CQ,
/// receives on the receive CQ. Receives posted to a shared receive queue
/// belong to the SRQ and stay.
///
/// At most what is pending when it starts (a ring's worth at most): a
/// process that keeps advancing the producer index cannot hold the QP's
/// lock here. What it posts later is flushed by its next doorbell.
pub(crate) fn flush(qp: &Qp<SroceDevice>, rings: &mut Rings) {
    flush_failing(qp, rings, None);
}

/// [`flush`], except that the send WQE at pending position `failed.0`
/// completes with the status `failed.1`: a WQE that failed before the
/// requester took it (IBTA: it completes with its error, the rest flush).
pub(crate) fn flush_failing(
    qp: &Qp<SroceDevice>,
    rings: &mut Rings,
    failed: Option<(u32, WcStatus)>,
) {
    let qpn = qp.data().qpn;
    let mut buf = [0u8; WQE_ID_LEN];
    // Each slot goes back before its completion is visible: the process
    // may post into it as soon as it polls the completion.
    for i in 0..rings.send.pending() {
        let Ok(n) = rings.send.copy_oldest(&mut buf) else {
            break;
        };
        rings.send.retire();
        if let Ok((wr_id, opcode)) = SendWqe::id_and_completion(&buf[..n]) {
            let mut c = Completion::flushed(wr_id, opcode, qpn);
            if let Some((_, status)) = failed.filter(|&(at, _)| at == i) {
                c.status = status;
            }
            let _ = cq::post(qp.send_cq(), qp, &c, false);
        }
    }
    if let Some(recv) = rings.recv.as_mut() {
        for _ in 0..recv.pending() {
            let Ok(n) = recv.copy_oldest(&mut buf) else {
                break;
            };
            recv.retire();
            if let Ok(wr_id) = RecvWqe::id(&buf[..n]) {
                let c = Completion::flushed(wr_id, WcOpcode::Recv, qpn);
                let _ = cq::post(qp.recv_cq(), qp, &c, false);
            }
        }
    }
}
