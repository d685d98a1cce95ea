// SPDX-License-Identifier: GPL-2.0

//! The responder's side of the multipath transport: hellos answered,
//! requests that arrive ahead of the expected PSN held and handed to the
//! engine in PSN order once their turn comes, SACKs out.

use super::*;

/// Looks at a received packet before the engines do: an extension packet
/// is taken here; a hello is answered (and goes on, to be re-ACKed as the
/// duplicate it is); with the responder's part agreed, a request ahead of
/// the expected PSN is held or dropped. Returns the packet if the engines
/// are to take it now.
pub(in crate::sroce::rc) fn intercept(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    pkt: RxPacket,
    now: Now,
) -> Option<RxPacket> {
    let connected = inner.attrs.state != QpState::Init;
    match inner.rc.as_ref() {
        Some(rc) if rc.is_acknowledged() && from_peer(rc, &pkt) => {}
        _ => return Some(pkt),
    }
    // Everything waits, in order, behind a packet that waits for a page
    // fault (`receive` keeps it).
    if receive_waits(inner) {
        return Some(pkt);
    }
    if ext::is_ext(pkt.head()) {
        super::spray::on_ext(qp, inner, &pkt, now);
        pkt.consume();
        return None;
    }
    let Some(bth) = bth_of(&pkt) else {
        return Some(pkt);
    };
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else {
        return Some(pkt);
    };
    if bth.opcode.transport() != Transport::Rc || !bth.opcode.operation().is_request() {
        return Some(pkt);
    }
    let ahead = bth.psn.diff(rc.resp.epsn());
    if ahead < 0 {
        if bth.opcode.operation() == Operation::RdmaWriteOnly && bth.ack_req {
            answer_hello(qp.device(), routes, rc, &pkt, bth.psn);
        }
        if rc.mp.responder_on() {
            // A resend of what was delivered: the requester may still
            // think the responder holds what it took since; a SACK says
            // what it holds now.
            rc.mp.sack_due = true;
            rc.mp.sack_ingress = pkt.ingress();
        }
        return Some(pkt);
    }
    if ahead <= 0 || !connected || !rc.mp.responder_on() {
        return Some(pkt);
    }
    let counters = &qp.device().data().io.counters;
    let ingress = pkt.ingress();
    let expected = rc.resp.epsn();
    let mp = &mut rc.mp;
    let Some(held) = mp.held.as_mut() else {
        return Some(pkt);
    };
    match held.offer(expected, bth.psn, pkt) {
        Offer::Held => counters.inc(Counter::MpHeld),
        Offer::Process(p) => return Some(p),
        Offer::Duplicate(p) | Offer::Beyond(p) => {
            counters.inc(Counter::MpHoldDropped);
            // Freed as a drop.
            drop(p);
        }
    }
    mp.sack_due = true;
    mp.sack_ingress = ingress;
    None
}

/// Answers a hello (a duplicate zero-length WRITE whose RETH says so),
/// if `pkt` is one.
fn answer_hello(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    rc: &mut RcState,
    pkt: &RxPacket,
    psn: Psn,
) {
    let Ok((h, rest)) = Headers::parse(pkt.head()) else {
        return;
    };
    let header_len = pkt.head().len() - rest.len();
    let payload = pkt.len().saturating_sub(header_len);
    let Some(caps) = h
        .reth
        .and_then(|r| ext::hello_caps(&r, u32::try_from(payload).unwrap_or(u32::MAX)))
    else {
        return;
    };
    if !caps.contains(ext::Caps::SACK) {
        return;
    }
    if rc.mp.held.is_none() {
        // The work item makes the buffer (it may sleep); the requester's
        // next hello is answered.
        rc.mp.want_held = true;
        return;
    }
    let ack = rc
        .mp
        .negotiation
        .on_hello(caps, u16::try_from(WINDOW).unwrap_or(u16::MAX));
    dev.data().io.counters.inc(Counter::MpHellosAnswered);
    let out = ExtPacket::hello_ack(rc.dest_qpn, psn, ack);
    send_ext(dev, routes, &reply_flow(rc, pkt.ingress()), &out);
}

/// Hands the held requests whose turn it is to the engines, in PSN order,
/// dropping any the engine went past. Returns whether the engines took
/// any.
pub(in crate::sroce::rc) fn release(qp: &Qp<SroceDevice>, inner: &mut QpInner, now: Now) -> bool {
    let mut released = false;
    while let Some(rc) = inner.rc.as_mut() {
        let epsn = rc.resp.epsn();
        let Some(held) = rc.mp.held.as_mut().filter(|h| !h.is_empty()) else {
            break;
        };
        let Some(pkt) = held.take(epsn) else {
            break;
        };
        if receive(qp, inner, &pkt, now) {
            pkt.consume();
            released = true;
            continue;
        }
        // Behind READ responses or a page fault: kept for the next pass.
        if let Some(held) = inner.rc.as_mut().and_then(|rc| rc.mp.held.as_mut()) {
            if let Err(p) = held.restore(epsn, pkt) {
                drop(p);
            }
        }
        break;
    }
    if released {
        if let Some(rc) = inner.rc.as_mut() {
            rc.mp.sack_due = true;
        }
    }
    released
}

/// Drops held requests the engine went past without taking them (inside
/// a READ's response range: no honest requester sends those). Once per
/// pass: it looks at every slot.
pub(in crate::sroce::rc) fn drop_stale(dev: &Device<SroceDevice>, inner: &mut QpInner) {
    let Some(rc) = inner.rc.as_mut() else { return };
    let epsn = rc.resp.epsn();
    let Some(held) = rc.mp.held.as_mut().filter(|h| !h.is_empty()) else {
        return;
    };
    while let Some(stale) = held.take_stale(epsn) {
        dev.data().io.counters.inc(Counter::MpHoldDropped);
        drop(stale);
    }
}

/// Sends the SACK owed, if one is and it can go now: not while READ
/// responses are queued (its acknowledgement would pass them, and a
/// requester takes an ACK past a READ as the READ's responses lost).
pub(in crate::sroce::rc) fn flush_sack(dev: &Device<SroceDevice>, inner: &mut QpInner) {
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let Some(held) = rc.mp.held.as_ref() else {
        return;
    };
    if !rc.mp.sack_due || rc.resp.read_responses_queued() {
        return;
    }
    let expected = rc.resp.epsn();
    let held = held.bitmap(expected);
    rc.mp.sack_due = false;
    let sack = Sack {
        expected,
        aeth: Aeth {
            syndrome: Syndrome::Ack {
                credits: CREDITS_INVALID,
            },
            msn: rc.resp.msn(),
        },
        held,
    };
    dev.data().io.counters.inc(Counter::MpSacksSent);
    let flow = reply_flow(rc, rc.mp.sack_ingress);
    send_ext(dev, routes, &flow, &ExtPacket::sack(rc.dest_qpn, sack));
}
