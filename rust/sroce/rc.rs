// SPDX-License-Identifier: GPL-2.0

//! The RC data path of one queue pair: the protocol core's requester and
//! responder engines driven from a work item, packets in through
//! [`super::recv`] and out through [`super::io::send`].
//!
//! Everything runs in the QP's work item (process context) under the QP's
//! lock; the receive softirq only queues packets ([`QpShared::queue_rx`])
//! and schedules the work. Not yet here: the retransmit and RNR timers (a
//! lost packet or an RNR NAK stalls the send queue until the next doorbell
//! or received packet runs the work item again), SRQ receives, SEND with
//! invalidate and atomics (completed or NAKed with an error).

use super::{cq, device::SroceDevice, io, io::RxPacket, qp::QpInner};
use crate::net::addr::IpAddr;
use crate::rdma::{
    access::Access,
    av::AddressVector,
    device::Device,
    qp::{Qp, QpLink, QpState},
    rxe_abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, SendData, SendOp, SendWqe, Sge, MAX_SGE},
};
use crate::roce::{
    aeth::{Aeth, NakCode},
    atomic_ack_eth::AtomicAckEth,
    bth::Bth,
    completer::{Action, Response},
    ieth::Ieth,
    immdt::ImmDt,
    opcode::{ExtHeader, Opcode, Operation, Transport},
    packet::Headers,
    psn::Psn,
    requester::{RequestPacket, RequesterConfig, SendQueue},
    responder::{
        Decision, Outcome, Reply, Request, Responder, ResponderConfig, Work as RespWork, WorkKind,
    },
    reth::Reth,
    segment::{Mtu, WqeOp},
};
use kernel::{
    new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, SpinLockIrq},
    workqueue::{Work, WorkItem},
};

/// Send work requests the requester engine holds at once (taken from the
/// ring, not yet completed).
const SQ_DEPTH: usize = 32;
/// RDMA READ/atomic responder resources.
const RD_ATOM: usize = 16;
/// Received packets queued for the work item at most; more are dropped
/// (and counted), as a NIC's full receive FIFO would.
const RX_QUEUE_LEN: usize = 128;
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
    /// Received packets; `closed` once the QP is being destroyed.
    #[pin]
    rx: SpinLockIrq<RxQueue>,
}

/// Packets waiting for the work item.
struct RxQueue {
    packets: KVec<RxPacket>,
    /// No more scheduling: the QP is going away.
    closed: bool,
}

kernel::impl_has_work! {
    impl HasWork<Self> for QpShared { self.work }
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
                rx <- new_spinlock_irq!(
                    RxQueue {
                        packets: KVec::with_capacity(RX_QUEUE_LEN, GFP_KERNEL)?,
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

    fn pop_rx(&self) -> Option<RxPacket> {
        let mut q = self.rx.lock();
        if q.packets.is_empty() {
            return None;
        }
        q.packets.remove(0).ok()
    }
}

/// The IP address of a GID (IPv4-mapped GIDs are IPv4).
fn gid_ip(gid: &[u8; 16]) -> IpAddr {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        IpAddr::V4([gid[12], gid[13], gid[14], gid[15]])
    } else {
        IpAddr::V6(*gid)
    }
}

/// The connection and engines of an RC QP from RTR on.
pub(crate) struct RcState {
    sq: SendQueue<SQ_DEPTH>,
    resp: Responder<RD_ATOM>,
    flow: io::Flow,
    dest_qpn: u32,
    /// Send WQEs taken from the ring, by tag modulo `SQ_DEPTH`.
    wqes: KVVec<Option<SendWqe>>,
    /// Tag of the next WQE taken (counts WQEs taken).
    next_tag: u32,
    /// WQEs taken from the ring and not yet retired.
    taken: u32,
    /// A WQE that failed locally and the status it completes with.
    local_error: Option<(u32, WcStatus)>,
    /// The receive WQE of the SEND being received.
    recv: Option<RecvWqe>,
    /// Staging for one packet's payload.
    scratch: KVec<u8>,
}

impl RcState {
    /// A connection as the attributes at RTR describe it.
    pub(crate) fn new(qpn: u32, a: &crate::rdma::qp::QpAttrs) -> Result<KBox<Self>> {
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
        };
        let mut rcfg = ResponderConfig::new(mtu);
        rcfg.max_dest_rd_atomic = a.max_dest_rd_atomic.min(RD_ATOM as u8);
        rcfg.min_rnr_timer = a.min_rnr_timer;
        let mut scratch = KVec::with_capacity(MAX_PAYLOAD, GFP_KERNEL)?;
        scratch.resize(MAX_PAYLOAD, 0, GFP_KERNEL)?;
        Ok(KBox::new(
            Self {
                sq: SendQueue::new(Self::requester_config(a, mtu), Psn::new(a.sq_psn)),
                resp: Responder::new(rcfg, Psn::new(a.rq_psn)),
                flow,
                dest_qpn: a.dest_qpn,
                wqes: KVVec::from_elem(None, SQ_DEPTH, GFP_KERNEL)?,
                next_tag: 0,
                taken: 0,
                local_error: None,
                recv: None,
                scratch,
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

    /// The QP enters RTS: the requester starts at `sq_psn`.
    pub(crate) fn ready_to_send(&mut self, a: &crate::rdma::qp::QpAttrs) {
        let mtu = self.sq.config().mtu;
        self.sq = SendQueue::new(Self::requester_config(a, mtu), Psn::new(a.sq_psn));
    }
}

/// The work item's body: received packets, then new send work, then
/// completions.
fn run(qp: &Qp<SroceDevice>) {
    let shared = qp.data().shared();
    let mut guard = qp.data().lock();
    let inner = &mut *guard;
    if inner.rc.is_none() {
        // Not connected (or reset): drop what arrived.
        while shared.pop_rx().is_some() {}
        return;
    }
    if let Some(rc) = inner.rc.as_mut() {
        if rc.sq.waiting_rnr() {
            // No RNR timer yet: resume on the next run.
            let _ = rc.sq.on_rnr_timer();
        }
    }
    while let Some(pkt) = shared.pop_rx() {
        receive(qp, inner, &pkt);
        pkt.consume();
    }
    send(qp, inner);
    complete_sends(qp, inner);
    if inner
        .rc
        .as_ref()
        .is_some_and(|rc| rc.sq.is_error() || rc.resp.is_error())
        && inner.attrs.state != QpState::Err
    {
        inner.attrs.state = QpState::Err;
        enter_error(qp, inner);
    }
}

fn receive(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket) {
    let Ok((h, rest)) = Headers::parse(pkt.head()) else {
        return;
    };
    let header_len = pkt.head().len() - rest.len();
    let after = pkt.len() - header_len + crate::roce::icrc::ICRC_LEN;
    let Ok(payload_len) = h.payload_len(after) else {
        return;
    };
    let op = h.bth.opcode.operation();
    if h.bth.opcode.transport() != Transport::Rc {
        return;
    }
    // A connected QP only hears from its peer.
    let from_peer = inner
        .rc
        .as_ref()
        .is_some_and(|rc| pkt.src() == rc.flow.dst && pkt.dst() == rc.flow.src);
    if !from_peer {
        return;
    }
    if op.is_response() {
        on_response(qp, inner, &h, pkt, header_len, payload_len);
    } else if op.is_request() && inner.attrs.state != QpState::Init {
        on_request(qp, inner, &h, pkt, header_len, payload_len);
    }
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
fn scatter(
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
fn gather(
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
) {
    let Ok(req) = Request::from_headers(h, payload_len) else {
        return;
    };
    let Some(rc) = inner.rc.as_mut() else { return };
    let recv_ready =
        rc.recv.is_some() || inner.rings.recv.as_ref().is_some_and(|r| r.pending() > 0);
    let reply = match rc.resp.receive(&req, recv_ready) {
        Decision::Reply(r) => r,
        Decision::Execute(work) => {
            let outcome = execute(qp, inner, &work, h, pkt, header_len);
            let Some(rc) = inner.rc.as_mut() else { return };
            let reply = rc.resp.commit(&work, outcome);
            finish_recv(qp, inner, &work, h, outcome);
            reply
        }
    };
    send_reply(qp, inner, reply);
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
            if h.ieth.is_some() {
                // Invalidation (memory windows) is not implemented.
                return Outcome::Failed(NakCode::InvalidRequest);
            }
            if first {
                let Some(rq) = rings.recv.as_ref() else {
                    return Outcome::Failed(NakCode::RemoteOperationalError);
                };
                let mut buf = [0u8; RECV_WQE_HEADER + SGE_SIZE * MAX_SGE];
                let max_sge = inner_max_recv_sge(rq.elem_size());
                let parsed = rq
                    .copy_pending(0, &mut buf)
                    .and_then(|n| RecvWqe::parse(&buf[..n], max_sge));
                match parsed {
                    Ok(w) => rc.recv = Some(w),
                    Err(_) => return Outcome::Failed(NakCode::RemoteOperationalError),
                }
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
                Ok(()) => Outcome::Done,
                Err(WcStatus::LocLenErr) => Outcome::Failed(NakCode::InvalidRequest),
                Err(_) => Outcome::Failed(NakCode::RemoteOperationalError),
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
            if imm {
                // The immediate consumes a receive WQE.
                let Some(rq) = rings.recv.as_ref() else {
                    return Outcome::Failed(NakCode::RemoteOperationalError);
                };
                let mut buf = [0u8; RECV_WQE_HEADER + SGE_SIZE * MAX_SGE];
                let max_sge = inner_max_recv_sge(rq.elem_size());
                match rq
                    .copy_pending(0, &mut buf)
                    .and_then(|n| RecvWqe::parse(&buf[..n], max_sge))
                {
                    Ok(w) => rc.recv = Some(w),
                    Err(_) => return Outcome::Failed(NakCode::RemoteOperationalError),
                }
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
fn inner_max_recv_sge(elem_size: usize) -> usize {
    (elem_size.saturating_sub(RECV_WQE_HEADER) / SGE_SIZE).min(MAX_SGE)
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
        WorkKind::Write { imm: true, .. } => (true, 0, WcOpcode::RecvRdmaWithImm),
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
        invalidated_rkey: None,
        qp_num: qp.data().qpn(),
        src_qp: rc.dest_qpn,
        grh: false,
    };
    let _ = cq::post(qp.recv_cq(), &c, h.bth.solicited);
    if let Some(rq) = rings.recv.as_mut() {
        rq.retire();
    }
}

/// Sends one packet with `headers` and `payload_len` bytes that `fill`
/// writes.
fn send_packet(
    dev: &Device<SroceDevice>,
    flow: &io::Flow,
    headers: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    let pad = crate::roce::packet::pad_len(payload_len) as usize;
    let total = headers.header_len() + payload_len + pad;
    io::send(dev, flow, total, |buf| {
        let n = headers.write(payload_len, buf).map_err(|_| EINVAL)?;
        let out = buf.get_mut(n..n + payload_len).ok_or(EINVAL)?;
        fill(out)?;
        Ok(total)
    })?;
    Ok(())
}

fn send_reply(qp: &Qp<SroceDevice>, inner: &mut QpInner, reply: Reply) {
    let dev = qp.device();
    let Some(rc) = inner.rc.as_mut() else { return };
    let ack = |op: Operation, psn: Psn, aeth: Aeth| {
        let mut h = Headers::new(Bth::new(Opcode::new(Transport::Rc, op), rc.dest_qpn, psn));
        h.aeth = Some(aeth);
        h
    };
    match reply {
        Reply::None => {}
        Reply::Ack { psn, aeth } | Reply::FatalNak { psn, aeth } => {
            let h = ack(Operation::Acknowledge, psn, aeth);
            let _ = send_packet(dev, &rc.flow, &h, 0, |_| Ok(()));
        }
        Reply::AtomicAck { psn, aeth, orig } => {
            let mut h = ack(Operation::AtomicAcknowledge, psn, aeth);
            h.atomic_ack_eth = Some(AtomicAckEth { orig });
            let _ = send_packet(dev, &rc.flow, &h, 0, |_| Ok(()));
        }
        Reply::Read(rr) => {
            for p in rr.packets() {
                let mut h = Headers::new(Bth::new(
                    Opcode::new(Transport::Rc, p.operation),
                    rc.dest_qpn,
                    p.psn,
                ));
                h.aeth = p.aeth;
                let mr = dev.check_mr_access(
                    rr.rkey(),
                    qp.pd(),
                    p.va,
                    u64::from(p.len),
                    Access::REMOTE_READ,
                );
                let Ok(mr) = mr else { break };
                let r = send_packet(dev, &rc.flow, &h, p.len as usize, |out| {
                    mr.copy_from(p.va, out)
                });
                if r.is_err() {
                    break;
                }
            }
        }
    }
}

fn on_response(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
    payload_len: usize,
) {
    let dev = qp.device();
    let Some(rc) = inner.rc.as_mut() else { return };
    let Ok(r) = Response::from_headers(h, payload_len) else {
        return;
    };
    match rc.sq.on_response(&r) {
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
        // No timers yet: an RNR wait ends at the next run of the work
        // item; the rest needs nothing beyond the completions and sending
        // that follow.
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

/// The requester engine's operation for a WQE.
fn wqe_op(op: SendOp) -> Option<WqeOp> {
    Some(match op {
        SendOp::Send => WqeOp::Send,
        SendOp::SendWithImm => WqeOp::SendWithImm,
        SendOp::SendWithInv => WqeOp::SendWithInv,
        SendOp::Write => WqeOp::Write,
        SendOp::WriteWithImm => WqeOp::WriteWithImm,
        SendOp::Read => WqeOp::Read,
        SendOp::CompareSwap => WqeOp::CompareSwap,
        SendOp::FetchAdd => WqeOp::FetchAdd,
        SendOp::LocalInv => return None,
    })
}

/// Takes newly posted WQEs into the engine and sends what it allows.
fn send(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    let dev = qp.device();
    let caps = inner.attrs.caps;
    let sending = matches!(inner.attrs.state, QpState::Rts);
    let QpInner { rings, rc, .. } = inner;
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
                Ok((w, Some(op))) => (w, op),
                Ok((w, None)) => {
                    // Local invalidate needs memory windows: not supported.
                    post_taken(rc, tag, Some(w));
                    fail_local(rc, tag, WcStatus::LocQpOpErr);
                    break;
                }
                Err(_) => {
                    post_taken(rc, tag, None);
                    fail_local(rc, tag, WcStatus::LocQpOpErr);
                    break;
                }
            };
            let len = if op.is_atomic() { 8 } else { wqe.length };
            let posted = rc.sq.post(crate::roce::requester::SendWqe {
                tag,
                op,
                len,
                fence: wqe.flags.fence,
            });
            if posted.is_err() {
                post_taken(rc, tag, Some(wqe));
                fail_local(rc, tag, WcStatus::LocLenErr);
                break;
            }
            post_taken(rc, tag, Some(wqe));
        }
    }
    while let Some(p) = rc.sq.next_packet() {
        if let Err(s) = send_request(qp, dev, rc, &p) {
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
    rc: &RcState,
    p: &RequestPacket,
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
    let r = send_packet(dev, &rc.flow, &h, payload, |out| match &w.data {
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
    while let Some(c) = rc.sq.pop_completion() {
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
            let _ = cq::post(qp.send_cq(), &comp, false);
        }
        rings.send.retire();
        rc.taken = rc.taken.saturating_sub(1);
    }
}

/// The QP enters the error state: what the engines hold completes (the
/// failed request with its error, the rest flushed), then everything still
/// in the rings is flushed, in order.
pub(crate) fn enter_error(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    if let Some(rc) = inner.rc.as_mut() {
        rc.sq.set_error();
        rc.resp.set_error();
    }
    complete_sends(qp, inner);
    inner.rc = None;
    super::qp::flush(qp, &mut inner.rings);
}
