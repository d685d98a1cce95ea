// SPDX-License-Identifier: GPL-2.0

//! The UD data path of one queue pair: every send WQE becomes one SEND Only
//! (with immediate) packet with a DETH, to the address handle it names; a
//! received UD packet for the QP with the right Q_Key fills the next
//! receive WQE with a 40-byte GRH and the payload. Unreliable: no PSN
//! checks, no ACKs; a send completes once its packet is handed to IP.
//!
//! Runs in the QP's passes, like the RC data path ([`super::rc`]).

use super::{
    cq,
    device::SroceDevice,
    io::{self, counters::Counter, RxPacket},
    limits,
    odp::Waiter,
    qp::{self, QpInner},
    rc::{gather, gid_ip, inner_max_recv_sge, scatter, send_packet, BufferError, QpShared},
};
use crate::rdma::{
    access::Access,
    device::{Device, PORT},
    mr_odp::NOT_PRESENT,
    qp::{Qp, QpState},
    rxe_abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, SendData, SendOp, SendWqe, MAX_SGE},
};
use crate::roce::{
    bth::Bth,
    deth::Deth,
    immdt::ImmDt,
    opcode::{Opcode, Operation, Transport},
    packet::Headers,
    psn::Psn,
    session::port_range::rxe_initial_sport,
};
use kernel::{prelude::*, sync::Arc};

/// Bytes of the GRH that precedes a UD receive's payload.
const GRH_LEN: usize = 40;
/// A Q_Key with this bit set in a send WQE means "the QP's own Q_Key".
const QKEY_USE_QP: u32 = 0x8000_0000;
/// The default partition key.
const PKEY_DEFAULT: u16 = 0xffff;

/// Bytes of a ring slot's copy: the larger WQE header and a full list.
const WQE_COPY_LEN: usize = if SEND_WQE_HEADER > RECV_WQE_HEADER {
    SEND_WQE_HEADER
} else {
    RECV_WQE_HEADER
} + SGE_SIZE * MAX_SGE;

/// Where a UD QP's pass copies a WQE out of its ring and parses it: on the
/// heap, since a WQE and its copy are over a KiB together, too much for a
/// frame of a pass that may run in the receive softirq.
pub(crate) struct WqeStage {
    copy: [u8; WQE_COPY_LEN],
    send: Option<SendWqe>,
    recv: Option<RecvWqe>,
    /// `recv` was taken from the shared receive queue for a datagram that
    /// waits for a page fault: it is that datagram's (it goes back to no
    /// queue), flushed if the QP fails first.
    recv_held: bool,
}

impl WqeStage {
    /// An empty stage, built in place. Process context.
    pub(crate) fn new() -> Result<KBox<Self>> {
        KBox::init(
            init!(Self {
                copy: [0; WQE_COPY_LEN],
                send: None,
                recv: None,
                recv_held: false,
            }),
            GFP_KERNEL,
        )
    }
}

/// A pass over a UD QP: received packets, then new sends.
/// Never inlined into the RC pass that dispatches to it: its locals would
/// add to that frame.
#[inline(never)]
pub(crate) fn run(qp: &Qp<SroceDevice>, inner: &mut QpInner, shared: &Arc<QpShared>) {
    // In arrival order; what is behind a datagram that waits for a page
    // fault waits with it.
    let mut batch = shared.take_backlog_or_batch();
    while !inner.faults.is_waiting(Waiter::UdReceive) {
        let Some(pkt) = batch.pop() else { break };
        if !receive(qp, inner, &pkt) {
            let _ = batch.push_within_capacity(pkt);
            break;
        }
        pkt.consume();
    }
    let queued = shared.keep_backlog(batch);
    let more = inner.attrs.state == QpState::Rts && send(qp, inner);
    // A page fault this pass stopped on is resolved by the work item;
    // packets that arrived behind a held one are taken next.
    if more || inner.faults.any() || queued {
        shared.schedule();
    }
}

/// The largest UD payload: the port's MTU.
fn max_payload(dev: &Device<SroceDevice>) -> usize {
    dev.netdev(PORT)
        .and_then(|n| limits::ib_mtu_for(n.mtu()))
        .map_or(256, |m| 128usize << (m as usize))
}

/// Sends the WQEs posted when it starts (a ring's worth at most, so a
/// process that keeps advancing the producer index cannot hold the QP's
/// lock), completing each in order; true if more are pending now.
fn send(qp: &Qp<SroceDevice>, inner: &mut QpInner) -> bool {
    // The next WQE waits for its data to be faulted in (the work item).
    if inner.faults.is_waiting(Waiter::UdSend) {
        return false;
    }
    // Out of the QP's state while the WQE is used alongside it.
    let Some(mut stage) = inner.ud_stage.take() else {
        return false;
    };
    let more = send_staged(qp, inner, &mut stage);
    inner.ud_stage = Some(stage);
    more
}

fn send_staged(qp: &Qp<SroceDevice>, inner: &mut QpInner, stage: &mut WqeStage) -> bool {
    let caps = inner.attrs.caps;
    let WqeStage {
        copy: buf,
        send: wqe,
        ..
    } = stage;
    for _ in 0..inner.rings.send.pending() {
        let parsed = inner.rings.send.copy_pending(0, buf).and_then(|n| {
            SendWqe::parse_into(
                buf.get(..n).ok_or(EINVAL)?,
                caps.max_send_sge as usize,
                caps.max_inline_data as usize,
                wqe,
            )
        });
        let (wr_id, signaled, length, status) = match (parsed, &*wqe) {
            (Ok(()), Some(w)) => {
                let status = match send_one(qp, inner, w) {
                    Ok(Sent::Yes) => WcStatus::Success,
                    // Its session group is built (or its data faulted in)
                    // by the work item, which this pass schedules; the WQE
                    // stays in the ring.
                    Ok(Sent::AwaitsGroup | Sent::AwaitsFault) => return true,
                    Err(s) => s,
                };
                (w.wr_id, w.flags.signaled, w.length, status)
            }
            _ => {
                let id = SendWqe::id_and_completion(&buf[..]).map_or(0, |(id, _)| id);
                (id, true, 0, WcStatus::LocQpOpErr)
            }
        };
        // The slot goes back before the completion is visible.
        inner.rings.send.retire();
        if signaled || inner.attrs.signal_all || status != WcStatus::Success {
            let c = Completion {
                wr_id,
                status,
                opcode: WcOpcode::Send,
                byte_len: length,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: qp.data().qpn(),
                src_qp: 0,
                grh: false,
            };
            let _ = cq::post(qp.send_cq(), qp, &c, false);
        }
        if status != WcStatus::Success {
            // A send error moves the QP to the error state; the rest flush.
            inner.attrs.state = QpState::Err;
            qp.data().publish_state(QpState::Err);
            qp::flush(qp, &mut inner.rings);
            return false;
        }
    }
    inner.rings.send.pending() > 0
}

/// What became of a send WQE that did not fail.
enum Sent {
    /// Its packet went out (or was lost on the way, as UD may).
    Yes,
    /// Not sent: the first datagram to its destination waits until the
    /// destination's session group is built, in process context.
    AwaitsGroup,
    /// Not sent: its data waits for a page fault to be resolved.
    AwaitsFault,
}

/// Builds and sends the packet of one UD send WQE.
fn send_one(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    w: &SendWqe,
) -> core::result::Result<Sent, WcStatus> {
    let dev = qp.device();
    let op = match w.op {
        SendOp::Send => Operation::SendOnly,
        SendOp::SendWithImm => Operation::SendOnlyWithImmediate,
        _ => return Err(WcStatus::LocQpOpErr),
    };
    if w.length as usize > max_payload(dev) {
        return Err(WcStatus::LocLenErr);
    }
    let av = match w.ud.av {
        // An address the process wrote into the WQE: its source GID is
        // never taken from there, only from the device's table by index,
        // so a packet cannot leave with an address the host does not own.
        Some(mut av) => {
            (av.sgid, av.roce_v1) = dev
                .roce_gid(PORT, av.sgid_index)
                .ok_or(WcStatus::LocQpOpErr)?;
            // RoCE v1 frames go to the address's MAC, which here would be
            // the process's word (RoCEv2 resolves it by routing): a v1
            // destination needs an address handle, resolved by the core.
            if av.roce_v1 {
                return Err(WcStatus::LocQpOpErr);
            }
            av
        }
        None => dev
            .data()
            .ah(w.ud.ah_num, qp.pd())
            .ok_or(WcStatus::LocQpOpErr)?,
    };
    let qpn = qp.data().qpn();
    let base = io::Flow {
        src: gid_ip(&av.sgid),
        dst: gid_ip(&av.dgid),
        src_port: rxe_initial_sport(qpn),
        tclass: av.traffic_class,
        hop_limit: av.hop_limit,
        out: io::OutPort::Device,
        encap: io::Encap::for_av(&av),
    };
    // QP1 (GSI) carries the CM's MADs: always the plain flow; so does RoCE
    // v1, which has no UDP source port to vary.
    let flow = if qpn == crate::sroce::limits::GSI_QPN || av.roce_v1 {
        base
    } else {
        let ov = inner.sessions_override;
        match inner.ud_sessions.flow(dev, base, w.length, &ov) {
            Some(f) => f,
            None => return Ok(Sent::AwaitsGroup),
        }
    };
    let psn = inner.attrs.sq_psn;
    inner.attrs.sq_psn = Psn::new(psn).next().value();
    let mut bth = Bth::new(
        Opcode::new(Transport::Ud, op),
        w.ud.remote_qpn & 0x00ff_ffff,
        Psn::new(psn),
    );
    bth.pkey = PKEY_DEFAULT;
    bth.solicited = w.flags.solicited;
    let mut h = Headers::new(bth);
    let qkey = if w.ud.remote_qkey & QKEY_USE_QP != 0 {
        inner.attrs.qkey
    } else {
        w.ud.remote_qkey
    };
    h.deth = Some(Deth { qkey, src_qp: qpn });
    if op == Operation::SendOnlyWithImmediate {
        h.immdt = Some(ImmDt(w.imm_or_inv.to_ne_bytes()));
    }
    let mut local = None;
    let routes = &mut inner.routes;
    let r = send_packet(dev, routes, &flow, &h, w.length as usize, |out| {
        match &w.data {
            SendData::Inline { bytes, len } => {
                let src = bytes.get(..*len).ok_or(EINVAL)?;
                out.get_mut(..src.len()).ok_or(EINVAL)?.copy_from_slice(src);
                Ok(())
            }
            SendData::Sges(sges) => gather(dev, qp, sges.as_slice(), 0, out).map_err(|e| {
                local = Some(e);
                // Not counted as a send error.
                if matches!(e, BufferError::NotPresent(_)) {
                    NOT_PRESENT
                } else {
                    EFAULT
                }
            }),
        }
    });
    match (r, local) {
        (_, Some(BufferError::NotPresent(f))) => {
            if inner.faults.wait(Waiter::UdSend, f) {
                Ok(Sent::AwaitsFault)
            } else {
                Err(WcStatus::LocProtErr)
            }
        }
        (_, Some(BufferError::Status(s))) => Err(s),
        // Lost on the way out (no route, no memory): counted; UD is
        // unreliable, so the send still completes.
        _ => Ok(Sent::Yes),
    }
}

/// Delivers one received packet to the next receive WQE, if it is a UD
/// SEND for this QP with the right Q_Key; false if it waits for a page
/// fault (it and its receive WQE stay).
fn receive(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket) -> bool {
    // Out of the QP's state while the WQE is used alongside it.
    let Some(mut stage) = inner.ud_stage.take() else {
        return true;
    };
    let taken = receive_staged(qp, inner, pkt, &mut stage);
    inner.ud_stage = Some(stage);
    taken
}

fn receive_staged(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    pkt: &RxPacket,
    stage: &mut WqeStage,
) -> bool {
    if !matches!(inner.attrs.state, QpState::Rtr | QpState::Rts) {
        return true;
    }
    let Ok((h, rest)) = Headers::parse(pkt.head()) else {
        return true;
    };
    if h.bth.opcode.transport() != Transport::Ud {
        return true;
    }
    let imm = match h.bth.opcode.operation() {
        Operation::SendOnly => None,
        Operation::SendOnlyWithImmediate => h.immdt.map(|i| u32::from_ne_bytes(i.0)),
        _ => return true,
    };
    let Some(deth) = h.deth else { return true };
    let counters = &qp.device().data().io.counters;
    if deth.qkey != inner.attrs.qkey {
        counters.inc(Counter::RcvdDropBadQkey);
        return true;
    }
    let header_len = pkt.head().len() - rest.len();
    let after = pkt.len() - header_len + crate::roce::icrc::ICRC_LEN;
    let Ok(payload_len) = h.payload_len(after) else {
        return true;
    };
    let (wr_id, status) = if let Some(rq) = inner.rings.recv.as_mut() {
        if rq.pending() == 0 {
            counters.inc(Counter::RcvdDropNoRecv);
            return true;
        }
        let max_sge = inner_max_recv_sge(rq.elem_size());
        let WqeStage {
            copy: buf,
            recv: wqe,
            ..
        } = &mut *stage;
        let parsed = rq
            .copy_pending(0, buf)
            .and_then(|n| RecvWqe::parse_into(buf.get(..n).ok_or(EINVAL)?, max_sge, wqe));
        let status = match (parsed, &*wqe) {
            (Ok(()), Some(w)) => place(qp, w, pkt, header_len, payload_len),
            _ => Ok(WcStatus::LocQpOpErr),
        };
        let Some(status) = wait_for_fault(inner, status) else {
            // The WQE stays first in the ring, for this datagram.
            return false;
        };
        let Some(rq) = inner.rings.recv.as_mut() else {
            return true;
        };
        // The slot goes back before the completion is visible.
        rq.retire();
        (RecvWqe::id(&buf[..]).unwrap_or(0), status)
    } else if let Some(srq) = qp.srq() {
        // Taken (copied out, its slot handed back) from the shared queue,
        // unless one taken before waits for this datagram.
        let wqe = &mut stage.recv;
        let taken = stage.recv_held || super::srq::take_usable(qp, srq, wqe);
        let (true, Some(w)) = (taken, &*wqe) else {
            counters.inc(Counter::RcvdDropNoRecv);
            return true;
        };
        let status = place(qp, w, pkt, header_len, payload_len);
        let Some(status) = wait_for_fault(inner, status) else {
            stage.recv_held = true;
            return false;
        };
        stage.recv_held = false;
        (w.wr_id, status)
    } else {
        counters.inc(Counter::RcvdDropNoRecv);
        return true;
    };
    let c = Completion {
        wr_id,
        status,
        opcode: WcOpcode::Recv,
        byte_len: (GRH_LEN + payload_len) as u32,
        imm_data: imm,
        invalidated_rkey: None,
        qp_num: qp.data().qpn(),
        src_qp: deth.src_qp,
        grh: true,
    };
    let _ = cq::post(qp.recv_cq(), qp, &c, h.bth.solicited);
    true
}

/// The status a receive completes with, or `None` if it waits for a page
/// fault (memory that could not be faulted in before fails it).
fn wait_for_fault(
    inner: &mut QpInner,
    placed: core::result::Result<WcStatus, BufferError>,
) -> Option<WcStatus> {
    match placed {
        Ok(s) | Err(BufferError::Status(s)) => Some(s),
        Err(BufferError::NotPresent(f)) => {
            if inner.faults.wait(Waiter::UdReceive, f) {
                None
            } else {
                Some(WcStatus::LocProtErr)
            }
        }
    }
}

/// A receive WQE taken from the shared queue for a datagram that waited
/// for a page fault goes without a completion: the QP is reset (IBTA: a
/// reset discards its work requests).
pub(crate) fn forget_held(inner: &mut QpInner) {
    if let Some(stage) = inner.ud_stage.as_mut() {
        stage.recv_held = false;
        stage.recv = None;
    }
}

/// A receive WQE taken from the shared queue for a datagram that waited
/// for a page fault completes flushed: the QP fails.
pub(crate) fn flush_held(qp: &Qp<SroceDevice>, inner: &mut QpInner) {
    let Some(stage) = inner.ud_stage.as_mut() else {
        return;
    };
    if !core::mem::take(&mut stage.recv_held) {
        return;
    }
    if let Some(w) = stage.recv.take() {
        let c = Completion::flushed(w.wr_id, WcOpcode::Recv, qp.data().qpn());
        let _ = cq::post(qp.recv_cq(), qp, &c, false);
    }
}

/// Writes the GRH and the payload into the receive WQE's buffers.
fn place(
    qp: &Qp<SroceDevice>,
    w: &RecvWqe,
    pkt: &RxPacket,
    header_len: usize,
    payload_len: usize,
) -> core::result::Result<WcStatus, BufferError> {
    let dev = qp.device();
    let sges = w.sges.as_slice();
    if w.sges
        .total_len()
        .is_none_or(|t| (t as usize) < GRH_LEN + payload_len)
    {
        return Ok(WcStatus::LocLenErr);
    }
    // RoCEv2: the IP header stands in for the GRH; an IPv4 header fills
    // the last 20 of the 40 bytes (IBTA annex A17), an IPv6 header all.
    let mut grh = [0u8; GRH_LEN];
    if let Some(ip) = pkt.ip_header() {
        let at = GRH_LEN.saturating_sub(ip.len());
        if let Some(dst) = grh.get_mut(at..) {
            if dst.len() == ip.len() {
                dst.copy_from_slice(ip);
            }
        }
    }
    scatter(dev, qp, sges, 0, &grh, Access::LOCAL_WRITE)?;
    // The payload in small pieces: no page-sized buffer on the stack.
    let mut chunk = [0u8; 256];
    let mut done = 0;
    while done < payload_len {
        let n = (payload_len - done).min(chunk.len());
        let Some(piece) = chunk.get_mut(..n) else {
            return Ok(WcStatus::LocLenErr);
        };
        if pkt.copy_to(header_len + done, piece).is_err() {
            return Ok(WcStatus::LocLenErr);
        }
        let at = (GRH_LEN + done) as u32;
        scatter(dev, qp, sges, at, piece, Access::LOCAL_WRITE)?;
        done += n;
    }
    Ok(WcStatus::Success)
}
