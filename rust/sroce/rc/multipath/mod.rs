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
pub(super) use spray::{maybe_hello, resend_quiet, resend_stranded};

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
        window::drain_time,
        Negotiation, Offer, QuietTimer, ReorderBuffer, Scoreboard,
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
    /// Each session's own retransmit timer (`roce::multipath::quiet`).
    quiet: EngineStore<QuietTimer>,
    /// The session `round-robin` chose last.
    last_turn: u8,
    /// The message being sent and the flowlet its packets go on now.
    current: Option<Flowlet>,
}

/// Packets of a message sent in a row on one session before the policy
/// chooses again (sooner if the session's window is full).
const FLOWLET_PACKETS: u32 = 32;

/// Part of a message sent in a row on one session.
#[derive(Clone, Copy)]
struct Flowlet {
    /// The message's tag.
    tag: u32,
    /// The session.
    on: SessionId,
    /// Packets sent in it so far.
    sent: u32,
}

impl Sprayer {
    /// Process context (may sleep).
    fn new() -> Result<Self> {
        Ok(Self {
            board: Scoreboard::with_storage(EngineStore::filled(TRACKED, Entry::default())?),
            lost: KVVec::with_capacity(WINDOW, GFP_KERNEL)?,
            meters: EngineStore::filled(MAX_SESSIONS, LossMeter::new())?,
            quiet: EngineStore::filled(MAX_SESSIONS, QuietTimer::new())?,
            last_turn: 0,
            current: None,
        })
    }

    /// The spreading policy's session for the next flowlet: with
    /// `least-outstanding` the soonest, with `round-robin` the next Up
    /// session with room; `None` for the other policies.
    fn choose(&mut self, sessions: &QpSessions<SQ_DEPTH>) -> Option<SessionId> {
        let chosen = match sessions.policy() {
            Policy::LeastOutstanding => self.soonest(sessions),
            Policy::RoundRobin => {
                let n = sessions.len();
                (1..=n)
                    .map(|k| (usize::from(self.last_turn) + k) % n.max(1))
                    .filter_map(|i| u8::try_from(i).ok().map(SessionId))
                    .find(|&id| sessions.is_up(id) && self.has_room(sessions, id))
            }
            _ => None,
        };
        if let Some(id) = chosen {
            self.last_turn = id.0;
        }
        chosen
    }

    /// Credits the sessions with what they delivered since the last call
    /// (acknowledged, or held by the peer) at `now_us`: their windows
    /// grow, their health sees progress, their own timers restart.
    fn credit(&mut self, sessions: &mut QpSessions<SQ_DEPTH>, now_us: u64) {
        let Sprayer { board, quiet, .. } = self;
        board.take_delivered(|id, n| {
            sessions.on_delivered(SessionId(id), n, now_us);
            if let Some(t) = quiet.as_mut().get_mut(usize::from(id)) {
                t.on_delivered(now_us);
            }
        });
    }

    /// The sessions whose own timer has expired at `now_us` (bit `i`:
    /// session `i`), and the earliest deadline of the others still
    /// running. A timer runs for an Up session with packets in flight,
    /// while another session is Up to resend them on (with one, the QP's
    /// transport timer decides, as over one path).
    fn quiet_scan(&self, sessions: &QpSessions<SQ_DEPTH>, now_us: u64) -> (u64, Option<u64>) {
        let mut up = sessions.up_ids();
        if up.next().is_none() || up.next().is_none() {
            return (0, None);
        }
        let qp_rto = sessions.rto_us();
        let (mut expired, mut next) = (0u64, None::<u64>);
        for id in sessions.up_ids() {
            let (Some(s), Some(t)) = (
                sessions.session(id),
                self.quiet.as_ref().get(usize::from(id.0)),
            ) else {
                continue;
            };
            if self.board.in_flight(id.0) == 0 {
                continue;
            }
            let Some(period) = t.period_us(s.rtt().rto_estimate_us(), qp_rto) else {
                continue;
            };
            let at = t.deadline_us(period);
            if at <= now_us {
                expired |= 1 << id.0;
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        (expired, next)
    }

    /// Whether session `id` has room in its congestion window.
    fn has_room(&self, sessions: &QpSessions<SQ_DEPTH>, id: SessionId) -> bool {
        sessions
            .session(id)
            .is_some_and(|s| s.window().has_room(self.board.in_flight(id.0)))
    }

    /// The Up session with room where a packet would be delivered first
    /// (`window::drain_time`: what is ahead of it over the session's
    /// window per round trip); the earliest of all if none has room.
    fn soonest(&self, sessions: &QpSessions<SQ_DEPTH>) -> Option<SessionId> {
        // A session without an RTT sample yet is taken as the slowest
        // known one (it is sampled once it carries something).
        let default_rtt = sessions
            .sessions()
            .map(|(s, _)| s.rtt().srtt_us())
            .max()
            .unwrap_or(0);
        sessions
            .up_ids()
            .filter_map(|id| {
                let s = sessions.session(id)?;
                let flying = self.board.in_flight(id.0);
                let t = drain_time(flying, s.window(), s.rtt().srtt_us(), default_rtt);
                Some((!s.window().has_room(flying), t, id.0))
            })
            .min()
            .map(|(_, _, id)| SessionId(id))
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
            s.board.clear(sq.una());
            s.quiet.as_mut().fill(QuietTimer::new());
            s.current = None;
            sq.set_max_unacked_psns(self.agreed_window());
        }
        self.deferred_ack = None;
    }

    /// Request packet `psn` went out on session `sid` at `now_us` (`una`:
    /// the oldest unacknowledged PSN). True if that ends a run of epochs
    /// in which the session lost too much: it should get a fresh 5-tuple.
    pub(super) fn sent(&mut self, una: Psn, psn: Psn, sid: SessionId, now_us: u64) -> bool {
        let Some(s) = self.sprayer.as_mut() else {
            return false;
        };
        let was_idle = s.board.in_flight(sid.0) == 0;
        let _ = s.board.record(una, psn, sid.0);
        if let Some(t) = s.quiet.as_mut().get_mut(usize::from(sid.0)) {
            t.on_sent(now_us, was_idle);
        }
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
    /// with `least-outstanding`, the Up session with room in its window
    /// where it would be delivered first (what is still on its way there,
    /// neither acknowledged nor held by the peer, over the session's
    /// window per round trip), so each path gets messages as fast as it
    /// delivers them; with `round-robin`, the next Up session with room.
    pub(super) fn preferred_session(
        &mut self,
        sessions: &QpSessions<SQ_DEPTH>,
        expects_responses: bool,
    ) -> Option<SessionId> {
        let s = self.sprayer.as_mut()?;
        if expects_responses {
            return Some(SessionId(0));
        }
        if sessions.canary_pending() {
            // The group's canary: the message starts on the session being
            // probed (its first packet; the rest moves on in flowlets, as
            // that session is not Up). Without canaries a session that
            // failed would never carry traffic again.
            return None;
        }
        s.choose(sessions)
    }

    /// Whether new packets wait: the policy spreads and no Up session has
    /// room in its window (the acknowledgements of what is in flight open
    /// them, or a timeout). Going back N is not held back (it resends what
    /// the windows let out before), nor is anything when no session is Up
    /// (the group's failover and probes decide then).
    pub(super) fn windows_full(&self, sessions: &QpSessions<SQ_DEPTH>) -> bool {
        let Some(s) = self.sprayer.as_ref() else {
            return false;
        };
        let mut up = sessions.up_ids().peekable();
        spreads(sessions) && up.peek().is_some() && !up.any(|id| s.has_room(sessions, id))
    }

    /// The session the next packet of message `tag` (not its first) goes
    /// on when the policy spreads, and whether the message moves: it stays
    /// on its session for [`FLOWLET_PACKETS`] packets while that has room,
    /// then the policy chooses again (a message larger than a window is
    /// spread in flowlets). `None`: where the ledger put the message.
    pub(super) fn flowlet_session(
        &mut self,
        sessions: &QpSessions<SQ_DEPTH>,
        tag: u32,
    ) -> Option<(SessionId, bool)> {
        let s = self.sprayer.as_mut()?;
        if !spreads(sessions) {
            return None;
        }
        let f = s.current.filter(|f| f.tag == tag)?;
        let usable = sessions.is_up(f.on) && s.has_room(sessions, f.on);
        if usable && f.sent < FLOWLET_PACKETS {
            s.current = Some(Flowlet {
                sent: f.sent.saturating_add(1),
                ..f
            });
            return Some((f.on, false));
        }
        let Some(next) = s.choose(sessions).filter(|&n| s.has_room(sessions, n)) else {
            // Nowhere with room: on where it is.
            return Some((f.on, false));
        };
        s.current = Some(Flowlet {
            tag,
            on: next,
            sent: 1,
        });
        Some((next, next != f.on))
    }

    /// Whether the next packet on session `id` asks for an
    /// acknowledgement (AckReq): when it takes the session past half its
    /// window. The requester asks only at a message's end (and every 64
    /// packets), so a window that stops a message partway (or shrinks
    /// under packets in flight: a cut, a fresh 5-tuple) would wait for the
    /// transport timer; ACKs from the upper half of every window keep the
    /// windows open and growing as the packets arrive.
    pub(super) fn asks_ack(&self, sessions: &QpSessions<SQ_DEPTH>, id: SessionId) -> bool {
        let Some(s) = self.sprayer.as_ref() else {
            return false;
        };
        let Some(cwnd) = sessions
            .session(id)
            .map(|x| x.window().cwnd())
            .filter(|&c| c != 0)
        else {
            return false;
        };
        let after = s.board.in_flight(id.0).saturating_add(1);
        spreads(sessions) && after >= cwnd / 2
    }

    /// The first packet of message `tag` went out on `id`.
    pub(super) fn message_on(&mut self, tag: u32, id: SessionId) {
        if let Some(s) = self.sprayer.as_mut() {
            s.current = Some(Flowlet {
                tag,
                on: id,
                sent: 1,
            });
        }
    }

    /// The requester goes back N (resends everything from its oldest
    /// unacknowledged packet, except what the peer holds): nothing it sent
    /// counts as on its way any more; the resends count again.
    pub(super) fn went_back(&mut self) {
        if let Some(s) = self.sprayer.as_mut() {
            let _ = s.board.go_back(false);
            s.current = None;
        }
    }

    /// The session that last carried `psn` (the requester's oldest
    /// unacknowledged one, when it goes back), once the peer agreed.
    pub(super) fn carrier_of(&self, psn: Psn) -> Option<SessionId> {
        let s = self.sprayer.as_ref()?;
        s.board.session_of(psn).map(SessionId)
    }

    /// The requester's oldest unacknowledged PSN is `una` now: what it
    /// passed was delivered, and the sessions that carried it are credited
    /// (`QpSessions::on_delivered`).
    pub(super) fn on_acked(&mut self, sessions: &mut QpSessions<SQ_DEPTH>, una: Psn, now_us: u64) {
        let Some(s) = self.sprayer.as_mut() else {
            return;
        };
        s.board.acked_through(una);
        s.credit(sessions, now_us);
    }

    /// Every session's own timer starts its period again at `now_us`
    /// (`QuietTimer::restart`): what it waits for is held up elsewhere.
    pub(super) fn restart_quiet(&mut self, now_us: u64) {
        if let Some(s) = self.sprayer.as_mut() {
            s.quiet.as_mut().iter_mut().for_each(|t| t.restart(now_us));
        }
    }

    /// How long until a session's own timer expires (0: one has), if one
    /// runs: the QP's wake-up timer fires by then.
    pub(super) fn quiet_wake_in(
        &self,
        sessions: &QpSessions<SQ_DEPTH>,
        now_us: u64,
    ) -> Option<u64> {
        let s = self.sprayer.as_ref()?;
        match s.quiet_scan(sessions, now_us) {
            (0, next) => next.map(|at| at.saturating_sub(now_us)),
            _ => Some(0),
        }
    }

    /// The transport timer expired at `now_us` with `una` the oldest
    /// unacknowledged PSN. The go-back-N resend skips what the responder holds, unless
    /// the previous timeout found the same `una`: then nothing moved in a
    /// whole timeout, what it said it holds may be gone, and everything is
    /// resent.
    /// The window of the session that carried `una` (of each that had
    /// packets in flight, if that is unknown) is cut to the minimum;
    /// returns how many were.
    pub(super) fn on_timeout(
        &mut self,
        una: Psn,
        sessions: &mut QpSessions<SQ_DEPTH>,
        now_us: u64,
    ) -> u32 {
        // What the responder said it holds is trusted for one timeout after
        // its last SACK, and never twice at the same oldest PSN.
        let forget = self.last_timeout_una == Some(una) || !self.sacked_since_timeout;
        let mut cuts = 0;
        if let Some(s) = self.sprayer.as_mut() {
            // The session that carried the oldest unacknowledged packet
            // stalled the connection: its window is cut (the others only
            // see their packets resent by the go-back).
            let carrier = s.board.session_of(una);
            // Nothing sent is on its way any more: the go-back resends it.
            let mut had = s.board.go_back(forget);
            // Charged for this silence (the carrier, or the session the
            // group charged instead, among those that had packets in
            // flight): a session's own timer charges it again only a whole
            // RTO later.
            let charged = carrier.map_or(had, |c| 1 << c);
            for (i, t) in s.quiet.as_mut().iter_mut().enumerate().take(MAX_SESSIONS) {
                if charged & (1 << i) != 0 {
                    t.on_charged(now_us);
                }
            }
            if let Some(c) = carrier.filter(|&c| had & (1 << c) != 0) {
                had = 1 << c;
            }
            for id in 0..MAX_SESSIONS as u8 {
                if had & (1 << id) == 0 {
                    continue;
                }
                if let Some(w) = sessions.window_mut(SessionId(id)).filter(|w| w.is_active()) {
                    w.on_timeout(s.board.next_seq(id));
                    cuts += 1;
                }
            }
            s.current = None;
        }
        self.last_timeout_una = Some(una);
        self.sacked_since_timeout = false;
        self.deferred_ack = None;
        cuts
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

    /// Session `id` got a fresh 5-tuple at `now_us`: its loss count, its
    /// window and its own timer start over, and the losses of what it sent
    /// on the old one (which a SACK may still show) count against neither.
    pub(crate) fn session_replaced(
        &mut self,
        id: SessionId,
        sessions: &mut QpSessions<SQ_DEPTH>,
        now_us: u64,
    ) {
        let Some(s) = self.sprayer.as_mut() else {
            return;
        };
        if let Some(t) = s.quiet.as_mut().get_mut(usize::from(id.0)) {
            t.reset(now_us);
        }
        let next = s.board.next_seq(id.0);
        if let Some(m) = s.meters.as_mut().get_mut(usize::from(id.0)) {
            m.reset_at(next);
        }
        if let Some(w) = sessions.window_mut(id).filter(|w| w.is_active()) {
            w.start_at(next);
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

/// Whether the group's policy spreads messages over its sessions (and so
/// the windows decide where, and whether, new packets go).
fn spreads(sessions: &QpSessions<SQ_DEPTH>) -> bool {
    matches!(
        sessions.policy(),
        Policy::LeastOutstanding | Policy::RoundRobin
    )
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
    let mut sprayer = sprayer;
    sprayer.board.clear(rc.sq.una());
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
