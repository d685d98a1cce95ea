// SPDX-License-Identifier: GPL-2.0

//! The completer side of an RC QP: responses in (ACKs, NAKs, READ and
//! atomic responses) through the protocol core's completer, send
//! completions out to the CQ, and the error state.

use super::{
    payload::{scatter, BufferError},
    requester::{count_action, fail_local, go_back},
    RcState, SQ_DEPTH,
};
use crate::rdma::{
    access::Access,
    qp::Qp,
    wc::{Completion, WcOpcode, WcStatus},
    wqe::SendData,
};
use crate::roce::{
    aeth::{NakCode, Syndrome},
    completer::{Action, Response, ResponseKind},
    packet::Headers,
};
use crate::sroce::{
    cq,
    device::SroceDevice,
    io::{counters::Counter, RxPacket},
    odp::Waiter,
    qp::QpInner,
    rc_sessions::GoBack,
    rc_timers::Now,
};
use kernel::time::{Instant, Monotonic};

/// Takes one response; false if it must wait for its local buffer's
/// pages to be faulted in (it is left untouched, and so is the engine).
pub(super) fn on_response(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
    payload_len: usize,
    now: Now,
) -> bool {
    let dev = qp.device();
    let counters = &dev.data().io.counters;
    let QpInner { rc, faults, .. } = inner;
    let Some(rc) = rc.as_mut() else { return true };
    let rc: &mut RcState = rc;
    let Ok(r) = Response::from_headers(h, payload_len) else {
        return true;
    };
    // With the multipath transport an ACK or NAK may overtake the
    // responses of an earlier READ or atomic (another path): kept until
    // they are in, not taken as their loss. (An ACK acknowledges its PSN,
    // a NAK the PSNs before it.)
    if let (ResponseKind::Ack(syndrome), Some(aeth)) = (r.kind, h.aeth) {
        let through = if syndrome.is_ack() {
            r.psn
        } else {
            r.psn.wrapping_sub(1)
        };
        if rc.sq.response_pending_through(through) && rc.mp.defer_ack(r.psn, aeth) {
            return true;
        }
    }
    // A READ response's data or an atomic's result is placed before the
    // engine takes the response, so that a page fault leaves both as they
    // were.
    let mut placed = Ok(());
    if let Some((tag, offset, len)) = rc.sq.placement(&r) {
        placed = match place(qp, rc, tag, offset, len, &r, pkt, header_len) {
            Err(BufferError::NotPresent(f)) => {
                if faults.wait(Waiter::Completer, f) {
                    return false;
                }
                Err((tag, WcStatus::LocProtErr))
            }
            Err(BufferError::Status(s)) => Err((tag, s)),
            Ok(()) => Ok(()),
        };
    }
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
    // What the acknowledgement passed was delivered: the windows of the
    // sessions that carried it grow (multipath).
    let now_us = rc.now_us(now);
    rc.mp.on_acked(&mut rc.sessions, rc.sq.una(), now_us);
    if matches!(
        action,
        Action::PlaceReadData { .. } | Action::AtomicResult { .. }
    ) {
        // Requests after a READ or atomic are acknowledged once its
        // responses are in: until then their sessions' silence is no
        // loss.
        rc.mp.restart_quiet(now_us);
    }
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
    // The data was placed above; a placement that failed fails its request
    // now that the engine has taken the response (and what it
    // acknowledged).
    if let Err((tag, s)) = placed {
        fail_local(rc, tag, s);
    }
    // An acknowledgement kept for the responses just taken.
    let sq = &rc.sq;
    if let Some((psn, aeth)) = rc.mp.take_deferred_ack(|p| sq.response_pending_through(p)) {
        let h = super::multipath::ack_headers(qp.data().qpn(), psn, aeth);
        return on_response(qp, inner, &h, pkt, 0, 0, now);
    }
    true
}

/// Places the data of response `r` (`len` bytes of a READ response's
/// payload, or an atomic's 8-byte result) into request `tag`'s local
/// buffer at `offset`.
#[expect(clippy::too_many_arguments, reason = "one response's pieces")]
fn place(
    qp: &Qp<SroceDevice>,
    rc: &mut RcState,
    tag: u32,
    offset: u32,
    len: u32,
    r: &Response,
    pkt: &RxPacket,
    header_len: usize,
) -> core::result::Result<(), BufferError> {
    let dev = qp.device();
    // The WQE is used where it is kept (a copy is 650 bytes).
    let Some(Some(w)) = rc.wqes.get(tag as usize % SQ_DEPTH) else {
        return Err(WcStatus::LocQpOpErr.into());
    };
    let SendData::Sges(sges) = &w.data else {
        return Err(WcStatus::LocQpOpErr.into());
    };
    if let ResponseKind::AtomicAck { orig, .. } = r.kind {
        let bytes = orig.to_ne_bytes();
        return scatter(dev, qp, sges.as_slice(), 0, &bytes, Access::LOCAL_WRITE);
    }
    let Some(buf) = rc.scratch.get_mut(..len as usize) else {
        return Err(WcStatus::LocLenErr.into());
    };
    pkt.copy_to(header_len, buf)
        .map_err(|_| WcStatus::LocLenErr)?;
    scatter(dev, qp, sges.as_slice(), offset, buf, Access::LOCAL_WRITE)
}

/// Posts the send completions the engine has produced and retires their
/// ring slots (`now`: the caller's pass's clock).
pub(crate) fn complete_sends(qp: &Qp<SroceDevice>, inner: &mut QpInner, now: Instant<Monotonic>) {
    let signal_all = inner.attrs.signal_all;
    let QpInner { rings, rc, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let now_us = rc.now_us(now);
    while let Some(c) = rc.sq.pop_completion() {
        // A local operation went out on no session.
        if c.status == crate::roce::wc::WcStatus::Success && !c.op.is_local() {
            rc.sessions.on_completed(c.tag, now_us);
        }
        // What the completion needs, read in place; the slot is emptied
        // (not moved out: a WQE is 650 bytes).
        let w = rc.wqes.get_mut(c.tag as usize % SQ_DEPTH).and_then(|slot| {
            let kept = slot
                .as_ref()
                .map(|w| (w.flags.signaled, w.wr_id, w.op.completion(), w.length));
            *slot = None;
            kept
        });
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
        let signaled = w.is_some_and(|w| w.0) || signal_all;
        if signaled || status != WcStatus::Success {
            let (wr_id, opcode, byte_len) = match w {
                Some((_, wr_id, opcode, length)) => (wr_id, opcode, length),
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
    crate::sroce::ud::flush_held(qp, inner);
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
    complete_sends(qp, inner, Instant::<Monotonic>::now());
    // The failed WQE is the last one taken: every one before it is still
    // in the ring (taken, not completed) and flushes first.
    let failed = inner
        .rc
        .as_ref()
        .and_then(|rc| Some((rc.taken.checked_sub(1)?, rc.unposted_error?)));
    // Dropped once the lock is released: its session group holds sockets.
    if let Some(rc) = inner.rc.take() {
        inner.retired = Some(rc);
    }
    crate::sroce::qp::flush_failing(qp, &mut inner.rings, failed);
}
