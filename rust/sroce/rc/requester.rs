// SPDX-License-Identifier: GPL-2.0

//! The requester side of an RC QP: WQEs taken from the send ring into the
//! protocol core's send queue, their packets out on the sessions, local
//! operations, and the go-back decisions of the session group.

use super::{
    payload::{burst_packet, gather, send_packet, BufferError},
    RcState, Requester, SQ_DEPTH, TX_REFUSED_MAX,
};
use crate::net::route::RouteCache;
use crate::rdma::{
    access::Access,
    device::Device,
    key_slots::is_window_key,
    mr_odp::NOT_PRESENT,
    qp::{Qp, QpState},
    rxe_abi::{SEND_WQE_HEADER, SGE_SIZE},
    wc::WcStatus,
    wqe::{SendData, SendOp, SendWqe, MAX_SGE},
};
use crate::roce::{
    bth::Bth,
    completer::Action,
    ieth::Ieth,
    immdt::ImmDt,
    opcode::{ExtHeader, Opcode, Operation, Transport},
    packet::Headers,
    requester::RequestPacket,
    reth::Reth,
    segment::WqeOp,
    session::{health::probe_psn, SessionId},
};
use crate::sroce::{
    device::SroceDevice,
    io,
    io::counters::Counter,
    odp::{PageFaults, Waiter},
    qp::QpInner,
    rc_sessions::GoBack,
    rc_timers::Now,
};
use kernel::prelude::*;

/// The requester goes back (`why`): with several sessions the group
/// charges the session that carried the oldest request and picks where to
/// resend (the send queue's own retry budget is kept full: the group's
/// per-session budgets decide, and the request fails only when all are
/// spent); with one session the send queue decides alone, as in rxe.
/// `step` is the send queue's own reaction (timeout or response).
pub(super) fn go_back(
    rc: &mut RcState,
    why: GoBack,
    now: Now,
    step: impl FnOnce(&mut Requester) -> Action,
) -> Action {
    let now_us = rc.now_us(now);
    let multi = rc.sessions.is_multi();
    if multi {
        rc.sq.refill_retries();
    }
    let oldest = rc.sq.oldest_tag();
    // The session that carried the oldest unacknowledged packet: with the
    // multipath transport a message's packets may have taken several.
    let carrier = rc.mp.carrier_of(rc.sq.una());
    let a = step(&mut rc.sq);
    if !matches!(a, Action::Retransmit { .. }) {
        return a;
    }
    // Everything from the oldest unacknowledged packet is resent: none of
    // it counts as on its way any more.
    rc.mp.went_back();
    match rc.sessions.go_back(why, oldest, carrier, now_us) {
        Err(_) if multi => rc.sq.abort(crate::roce::wc::WcStatus::RetryExcErr),
        _ => a,
    }
}

/// Counts what the requester does about a response or a timeout.
pub(super) fn count_action(counters: &io::counters::IoCounters, a: &Action) {
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

/// Fails `tag` locally with `status`; the QP enters the error state.
pub(super) fn fail_local(rc: &mut RcState, tag: u32, status: WcStatus) {
    if rc.local_error.is_none() {
        rc.local_error = Some((tag, status));
    }
    rc.sq.set_error();
}

/// The WQE just taken from the ring failed before the requester took it:
/// the QP goes to the error state, and that WQE completes with `status`
/// (the ones before it and after it flush).
pub(super) fn fail_unposted(rc: &mut RcState, status: WcStatus) {
    if rc.unposted_error.is_none() {
        rc.unposted_error = Some(status);
    }
    rc.sq.set_error();
}

/// Performs the local operation `tag` (fast registration, local
/// invalidate of a region or a type 2 window, window binding) for the QP;
/// a refused one fails with `LocQpOpErr` (`MwBindErr` for a binding), as
/// rxe reports them.
pub(super) fn perform_local(
    qp: &Qp<SroceDevice>,
    dev: &Device<SroceDevice>,
    rc: &RcState,
    tag: u32,
) -> core::result::Result<(), WcStatus> {
    let Some(Some(w)) = rc.wqes.get(tag as usize % SQ_DEPTH) else {
        return Err(WcStatus::LocQpOpErr);
    };
    let refused = WcStatus::LocQpOpErr;
    let counter = match w.op {
        SendOp::RegMr => {
            let access = Access::from_raw(w.fast_reg.access as kernel::ffi::c_int);
            dev.fast_register(qp.pd(), w.fast_reg.key, access)
                .map_err(|_| refused)?;
            Counter::FastReg
        }
        SendOp::LocalInv if is_window_key(w.imm_or_inv) => {
            dev.invalidate_window(qp.pd(), w.imm_or_inv, None)
                .map_err(|_| refused)?;
            Counter::LocalInv
        }
        SendOp::LocalInv => {
            dev.invalidate_key(qp.pd(), w.imm_or_inv)
                .map_err(|_| refused)?;
            Counter::LocalInv
        }
        SendOp::BindMw => {
            dev.bind_window(qp.pd(), qp.data().serial(), &w.bind)
                .map_err(|_| WcStatus::MwBindErr)?;
            Counter::MwBind
        }
        _ => return Err(refused),
    };
    dev.data().io.counters.inc(counter);
    Ok(())
}

/// Sends a duplicate probe on session `s` of an idle QP: a zero-length RDMA
/// WRITE Only with AckReq and the last acknowledged PSN, which the
/// responder can only re-ACK (see `roce::session::health`).
pub(super) fn send_duplicate_probe(
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

/// Sends the newest packet once more, asking for an ACK, if packets are
/// unacknowledged that no packet asked for (unsignaled messages share
/// ACKs, and sending paused before the next that asks).
pub(super) fn request_ack(qp: &Qp<SroceDevice>, routes: &mut RouteCache, rc: &mut RcState) {
    let Some(p) = rc.sq.ack_request_packet() else {
        return;
    };
    let flow = rc
        .sessions
        .resend_flow(None, 0)
        .map_or(rc.flow, |(_, flow)| flow);
    let dev = qp.device();
    let mut burst = io::Burst::new(dev);
    // Not sent (no memory, or its pages are gone): the transport timer
    // covers it, as any loss.
    if send_request(qp, dev, routes, &mut burst, rc, &p, &flow).is_ok() {
        dev.data().io.counters.inc(Counter::AckRequests);
    }
}

/// The requester engine's operation for a WQE.
pub(super) fn wqe_op(op: SendOp) -> WqeOp {
    match op {
        SendOp::Send => WqeOp::Send,
        SendOp::SendWithImm => WqeOp::SendWithImm,
        SendOp::SendWithInv => WqeOp::SendWithInv,
        SendOp::Write => WqeOp::Write,
        SendOp::WriteWithImm => WqeOp::WriteWithImm,
        SendOp::Read => WqeOp::Read,
        SendOp::CompareSwap => WqeOp::CompareSwap,
        SendOp::FetchAdd => WqeOp::FetchAdd,
        SendOp::AtomicWrite => WqeOp::AtomicWrite,
        SendOp::LocalInv | SendOp::RegMr | SendOp::BindMw => WqeOp::Local,
    }
}

/// Takes newly posted WQEs into the engine and sends what it allows.
pub(super) fn send(qp: &Qp<SroceDevice>, inner: &mut QpInner, now: Now) {
    let dev = qp.device();
    let caps = inner.attrs.caps;
    let signal_all = inner.attrs.signal_all;
    let sending = matches!(inner.attrs.state, QpState::Rts);
    let QpInner {
        rings,
        rc,
        routes,
        faults,
        ..
    } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let rc: &mut RcState = rc;
    if sending {
        while rc.sq.has_room() && !rc.sq.is_error() && rings.send.pending() > rc.taken {
            let (tag, taken) = (rc.next_tag, rc.taken);
            // Parsed straight into its place in the in-flight table.
            let Some(slot) = rc.wqes.get_mut(tag as usize % SQ_DEPTH) else {
                break;
            };
            // The copy of the ring slot is staged in the QP's scratch buffer
            // (free until packets are built), not on the stack.
            let Some(buf) = rc.scratch.get_mut(..SEND_WQE_HEADER + SGE_SIZE * MAX_SGE) else {
                break;
            };
            let parsed = rings.send.copy_pending(taken, buf).and_then(|n| {
                SendWqe::parse_into(
                    buf.get(..n).ok_or(EINVAL)?,
                    caps.max_send_sge as usize,
                    caps.max_inline_data as usize,
                    slot,
                )
            });
            let Some(wqe) = slot.as_ref().filter(|_| parsed.is_ok()) else {
                note_taken(rc);
                fail_unposted(rc, WcStatus::LocQpOpErr);
                break;
            };
            let op = wqe_op(wqe.op);
            let len = if op.has_8_byte_operand() {
                8
            } else if op.is_local() {
                0
            } else {
                wqe.length
            };
            let fence = wqe.flags.fence;
            let posted = rc.sq.post(crate::roce::requester::SendWqe {
                tag,
                op,
                len,
                fence,
                signaled: wqe.flags.signaled || signal_all,
            });
            note_taken(rc);
            if let Err(e) = posted {
                // An operation the service does not carry (READ or an
                // atomic on UC) is an operation error, as in rxe; the
                // other refusal is a message too long.
                let status = match e {
                    crate::roce::Error::InvalidForTransport => WcStatus::LocQpOpErr,
                    _ => WcStatus::LocLenErr,
                };
                fail_unposted(rc, status);
                break;
            }
        }
    }
    if core::mem::take(&mut rc.tx_refused) {
        // The packet the stack refused last time goes first.
        rc.sq.resume();
    }
    let now_us = rc.now_us(now);
    let mtu = rc.sq.config().mtu.bytes();
    // Several sessions keep an ACK per message: their windows, losses and
    // SACKs are measured by them.
    rc.sq.set_ack_coalesce(if rc.sessions.is_multi() {
        1
    } else {
        rc.ack_coalesce
    });
    super::multipath::maybe_hello(dev, routes, rc, now_us);
    // The packets of a message go out together (sent when it is dropped).
    let mut burst = io::Burst::new(dev);
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
        if rc.mp.windows_full(&rc.sessions)
            && !rc.sq.resending()
            && rc.sq.has_unsent()
            && rc.sq.has_unacked()
        {
            // No live session has room in its congestion window: the
            // acknowledgements of what is unacknowledged (or its timeout)
            // run this again.
            dev.data().io.counters.inc(Counter::MpWindowFull);
            break;
        }
        let Some(p) = rc.sq.next_packet() else { break };
        let (wqe_len, responses) = match rc.wqes.get(p.tag as usize % SQ_DEPTH) {
            Some(Some(w)) => (w.length, wqe_op(w.op).is_read_or_atomic()),
            _ => (0, false),
        };
        if p.retransmit && p.psn != rc.sq.una() && rc.mp.peer_holds(p.psn) {
            // Going back N: the peer holds this one already.
            dev.data().io.counters.inc(Counter::MpResendsSkipped);
            continue;
        }
        let una = rc.sq.una();
        let first = !p.retransmit && p.operation.position().starts_message();
        // Asked for a new message's first packet (the ledger keeps the
        // rest of it on the same session, unless the multipath transport
        // moves it on when that session's window is full).
        let prefer = if first {
            rc.mp.preferred_session(&rc.sessions, responses)
        } else {
            None
        };
        let moved = if p.retransmit || first {
            None
        } else {
            rc.mp
                .flowlet_session(&rc.sessions, p.tag)
                .and_then(|(id, moved)| Some((id, rc.sessions.flow(id)?, moved)))
        };
        let (sid, flow) = match moved {
            Some((id, flow, switched)) => {
                if switched {
                    dev.data().io.counters.inc(Counter::MpFlowletSwitches);
                    rc.sessions.spread(p.tag);
                }
                // Counted where it went.
                rc.sessions.sent_on(p.tag, id, p.payload_len);
                (id, flow)
            }
            None => rc
                .sessions
                .flow_for(&p, wqe_len, mtu, prefer, now_us)
                .unwrap_or((SessionId(0), rc.flow)),
        };
        if first {
            rc.mp.message_on(p.tag, sid);
        }
        let mut p = p;
        if !p.ack_req && rc.mp.asks_ack(&rc.sessions, sid) {
            p.ack_req = true;
            if !p.retransmit {
                // The engine's wait before a probe starts over as for its
                // own requests.
                rc.sq.asked_by_driver(p.psn);
            }
        }
        if rc.mp.sent(una, p.psn, sid, now_us) {
            // Its losses stayed high: a fresh 5-tuple (the work item).
            rc.sessions.want_replace(sid);
        }
        match send_request(qp, dev, routes, &mut burst, rc, &p, &flow) {
            // The local stack refused it (its queue is full: veth's
            // backlog, a qdisc): taken back, not lost, and sending stops
            // until the queue has drained (the next pass: an ACK, a
            // doorbell, or the wake-up `run_pass` sets), as rxe's
            // requester backs off. Counted as lost it would be resent only
            // after a NAK or a timeout, going back N into the same full
            // queue. (Several sessions keep their own accounts of what
            // went where: there it stays a loss; so it does once the queue
            // refused `TX_REFUSED_MAX` in a row.)
            Ok(Sent::Refused)
                if rc.tx_refusals < TX_REFUSED_MAX && !rc.sessions.is_multi() && rc.sq.hold(&p) =>
            {
                dev.data().io.counters.inc(Counter::SendRequeued);
                rc.tx_refused = true;
                rc.tx_refusals += 1;
                break;
            }
            Ok(sent) => {
                if matches!(sent, Sent::Out) {
                    rc.tx_refusals = 0;
                }
                if p.retransmit {
                    dev.data().io.counters.inc(Counter::RetransmittedPkts);
                }
            }
            Err(BufferError::NotPresent(f)) => {
                hold_for_fault(rc, faults, &p, f);
                break;
            }
            Err(BufferError::Status(s)) => {
                fail_local(rc, p.tag, s);
                break;
            }
        }
    }
}

/// Request packet `p` could not be built: its data is absent. The
/// requester takes it back and waits for the fault to be resolved; memory
/// that could not be faulted in before fails the request.
fn hold_for_fault(
    rc: &mut RcState,
    faults: &mut PageFaults,
    p: &RequestPacket,
    f: crate::sroce::odp::PageFault,
) {
    if !faults.wait(Waiter::Requester, f) || !rc.sq.hold(p) {
        fail_local(rc, p.tag, WcStatus::LocProtErr);
    }
}

/// Counts the WQE just taken from the ring (parsed, or not, into the
/// in-flight table under the tag `rc.next_tag`).
fn note_taken(rc: &mut RcState) {
    rc.next_tag = rc.next_tag.wrapping_add(1);
    rc.taken += 1;
}

/// What became of a request packet handed to [`send_request`].
pub(super) enum Sent {
    /// Sent, joined to a burst, or lost on the way out (no route, no
    /// memory: counted, the retransmit timer's job).
    Out,
    /// Sent alone and refused by the local stack's full queue (`ENOBUFS`,
    /// counted as a send error): it can go again once the queue drains.
    Refused,
}

/// Sends request packet `p` along `flow`, in `burst` with the packets of
/// its message around it.
pub(super) fn send_request(
    qp: &Qp<SroceDevice>,
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    burst: &mut io::Burst<'_>,
    rc: &RcState,
    p: &RequestPacket,
    flow: &io::Flow,
) -> core::result::Result<Sent, BufferError> {
    let Some(Some(w)) = rc.wqes.get(p.tag as usize % SQ_DEPTH) else {
        return Err(WcStatus::LocQpOpErr.into());
    };
    let opcode = Opcode::new(rc.transport, p.operation);
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
    // Packets of this message still to come after this one that can join
    // it: not a Last with an immediate or an R_Key to invalidate, which is
    // longer when it is full. (The PSN window may stop the message sooner.)
    let more = if p.operation.position().ends_message() || payload == 0 {
        0
    } else {
        let left = w
            .length
            .saturating_sub(p.offset.saturating_add(p.payload_len));
        let following = left.div_ceil(p.payload_len) as usize;
        if matches!(
            w.op,
            SendOp::SendWithImm | SendOp::SendWithInv | SendOp::WriteWithImm
        ) {
            following.saturating_sub(1)
        } else {
            following
        }
    };
    let mut local = None;
    let r = burst_packet(burst, routes, flow, &h, payload, more, |out| {
        match &w.data {
            SendData::Inline { bytes, len } => {
                let src = bytes
                    .get(p.offset as usize..(*len).min(bytes.len()))
                    .and_then(|b| b.get(..out.len()))
                    .ok_or(EINVAL)?;
                out.copy_from_slice(src);
                Ok(())
            }
            SendData::Sges(sges) => gather(dev, qp, sges.as_slice(), p.offset, out).map_err(|e| {
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
        (_, Some(s)) => Err(s),
        (Err(e), None) if e == ENOBUFS => Ok(Sent::Refused),
        _ => Ok(Sent::Out),
    }
}
