// SPDX-License-Identifier: GPL-2.0

//! The RC data path of one queue pair: the protocol core's requester and
//! responder engines driven from a work item, packets in through
//! [`super::recv`] and out through [`super::io::send`].
//!
//! Everything runs in the QP's work item (process context) under the QP's
//! lock; the receive softirq only queues packets ([`QpShared::queue_rx`])
//! and schedules the work, and the QP's timer ([`super::rc_timers`]) only
//! schedules it too. Not yet here: SEND with invalidate.

use super::{
    cq,
    device::SroceDevice,
    io,
    io::{counters::Counter, RxPacket},
    qp::QpInner,
    rc_sessions::{GoBack, Origin, QpSessions, SessionOverride},
    rc_timers::{Now, RcTimers},
    srq::Taken,
};
use crate::net::{addr::IpAddr, route::RouteCache};
use crate::rdma::{
    access::Access,
    av::AddressVector,
    device::Device,
    qp::{Qp, QpLink, QpState, QpType},
    queue::UserProducerQueue,
    rxe_abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    srq::Srq,
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, SendData, SendOp, SendWqe, Sge, MAX_SGE},
};
use crate::roce::{
    aeth::{Aeth, NakCode, Syndrome},
    atomic_ack_eth::AtomicAckEth,
    bth::Bth,
    completer::{Action, Response, ResponseKind},
    ieth::Ieth,
    immdt::ImmDt,
    opcode::{ExtHeader, Opcode, Operation, Transport},
    packet::Headers,
    psn::Psn,
    requester::{RequestPacket, RequesterConfig, SendQueue},
    responder::{
        Decision, Outcome, ReadAtomicResource, Reply, Request, ResponderConfig, ResponderWith,
        Work as RespWork, WorkKind,
    },
    reth::Reth,
    segment::{Mtu, WqeOp},
    session::{health::probe_psn, SessionId},
};
use kernel::{
    alloc::KVBox,
    new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, SpinLockIrq},
    time::{
        hrtimer::{HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart, RelativeMode},
        Instant, Monotonic,
    },
    workqueue::{Work, WorkItem},
};

/// Send work requests the requester engine holds at once (taken from the
/// ring, not yet completed).
const SQ_DEPTH: usize = 32;
/// RDMA READ/atomic responder resources: as many as the device promises
/// (`max_qp_rd_atom`), since initiators size their depth from it.
const RD_ATOM: usize = super::limits::MAX_QP_RD_ATOM as usize;

/// A responder's READ/atomic resources, on the heap (128 of them are 4 KiB:
/// not for a kernel stack).
pub(crate) struct ResourceSlots(KVVec<Option<ReadAtomicResource>>);

impl AsRef<[Option<ReadAtomicResource>]> for ResourceSlots {
    fn as_ref(&self) -> &[Option<ReadAtomicResource>] {
        &self.0
    }
}

impl AsMut<[Option<ReadAtomicResource>]> for ResourceSlots {
    fn as_mut(&mut self) -> &mut [Option<ReadAtomicResource>] {
        &mut self.0
    }
}
/// Received packets queued for the work item at most; more are dropped
/// (and counted), as a NIC's full receive FIFO would.
const RX_QUEUE_LEN: usize = 512;
/// Received packets an RC QP's work item takes per pass; the rest wait for
/// the next pass, which it schedules (bounded time per pass: a peer's
/// flood cannot hold a worker, nor delay the QP's teardown).
const RX_PER_PASS: usize = 64;
/// RDMA READ response packets an RC QP's work item sends per pass (its
/// own or replayed); the rest go in later passes.
const READ_RESPONSES_PER_PASS: u32 = 32;
/// Largest payload of one packet (path MTU 4096).
const MAX_PAYLOAD: usize = 4096;

/// What the receive softirq and the work item share for one QP; kept alive
/// by the QP and by the device's QP table (and by a queued work item).
#[pin_data]
pub(crate) struct QpShared {
    #[pin]
    link: QpLink<SroceDevice>,
    #[pin]
    work: Work<QpShared>,
    /// Wakes the work item when a requester deadline is due.
    #[pin]
    timer: HrTimer<QpShared>,
    /// Received packets; `closed` once the QP is being destroyed.
    #[pin]
    rx: SpinLockIrq<RxQueue>,
}

/// Packets waiting for the work item.
struct RxQueue {
    packets: KVVec<RxPacket>,
    /// An empty vector of the same capacity, swapped with `packets` when
    /// the work item takes a batch (and given back empty).
    spare: KVVec<RxPacket>,
    /// A batch the work item took but did not finish, in reverse arrival
    /// order (the next packet last); taken again before any new one.
    backlog: KVVec<RxPacket>,
    /// No more scheduling: the QP is going away.
    closed: bool,
}

kernel::impl_has_work! {
    impl HasWork<Self> for QpShared { self.work }
}

kernel::impl_has_hr_timer! {
    impl HasHrTimer<Self> for QpShared {
        mode: RelativeMode<Monotonic>,
        field: self.timer
    }
}

impl HrTimerCallback for QpShared {
    type Pointer<'a> = Arc<QpShared>;

    fn run(
        this: ArcBorrow<'_, QpShared>,
        _ctx: HrTimerCallbackContext<'_, Self>,
    ) -> HrTimerRestart {
        // Hard interrupt context: only wake the work item, which checks
        // the deadlines under the QP's lock.
        Arc::<QpShared>::from(this).schedule();
        HrTimerRestart::NoRestart
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        // A destroyed QP's work does nothing; its queued packets go with
        // the last reference.
        this.link.with(run);
    }
}

impl QpShared {
    /// Shared state for a new QP.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                link <- QpLink::new(),
                work <- new_work!("sroce::qp_work"),
                timer <- HrTimer::new(),
                rx <- new_spinlock_irq!(
                    RxQueue {
                        packets: KVVec::with_capacity(RX_QUEUE_LEN, GFP_KERNEL)?,
                        spare: KVVec::with_capacity(RX_QUEUE_LEN, GFP_KERNEL)?,
                        backlog: KVVec::new(),
                        closed: false,
                    },
                    "sroce::qp_rx"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// The link the rdma layer attaches to the QP.
    pub(crate) fn link(&self) -> &QpLink<SroceDevice> {
        &self.link
    }

    /// Queues a received packet for the work item and schedules it; false
    /// if the queue is full (the packet is dropped). Any context.
    pub(crate) fn queue_rx(self: Arc<Self>, pkt: RxPacket) -> bool {
        let mut q = self.rx.lock();
        if q.closed {
            drop(q);
            // The QP is going away: freed (as a drop) outside the lock.
            drop(pkt);
            return true;
        }
        let refused = q.packets.push_within_capacity(pkt).err();
        // Under the lock, so that `close` cannot miss this queueing.
        let _ = crate::rdma::work::system_dfl().enqueue(self.clone());
        drop(q);
        // A refused packet is freed outside the IRQ-disabling lock.
        let queued = refused.is_none();
        drop(refused);
        queued
    }

    /// Schedules the work item (no-op if it is already queued or the QP is
    /// going away).
    pub(crate) fn schedule(self: &Arc<Self>) {
        let q = self.rx.lock();
        if !q.closed {
            let _ = crate::rdma::work::system_dfl().enqueue(self.clone());
        }
        drop(q);
    }

    /// Stops scheduling, then waits for the work item to finish, so no
    /// execution is left once the QP (and possibly the module) is gone.
    /// Process context; the QP's locks must not be held.
    pub(crate) fn close(&self) {
        self.rx.lock().closed = true;
        crate::rdma::work::flush(&self.work);
    }

    /// Takes every queued packet at once (the receive path goes on
    /// queueing into the spare vector meanwhile); give the emptied vector
    /// back with [`QpShared::return_batch`].
    pub(crate) fn take_batch(&self) -> KVVec<RxPacket> {
        let mut q = self.rx.lock();
        let spare = core::mem::take(&mut q.spare);
        core::mem::replace(&mut q.packets, spare)
    }

    /// Takes the unfinished batch, or else every queued packet, in reverse
    /// arrival order (pop the next one); give it back with
    /// [`QpShared::keep_backlog`].
    fn take_backlog_or_batch(&self) -> KVVec<RxPacket> {
        let mut q = self.rx.lock();
        if !q.backlog.is_empty() {
            return core::mem::take(&mut q.backlog);
        }
        drop(q);
        let mut batch = self.take_batch();
        batch.reverse();
        batch
    }

    /// Gives back a batch from [`QpShared::take_backlog_or_batch`]: what
    /// is left is taken first next time; an empty one is the next spare.
    fn keep_backlog(&self, batch: KVVec<RxPacket>) {
        if batch.is_empty() {
            self.return_batch(batch);
        } else {
            self.rx.lock().backlog = batch;
        }
    }

    /// Returns a batch's vector, emptied (packets are dropped outside the
    /// IRQ-disabling lock), as the next spare.
    pub(crate) fn return_batch(&self, mut batch: KVVec<RxPacket>) {
        batch.clear();
        let mut q = self.rx.lock();
        if q.spare.capacity() < batch.capacity() {
            q.spare = batch;
            return;
        }
        drop(q);
    }
}

/// The IP address of a GID (IPv4-mapped GIDs are IPv4).
pub(crate) fn gid_ip(gid: &[u8; 16]) -> IpAddr {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        IpAddr::V4([gid[12], gid[13], gid[14], gid[15]])
    } else {
        IpAddr::V6(*gid)
    }
}

/// The connection and engines of an RC QP from RTR on.
pub(crate) struct RcState {
    sq: SendQueue<SQ_DEPTH>,
    resp: ResponderWith<ResourceSlots>,
    flow: io::Flow,
    dest_qpn: u32,
    /// Send WQEs taken from the ring, by tag modulo `SQ_DEPTH`.
    wqes: KVVec<Option<SendWqe>>,
    /// Tag of the next WQE taken (counts WQEs taken).
    next_tag: u32,
    /// WQEs taken from the ring and not yet retired.
    pub(crate) taken: u32,
    /// A WQE that failed locally and the status it completes with.
    local_error: Option<(u32, WcStatus)>,
    /// The status of the last WQE taken from the ring, which failed before
    /// the requester saw it (malformed, or refused by the requester): it
    /// completes with this status when the QP enters the error state.
    unposted_error: Option<WcStatus>,
    /// The receive WQE of the SEND being received.
    recv: Option<RecvWqe>,
    /// Staging for one packet's payload.
    scratch: KVec<u8>,
    /// The transport and RNR timers.
    timers: RcTimers,
    /// The session group: which 5-tuple each message takes.
    pub(crate) sessions: KVBox<QpSessions<SQ_DEPTH>>,
    /// Origin of the sessions' microsecond clock.
    epoch: Now,
    /// The net device the last READ request came in through: its
    /// responses go out through it (see [`send_reply`]).
    read_ingress: i32,
}

impl RcState {
    /// A connection as the attributes at RTR describe it.
    pub(crate) fn new(
        dev: &Device<SroceDevice>,
        qpn: u32,
        a: &crate::rdma::qp::QpAttrs,
        ov: &SessionOverride,
    ) -> Result<KBox<Self>> {
        let av: AddressVector = a.av.ok_or(EINVAL)?;
        let mtu = Mtu::from_ib(a.path_mtu as u8).ok_or(EINVAL)?;
        let flow = io::Flow {
            src: gid_ip(&av.sgid),
            dst: gid_ip(&av.dgid),
            // A one-session group: the port every RoCEv2 stack (rxe, the
            // kernel's `rdma_get_udp_sport()`) would use.
            src_port: crate::roce::session::port_range::roce_v2_sport(
                av.flow_label,
                qpn,
                a.dest_qpn,
            ),
            tclass: av.traffic_class,
            hop_limit: av.hop_limit,
            out: io::OutPort::Device,
        };
        let defaults = *dev.data().sessions.lock();
        let epoch = Instant::<Monotonic>::now();
        let rto_us = crate::roce::timer::transport_timeout_ns(a.timeout).map(|ns| ns / 1000);
        let origin = Origin {
            qpn,
            flow0: flow,
            ports: defaults.ports,
            retry_cnt: a.retry_cnt,
            rto_us,
        };
        let sessions = QpSessions::new(dev, origin, &ov.apply(defaults.group), 0)?;
        let mut rcfg = ResponderConfig::new(mtu);
        rcfg.max_dest_rd_atomic = a.max_dest_rd_atomic.min(RD_ATOM as u8);
        rcfg.min_rnr_timer = a.min_rnr_timer;
        let slots = ResourceSlots(KVVec::from_elem(None, RD_ATOM, GFP_KERNEL)?);
        let mut scratch = KVec::with_capacity(MAX_PAYLOAD, GFP_KERNEL)?;
        scratch.resize(MAX_PAYLOAD, 0, GFP_KERNEL)?;
        Ok(KBox::new(
            Self {
                sq: SendQueue::new(Self::requester_config(a, mtu), Psn::new(a.sq_psn)),
                resp: ResponderWith::with_storage(slots, rcfg, Psn::new(a.rq_psn)),
                flow,
                dest_qpn: a.dest_qpn,
                wqes: KVVec::from_elem(None, SQ_DEPTH, GFP_KERNEL)?,
                next_tag: 0,
                taken: 0,
                local_error: None,
                unposted_error: None,
                recv: None,
                scratch,
                timers: RcTimers::new(a.timeout),
                sessions,
                epoch,
                read_ingress: 0,
            },
            GFP_KERNEL,
        )?)
    }

    fn requester_config(a: &crate::rdma::qp::QpAttrs, mtu: Mtu) -> RequesterConfig {
        let mut cfg = RequesterConfig::new(mtu);
        cfg.max_rd_atomic = a.max_rd_atomic;
        cfg.retry_cnt = a.retry_cnt;
        cfg.rnr_retry = a.rnr_retry;
        cfg
    }

    /// The requester's next PSN, its oldest unacknowledged PSN and the
    /// responder's expected PSN.
    pub(crate) fn psns(&self) -> (u32, u32, u32) {
        (
            self.sq.next_psn().value(),
            self.sq.una().value(),
            self.resp.epsn().value(),
        )
    }

    /// Applies a changed session override now (see
    /// [`QpSessions::reconfigure`]).
    pub(crate) fn reconfigure_sessions(
        &mut self,
        dev: &Device<SroceDevice>,
        ov: &SessionOverride,
    ) -> Result {
        let cfg = ov.apply(dev.data().sessions.lock().group);
        let now_us = self.now_us(Instant::<Monotonic>::now());
        self.sessions.reconfigure(dev, &cfg, now_us)
    }

    /// Microseconds since the connection began, the sessions' clock.
    fn now_us(&self, now: Now) -> u64 {
        u64::try_from((now - self.epoch).as_micros_ceil()).unwrap_or(0)
    }

    /// Whether the requester may take more WQEs (its window has room).
    pub(crate) fn window_has_room(&self) -> bool {
        self.sq.has_room()
    }

    /// The QP enters RTS: the requester starts at `sq_psn`.
    pub(crate) fn ready_to_send(&mut self, a: &crate::rdma::qp::QpAttrs) {
        let mtu = self.sq.config().mtu;
        self.sq = SendQueue::new(Self::requester_config(a, mtu), Psn::new(a.sq_psn));
        self.timers.set_timeout(a.timeout);
        let rto_us = crate::roce::timer::transport_timeout_ns(a.timeout).map(|ns| ns / 1000);
        self.sessions.set_transport(a.retry_cnt, rto_us);
    }
}

/// The work item's body.
fn run(qp: &Qp<SroceDevice>) {
    let mut guard = qp.data().lock();
    run_pass(qp, &mut guard);
}

/// One pass over the QP, with it locked: due timers, received packets,
/// then new send work, completions and the timers for what is outstanding.
/// Bounded (see the budgets); what is left schedules the work item.
pub(crate) fn run_pass(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    let shared = qp.data().shared();
    let counters = &qp.device().data().io.counters;
    super::qp::check_cq_overrun(qp, inner);
    // QP1 (GSI) is a UD QP with a fixed number.
    if matches!(inner.attrs.qp_type, Some(QpType::Ud | QpType::Gsi)) {
        super::ud::run(qp, inner, shared);
        return;
    }
    if inner.rc.is_none() {
        // Not connected (or reset): drop what arrived. Work a kernel
        // consumer posted in the error state completes flushed.
        shared.return_batch(shared.take_backlog_or_batch());
        if inner.attrs.state == QpState::Err {
            super::qp::flush(qp, &mut inner.rings);
        }
        return;
    }
    let now: Now = Instant::<Monotonic>::now();
    // Responses that arrived before this pass come first: when the work
    // item runs late (a busy machine), the ACKs waiting for it restart the
    // transport timer instead of a spurious timeout resending everything.
    let more = receive_batch(qp, inner, shared, now);
    if let Some(rc) = inner.rc.as_mut() {
        let rc: &mut RcState = rc;
        if rc.timers.expire(now, &mut rc.sq) {
            counters.inc(Counter::LocalAckTimeout);
            let a = go_back(rc, GoBack::Timeout, now, |sq| sq.on_timeout());
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
        }
        let now_us = rc.now_us(now);
        let oldest = rc.sq.oldest_tag();
        if rc.sessions.refresh_links(qp.device(), oldest, now_us) {
            // A session's link went down under unacknowledged requests:
            // resend them on a live one now rather than at the timeout.
            let a = rc.sq.go_back_now();
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
        }
    }
    // Completions first: the ACKs just received free send-queue slots that
    // this pass's `send` can fill from the ring at once.
    complete_sends(qp, inner);
    send(qp, inner, now);
    complete_sends(qp, inner);
    // Room freed after `send` looked (local operations performed, ACKs that
    // retired the whole window) would otherwise wait for a doorbell or a
    // packet that may never come: a process waiting for a completion of
    // work still in the ring posts nothing.
    let mut more = more || sends_waiting(inner);
    if let Some(rc) = inner.rc.as_mut() {
        let rc: &mut RcState = rc;
        let now_us = rc.now_us(now);
        let polled = rc.sessions.poll(rc.sq.oldest_tag(), now_us);
        if polled.resend {
            // A session stalled under unacknowledged requests and is down:
            // the next pass resends them on a live one.
            let a = rc.sq.go_back_now();
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
            more = true;
        }
        if let Some(s) = polled.probe {
            if rc.sq.is_empty() {
                send_duplicate_probe(qp.device(), &mut inner.routes, rc, s);
            }
        }
        rc.timers.update(now, &rc.sq, polled.keep_polling, shared);
    }
    if inner
        .rc
        .as_ref()
        .is_some_and(|rc| rc.sq.is_error() || rc.resp.is_error())
        && inner.attrs.state != QpState::Err
    {
        inner.attrs.state = QpState::Err;
        qp.data().publish_state(QpState::Err);
        enter_error(qp, inner);
    }
    if more {
        shared.schedule();
    }
}

/// Queued READ responses, then received packets until one must wait for
/// them, within this pass's budgets; true if work is left for another pass.
fn receive_batch(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    shared: &Arc<QpShared>,
    now: Now,
) -> bool {
    let mut budget = READ_RESPONSES_PER_PASS;
    send_read_responses(qp, inner, &mut budget);
    let mut batch = shared.take_backlog_or_batch();
    let mut taken = 0;
    while taken < RX_PER_PASS {
        let Some(pkt) = batch.pop() else { break };
        if receive(qp, inner, &pkt, now) {
            pkt.consume();
            taken += 1;
            continue;
        }
        // A request behind queued READ responses: they go first, then it
        // is offered again (next pass if the budget ran out).
        let _ = batch.push_within_capacity(pkt);
        send_read_responses(qp, inner, &mut budget);
        if reads_queued(inner) {
            break;
        }
    }
    send_read_responses(qp, inner, &mut budget);
    let more = !batch.is_empty() || reads_queued(inner);
    shared.keep_backlog(batch);
    more
}

/// Whether WQEs wait in the send ring while the send queue has room for
/// them (the QP sending).
fn sends_waiting(inner: &QpInner) -> bool {
    matches!(inner.attrs.state, QpState::Rts)
        && inner.rc.as_ref().is_some_and(|rc| {
            rc.sq.has_room() && !rc.sq.is_error() && inner.rings.send.pending() > rc.taken
        })
}

fn reads_queued(inner: &QpInner) -> bool {
    inner
        .rc
        .as_ref()
        .is_some_and(|rc| rc.resp.read_responses_queued())
}

/// The requester goes back (`why`): with several sessions the group
/// charges the session that carried the oldest request and picks where to
/// resend (the send queue's own retry budget is kept full: the group's
/// per-session budgets decide, and the request fails only when all are
/// spent); with one session the send queue decides alone, as in rxe.
/// `step` is the send queue's own reaction (timeout or response).
fn go_back(
    rc: &mut RcState,
    why: GoBack,
    now: Now,
    step: impl FnOnce(&mut SendQueue<SQ_DEPTH>) -> Action,
) -> Action {
    let now_us = rc.now_us(now);
    let multi = rc.sessions.is_multi();
    if multi {
        rc.sq.refill_retries();
    }
    let oldest = rc.sq.oldest_tag();
    let a = step(&mut rc.sq);
    if !matches!(a, Action::Retransmit { .. }) {
        return a;
    }
    match rc.sessions.go_back(why, oldest, now_us) {
        Err(_) if multi => rc.sq.abort(crate::roce::wc::WcStatus::RetryExcErr),
        _ => a,
    }
}

/// Counts what the requester does about a response or a timeout.
fn count_action(counters: &io::counters::IoCounters, a: &Action) {
    match a {
        Action::Retransmit { .. } => counters.inc(Counter::CompleterRetry),
        Action::RnrWait { .. } => counters.inc(Counter::RcvdRnrNak),
        Action::Fatal {
            status: crate::roce::wc::WcStatus::RetryExcErr,
        } => counters.inc(Counter::RetryExceeded),
        Action::Fatal {
            status: crate::roce::wc::WcStatus::RnrRetryExcErr,
        } => counters.inc(Counter::RnrRetryExceeded),
        _ => {}
    }
}

/// Takes one received packet; false if it is a request that must wait for
/// queued READ responses (it is left untouched).
fn receive(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket, now: Now) -> bool {
    let Ok((h, rest)) = Headers::parse(pkt.head()) else {
        return true;
    };
    let header_len = pkt.head().len() - rest.len();
    let after = pkt.len() - header_len + crate::roce::icrc::ICRC_LEN;
    let Ok(payload_len) = h.payload_len(after) else {
        return true;
    };
    let op = h.bth.opcode.operation();
    if h.bth.opcode.transport() != Transport::Rc {
        return true;
    }
    // A connected QP only hears from its peer.
    let from_peer = inner
        .rc
        .as_ref()
        .is_some_and(|rc| pkt.src() == rc.flow.dst && pkt.dst() == rc.flow.src);
    if !from_peer {
        return true;
    }
    if op.is_response() {
        on_response(qp, inner, &h, pkt, header_len, payload_len, now);
    } else if op.is_request() && inner.attrs.state != QpState::Init {
        return on_request(qp, inner, &h, pkt, header_len, payload_len);
    }
    true
}

/// Walks the pieces of the local buffer `sges` that hold `len` message bytes
/// from message byte `offset`: calls `f(lkey, addr, at, n)` for `n` bytes at
/// `addr` that are message bytes `at..at + n` of the walk. `LocLenErr` if
/// the buffer ends first.
fn for_each_piece(
    sges: &[Sge],
    mut offset: u32,
    len: usize,
    mut f: impl FnMut(u32, u64, usize, usize) -> core::result::Result<(), WcStatus>,
) -> core::result::Result<(), WcStatus> {
    let mut done = 0;
    for s in sges {
        if done == len {
            break;
        }
        if offset >= s.length {
            offset -= s.length;
            continue;
        }
        let n = ((s.length - offset) as usize).min(len - done);
        f(s.lkey, s.addr.wrapping_add(u64::from(offset)), done, n)?;
        done += n;
        offset = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// Writes `data` into the local buffer `sges` at message byte `offset`,
/// checking each piece under the QP's PD with `right`.
pub(crate) fn scatter(
    dev: &Device<SroceDevice>,
    qp: &Qp<SroceDevice>,
    sges: &[Sge],
    offset: u32,
    data: &[u8],
    right: Access,
) -> core::result::Result<(), WcStatus> {
    for_each_piece(sges, offset, data.len(), |lkey, addr, at, n| {
        let mr = dev
            .check_mr_access(lkey, qp.pd(), addr, n as u64, right)
            .map_err(|_| WcStatus::LocProtErr)?;
        let piece = data.get(at..at + n).ok_or(WcStatus::LocLenErr)?;
        mr.copy_to(addr, piece).map_err(|_| WcStatus::LocProtErr)
    })
}

/// Fills `out` from the local buffer `sges` at message byte `offset`.
pub(crate) fn gather(
    dev: &Device<SroceDevice>,
    qp: &Qp<SroceDevice>,
    sges: &[Sge],
    offset: u32,
    out: &mut [u8],
) -> core::result::Result<(), WcStatus> {
    let len = out.len();
    for_each_piece(sges, offset, len, |lkey, addr, at, n| {
        let mr = dev
            .check_mr_access(lkey, qp.pd(), addr, n as u64, Access::NONE)
            .map_err(|_| WcStatus::LocProtErr)?;
        let piece = out.get_mut(at..at + n).ok_or(WcStatus::LocLenErr)?;
        mr.copy_from(addr, piece).map_err(|_| WcStatus::LocProtErr)
    })
}

fn on_request(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
    payload_len: usize,
) -> bool {
    let Ok(req) = Request::from_headers(h, payload_len) else {
        return true;
    };
    let Some(rc) = inner.rc.as_mut() else {
        return true;
    };
    let duplicate = req.psn.diff(rc.resp.epsn()) < 0;
    let recv_ready = rc.recv.is_some()
        || match qp.srq() {
            // A shared queue's WQE is taken (for good) only when a request
            // at the expected PSN needs one; the QP holds it from then on.
            Some(srq) => needs_recv(rc, &req) && take_from_srq(qp, srq, rc),
            None => inner.rings.recv.as_ref().is_some_and(|r| r.pending() > 0),
        };
    let decision = rc.resp.receive(&req, recv_ready);
    if decision == Decision::Defer {
        return false;
    }
    if duplicate {
        qp.device()
            .data()
            .io
            .counters
            .inc(Counter::DuplicateRequest);
    }
    let reply = match decision {
        Decision::Reply(r) => r,
        Decision::Execute(work) => {
            let outcome = execute(qp, inner, &work, h, pkt, header_len);
            let Some(rc) = inner.rc.as_mut() else {
                return true;
            };
            let reply = rc.resp.commit(&work, outcome);
            finish_recv(qp, inner, &work, h, outcome);
            reply
        }
        Decision::Defer => return false,
    };
    send_reply(qp, inner, reply, pkt.ingress());
    true
}

/// Performs the memory work of an accepted request.
fn execute(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    work: &RespWork,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
) -> Outcome {
    let dev = qp.device();
    let access = inner.attrs.access_flags;
    let QpInner { rings, rc, .. } = inner;
    let Some(rc) = rc.as_mut() else {
        return Outcome::Failed(NakCode::RemoteOperationalError);
    };
    let rc: &mut RcState = rc;
    match work.kind {
        WorkKind::Send {
            offset, len, first, ..
        } => {
            if first && !load_recv(rings.recv.as_ref(), rc) {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            }
            let Some(data) = load(&mut rc.scratch, pkt, header_len, len) else {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            };
            let Some(recv) = rc.recv.as_ref() else {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            };
            match scatter(
                dev,
                qp,
                recv.sges.as_slice(),
                offset,
                data,
                Access::LOCAL_WRITE,
            ) {
                Ok(()) => {}
                Err(WcStatus::LocLenErr) => return Outcome::Failed(NakCode::InvalidRequest),
                Err(_) => return Outcome::Failed(NakCode::RemoteOperationalError),
            }
            // SEND with invalidate (the IETH rides on the last packet):
            // the key must name a fast-registration region of this PD.
            let Some(ieth) = h.ieth else {
                return Outcome::Done;
            };
            match dev.invalidate_key(qp.pd(), ieth.rkey) {
                Ok(()) => {
                    dev.data().io.counters.inc(Counter::RemoteInv);
                    Outcome::Done
                }
                Err(_) => Outcome::Failed(NakCode::InvalidRequest),
            }
        }
        WorkKind::Write {
            va,
            rkey,
            len,
            first,
            dma_len,
            imm,
        } => {
            if access & Access::REMOTE_WRITE.bits() == 0 {
                return Outcome::Failed(NakCode::RemoteAccessError);
            }
            if first && dma_len > 0 {
                let ok = dev.check_mr_access(
                    rkey,
                    qp.pd(),
                    va,
                    u64::from(dma_len),
                    Access::REMOTE_WRITE,
                );
                if ok.is_err() {
                    return Outcome::Failed(NakCode::RemoteAccessError);
                }
            }
            // The immediate consumes a receive WQE.
            if imm && !load_recv(rings.recv.as_ref(), rc) {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            }
            if len == 0 {
                return Outcome::Done;
            }
            let Some(data) = load(&mut rc.scratch, pkt, header_len, len) else {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            };
            let mr = match dev.check_mr_access(
                rkey,
                qp.pd(),
                va,
                u64::from(len),
                Access::REMOTE_WRITE,
            ) {
                Ok(mr) => mr,
                Err(_) => return Outcome::Failed(NakCode::RemoteAccessError),
            };
            match mr.copy_to(va, data) {
                Ok(()) => Outcome::Done,
                Err(_) => Outcome::Failed(NakCode::RemoteAccessError),
            }
        }
        WorkKind::Read { va, rkey, len } => {
            if access & Access::REMOTE_READ.bits() == 0 {
                return Outcome::Failed(NakCode::RemoteAccessError);
            }
            if len == 0 {
                return Outcome::Done;
            }
            match dev.check_mr_access(rkey, qp.pd(), va, u64::from(len), Access::REMOTE_READ) {
                Ok(_) => Outcome::Done,
                Err(_) => Outcome::Failed(NakCode::RemoteAccessError),
            }
        }
        WorkKind::Atomic {
            va,
            rkey,
            compare_swap,
            swap_add,
            compare,
        } => {
            if access & Access::REMOTE_ATOMIC.bits() == 0 {
                return Outcome::Failed(NakCode::RemoteAccessError);
            }
            let mr = match dev.check_mr_access(rkey, qp.pd(), va, 8, Access::REMOTE_ATOMIC) {
                Ok(mr) => mr,
                Err(_) => return Outcome::Failed(NakCode::RemoteAccessError),
            };
            let r = if compare_swap {
                mr.atomic_compare_swap(va, compare, swap_add)
            } else {
                mr.atomic_fetch_add(va, swap_add)
            };
            match r {
                Ok(orig) => Outcome::Atomic(orig),
                Err(_) => Outcome::Failed(NakCode::InvalidRequest),
            }
        }
    }
}

/// Copies `len` payload bytes of `pkt` (after `header_len`) to `scratch`.
fn load<'a>(
    scratch: &'a mut [u8],
    pkt: &RxPacket,
    header_len: usize,
    len: u32,
) -> Option<&'a [u8]> {
    let buf = scratch.get_mut(..len as usize)?;
    pkt.copy_to(header_len, buf).ok()?;
    Some(&*buf)
}

/// SGEs a receive slot of `elem_size` bytes holds.
pub(crate) fn inner_max_recv_sge(elem_size: usize) -> usize {
    (elem_size.saturating_sub(RECV_WQE_HEADER) / SGE_SIZE).min(MAX_SGE)
}

/// Makes `rc.recv` the receive WQE of a new message: a copy of the oldest
/// in the QP's own ring `rq` (its slot retires at completion) or, with a
/// shared queue, the WQE `on_request` took. False if there is none.
fn load_recv(rq: Option<&UserProducerQueue>, rc: &mut RcState) -> bool {
    let Some(rq) = rq else {
        return rc.recv.is_some();
    };
    let mut buf = [0u8; RECV_WQE_HEADER + SGE_SIZE * MAX_SGE];
    let max_sge = inner_max_recv_sge(rq.elem_size());
    rc.recv = rq
        .copy_pending(0, &mut buf)
        .and_then(|n| RecvWqe::parse(&buf[..n], max_sge))
        .ok();
    rc.recv.is_some()
}

/// Whether `req` is the next request and starts a message that consumes a
/// receive WQE (SEND First/Only, WRITE with immediate).
fn needs_recv(rc: &RcState, req: &Request) -> bool {
    use Operation as O;
    !rc.resp.is_error()
        && req.psn == rc.resp.epsn()
        && matches!(
            req.operation,
            O::SendFirst
                | O::SendOnly
                | O::SendOnlyWithImmediate
                | O::SendOnlyWithInvalidate
                | O::RdmaWriteOnlyWithImmediate
                | O::RdmaWriteLastWithImmediate
        )
}

/// Takes the next WQE of the shared queue for `rc`; false if it is empty.
/// A WQE that does not parse completes in error and the next is tried.
fn take_from_srq(qp: &Qp<SroceDevice>, srq: &Srq<SroceDevice>, rc: &mut RcState) -> bool {
    // Malformed WQEs complete with an error and the next one is tried, at
    // most a ring's worth: a process that keeps advancing the producer
    // index over garbage gets "no receive" (an RNR NAK), not a worker.
    for _ in 0..=super::srq::capacity(srq) {
        match super::srq::take(srq) {
            Taken::Empty => return false,
            Taken::Wqe(w) => {
                rc.recv = Some(w);
                return true;
            }
            Taken::Malformed(wr_id) => {
                let c = Completion {
                    status: WcStatus::LocQpOpErr,
                    ..Completion::flushed(wr_id, WcOpcode::Recv, qp.data().qpn())
                };
                let _ = cq::post(qp.recv_cq(), qp, &c, false);
            }
        }
    }
    false
}

/// Completes the receive WQE a request used, if the message ended (or
/// failed).
fn finish_recv(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    work: &RespWork,
    h: &Headers,
    outcome: Outcome,
) {
    let (last, byte_len, opcode) = match work.kind {
        WorkKind::Send {
            offset, len, last, ..
        } => (last, offset.saturating_add(len), WcOpcode::Recv),
        // The whole WRITE's length, as rxe and hardware report it.
        WorkKind::Write {
            imm: true, dma_len, ..
        } => (true, dma_len, WcOpcode::RecvRdmaWithImm),
        _ => return,
    };
    let failed = matches!(outcome, Outcome::Failed(_));
    if !last && !failed {
        return;
    }
    let QpInner { rings, rc, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let Some(recv) = rc.recv.take() else { return };
    let status = match outcome {
        Outcome::Failed(NakCode::InvalidRequest) => WcStatus::LocLenErr,
        Outcome::Failed(_) => WcStatus::LocProtErr,
        _ => WcStatus::Success,
    };
    let c = Completion {
        wr_id: recv.wr_id,
        status,
        opcode,
        byte_len,
        imm_data: h.immdt.map(|i| u32::from_ne_bytes(i.0)),
        invalidated_rkey: h
            .ieth
            .filter(|_| status == WcStatus::Success)
            .map(|i| i.rkey),
        qp_num: qp.data().qpn(),
        src_qp: rc.dest_qpn,
        grh: false,
    };
    // The slot goes back first: a process that sees the completion may
    // post into it at once.
    if let Some(rq) = rings.recv.as_mut() {
        rq.retire();
    }
    let _ = cq::post(qp.recv_cq(), qp, &c, h.bth.solicited);
}

/// Sends one packet with `headers` and `payload_len` bytes that `fill`
/// writes.
pub(crate) fn send_packet(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &io::Flow,
    headers: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    let pad = crate::roce::packet::pad_len(payload_len) as usize;
    let total = headers.header_len() + payload_len + pad;
    io::send(dev, routes, flow, total, |buf| {
        let n = headers.write(payload_len, buf).map_err(|_| EINVAL)?;
        let out = buf.get_mut(n..n + payload_len).ok_or(EINVAL)?;
        fill(out)?;
        Ok(total)
    })?;
    Ok(())
}

/// Sends `reply` to a request that arrived through net device `ingress`:
/// out through the same device, so replies return over the path that
/// delivered the request (with several paths, a path that delivers
/// requests is known to work), from the QP's RoCEv2 source port.
fn send_reply(qp: &Qp<SroceDevice>, inner: &mut QpInner, reply: Reply, ingress: i32) {
    let dev = qp.device();
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let flow = reply_flow(rc, ingress);
    let dest_qpn = rc.dest_qpn;
    let ack = |op: Operation, psn: Psn, aeth: Aeth| {
        let mut h = Headers::new(Bth::new(Opcode::new(Transport::Rc, op), dest_qpn, psn));
        h.aeth = Some(aeth);
        h
    };
    let counters = &dev.data().io.counters;
    match reply {
        Reply::None => {}
        Reply::Ack { psn, aeth } | Reply::FatalNak { psn, aeth } => {
            match aeth.syndrome {
                Syndrome::RnrNak { .. } => counters.inc(Counter::SentRnrNak),
                Syndrome::Nak(NakCode::PsnSequenceError) => counters.inc(Counter::SentSeqNak),
                _ => {}
            }
            let h = ack(Operation::Acknowledge, psn, aeth);
            let _ = send_packet(dev, routes, &flow, &h, 0, |_| Ok(()));
        }
        Reply::AtomicAck { psn, aeth, orig } => {
            let mut h = ack(Operation::AtomicAcknowledge, psn, aeth);
            h.atomic_ack_eth = Some(AtomicAckEth { orig });
            let _ = send_packet(dev, routes, &flow, &h, 0, |_| Ok(()));
        }
        // Queued: sent by the work item within its budget, from the
        // device the READ came in through.
        Reply::Read => rc.read_ingress = ingress,
    }
}

/// The flow of a reply to a request that arrived through net device
/// `ingress`.
fn reply_flow(rc: &RcState, ingress: i32) -> io::Flow {
    io::Flow {
        out: if ingress > 0 {
            io::OutPort::Ifindex(ingress)
        } else {
            io::OutPort::Device
        },
        ..rc.flow
    }
}

/// Sends queued RDMA READ response packets, at most `budget` (counted
/// down). Data is read under the R_Key when each packet is built; a key
/// gone meanwhile (deregistered, invalidated) ends the responses: the
/// requester times out and asks again, and gets a NAK then.
fn send_read_responses(qp: &Qp<SroceDevice>, inner: &mut QpInner, budget: &mut u32) {
    let dev = qp.device();
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let flow = reply_flow(rc, rc.read_ingress);
    while *budget > 0 {
        let Some(p) = rc.resp.next_read_response() else {
            return;
        };
        *budget -= 1;
        let mut h = Headers::new(Bth::new(
            Opcode::new(Transport::Rc, p.operation),
            rc.dest_qpn,
            p.psn,
        ));
        h.aeth = p.aeth;
        let mr = dev.check_mr_access(p.rkey, qp.pd(), p.va, u64::from(p.len), Access::REMOTE_READ);
        let Ok(mr) = mr else { continue };
        let _ = send_packet(dev, routes, &flow, &h, p.len as usize, |out| {
            mr.copy_from(p.va, out)
        });
    }
}

fn on_response(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
    payload_len: usize,
    now: Now,
) {
    let dev = qp.device();
    let counters = &dev.data().io.counters;
    let Some(rc) = inner.rc.as_mut() else { return };
    let Ok(r) = Response::from_headers(h, payload_len) else {
        return;
    };
    let seq_nak = matches!(
        r.kind,
        ResponseKind::Ack(Syndrome::Nak(NakCode::PsnSequenceError))
    );
    if seq_nak {
        counters.inc(Counter::RcvdSeqNak);
    }
    let why = if seq_nak {
        GoBack::SequenceNak
    } else {
        GoBack::Other
    };
    if rc.sq.is_empty() {
        if let ResponseKind::Ack(Syndrome::Ack { .. }) = r.kind {
            let now_us = rc.now_us(now);
            rc.sessions.on_idle_ack(r.psn, now_us);
        }
    }
    let oldest = rc.sq.oldest_tag();
    let action = go_back(rc, why, now, |sq| sq.on_response(&r));
    if let (
        Some(tag),
        Action::Progress | Action::PlaceReadData { .. } | Action::AtomicResult { .. },
    ) = (oldest, action)
    {
        let now_us = rc.now_us(now);
        rc.sessions.on_partial_ack(tag, now_us);
    }
    count_action(counters, &action);
    rc.timers.on_action(now, &action);
    match action {
        Action::PlaceReadData { tag, offset, len } => {
            let Some(Some(w)) = rc.wqes.get(tag as usize % SQ_DEPTH).copied() else {
                return;
            };
            let ok = match (&w.data, rc.scratch.get_mut(..len as usize)) {
                (SendData::Sges(sges), Some(buf)) => match pkt.copy_to(header_len, buf) {
                    Ok(()) => scatter(dev, qp, sges.as_slice(), offset, buf, Access::LOCAL_WRITE),
                    Err(_) => Err(WcStatus::LocLenErr),
                },
                _ => Err(WcStatus::LocLenErr),
            };
            if let Err(s) = ok {
                fail_local(rc, tag, s);
            }
        }
        Action::AtomicResult { tag, orig } => {
            let Some(Some(w)) = rc.wqes.get(tag as usize % SQ_DEPTH).copied() else {
                return;
            };
            let ok = match &w.data {
                SendData::Sges(sges) => scatter(
                    dev,
                    qp,
                    sges.as_slice(),
                    0,
                    &orig.to_ne_bytes(),
                    Access::LOCAL_WRITE,
                ),
                SendData::Inline { .. } => Err(WcStatus::LocQpOpErr),
            };
            if let Err(s) = ok {
                fail_local(rc, tag, s);
            }
        }
        // The rest needs nothing beyond the timers (above), and the
        // completions and sending that follow.
        _ => {}
    }
}

/// Fails `tag` locally with `status`; the QP enters the error state.
fn fail_local(rc: &mut RcState, tag: u32, status: WcStatus) {
    if rc.local_error.is_none() {
        rc.local_error = Some((tag, status));
    }
    rc.sq.set_error();
}

/// The WQE just taken from the ring failed before the requester took it:
/// the QP goes to the error state, and that WQE completes with `status`
/// (the ones before it and after it flush).
fn fail_unposted(rc: &mut RcState, status: WcStatus) {
    if rc.unposted_error.is_none() {
        rc.unposted_error = Some(status);
    }
    rc.sq.set_error();
}

/// Performs the local operation `tag` (fast registration or local
/// invalidate) on a region of the QP's PD; `LocQpOpErr` if it is refused,
/// as rxe reports it.
fn perform_local(
    qp: &Qp<SroceDevice>,
    dev: &Device<SroceDevice>,
    rc: &RcState,
    tag: u32,
) -> core::result::Result<(), WcStatus> {
    let Some(Some(w)) = rc.wqes.get(tag as usize % SQ_DEPTH) else {
        return Err(WcStatus::LocQpOpErr);
    };
    let (done, counter) = match w.op {
        SendOp::RegMr => (
            dev.fast_register(
                qp.pd(),
                w.fast_reg.key,
                Access::from_raw(w.fast_reg.access as kernel::ffi::c_int),
            ),
            Counter::FastReg,
        ),
        SendOp::LocalInv => (dev.invalidate_key(qp.pd(), w.imm_or_inv), Counter::LocalInv),
        _ => return Err(WcStatus::LocQpOpErr),
    };
    done.map_err(|_| WcStatus::LocQpOpErr)?;
    dev.data().io.counters.inc(counter);
    Ok(())
}

/// Sends a duplicate probe on session `s` of an idle QP: a zero-length RDMA
/// WRITE Only with AckReq and the last acknowledged PSN, which the
/// responder can only re-ACK (see `roce::session::health`).
fn send_duplicate_probe(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    rc: &mut RcState,
    s: SessionId,
) {
    let Some(flow) = rc.sessions.flow(s) else {
        return;
    };
    let psn = probe_psn(rc.sq.una());
    let mut bth = Bth::new(
        Opcode::new(Transport::Rc, Operation::RdmaWriteOnly),
        rc.dest_qpn,
        psn,
    );
    bth.ack_req = true;
    let mut h = Headers::new(bth);
    h.reth = Some(Reth {
        va: 0,
        rkey: 0,
        dma_len: 0,
    });
    if send_packet(dev, routes, &flow, &h, 0, |_| Ok(())).is_ok() {
        rc.sessions.probe_sent(s, psn);
    }
}

/// The requester engine's operation for a WQE.
fn wqe_op(op: SendOp) -> WqeOp {
    match op {
        SendOp::Send => WqeOp::Send,
        SendOp::SendWithImm => WqeOp::SendWithImm,
        SendOp::SendWithInv => WqeOp::SendWithInv,
        SendOp::Write => WqeOp::Write,
        SendOp::WriteWithImm => WqeOp::WriteWithImm,
        SendOp::Read => WqeOp::Read,
        SendOp::CompareSwap => WqeOp::CompareSwap,
        SendOp::FetchAdd => WqeOp::FetchAdd,
        SendOp::LocalInv | SendOp::RegMr => WqeOp::Local,
    }
}

/// Takes newly posted WQEs into the engine and sends what it allows.
fn send(qp: &Qp<SroceDevice>, inner: &mut QpInner, now: Now) {
    let dev = qp.device();
    let caps = inner.attrs.caps;
    let sending = matches!(inner.attrs.state, QpState::Rts);
    let QpInner {
        rings, rc, routes, ..
    } = inner;
    let Some(rc) = rc.as_mut() else { return };
    if sending {
        let mut buf = [0u8; SEND_WQE_HEADER + SGE_SIZE * MAX_SGE];
        while rc.sq.has_room() && !rc.sq.is_error() && rings.send.pending() > rc.taken {
            let tag = rc.next_tag;
            let parsed = rings.send.copy_pending(rc.taken, &mut buf).and_then(|n| {
                SendWqe::parse(
                    &buf[..n],
                    caps.max_send_sge as usize,
                    caps.max_inline_data as usize,
                )
            });
            let (wqe, op) = match parsed.map(|w| (w, wqe_op(w.op))) {
                Ok(v) => v,
                Err(_) => {
                    post_taken(rc, tag, None);
                    fail_unposted(rc, WcStatus::LocQpOpErr);
                    break;
                }
            };
            let len = if op.is_atomic() {
                8
            } else if op.is_local() {
                0
            } else {
                wqe.length
            };
            let posted = rc.sq.post(crate::roce::requester::SendWqe {
                tag,
                op,
                len,
                fence: wqe.flags.fence,
            });
            if posted.is_err() {
                post_taken(rc, tag, Some(wqe));
                fail_unposted(rc, WcStatus::LocLenErr);
                break;
            }
            post_taken(rc, tag, Some(wqe));
        }
    }
    let now_us = rc.now_us(now);
    let mtu = rc.sq.config().mtu.bytes();
    loop {
        // A local operation runs when the queue reaches it: after the
        // packets of everything before it, before any packet after it.
        if let Some(tag) = rc.sq.take_local() {
            if let Err(s) = perform_local(qp, dev, rc, tag) {
                fail_local(rc, tag, s);
                break;
            }
            continue;
        }
        let Some(p) = rc.sq.next_packet() else { break };
        if p.retransmit {
            dev.data().io.counters.inc(Counter::RetransmittedPkts);
        }
        let wqe_len = match rc.wqes.get(p.tag as usize % SQ_DEPTH) {
            Some(Some(w)) => w.length,
            _ => 0,
        };
        let flow = rc
            .sessions
            .flow_for(&p, wqe_len, mtu, now_us)
            .unwrap_or(rc.flow);
        if let Err(s) = send_request(qp, dev, routes, rc, &p, &flow) {
            fail_local(rc, p.tag, s);
            break;
        }
    }
}

/// Records a WQE taken from the ring under `tag`.
fn post_taken(rc: &mut RcState, tag: u32, wqe: Option<SendWqe>) {
    if let Some(slot) = rc.wqes.get_mut(tag as usize % SQ_DEPTH) {
        *slot = wqe;
    }
    rc.next_tag = rc.next_tag.wrapping_add(1);
    rc.taken += 1;
}

fn send_request(
    qp: &Qp<SroceDevice>,
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    rc: &RcState,
    p: &RequestPacket,
    flow: &io::Flow,
) -> core::result::Result<(), WcStatus> {
    let Some(Some(w)) = rc.wqes.get(p.tag as usize % SQ_DEPTH) else {
        return Err(WcStatus::LocQpOpErr);
    };
    let opcode = Opcode::new(Transport::Rc, p.operation);
    let mut bth = Bth::new(opcode, rc.dest_qpn, p.psn);
    bth.ack_req = p.ack_req;
    bth.solicited = w.flags.solicited && p.operation.position().ends_message();
    let mut h = Headers::new(bth);
    let ext = opcode.ext_headers();
    if let Some(span) = p.reth {
        h.reth = Some(Reth {
            va: w.remote.remote_addr.wrapping_add(u64::from(span.offset)),
            rkey: w.remote.rkey,
            dma_len: span.dma_len,
        });
    }
    if ext.contains(ExtHeader::ImmDt) {
        h.immdt = Some(ImmDt(w.imm_or_inv.to_ne_bytes()));
    }
    if ext.contains(ExtHeader::Ieth) {
        h.ieth = Some(Ieth { rkey: w.imm_or_inv });
    }
    if ext.contains(ExtHeader::AtomicEth) {
        h.atomic_eth = Some(crate::roce::atomic_eth::AtomicEth {
            va: w.remote.remote_addr,
            rkey: w.remote.rkey,
            swap_add: if w.op == SendOp::CompareSwap {
                w.remote.swap
            } else {
                w.remote.compare_add
            },
            compare: w.remote.compare_add,
        });
    }
    let payload = if p.operation.has_payload() && !p.operation.is_response() {
        p.payload_len as usize
    } else {
        0
    };
    let mut local = None;
    let r = send_packet(dev, routes, flow, &h, payload, |out| match &w.data {
        SendData::Inline { bytes, len } => {
            let src = bytes
                .get(p.offset as usize..(*len).min(bytes.len()))
                .and_then(|b| b.get(..out.len()))
                .ok_or(EINVAL)?;
            out.copy_from_slice(src);
            Ok(())
        }
        SendData::Sges(sges) => gather(dev, qp, sges.as_slice(), p.offset, out).map_err(|s| {
            local = Some(s);
            EFAULT
        }),
    });
    match (r, local) {
        (_, Some(s)) => Err(s),
        // Lost on the way out (no route, no memory): counted; the
        // retransmit timer's job once there is one.
        _ => Ok(()),
    }
}

/// Posts the send completions the engine has produced and retires their
/// ring slots.
pub(crate) fn complete_sends(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    let signal_all = inner.attrs.signal_all;
    let QpInner { rings, rc, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let now_us = rc.now_us(Instant::<Monotonic>::now());
    while let Some(c) = rc.sq.pop_completion() {
        // A local operation went out on no session.
        if c.status == crate::roce::wc::WcStatus::Success && !c.op.is_local() {
            rc.sessions.on_completed(c.tag, now_us);
        }
        let w = rc
            .wqes
            .get_mut(c.tag as usize % SQ_DEPTH)
            .and_then(Option::take);
        let mut status = WcStatus::from_code(u32::from(c.status.code()));
        if let Some((tag, s)) = rc.local_error {
            if tag == c.tag {
                status = s;
            }
        }
        // The slot goes back before the completion is visible: a process
        // that polls it may post into the slot at once (a full ring of one
        // WQE otherwise refuses the next post).
        rings.send.retire();
        rc.taken = rc.taken.saturating_sub(1);
        let signaled = w.is_some_and(|w| w.flags.signaled) || signal_all;
        if signaled || status != WcStatus::Success {
            let (wr_id, opcode, byte_len) = match w {
                Some(w) => (w.wr_id, w.op.completion(), w.length),
                None => (0, WcOpcode::Send, 0),
            };
            let comp = Completion {
                wr_id,
                status,
                opcode,
                byte_len,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: qp.data().qpn(),
                src_qp: 0,
                grh: false,
            };
            let _ = cq::post(qp.send_cq(), qp, &comp, false);
        }
    }
}

/// The QP enters the error state: what the engines hold completes (the
/// failed request with its error, the rest flushed), then everything still
/// in the rings is flushed, in order.
pub(crate) fn enter_error(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    if let Some(rc) = inner.rc.as_mut() {
        rc.sq.set_error();
        rc.resp.set_error();
        // A WQE taken from a shared queue belongs to this QP now: flushed
        // with it (one from the QP's own ring is flushed from the ring).
        if qp.srq().is_some() {
            if let Some(w) = rc.recv.take() {
                let c = Completion::flushed(w.wr_id, WcOpcode::Recv, qp.data().qpn());
                let _ = cq::post(qp.recv_cq(), qp, &c, false);
            }
        }
    }
    complete_sends(qp, inner);
    // The failed WQE is the last one taken: every one before it is still
    // in the ring (taken, not completed) and flushes first.
    let failed = inner
        .rc
        .as_ref()
        .and_then(|rc| Some((rc.taken.checked_sub(1)?, rc.unposted_error?)));
    inner.rc = None;
    super::qp::flush_failing(qp, &mut inner.rings, failed);
}
