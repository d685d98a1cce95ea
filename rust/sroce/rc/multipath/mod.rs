// SPDX-License-Identifier: GPL-2.0

//! The multipath transport of one RC connection (`roce::multipath`,
//! `docs/sessions.md` "Multipath transport"): the connection's state and
//! what an agreement allocates (here), the responder's side (`hold`:
//! hellos answered, requests that arrive ahead of the expected PSN held
//! until their turn, SACKs out) and the requester's (`spray`: hellos out,
//! hello ACKs and SACKs in, selective resends). Everything applies only
//! once the peer agreed; until then the connection is plain RoCEv2 both
//! ways.

mod hold;
mod spray;

pub(super) use hold::{drop_stale, flush_sack, intercept, release};
pub(super) use spray::maybe_hello;

use super::{
    completer::on_response, receive, receive_waits, requester::send_request, responder::reply_flow,
    send_packet, RcState, SQ_DEPTH,
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

/// Sends extension packet `p` along `flow` (best effort: a lost one is
/// answered again or made up for by the transport timer).
fn send_ext(dev: &Device<SroceDevice>, routes: &mut RouteCache, flow: &io::Flow, p: &ExtPacket) {
    let _ = io::send(dev, routes, flow, p.len(), |buf| {
        p.write(buf).map_err(|_| EINVAL)
    });
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
