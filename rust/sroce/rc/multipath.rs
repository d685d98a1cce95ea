// SPDX-License-Identifier: GPL-2.0

//! The multipath transport of one RC connection (`roce::multipath`,
//! `docs/sessions.md` "Multipath transport"): hellos out and answered,
//! requests that arrive ahead of the expected PSN held until their turn,
//! selective acknowledgements out and in, and the selective resends they
//! call for. Everything here applies only once the peer agreed; until then
//! the connection is plain RoCEv2 both ways.

use super::{
    completer::on_response, receive, requester::send_request, responder::reply_flow, RcState,
    SQ_DEPTH,
};
use crate::net::route::RouteCache;
use crate::rdma::{
    device::Device,
    qp::{Qp, QpState},
};
use crate::roce::{
    aeth::{Aeth, Syndrome, CREDITS_INVALID},
    bth::Bth,
    multipath::{
        congestion::{LossMeter, ReplaceConfig},
        ext::{self, ExtKind, ExtPacket, HelloAck, Sack},
        reorder::{Held as HeldRequest, MAX_WINDOW},
        scoreboard::Entry,
        Negotiation, Offer, ReorderBuffer, Scoreboard,
    },
    opcode::{Opcode, Operation, Transport},
    packet::Headers,
    psn::Psn,
    reth::Reth,
    session::{health::probe_psn, Policy, SessionId, MAX_SESSIONS},
};
use crate::sroce::{
    device::SroceDevice,
    engine_store::EngineStore,
    io::{self, counters::Counter, RxPacket},
    qp::QpInner,
    rc_sessions::QpSessions,
    rc_timers::Now,
};
use kernel::prelude::*;

/// PSNs ahead of the expected one a responder holds requests for (the
/// span of one SACK): at most this many packets per connection, the bound
/// on what a peer can make it keep. Twice the plain requester's window:
/// messages spread over paths of unequal rate keep the faster one busy
/// while the slower one holds the oldest.
const WINDOW: usize = MAX_WINDOW;

/// PSNs past the oldest unacknowledged one the requester tracks (twice
/// its window, so a resend round never runs out).
const TRACKED: usize = 2 * WINDOW;

/// The requester's side once its peer agreed: which session carried each
/// unacknowledged PSN and what the peer holds, and room for the PSNs a
/// SACK shows lost.
struct Sprayer {
    board: Scoreboard<EngineStore<Entry>>,
    lost: KVVec<Psn>,
    /// Each session's losses, for replacing a congested one.
    meters: EngineStore<LossMeter>,
}

impl Sprayer {
    /// Process context (may sleep).
    fn new() -> Result<Self> {
        Ok(Self {
            board: Scoreboard::with_storage(EngineStore::filled(TRACKED, Entry::default())?),
            lost: KVVec::with_capacity(WINDOW, GFP_KERNEL)?,
            meters: EngineStore::filled(MAX_SESSIONS, LossMeter::new())?,
        })
    }
}

type Held = ReorderBuffer<RxPacket, EngineStore<Option<HeldRequest<RxPacket>>>>;

/// The multipath state of a connection.
pub(crate) struct Multipath {
    /// What the peer agreed to, per direction.
    negotiation: Negotiation,
    /// Requests held ahead of the expected PSN (from the peer's hello on).
    held: Option<Held>,
    /// The requester's state (from the peer's hello ACK on; boxed: it is
    /// larger than the rest of the connection's state).
    sprayer: Option<KBox<Sprayer>>,
    /// The held set changed or the expected PSN moved over held requests
    /// since the last SACK.
    sack_due: bool,
    /// The net device the last held request came in through (the SACK
    /// returns through it).
    sack_ingress: i32,
    /// The oldest unacknowledged PSN at the last transport timeout.
    last_timeout_una: Option<Psn>,
    /// A SACK arrived since the last transport timeout.
    sacked_since_timeout: bool,
    /// The expected PSN of the last SACK taken.
    last_sack: Option<Psn>,
    /// A hello arrived before the reorder buffer was made: the work item
    /// makes it (it may sleep), the next hello is answered.
    want_held: bool,
    /// The peer's hello ACK, kept until the work item has made the
    /// requester's state.
    want_sprayer: Option<HelloAck>,
    /// An acknowledgement that arrived before the responses of an earlier
    /// READ or atomic (over a faster path): applied once they are in.
    deferred_ack: Option<(Psn, Aeth)>,
}

impl Multipath {
    /// Nothing agreed yet (nothing allocated either).
    pub(crate) const fn new() -> Self {
        Self {
            negotiation: Negotiation::new(),
            held: None,
            sprayer: None,
            sack_due: false,
            sack_ingress: 0,
            last_timeout_una: None,
            sacked_since_timeout: false,
            last_sack: None,
            want_held: false,
            want_sprayer: None,
            deferred_ack: None,
        }
    }

    /// Whether the work item has state to make for an agreement.
    pub(crate) fn wants_work(&self) -> bool {
        (self.want_held && self.held.is_none())
            || (self.want_sprayer.is_some() && self.sprayer.is_none())
    }

    /// The PSN window the requester uses once the peer agreed: the peer's
    /// hold window, at most what the scoreboard tracks with room to spare.
    fn agreed_window(&self) -> u32 {
        u32::from(self.negotiation.peer_window()).min(WINDOW as u32)
    }

    /// Whether this side's responder holds and SACKs (the peer's requester
    /// said it reads SACKs, and the buffer was made).
    pub(crate) fn responder_on(&self) -> bool {
        // The buffer is made after the first hello; holding starts with
        // the hello that is answered.
        self.held.is_some() && self.negotiation.peer_reads_sacks()
    }

    /// Whether this side's requester sprays and reads SACKs (the peer's
    /// responder said it reorders, and the scoreboard was made).
    pub(crate) fn requester_on(&self) -> bool {
        self.sprayer.is_some()
    }

    /// The requester restarts (RTS again) with `sq`: what was tracked is
    /// void; an agreed window stays.
    pub(crate) fn restart_requester(&mut self, sq: &mut super::Requester) {
        if let Some(s) = self.sprayer.as_mut() {
            s.board.clear();
            sq.set_max_unacked_psns(self.agreed_window());
        }
        self.deferred_ack = None;
    }

    /// Request packet `psn` went out on session `sid` (`una`: the oldest
    /// unacknowledged PSN). True if that ends a run of epochs in which the
    /// session lost too much: it should get a fresh 5-tuple.
    pub(super) fn sent(&mut self, una: Psn, psn: Psn, sid: SessionId) -> bool {
        let Some(s) = self.sprayer.as_mut() else {
            return false;
        };
        let _ = s.board.record(una, psn, sid.0);
        s.meters
            .as_mut()
            .get_mut(usize::from(sid.0))
            .is_some_and(|m| m.on_sent(&ReplaceConfig::DEFAULT))
    }

    /// Whether a go-back-N resend of `psn` can be skipped: the peer holds
    /// it.
    pub(super) fn peer_holds(&self, psn: Psn) -> bool {
        self.sprayer.as_ref().is_some_and(|s| s.board.is_held(psn))
    }

    /// Where a new message goes instead of the policy's choice, once the
    /// peer agreed: READs and atomics (`expects_responses`) on session 0,
    /// so their responses, taken in order only, come back over one path;
    /// with `least-outstanding`, the Up session with the fewest packets
    /// still on their way (neither acknowledged nor held by the peer), so
    /// each path gets messages as fast as it delivers them.
    pub(super) fn preferred_session(
        &self,
        sessions: &QpSessions<SQ_DEPTH>,
        una: Psn,
        expects_responses: bool,
    ) -> Option<SessionId> {
        let s = self.sprayer.as_ref()?;
        if expects_responses {
            return Some(SessionId(0));
        }
        if sessions.policy() != Policy::LeastOutstanding {
            return None;
        }
        sessions
            .up_ids()
            .min_by_key(|id| (s.board.in_flight(una, id.0), id.0))
    }

    /// The transport timer expired with `una` the oldest unacknowledged
    /// PSN. The go-back-N resend skips what the responder holds, unless
    /// the previous timeout found the same `una`: then nothing moved in a
    /// whole timeout, what it said it holds may be gone, and everything is
    /// resent.
    pub(super) fn on_timeout(&mut self, una: Psn) {
        // What the responder said it holds is trusted for one timeout after
        // its last SACK, and never twice at the same oldest PSN.
        if self.last_timeout_una == Some(una) || !self.sacked_since_timeout {
            if let Some(s) = self.sprayer.as_mut() {
                s.board.forget_held();
            }
        }
        self.last_timeout_una = Some(una);
        self.sacked_since_timeout = false;
        self.deferred_ack = None;
    }

    /// An acknowledgement or NAK (`psn`, `aeth`) that passes a READ or
    /// atomic still waiting for its responses: kept (the newest), to be
    /// applied once they are in. Over one path responses come first, so
    /// an ACK past them means they were lost; over several, they may just
    /// be slower.
    pub(super) fn defer_ack(&mut self, psn: Psn, aeth: Aeth) -> bool {
        if self.sprayer.is_none() {
            return false;
        }
        match self.deferred_ack {
            Some((p, _)) if psn.is_before(p) => {}
            _ => self.deferred_ack = Some((psn, aeth)),
        }
        true
    }

    /// Session `id` got a fresh 5-tuple: its loss count starts over.
    pub(crate) fn session_replaced(&mut self, id: SessionId) {
        if let Some(m) = self
            .sprayer
            .as_mut()
            .and_then(|s| s.meters.as_mut().get_mut(usize::from(id.0)))
        {
            m.reset();
        }
    }

    /// The deferred acknowledgement, if the responses it waited for are
    /// in (`blocked`: whether a READ or atomic before it still waits).
    pub(super) fn take_deferred_ack(
        &mut self,
        blocked: impl Fn(Psn) -> bool,
    ) -> Option<(Psn, Aeth)> {
        let (psn, _) = self.deferred_ack?;
        if blocked(psn) {
            return None;
        }
        self.deferred_ack.take()
    }
}

/// The fields of a request's BTH the hold decision needs, read without a
/// full parse.
fn bth_of(pkt: &RxPacket) -> Option<Bth> {
    Bth::parse(pkt.head()).ok().map(|(b, _)| b)
}

/// Whether `pkt` is from the connection's peer (its addresses).
fn from_peer(rc: &RcState, pkt: &RxPacket) -> bool {
    pkt.src() == rc.flow.dst && pkt.dst() == rc.flow.src && !pkt.is_roce_v1()
}

/// Looks at a received packet before the engines do: an extension packet
/// is taken here; a hello is answered (and goes on, to be re-ACKed as the
/// duplicate it is); with the responder's part agreed, a request ahead of
/// the expected PSN is held or dropped. Returns the packet if the engines
/// are to take it now.
pub(super) fn intercept(
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
    if super::receive_waits(inner) {
        return Some(pkt);
    }
    if ext::is_ext(pkt.head()) {
        on_ext(qp, inner, &pkt, now);
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

/// Sends extension packet `p` along `flow` (best effort: a lost one is
/// answered again or made up for by the transport timer).
fn send_ext(dev: &Device<SroceDevice>, routes: &mut RouteCache, flow: &io::Flow, p: &ExtPacket) {
    let _ = io::send(dev, routes, flow, p.len(), |buf| {
        p.write(buf).map_err(|_| EINVAL)
    });
}

/// Hands the held requests whose turn it is to the engines, in PSN order,
/// dropping any the engine went past. Returns whether the engines took
/// any.
pub(super) fn release(qp: &Qp<SroceDevice>, inner: &mut QpInner, now: Now) -> bool {
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
pub(super) fn drop_stale(dev: &Device<SroceDevice>, inner: &mut QpInner) {
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

/// Makes what an agreement needs and the pass could not (it may sleep):
/// the reorder buffer once a peer's hello arrived (its next hello is
/// answered), the requester's state once the peer's hello ACK arrived (it
/// sprays from then on). Process context: the work item. Not inlined: its
/// frame stays out of the work item's.
#[inline(never)]
pub(crate) fn prepare(qp: &Qp<SroceDevice>) {
    let (want_held, want_sprayer) = {
        let inner = qp.data().lock();
        match inner.rc.as_ref() {
            Some(rc) => (
                rc.mp.want_held && rc.mp.held.is_none(),
                rc.mp.want_sprayer.is_some() && rc.mp.sprayer.is_none(),
            ),
            None => return,
        }
    };
    if !want_held && !want_sprayer {
        return;
    }
    let held = want_held
        .then(|| EngineStore::from_fn(WINDOW, GFP_KERNEL, || None).ok())
        .flatten();
    let sprayer = want_sprayer
        .then(|| {
            Sprayer::new()
                .and_then(|s| Ok(KBox::new(s, GFP_KERNEL)?))
                .ok()
        })
        .flatten();
    let mut inner = qp.data().lock();
    let Some(rc) = inner.rc.as_mut() else { return };
    // Only what was asked for before, and is still asked for (the
    // connection may have been made again meanwhile). Without memory the
    // connection stays plain RoCEv2 (asked again by the peer's next hello
    // or hello ACK).
    if want_held && rc.mp.want_held {
        rc.mp.want_held = false;
        if let (Some(slots), None) = (held, rc.mp.held.as_ref()) {
            rc.mp.held = Some(ReorderBuffer::with_storage(slots));
        }
    }
    if !want_sprayer || rc.mp.sprayer.is_some() {
        return;
    }
    let Some(ack) = rc.mp.want_sprayer.take() else {
        return;
    };
    let Some(sprayer) = sprayer else {
        return;
    };
    rc.mp.negotiation.on_hello_ack(&ack);
    rc.mp.sprayer = Some(sprayer);
    let window = rc.mp.agreed_window();
    rc.sq.set_max_unacked_psns(window);
    rc.sessions.set_multipath(true);
    qp.device().data().io.counters.inc(Counter::MpAgreed);
}

/// Sends the SACK owed, if one is and it can go now: not while READ
/// responses are queued (its acknowledgement would pass them, and a
/// requester takes an ACK past a READ as the READ's responses lost).
pub(super) fn flush_sack(dev: &Device<SroceDevice>, inner: &mut QpInner) {
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

/// An extension packet from the peer.
fn on_ext(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket, now: Now) {
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
            resend_lost(qp, inner, &s);
        }
    }
}

/// The headers of an ACK with `psn` and `aeth`, to QP `qpn`.
pub(super) fn ack_headers(qpn: u32, psn: Psn, aeth: Aeth) -> Headers {
    let mut h = Headers::new(Bth::new(
        Opcode::new(Transport::Rc, Operation::Acknowledge),
        qpn,
        psn,
    ));
    h.aeth = Some(aeth);
    h
}

/// Resends what SACK `s` shows lost, each on another live session (a
/// READ or atomic on session 0 while it is Up, as when first sent).
fn resend_lost(qp: &Qp<SroceDevice>, inner: &mut QpInner, s: &Sack) {
    let dev = qp.device();
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
    let mut burst = io::Burst::new(dev);
    for &psn in lost.iter() {
        let Some(p) = rc.sq.packet_at(psn) else {
            continue;
        };
        let was_on = rc.mp.sprayer.as_mut().and_then(|s| {
            let id = s.board.session_of(psn)?;
            // The loss is charged to the session that carried it.
            if let Some(m) = s.meters.as_mut().get_mut(usize::from(id)) {
                m.on_lost();
            }
            Some(id)
        });
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
            .and_then(|id| Some((id, rc.sessions.flow(id)?)));
        let Some((sid, flow)) = pinned.or_else(|| rc.sessions.resend_flow(was_on)) else {
            continue;
        };
        if send_request(qp, dev, routes, &mut burst, rc, &p, &flow).is_ok() {
            let c = &dev.data().io.counters;
            c.inc(Counter::MpSelectiveResends);
            c.inc(Counter::RetransmittedPkts);
            let una = rc.sq.una();
            if rc.mp.sent(una, psn, sid) {
                rc.sessions.want_replace(sid);
            }
        }
    }
    drop(burst);
    if let Some(s) = rc.mp.sprayer.as_mut() {
        s.lost = lost;
    }
}

/// Sends a hello on session 0 if one is due: the requester of a
/// multi-session RoCEv2 group with work, no agreement yet, no duplicate
/// probe in flight (a hello is re-ACKed like one).
pub(super) fn maybe_hello(
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
    let _ = super::send_packet(dev, routes, &flow, &h, 0, |_| Ok(()));
}
