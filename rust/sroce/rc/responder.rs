// SPDX-License-Identifier: GPL-2.0

//! The responder side of an RC or UC QP: requests in (through the
//! protocol core's responder engine), their effects on local memory and
//! receive WQEs, and the replies out (ACKs, NAKs, atomic ACKs, queued READ
//! responses; none for UC).

use super::{
    payload::{burst_packet, scatter, send_packet, BufferError},
    RcState,
};
use crate::rdma::{
    access::Access,
    key_slots::is_window_key,
    mr_odp::NOT_PRESENT,
    qp::Qp,
    queue::UserProducerQueue,
    rxe_abi::{RECV_WQE_HEADER, SGE_SIZE},
    srq::Srq,
    wc::{Completion, WcOpcode, WcStatus},
    wqe::{RecvWqe, MAX_SGE},
};
use crate::roce::{
    aeth::{Aeth, NakCode, Syndrome},
    atomic_ack_eth::AtomicAckEth,
    bth::Bth,
    opcode::{Opcode, Operation, Transport},
    packet::Headers,
    psn::Psn,
    responder::{Decision, Outcome, Reply, Request, Work as RespWork, WorkKind},
};
use crate::sroce::{
    cq,
    device::SroceDevice,
    io,
    io::{counters::Counter, RxPacket},
    odp::{PageFault, PageFaults, Waiter},
    qp::QpInner,
};
use kernel::error::code::EINVAL;

pub(super) fn on_request(
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
            if reply == Reply::Paused {
                // Kept queued; offered again once the fault is resolved.
                return false;
            }
            // A dropped UC message leaves its receive WQE for the next.
            if reply != Reply::Dropped {
                finish_recv(qp, inner, &work, h, outcome);
            }
            reply
        }
        Decision::Defer => return false,
    };
    if reply == Reply::Dropped {
        qp.device().data().io.counters.inc(Counter::RcvdDropUc);
    }
    send_reply(qp, inner, reply, pkt.ingress());
    true
}

/// Performs the memory work of an accepted request.
pub(super) fn execute(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    work: &RespWork,
    h: &Headers,
    pkt: &RxPacket,
    header_len: usize,
) -> Outcome {
    let dev = qp.device();
    let access = inner.attrs.access_flags;
    // Whom a type 2 memory window must be bound to.
    let me = qp.data().serial();
    let QpInner {
        rings, rc, faults, ..
    } = inner;
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
                Err(BufferError::Status(WcStatus::LocLenErr)) => {
                    return Outcome::Failed(NakCode::InvalidRequest)
                }
                Err(BufferError::NotPresent(f)) => {
                    return page_fault(faults, f, NakCode::RemoteOperationalError)
                }
                Err(_) => return Outcome::Failed(NakCode::RemoteOperationalError),
            }
            // SEND with invalidate (the IETH rides on the last packet):
            // the key must name a fast-registration region of this PD, or
            // a type 2 window bound to this QP.
            let Some(ieth) = h.ieth else {
                return Outcome::Done;
            };
            let invalidated = if is_window_key(ieth.rkey) {
                dev.invalidate_window(qp.pd(), ieth.rkey, Some(me)).is_ok()
            } else {
                dev.invalidate_key(qp.pd(), ieth.rkey).is_ok()
            };
            if !invalidated {
                return Outcome::Failed(NakCode::InvalidRequest);
            }
            dev.data().io.counters.inc(Counter::RemoteInv);
            Outcome::Done
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
                let ok = dev.check_remote_access(
                    rkey,
                    qp.pd(),
                    me,
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
            let (mr, at) = match dev.check_remote_access(
                rkey,
                qp.pd(),
                me,
                va,
                u64::from(len),
                Access::REMOTE_WRITE,
            ) {
                Ok(found) => found,
                Err(_) => return Outcome::Failed(NakCode::RemoteAccessError),
            };
            match mr.copy_to(at, data) {
                Ok(()) => Outcome::Done,
                Err(e) if e == NOT_PRESENT => {
                    page_fault(faults, fault(mr.key(), at, len.into(), true), REMOTE_ACCESS)
                }
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
            let len = u64::from(len);
            match dev.check_remote_access(rkey, qp.pd(), me, va, len, Access::REMOTE_READ) {
                Ok(_) => Outcome::Done,
                Err(_) => Outcome::Failed(NakCode::RemoteAccessError),
            }
        }
        WorkKind::AtomicWrite { va, rkey } => {
            if access & Access::REMOTE_WRITE.bits() == 0 {
                return Outcome::Failed(NakCode::RemoteAccessError);
            }
            let (mr, at) =
                match dev.check_remote_access(rkey, qp.pd(), me, va, 8, Access::REMOTE_WRITE) {
                    Ok(found) => found,
                    Err(_) => return Outcome::Failed(NakCode::RemoteAccessError),
                };
            let Some(data) = load(&mut rc.scratch, pkt, header_len, 8) else {
                return Outcome::Failed(NakCode::RemoteOperationalError);
            };
            let mut value = [0u8; 8];
            value.copy_from_slice(data);
            // The payload's bytes land as they are.
            match mr.atomic_write(at, u64::from_ne_bytes(value)) {
                Ok(()) => Outcome::Done,
                Err(e) if e == NOT_PRESENT => {
                    page_fault(faults, fault(mr.key(), at, 8, true), REMOTE_ACCESS)
                }
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
            let (mr, at) =
                match dev.check_remote_access(rkey, qp.pd(), me, va, 8, Access::REMOTE_ATOMIC) {
                    Ok(found) => found,
                    Err(_) => return Outcome::Failed(NakCode::RemoteAccessError),
                };
            let r = if compare_swap {
                mr.atomic_compare_swap(at, compare, swap_add)
            } else {
                mr.atomic_fetch_add(at, swap_add)
            };
            match r {
                Ok(orig) => Outcome::Atomic(orig),
                Err(e) if e == NOT_PRESENT => {
                    page_fault(faults, fault(mr.key(), at, 8, true), REMOTE_ACCESS)
                }
                Err(_) => Outcome::Failed(NakCode::InvalidRequest),
            }
        }
    }
}

const REMOTE_ACCESS: NakCode = NakCode::RemoteAccessError;

fn fault(key: u32, iova: u64, len: u64, write: bool) -> PageFault {
    PageFault {
        key,
        iova,
        len,
        write,
    }
}

/// The responder stops on `f` ([`Outcome::PageFault`]), unless that
/// memory could not be faulted in before: then the request fails with
/// `failed`, as an access to unmapped memory.
fn page_fault(faults: &mut PageFaults, f: PageFault, failed: NakCode) -> Outcome {
    if faults.wait(Waiter::Responder, f) {
        Outcome::PageFault
    } else {
        Outcome::Failed(failed)
    }
}

/// Copies `len` payload bytes of `pkt` (after `header_len`) to `scratch`.
pub(super) fn load<'a>(
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
pub(super) fn load_recv(rq: Option<&UserProducerQueue>, rc: &mut RcState) -> bool {
    let Some(rq) = rq else {
        return rc.recv.is_some();
    };
    let max_sge = inner_max_recv_sge(rq.elem_size());
    // The ring slot's copy is staged in the scratch buffer, which the
    // packet's payload fills only after this.
    let parsed = rc
        .scratch
        .get_mut(..RECV_WQE_HEADER + SGE_SIZE * MAX_SGE)
        .ok_or(EINVAL)
        .and_then(|buf| {
            let n = rq.copy_pending(0, buf)?;
            RecvWqe::parse_into(buf.get(..n).ok_or(EINVAL)?, max_sge, &mut rc.recv)
        });
    if parsed.is_err() {
        *rc.recv = None;
    }
    parsed.is_ok()
}

/// Whether `req` is the next request (for UC: at or after the expected
/// PSN, where the responder resynchronises after a loss) and starts a
/// message that consumes a receive WQE (SEND First/Only, WRITE with
/// immediate).
pub(super) fn needs_recv(rc: &RcState, req: &Request) -> bool {
    use Operation as O;
    let d = req.psn.diff(rc.resp.epsn());
    let next = d == 0 || (d > 0 && !rc.is_acknowledged());
    !rc.resp.is_error()
        && next
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

/// Takes the next usable WQE of the shared queue for `rc`; false if there
/// is none.
pub(super) fn take_from_srq(
    qp: &Qp<SroceDevice>,
    srq: &Srq<SroceDevice>,
    rc: &mut RcState,
) -> bool {
    crate::sroce::srq::take_usable(qp, srq, &mut rc.recv)
}

/// Completes the receive WQE a request used, if the message ended (or
/// failed).
pub(super) fn finish_recv(
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

/// Sends `reply` to a request that arrived through net device `ingress`:
/// out through the same device, so replies return over the path that
/// delivered the request (with several paths, a path that delivers
/// requests is known to work), from the QP's RoCEv2 source port.
pub(super) fn send_reply(qp: &Qp<SroceDevice>, inner: &mut QpInner, reply: Reply, ingress: i32) {
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
        Reply::None | Reply::Dropped | Reply::Fatal | Reply::Paused => {}
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
        // Queued: sent by a pass within its budget, from the
        // device the READ came in through.
        Reply::Read => rc.read_ingress = ingress,
    }
}

/// The flow of a reply to a request that arrived through net device
/// `ingress`.
pub(super) fn reply_flow(rc: &RcState, ingress: i32) -> io::Flow {
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
pub(super) fn send_read_responses(qp: &Qp<SroceDevice>, inner: &mut QpInner, budget: &mut u32) {
    let dev = qp.device();
    let me = qp.data().serial();
    let QpInner {
        rc, routes, faults, ..
    } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let flow = reply_flow(rc, rc.read_ingress);
    // A READ's responses go out together (sent when it is dropped).
    let mut burst = io::Burst::new(dev);
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
        if p.len == 0 {
            // Nothing to read (an empty READ, an atomic write's response):
            // no key to check.
            // In the burst too, so it stays behind the responses before it.
            let _ = burst_packet(&mut burst, routes, &flow, &h, 0, 0, |_| Ok(()));
            continue;
        }
        let len = u64::from(p.len);
        let found = dev.check_remote_access(p.rkey, qp.pd(), me, p.va, len, Access::REMOTE_READ);
        let Ok((mr, at)) = found else { continue };
        // The READ's later responses that can join this one, as many as
        // this pass sends: not the Last, whose AETH makes it longer when
        // it is full.
        let more = p.following.saturating_sub(1).min(*budget) as usize;
        let mut absent = false;
        let _ = burst_packet(&mut burst, routes, &flow, &h, p.len as usize, more, |out| {
            mr.copy_from(at, out)
                .inspect_err(|e| absent = *e == NOT_PRESENT)
        });
        if !absent {
            continue;
        }
        if faults.wait(Waiter::Responder, fault(mr.key(), at, len, false)) {
            // Sent again, first, once the data is faulted in.
            rc.resp.hold_read_response(&p);
            return;
        }
        // The READ's memory is not mapped: it fails as an access to
        // unregistered memory would have (the QP enters the error state).
        let mut nak = Headers::new(Bth::new(
            Opcode::new(Transport::Rc, Operation::Acknowledge),
            rc.dest_qpn,
            p.psn,
        ));
        nak.aeth = Some(Aeth {
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn: rc.resp.msn(),
        });
        drop(burst);
        let _ = send_packet(dev, routes, &flow, &nak, 0, |_| Ok(()));
        rc.resp.set_error();
        return;
    }
}
