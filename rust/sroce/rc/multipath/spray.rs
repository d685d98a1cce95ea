// SPDX-License-Identifier: GPL-2.0

//! The requester's side of the multipath transport: hellos out, hello
//! ACKs and SACKs in, the selective resends a SACK calls for.

use super::*;

/// An extension packet from the peer.
pub(super) fn on_ext(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket, now: Now) {
    let dev = qp.device();
    let counters = &dev.data().io.counters;
    let Ok(p) = ExtPacket::parse(pkt.head()) else {
        counters.inc(Counter::RcvdDropMalformed);
        return;
    };
    let Some(rc) = inner.rc.as_mut() else { return };
    match p.kind {
        ExtKind::HelloAck(a) => {
            if rc.mp.requester_on() {
                return;
            }
            let mut n = rc.mp.negotiation;
            n.on_hello_ack(&a);
            if n.peer_reorders() {
                // The work item makes the requester's state (it may
                // sleep), then sprays.
                rc.mp.want_sprayer = Some(a);
            }
        }
        ExtKind::Sack(s) => {
            // Only a peer this side's hellos agreed with sends them.
            if !rc.mp.requester_on() {
                return;
            }
            counters.inc(Counter::MpSacksRcvd);
            // SACKs may take different paths: an older one (a smaller
            // expected PSN) says less than the last one did.
            if rc.mp.last_sack.is_some_and(|l| s.expected.is_before(l)) {
                return;
            }
            rc.mp.last_sack = Some(s.expected);
            rc.mp.sacked_since_timeout = true;
            // Its acknowledgement part is an ACK like any other, while
            // there is something to acknowledge (an idle QP's would pass
            // for the re-ACK of a duplicate probe).
            if rc.sq.has_unacked() {
                let h = ack_headers(qp.data().qpn(), s.expected.wrapping_sub(1), s.aeth);
                let _ = on_response(qp, inner, &h, pkt, 0, 0, now);
            }
            let now_us = inner.rc.as_ref().map_or(0, |rc| rc.now_us(now));
            resend_lost(qp, inner, &s, now_us);
        }
    }
}

/// Resends what SACK `s` shows lost, each on another live session (a
/// READ or atomic on session 0 while it is Up, as when first sent).
fn resend_lost(qp: &Qp<SroceDevice>, inner: &mut QpInner, s: &Sack, now_us: u64) {
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let rc: &mut RcState = rc;
    let Some(sprayer) = rc.mp.sprayer.as_mut() else {
        return;
    };
    let mut lost = core::mem::take(&mut sprayer.lost);
    lost.clear();
    sprayer.board.on_sack(s.expected, &s.held, |psn| {
        let _ = lost.push_within_capacity(psn);
    });
    // What the peer holds now was delivered by the sessions that carried
    // it.
    sprayer.credit(&mut rc.sessions, now_us);
    resend(qp, routes, rc, &lost, Charge::LossAndWindow, 0, now_us);
    if let Some(s) = rc.mp.sprayer.as_mut() {
        s.lost = lost;
    }
}

/// Resends at once, on live sessions, the packets still in flight on
/// sessions that are down (their link went down, or the group marked them
/// down), once the peer agreed: they cannot arrive, and no SACK will show
/// them lost. (Going back N resends everything anyway, so a group that
/// does is left to it; a probing session's canary is meant to go there.)
pub(in crate::sroce::rc) fn resend_stranded(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    now_us: u64,
) {
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let rc: &mut RcState = rc;
    // Going back N: everything is being resent anyway.
    if rc.sq.resending() {
        return;
    }
    let Some(sprayer) = rc.mp.sprayer.as_mut() else {
        return;
    };
    let mut down = 0u64;
    for id in 0..rc.sessions.len().min(MAX_SESSIONS) {
        let id = SessionId(id as u8);
        if rc.sessions.is_down(id) && sprayer.board.in_flight(id.0) > 0 {
            down |= 1 << id.0;
        }
    }
    if down == 0 || rc.sessions.up_ids().next().is_none() {
        return;
    }
    strand_and_resend(qp, routes, rc, down, 0, Charge::Nothing, now_us);
}

/// Resends, on other live sessions, the packets in flight on each Up
/// session whose own timer expired at `now_us`: nothing sent after them
/// on it arrived within its period (`roce::multipath::quiet`), so no SACK
/// would show them lost, and the QP's transport timer would wait a whole
/// RTO. The session's window drops to the minimum; after a whole RTO of
/// silence its health is charged a timeout. (Going back N resends
/// everything anyway; an RNR wait restarts the timers.)
pub(in crate::sroce::rc) fn resend_quiet(qp: &Qp<SroceDevice>, inner: &mut QpInner, now_us: u64) {
    let QpInner { rc, routes, .. } = inner;
    let Some(rc) = rc.as_mut() else { return };
    let rc: &mut RcState = rc;
    if rc.sq.resending() || rc.sq.waiting_rnr() {
        return;
    }
    let Some(sprayer) = rc.mp.sprayer.as_mut() else {
        return;
    };
    let (expired, _) = sprayer.quiet_scan(&rc.sessions, now_us);
    if expired == 0 {
        return;
    }
    let counters = &qp.device().data().io.counters;
    let qp_rto = rc.sessions.rto_us();
    for id in 0..MAX_SESSIONS as u8 {
        if expired & (1 << id) == 0 {
            continue;
        }
        counters.inc(Counter::MpSessionTimeouts);
        let charge = sprayer
            .quiet
            .as_mut()
            .get_mut(usize::from(id))
            .is_some_and(|t| t.on_expired(now_us, qp_rto));
        if let Some(w) = rc
            .sessions
            .window_mut(SessionId(id))
            .filter(|w| w.is_active())
        {
            w.on_timeout(sprayer.board.next_seq(id));
            counters.inc(Counter::MpWindowCuts);
        }
        if charge {
            let _ = rc.sessions.session_timeout(SessionId(id), now_us);
        }
    }
    // Never onto a session whose timer expired too (all of them: the
    // transport timer goes back N later). What a session's silence strands
    // is its loss: on a lossy path with a small window a lost burst is
    // mostly the whole window, which no SACK can show.
    strand_and_resend(qp, routes, rc, expired, expired, Charge::Loss, now_us);
}

/// Presumes lost the packets in flight on the sessions of `mask` (bit
/// `i`: session `i`) and resends them at once on live sessions not in
/// `except`; the resend is timed as a failover (until the next
/// completion). Windows are not charged: those paths failed or fell
/// silent, which their health and windows answer.
fn strand_and_resend(
    qp: &Qp<SroceDevice>,
    routes: &mut RouteCache,
    rc: &mut RcState,
    mask: u64,
    except: u64,
    charge: Charge,
    now_us: u64,
) {
    let Some(sprayer) = rc.mp.sprayer.as_mut() else {
        return;
    };
    let mut lost = core::mem::take(&mut sprayer.lost);
    lost.clear();
    let stranded = sprayer.board.strand(mask, |psn| {
        let _ = lost.push_within_capacity(psn);
    });
    if stranded != 0 {
        let oldest = rc.sq.oldest_tag();
        rc.sessions.failover_began(oldest);
    }
    resend(qp, routes, rc, &lost, charge, except, now_us);
    if let Some(s) = rc.mp.sprayer.as_mut() {
        s.lost = lost;
    }
}

/// What a loss counts against: the session that carried the packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Charge {
    /// Nothing (its session is down: its health answers).
    Nothing,
    /// Its loss meter (the window was cut already).
    Loss,
    /// Its loss meter, and its window once per episode.
    LossAndWindow,
}

/// Resends the packets `lost`, each on another live session (a READ or
/// atomic on session 0 while it is Up, as when first sent), none in
/// `except` (bit `i`: session `i`; a packet with nowhere else to go is
/// left for the transport timer).
fn resend(
    qp: &Qp<SroceDevice>,
    routes: &mut RouteCache,
    rc: &mut RcState,
    lost: &[Psn],
    charge: Charge,
    except: u64,
    now_us: u64,
) {
    let dev = qp.device();
    let counters = &dev.data().io.counters;
    let mut burst = io::Burst::new(dev);
    for &psn in lost {
        let sessions = &mut rc.sessions;
        let was_on = rc.mp.sprayer.as_mut().and_then(|s| {
            let (id, seq) = s.board.sent_as(psn)?;
            if charge == Charge::Nothing {
                return Some(id);
            }
            let next = s.board.next_seq(id);
            if let Some(m) = s.meters.as_mut().get_mut(usize::from(id)) {
                m.on_lost(seq, next);
            }
            if charge == Charge::LossAndWindow
                && sessions
                    .window_mut(SessionId(id))
                    .is_some_and(|w| w.on_loss(seq, next))
            {
                counters.inc(Counter::MpWindowCuts);
            }
            Some(id)
        });
        let Some(p) = rc.sq.packet_at(psn) else {
            continue;
        };
        let responses = matches!(
            p.operation,
            Operation::RdmaReadRequest
                | Operation::CompareSwap
                | Operation::FetchAdd
                | Operation::AtomicWrite
        );
        let pinned = responses
            .then(|| rc.sessions.up_ids().find(|id| id.0 == 0))
            .flatten()
            .filter(|_| except & 1 == 0)
            .and_then(|id| Some((id, rc.sessions.flow(id)?)));
        let Some((sid, flow)) = pinned.or_else(|| rc.sessions.resend_flow(was_on, except)) else {
            continue;
        };
        if send_request(qp, dev, routes, &mut burst, rc, &p, &flow).is_ok() {
            counters.inc(Counter::MpSelectiveResends);
            counters.inc(Counter::RetransmittedPkts);
            // Sent more than once: its completion is no round trip (Karn).
            rc.sessions.spread(p.tag);
            let una = rc.sq.una();
            if rc.mp.sent(una, psn, sid, now_us) {
                rc.sessions.want_replace(sid);
            }
        }
    }
}

/// Sends a hello on session 0 if one is due: the requester of a
/// multi-session RoCEv2 group with work, no agreement yet, no duplicate
/// probe in flight (a hello is re-ACKed like one).
pub(in crate::sroce::rc) fn maybe_hello(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    rc: &mut RcState,
    now_us: u64,
) {
    if !rc.sessions.is_multi()
        || !rc.is_acknowledged()
        || rc.roce_v1()
        || rc.sq.is_empty()
        || rc.sessions.probe_in_flight()
        || !rc.mp.negotiation.hello_due(now_us)
    {
        return;
    }
    let Some(flow) = rc.sessions.flow(SessionId(0)) else {
        return;
    };
    let mut bth = Bth::new(
        Opcode::new(Transport::Rc, Operation::RdmaWriteOnly),
        rc.dest_qpn,
        probe_psn(rc.sq.una()),
    );
    bth.ack_req = true;
    let mut h = Headers::new(bth);
    let reth: Reth = ext::hello_reth(ext::Caps::ALL);
    h.reth = Some(reth);
    rc.mp.negotiation.hello_sent(now_us);
    dev.data().io.counters.inc(Counter::MpHellosSent);
    let _ = send_packet(dev, routes, &flow, &h, 0, |_| Ok(()));
}
