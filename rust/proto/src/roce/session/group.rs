//! A QP's session group and the policies that pick a session per message.
//!
//! # Per message, not per packet
//!
//! The responder of an RC QP accepts only the next expected PSN; anything
//! else is a duplicate or a sequence error (one NAK, then silence until
//! the expected PSN arrives), and the requester recovers by go-back-N. If
//! the packets of one message were sprayed over paths of different delay,
//! almost every multi-packet message would arrive out of order and cost a
//! NAK and a resend of the whole window. Choosing the session per
//! *message* keeps each message's packets in order on one path, so
//! reordering can only happen at a message boundary where the session
//! changes; and with the reorder guard ([`GroupConfig::reorder_guard`],
//! on by default) a busy QP changes session only when it has nothing
//! outstanding (flowlet switching) or when its session fails, so the
//! responder sees a single in-order stream at any time. It also keeps the
//! bookkeeping small: the requester records one session per message (for
//! ACK credit, outstanding bytes and RTT), not per packet, and a go-back-N
//! resend always moves whole messages. Correctness never depends on the
//! policy: PSNs, duplicate detection and go-back-N are exactly those of a
//! single path.
//!
//! # Driver contract
//!
//! - [`SessionGroup::choose`] for each new message; send all its packets on
//!   that session, then [`SessionGroup::on_send`].
//! - For each message fully acknowledged, [`SessionGroup::on_ack`] on the
//!   session of its *latest* transmission (Karn: an RTT sample only if it
//!   was sent once).
//! - Retransmit timer expiry: [`SessionGroup::on_timeout`] with the session
//!   of the oldest unacknowledged message; PSN sequence NAK:
//!   [`SessionGroup::on_sequence_nak`]. Both answer with the session on
//!   which to resend **everything** from the oldest unacknowledged PSN
//!   (go-back-N; each resent message reported with `on_send(..., true)`),
//!   or [`SessionError::RetryExceeded`].
//! - Periodically (the QP timer tick), [`SessionGroup::poll`]; on netdev
//!   events, [`SessionGroup::on_link`].

use super::health::{Health, HealthConfig, HealthEvent, State};
use super::rtt::RttEstimator;
use super::{SessionError, SessionId, SessionMask, MAX_SESSIONS};
use crate::roce::multipath::window::PathWindow;

/// How a session is chosen for each message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// One session per QP, from the QP's hash key (stable: the same
    /// session while it is Up; otherwise the next Up one in ring order).
    /// Spreads QPs, not messages, over the sessions.
    #[default]
    Hash,
    /// The next Up session in ring order, message after message.
    RoundRobin,
    /// The Up session with the fewest unacknowledged bytes (ties: ring
    /// order).
    LeastOutstanding,
    /// The lowest-numbered Up session: session 0 active, the others
    /// backups in order; traffic returns to session 0 when it is Up again.
    Failover,
}

/// Group parameters: device defaults, overridable per QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupConfig {
    /// Number of sessions (1..=64). 1 = plain RoCEv2.
    pub size: u8,
    /// Selection policy.
    pub policy: Policy,
    /// Change session between messages only when nothing is outstanding
    /// (or the current session is not Up).
    pub reorder_guard: bool,
    /// Health thresholds.
    pub health: HealthConfig,
}

impl GroupConfig {
    /// One session, `Hash`, reorder guard on, default health.
    pub const DEFAULT: GroupConfig = GroupConfig {
        size: 1,
        policy: Policy::Hash,
        reorder_guard: true,
        health: HealthConfig::DEFAULT,
    };

    /// This (device) configuration with a QP's overrides applied.
    pub const fn with_override(self, size: Option<u8>, policy: Option<Policy>) -> GroupConfig {
        let mut c = self;
        if let Some(s) = size {
            c.size = s;
        }
        if let Some(p) = policy {
            c.policy = p;
        }
        c
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig::DEFAULT
    }
}

/// Per-session counters (all monotonic except where noted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Packets sent, first transmissions and retransmissions.
    pub tx_packets: u64,
    /// Payload bytes sent, first transmissions and retransmissions.
    pub tx_bytes: u64,
    /// Messages sent.
    pub tx_messages: u64,
    /// Messages retransmitted on this session.
    pub retransmits: u64,
    /// Retransmit timeouts charged to this session.
    pub timeouts: u64,
    /// Messages acknowledged.
    pub acked_messages: u64,
    /// Probes started (duplicate or canary).
    pub probes: u64,
    /// Probes that got no reply.
    pub probes_failed: u64,
    /// Times its 5-tuple was replaced by a fresh one (its congestion
    /// stayed high: see `multipath::congestion`).
    pub replacements: u64,
    /// Transitions to Down.
    pub downs: u64,
    /// Transitions back to Up.
    pub ups: u64,
}

/// One session: its 5-tuple part, health, RTT and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    src_port: u16,
    local_addr: u8,
    health: Health,
    rtt: RttEstimator,
    counters: Counters,
    outstanding_bytes: u64,
    outstanding_msgs: u32,
    canary_pending: bool,
    /// Its congestion window (in use with the multipath transport).
    window: PathWindow,
}

impl Session {
    /// An unused slot (storage for [`Group::with_storage`]).
    pub const EMPTY: Session = Session {
        src_port: 0,
        local_addr: 0,
        health: Health::new(&HealthConfig::DEFAULT, 0),
        rtt: RttEstimator::new(),
        counters: Counters {
            tx_packets: 0,
            tx_bytes: 0,
            tx_messages: 0,
            retransmits: 0,
            timeouts: 0,
            acked_messages: 0,
            probes: 0,
            probes_failed: 0,
            replacements: 0,
            downs: 0,
            ups: 0,
        },
        outstanding_bytes: 0,
        outstanding_msgs: 0,
        canary_pending: false,
        window: PathWindow::UNUSED,
    };

    /// UDP source port.
    pub const fn src_port(&self) -> u16 {
        self.src_port
    }

    /// Index of the local address (in the device's address table).
    pub const fn local_addr(&self) -> u8 {
        self.local_addr
    }

    /// Health state.
    pub const fn state(&self) -> State {
        self.health.state()
    }

    /// The health machine.
    pub const fn health(&self) -> &Health {
        &self.health
    }

    /// RTT estimator.
    pub const fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Counters.
    pub const fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Unacknowledged payload bytes sent on this session.
    pub const fn outstanding_bytes(&self) -> u64 {
        self.outstanding_bytes
    }

    /// Its congestion window (not in use unless the multipath transport
    /// is).
    pub const fn window(&self) -> &PathWindow {
        &self.window
    }

    /// Unacknowledged messages sent on this session.
    pub const fn outstanding_msgs(&self) -> u32 {
        self.outstanding_msgs
    }

    fn has_outstanding(&self) -> bool {
        self.outstanding_msgs != 0 || self.outstanding_bytes != 0
    }

    fn count(&mut self, ev: HealthEvent) {
        match ev {
            HealthEvent::WentDown => self.counters.downs = self.counters.downs.saturating_add(1),
            HealthEvent::WentUp => self.counters.ups = self.counters.ups.saturating_add(1),
            HealthEvent::ProbeDue => self.counters.probes = self.counters.probes.saturating_add(1),
            HealthEvent::ProbeFailed => {
                self.canary_pending = false;
                self.counters.probes_failed = self.counters.probes_failed.saturating_add(1);
            }
            HealthEvent::None => {}
        }
    }
}

/// A session's 5-tuple part, given when the group is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionSpec {
    /// UDP source port (session 0: the standard RoCEv2 port).
    pub src_port: u16,
    /// Index of the local address in the device's address table.
    pub local_addr: u8,
}

/// The session picked for a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Choice {
    /// Where to send the message.
    pub session: SessionId,
    /// No session is Up: this is the least-recently-failed one.
    pub fallback: bool,
    /// The message is a canary probe of a Probing session.
    pub canary: bool,
}

/// What kind of probe a due probe is (see [`super::health`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// Send a zero-length duplicate RDMA WRITE (PSN =
    /// [`probe_psn`](super::health::probe_psn)) on the session now.
    Duplicate,
    /// The next message goes on the session ([`Choice::canary`]).
    Canary,
}

/// Where to go-back-N after a timeout or sequence NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeoutAction {
    /// Resend everything from the oldest unacknowledged PSN here.
    pub resend_on: SessionId,
    /// `resend_on` differs from the session charged (a failover).
    pub failed_over: bool,
    /// No session is Up: `resend_on` is the fallback.
    pub fallback: bool,
}

/// Result of [`SessionGroup::poll`] and [`SessionGroup::on_link`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PollResult {
    /// Sessions that went Down.
    pub went_down: SessionMask,
    /// Sessions that need a duplicate probe sent now.
    pub duplicate_probes: SessionMask,
    /// Sessions that will get the next message as a canary.
    pub canaries: SessionMask,
    /// Sessions whose probe failed.
    pub probes_failed: SessionMask,
    /// A session holding unacknowledged data went Down: go-back-N on this
    /// session.
    pub resend_on: Option<SessionId>,
    /// Every session is exhausted: fail the WR with `RETRY_EXC_ERR`.
    pub retry_exceeded: bool,
}

/// Where a group keeps its sessions: an array ([`SessionGroup`]), or a
/// heap buffer in a kernel, where a 64-slot array (10 KiB) must not be
/// built on the stack.
pub trait SessionStore: AsRef<[Session]> + AsMut<[Session]> {}

impl<T: AsRef<[Session]> + AsMut<[Session]>> SessionStore for T {}

/// The session group of one QP (or UD address handle), its sessions in
/// `S` (at most 64 are used).
#[derive(Clone, Debug)]
pub struct Group<S> {
    sessions: S,
    len: u8,
    cfg: GroupConfig,
    hash_key: u32,
    rto_us: Option<u64>,
    rr_next: u8,
    last: Option<u8>,
}

/// A group with room for `N` sessions in an array.
pub type SessionGroup<const N: usize> = Group<[Session; N]>;

impl<const N: usize> Group<[Session; N]> {
    /// A group of the sessions in `specs`; see [`Group::with_storage`].
    pub fn new(
        cfg: &GroupConfig,
        specs: &[SessionSpec],
        hash_key: u32,
        rto_us: Option<u64>,
        now: u64,
    ) -> Result<Self, SessionError> {
        Self::with_storage([Session::EMPTY; N], cfg, specs, hash_key, rto_us, now)
    }
}

impl<S: SessionStore> Group<S> {
    /// A group of the sessions in `specs` (all Up at `now`), kept in
    /// `storage` (which needs room for them), with the policy and health
    /// thresholds of `cfg` (`cfg.size` is informative; the group has
    /// `specs.len()` sessions). `hash_key` seeds the `Hash` policy (e.g.
    /// [`calc_flow_label`](super::port_range::calc_flow_label) of the two
    /// QPNs); `rto_us` is the QP's retransmit timeout (`None` = infinite).
    pub fn with_storage(
        mut storage: S,
        cfg: &GroupConfig,
        specs: &[SessionSpec],
        hash_key: u32,
        rto_us: Option<u64>,
        now: u64,
    ) -> Result<Self, SessionError> {
        if specs.is_empty() || specs.len() > storage.as_ref().len() || specs.len() > MAX_SESSIONS {
            return Err(SessionError::BadGroupSize);
        }
        for (i, a) in specs.iter().enumerate() {
            if a.src_port == 0 || specs.iter().skip(i.saturating_add(1)).any(|b| b == a) {
                return Err(SessionError::BadPort);
            }
        }
        for (slot, spec) in storage.as_mut().iter_mut().zip(specs) {
            *slot = Session {
                src_port: spec.src_port,
                local_addr: spec.local_addr,
                health: Health::new(&cfg.health, now),
                ..Session::EMPTY
            };
        }
        Ok(Group {
            sessions: storage,
            len: specs.len() as u8,
            cfg: *cfg,
            hash_key,
            rto_us,
            rr_next: 0,
            last: None,
        })
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Always `false`: a group has at least one session.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sessions.
    pub fn sessions(&self) -> &[Session] {
        self.sessions.as_ref().get(..self.len()).unwrap_or(&[])
    }

    fn live_mut(&mut self) -> &mut [Session] {
        let n = self.len();
        self.sessions.as_mut().get_mut(..n).unwrap_or(&mut [])
    }

    /// One session.
    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.sessions().get(id.index())
    }

    fn get_mut(&mut self, id: SessionId) -> Result<&mut Session, SessionError> {
        self.live_mut()
            .get_mut(id.index())
            .ok_or(SessionError::NoSuchSession)
    }

    /// The configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    /// Changes the policy (takes effect at the next message).
    pub fn set_policy(&mut self, policy: Policy) {
        self.cfg.policy = policy;
    }

    /// Turns the reorder guard ([`GroupConfig::reorder_guard`]) on or off.
    pub fn set_reorder_guard(&mut self, on: bool) {
        self.cfg.reorder_guard = on;
    }

    /// Starts (`on`) or stops every session's congestion window: the
    /// multipath transport limits what each session has in flight.
    pub fn set_windows(&mut self, on: bool) {
        for s in self.live_mut() {
            if on {
                s.window.start();
            } else {
                s.window = PathWindow::UNUSED;
            }
        }
    }

    /// Session `id`'s congestion window, to update.
    pub fn window_mut(&mut self, id: SessionId) -> Option<&mut PathWindow> {
        self.get_mut(id).ok().map(|s| &mut s.window)
    }

    /// Sets the QP retransmit timeout (`modify_qp` of `timeout`).
    pub fn set_rto_us(&mut self, rto_us: Option<u64>) {
        self.rto_us = rto_us;
    }

    /// Sets every session's retry budget to the QP's `retry_cnt` (0..=7,
    /// 7 = unlimited), full. A group built before the QP's RTS attributes
    /// are known (at RTR) gets them here.
    pub fn set_retry_cnt(&mut self, retry_cnt: u8) {
        self.cfg.health.retry_cnt = retry_cnt;
        let cfg = self.cfg.health;
        for s in self.live_mut() {
            s.health.set_retries(&cfg);
        }
    }

    /// The QP retransmit timeout.
    pub fn rto_us(&self) -> Option<u64> {
        self.rto_us
    }

    /// Sessions that are Up.
    pub fn up_mask(&self) -> SessionMask {
        let mut m = 0;
        for (i, s) in self.sessions().iter().enumerate() {
            if s.health.is_up() {
                m |= SessionId(i as u8).bit();
            }
        }
        m
    }

    /// Unacknowledged bytes over all sessions.
    pub fn outstanding_bytes(&self) -> u64 {
        self.sessions()
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.outstanding_bytes))
    }

    /// `true` if any session holds unacknowledged data.
    pub fn has_outstanding(&self) -> bool {
        self.sessions().iter().any(Session::has_outstanding)
    }

    /// `true` if every session has exhausted its retry budget.
    pub fn retry_exceeded(&self) -> bool {
        self.sessions().iter().all(|s| s.health.is_exhausted())
    }

    /// First Up session at or after `start` in ring order.
    fn first_up_from(&self, start: usize) -> Option<usize> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let start = start.checked_rem(n).unwrap_or(0);
        (0..n)
            .map(|k| {
                let i = start.wrapping_add(k);
                if i >= n {
                    i.wrapping_sub(n)
                } else {
                    i
                }
            })
            .find(|&i| self.sessions().get(i).is_some_and(|s| s.health.is_up()))
    }

    /// The session the policy picks among Up ones, if any is Up.
    fn policy_pick(&self) -> Option<usize> {
        let n = self.len();
        match self.cfg.policy {
            Policy::Hash => {
                self.first_up_from((self.hash_key as usize).checked_rem(n).unwrap_or(0))
            }
            Policy::RoundRobin => self.first_up_from(usize::from(self.rr_next)),
            Policy::Failover => self.first_up_from(0),
            Policy::LeastOutstanding => {
                let first = self.first_up_from(usize::from(self.rr_next))?;
                let mut best = first;
                let mut best_bytes = self.sessions().get(first)?.outstanding_bytes;
                for k in 1..n {
                    let i = first.wrapping_add(k).checked_rem(n).unwrap_or(0);
                    if let Some(s) = self.sessions().get(i) {
                        if s.health.is_up() && s.outstanding_bytes < best_bytes {
                            best = i;
                            best_bytes = s.outstanding_bytes;
                        }
                    }
                }
                Some(best)
            }
        }
    }

    /// The least-recently-failed session that is not exhausted.
    fn fallback_pick(&self) -> Option<usize> {
        self.sessions()
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.health.is_exhausted())
            .min_by_key(|(i, s)| (s.health.failed_at_us(), *i))
            .map(|(i, _)| i)
    }

    /// A session for go-back-N (no guard, no canary).
    fn target(&self) -> Result<(usize, bool), SessionError> {
        if let Some(i) = self.policy_pick() {
            return Ok((i, false));
        }
        self.fallback_pick()
            .map(|i| (i, true))
            .ok_or(SessionError::RetryExceeded)
    }

    fn note_chosen(&mut self, i: usize) {
        let n = self.len().max(1);
        self.rr_next = i.wrapping_add(1).checked_rem(n).unwrap_or(0) as u8;
        self.last = Some(i as u8);
    }

    /// Whether a session waits for a canary (the next new message probes
    /// it: see [`Group::choose`]).
    pub fn canary_pending(&self) -> bool {
        self.sessions().iter().any(|s| s.canary_pending)
    }

    /// Picks the session for the next message. Only Up sessions are
    /// chosen, except: a pending canary probe gets the message; and when no
    /// session is Up the least-recently-failed non-exhausted session is
    /// used (`fallback`). Fails with [`SessionError::RetryExceeded`] only
    /// when every session is exhausted.
    pub fn choose(&mut self) -> Result<Choice, SessionError> {
        if let Some(i) = self.sessions().iter().position(|s| s.canary_pending) {
            if let Some(s) = self.live_mut().get_mut(i) {
                s.canary_pending = false;
            }
            self.last = Some(i as u8);
            return Ok(Choice {
                session: SessionId(i as u8),
                fallback: false,
                canary: true,
            });
        }
        if self.cfg.reorder_guard && self.has_outstanding() {
            if let Some(l) = self.last {
                if self
                    .sessions()
                    .get(usize::from(l))
                    .is_some_and(|s| s.health.is_up())
                {
                    return Ok(Choice {
                        session: SessionId(l),
                        fallback: false,
                        canary: false,
                    });
                }
            }
        }
        let (i, fallback) = self.target()?;
        self.note_chosen(i);
        Ok(Choice {
            session: SessionId(i as u8),
            fallback,
            canary: false,
        })
    }

    /// One message (`bytes` of payload in `packets` packets) was sent on
    /// `id`; `retransmit` if it is a resend.
    pub fn on_send(
        &mut self,
        id: SessionId,
        bytes: u64,
        packets: u32,
        retransmit: bool,
        now: u64,
    ) -> Result<(), SessionError> {
        let s = self.get_mut(id)?;
        s.health.on_send(now, s.has_outstanding());
        s.outstanding_bytes = s.outstanding_bytes.saturating_add(bytes);
        s.outstanding_msgs = s.outstanding_msgs.saturating_add(1);
        let c = &mut s.counters;
        c.tx_packets = c.tx_packets.saturating_add(u64::from(packets));
        c.tx_bytes = c.tx_bytes.saturating_add(bytes);
        c.tx_messages = c.tx_messages.saturating_add(1);
        if retransmit {
            c.retransmits = c.retransmits.saturating_add(1);
        }
        self.last = Some(id.0);
        Ok(())
    }

    /// One packet (`bytes` of payload) of a message counted on `from`
    /// went out on `to` instead (the multipath transport sent that part of
    /// the message there): the transmit counters say what each session
    /// carried.
    pub fn moved_packet(&mut self, from: SessionId, to: SessionId, bytes: u64) {
        if from == to || self.session(to).is_none() {
            return;
        }
        if let Ok(s) = self.get_mut(from) {
            s.counters.tx_packets = s.counters.tx_packets.saturating_sub(1);
            s.counters.tx_bytes = s.counters.tx_bytes.saturating_sub(bytes);
        }
        if let Ok(s) = self.get_mut(to) {
            s.counters.tx_packets = s.counters.tx_packets.saturating_add(1);
            s.counters.tx_bytes = s.counters.tx_bytes.saturating_add(bytes);
        }
    }

    /// A datagram of `bytes` went out on `id` (UD): counted, and nothing
    /// stays outstanding since nothing is acknowledged.
    pub fn on_datagram(&mut self, id: SessionId, bytes: u64) -> Result<(), SessionError> {
        let s = self.get_mut(id)?;
        let c = &mut s.counters;
        c.tx_packets = c.tx_packets.saturating_add(1);
        c.tx_bytes = c.tx_bytes.saturating_add(bytes);
        c.tx_messages = c.tx_messages.saturating_add(1);
        self.last = Some(id.0);
        Ok(())
    }

    /// A message sent (last) on `id` was acknowledged at `now`; `rtt_us`
    /// is a sample if it was sent only once (Karn). ACK progress: the
    /// session's budget is refilled and, if it was Down or Probing
    /// (fallback or canary), it is Up again. Returns `true` if it came
    /// back Up. While the session's window is in use (the multipath
    /// transport) the message is no progress of `id`: its packets may
    /// have been resent on, or moved to, another session, and a session
    /// on a dead path whose messages completed over the other one looked
    /// alive and never went Down; the packets a session delivered are its
    /// progress ([`Self::on_progress`]). The message's outstanding count is the caller's to
    /// [`forget`](Self::forget) (it may be counted nowhere after a
    /// go-back: see [`Ledger`](super::ledger::Ledger)).
    pub fn on_ack(
        &mut self,
        id: SessionId,
        rtt_us: Option<u32>,
        now: u64,
    ) -> Result<bool, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        s.counters.acked_messages = s.counters.acked_messages.saturating_add(1);
        if let Some(m) = rtt_us {
            s.rtt.sample(m);
        }
        if s.window.is_active() {
            return Ok(false);
        }
        let ev = s.health.on_progress(now, &cfg);
        s.count(ev);
        Ok(ev == HealthEvent::WentUp)
    }

    /// One message of `bytes` counts as outstanding on `id` from `now`
    /// although it has not been sent there yet (it is about to be resent
    /// there): as for a send, the session's stall clock starts now if it
    /// held nothing. Returns whether `id` is in the group.
    pub fn hold(&mut self, id: SessionId, bytes: u64, now: u64) -> bool {
        let Ok(s) = self.get_mut(id) else {
            return false;
        };
        s.health.on_send(now, s.has_outstanding());
        s.outstanding_bytes = s.outstanding_bytes.saturating_add(bytes);
        s.outstanding_msgs = s.outstanding_msgs.saturating_add(1);
        true
    }

    /// One message of `bytes` counted on `id` by [`on_send`](Self::on_send)
    /// or [`hold`](Self::hold)
    /// is no longer outstanding there (acknowledged, or moved to another
    /// session by a resend).
    pub fn forget(&mut self, id: SessionId, bytes: u64) {
        if let Ok(s) = self.get_mut(id) {
            s.outstanding_bytes = s.outstanding_bytes.saturating_sub(bytes);
            s.outstanding_msgs = s.outstanding_msgs.saturating_sub(1);
        }
    }

    /// Acknowledgements advanced inside a message last sent on `id` that
    /// has not completed yet (a long message is acknowledged in parts):
    /// progress on `id`, which refills its retries and clears its
    /// timeouts as a completion does, so that a message delivered slowly
    /// but steadily never runs out of them (as the transport's own retry
    /// counter is reloaded by any forward progress). Returns `true` if the
    /// session came back Up.
    pub fn on_progress(&mut self, id: SessionId, now: u64) -> Result<bool, SessionError> {
        self.progress(id, now)
    }

    /// Acknowledgements advanced inside a message that started on `id`:
    /// its progress ([`Self::on_progress`]), unless the session's window
    /// is in use (the multipath transport credits each session with the
    /// packets it delivered instead, as in [`Self::on_ack`]).
    pub fn on_message_progress(&mut self, id: SessionId, now: u64) -> Result<bool, SessionError> {
        if self.session(id).is_some_and(|s| s.window.is_active()) {
            return Ok(false);
        }
        self.progress(id, now)
    }

    fn progress(&mut self, id: SessionId, now: u64) -> Result<bool, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        let ev = s.health.on_progress(now, &cfg);
        s.count(ev);
        Ok(ev == HealthEvent::WentUp)
    }

    /// The reply to a duplicate probe of `id` arrived; returns `true` if
    /// the session came back Up.
    pub fn on_probe_reply(&mut self, id: SessionId, now: u64) -> Result<bool, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        let ev = s.health.on_probe_reply(now, &cfg);
        s.count(ev);
        Ok(ev == HealthEvent::WentUp)
    }

    /// Whether session `id` may get a fresh 5-tuple for its congestion
    /// ([`Self::replace`]): only while it is Up and was charged no timeout
    /// since it last delivered. One that fell silent is the health
    /// machine's (Down, failover, probes): a replacement starts its health
    /// afresh, so a session on a dead path whose resends filled its loss
    /// meter, replaced before each second timeout, never went Down.
    pub fn may_replace(&self, id: SessionId) -> bool {
        self.session(id)
            .is_some_and(|s| s.health.is_up() && s.health.consecutive_timeouts() == 0)
    }

    /// Session `id` now leaves from source port `src_port` through local
    /// link `local_addr` (a fresh 5-tuple for a congested one): it starts
    /// Up with a fresh RTT estimate, its counters go on and count the
    /// replacement.
    pub fn replace(
        &mut self,
        id: SessionId,
        src_port: u16,
        local_addr: u8,
        now: u64,
    ) -> Result<(), SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        s.src_port = src_port;
        s.local_addr = local_addr;
        s.health = Health::new(&cfg, now);
        s.rtt = RttEstimator::new();
        s.canary_pending = false;
        // Another path: its window starts over.
        if s.window.is_active() {
            s.window.start();
        }
        s.counters.replacements = s.counters.replacements.saturating_add(1);
        Ok(())
    }

    /// Nothing is outstanding on any session any more: a go-back resends
    /// every unacknowledged message, and each counts again where it is
    /// resent.
    pub fn clear_outstanding(&mut self) {
        for s in self.live_mut() {
            s.outstanding_bytes = 0;
            s.outstanding_msgs = 0;
        }
    }

    fn go_back(&mut self, charged: SessionId) -> Result<TimeoutAction, SessionError> {
        if self.retry_exceeded() {
            return Err(SessionError::RetryExceeded);
        }
        self.clear_outstanding();
        let up = self
            .session(charged)
            .is_some_and(|s| s.health.is_up() && !s.health.is_exhausted());
        let (i, fallback) = if up {
            (charged.index(), false)
        } else {
            self.target()?
        };
        self.note_chosen(i);
        Ok(TimeoutAction {
            resend_on: SessionId(i as u8),
            failed_over: i != charged.index(),
            fallback,
        })
    }

    /// The retransmit timer fired; `id` carried the oldest unacknowledged
    /// message. Charges the timeout (one retry), possibly marks `id` Down,
    /// and returns where to go-back-N: `id` itself while it stays Up,
    /// otherwise the policy's Up session, otherwise the fallback. Fails
    /// with [`SessionError::RetryExceeded`] when every session is
    /// exhausted.
    pub fn on_timeout(&mut self, id: SessionId, now: u64) -> Result<TimeoutAction, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        s.counters.timeouts = s.counters.timeouts.saturating_add(1);
        let ev = s.health.on_timeout(now, &cfg);
        s.count(ev);
        self.go_back(id)
    }

    /// Session `id`'s own retransmit timer found it silent (packets in
    /// flight, nothing delivered) for a whole RTO
    /// (`multipath::quiet`): a timeout towards Down as by the transport
    /// timer, but no retry spent and no go-back (its packets were resent
    /// on another session). Returns `true` if it went Down.
    pub fn on_session_timeout(&mut self, id: SessionId, now: u64) -> Result<bool, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        s.counters.timeouts = s.counters.timeouts.saturating_add(1);
        let ev = s.health.on_session_timeout(now, &cfg);
        s.count(ev);
        let down = matches!(ev, HealthEvent::WentDown | HealthEvent::ProbeFailed);
        if down {
            s.canary_pending = false;
        }
        Ok(down)
    }

    /// A PSN sequence error NAK named a message last sent on `id` (lost
    /// while later ones arrived). Ends a canary probe of `id`; returns
    /// where to go-back-N. Spends no retry (as in rxe).
    pub fn on_sequence_nak(
        &mut self,
        id: SessionId,
        now: u64,
    ) -> Result<TimeoutAction, SessionError> {
        let cfg = self.cfg.health;
        let s = self.get_mut(id)?;
        let ev = s.health.on_sequence_nak(now, &cfg);
        s.count(ev);
        self.go_back(id)
    }

    /// The netdev of local address `local_addr` went up or down.
    pub fn on_link(&mut self, local_addr: u8, up: bool, now: u64) -> PollResult {
        let cfg = self.cfg.health;
        let mut r = PollResult::default();
        let mut resend = false;
        for (i, s) in self.live_mut().iter_mut().enumerate() {
            if s.local_addr != local_addr {
                continue;
            }
            let ev = s.health.on_link(up, now, &cfg);
            s.count(ev);
            if ev == HealthEvent::WentDown {
                s.canary_pending = false;
                r.went_down |= SessionId(i as u8).bit();
                resend |= s.has_outstanding();
            }
        }
        self.finish(r, resend)
    }

    fn finish(&mut self, mut r: PollResult, resend: bool) -> PollResult {
        // The caller resends every unacknowledged message on `resend_on`:
        // each counts again there as it goes out (see `Ledger`).
        if resend {
            match self.target() {
                Ok((i, _)) => {
                    self.clear_outstanding();
                    self.note_chosen(i);
                    r.resend_on = Some(SessionId(i as u8));
                }
                Err(_) => r.retry_exceeded = true,
            }
        }
        r
    }

    /// Time-driven health at `now`: stall detection, probe timeouts, due
    /// probes. Call from the QP timer (at least every RTO / 2).
    pub fn poll(&mut self, now: u64) -> PollResult {
        let cfg = self.cfg.health;
        let rto = self.rto_us;
        let idle = !self.has_outstanding();
        let mut r = PollResult::default();
        let mut resend = false;
        for (i, s) in self.live_mut().iter_mut().enumerate() {
            let bit = SessionId(i as u8).bit();
            let ev = s.health.poll(now, s.has_outstanding(), rto, &cfg);
            s.count(ev);
            match ev {
                HealthEvent::WentDown => {
                    r.went_down |= bit;
                    resend |= s.has_outstanding();
                }
                HealthEvent::ProbeDue => {
                    if idle {
                        r.duplicate_probes |= bit;
                    } else {
                        s.canary_pending = true;
                        r.canaries |= bit;
                    }
                }
                HealthEvent::ProbeFailed => r.probes_failed |= bit,
                HealthEvent::None | HealthEvent::WentUp => {}
            }
        }
        self.finish(r, resend)
    }

    /// The kind of probe for a session whose probe is due now.
    pub fn probe_kind(&self) -> ProbeKind {
        if self.has_outstanding() {
            ProbeKind::Canary
        } else {
            ProbeKind::Duplicate
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(n: u16) -> std::vec::Vec<SessionSpec> {
        (0..n)
            .map(|i| SessionSpec {
                src_port: 61000 + i,
                local_addr: 0,
            })
            .collect()
    }

    #[test]
    fn one_session_is_plain() {
        let mut g =
            SessionGroup::<1>::new(&GroupConfig::DEFAULT, &specs(1), 7, Some(100), 0).unwrap();
        for _ in 0..3 {
            assert_eq!(g.choose().unwrap().session, SessionId(0));
        }
        // retry_cnt 2: the third timeout without progress is RETRY_EXC.
        let mut cfg = GroupConfig::DEFAULT;
        cfg.health.retry_cnt = 2;
        let mut g = SessionGroup::<1>::new(&cfg, &specs(1), 7, Some(100), 0).unwrap();
        g.on_send(SessionId(0), 10, 1, false, 0).unwrap();
        assert!(g.on_timeout(SessionId(0), 100).is_ok());
        assert!(g.on_timeout(SessionId(0), 200).is_ok());
        assert_eq!(
            g.on_timeout(SessionId(0), 300),
            Err(SessionError::RetryExceeded)
        );
    }

    #[test]
    fn moved_packets_count_where_they_went_and_windows_follow_the_group() {
        let mut g =
            SessionGroup::<2>::new(&GroupConfig::DEFAULT, &specs(2), 7, Some(100), 0).unwrap();
        g.on_send(SessionId(0), 4096, 4, false, 0).unwrap();
        g.moved_packet(SessionId(0), SessionId(1), 1024);
        g.moved_packet(SessionId(0), SessionId(0), 1024);
        g.moved_packet(SessionId(0), SessionId(9), 1024);
        let c = |g: &SessionGroup<2>, i| {
            let c = g.session(SessionId(i)).unwrap().counters();
            (c.tx_packets, c.tx_bytes)
        };
        assert_eq!((c(&g, 0), c(&g, 1)), ((3, 3072), (1, 1024)));
        // Windows: unused until the multipath transport starts them; a
        // fresh 5-tuple starts its session's window over.
        assert!(!g.session(SessionId(1)).unwrap().window().is_active());
        g.set_windows(true);
        g.window_mut(SessionId(1)).unwrap().on_timeout(0);
        assert_eq!(g.session(SessionId(1)).unwrap().window().cwnd(), 2);
        g.replace(SessionId(1), 62000, 0, 10).unwrap();
        assert_eq!(g.session(SessionId(1)).unwrap().window().cwnd(), 16);
        g.set_windows(false);
        assert!(!g.session(SessionId(0)).unwrap().window().is_active());
    }

    #[test]
    fn with_windows_only_delivered_packets_are_a_sessions_progress() {
        let mut g =
            SessionGroup::<2>::new(&GroupConfig::DEFAULT, &specs(2), 7, Some(100), 0).unwrap();
        let timeouts = |g: &SessionGroup<2>| {
            g.session(SessionId(1))
                .unwrap()
                .health()
                .consecutive_timeouts()
        };
        // Without windows a message's acknowledgement is its session's
        // progress.
        g.on_send(SessionId(1), 4096, 4, false, 0).unwrap();
        let _ = g.on_timeout(SessionId(1), 100);
        g.on_ack(SessionId(1), None, 110).unwrap();
        assert_eq!(timeouts(&g), 0);
        // With them (multipath), neither a completion nor a partial ACK
        // of a message that started on it is: its packets may have been
        // resent over the other session.
        g.set_windows(true);
        let _ = g.on_timeout(SessionId(1), 200);
        g.on_ack(SessionId(1), Some(50), 210).unwrap();
        g.on_message_progress(SessionId(1), 220).unwrap();
        assert_eq!(timeouts(&g), 1);
        assert_eq!(
            g.session(SessionId(1)).unwrap().counters().acked_messages,
            2
        );
        g.on_progress(SessionId(1), 230).unwrap();
        assert_eq!(timeouts(&g), 0);
    }

    #[test]
    fn only_an_up_session_charged_no_timeout_is_replaced() {
        let mut g =
            SessionGroup::<2>::new(&GroupConfig::DEFAULT, &specs(2), 7, Some(100), 0).unwrap();
        g.on_send(SessionId(1), 4096, 4, false, 0).unwrap();
        assert!(g.may_replace(SessionId(1)));
        let _ = g.on_timeout(SessionId(1), 100);
        assert!(!g.may_replace(SessionId(1)));
        // It delivered again: congested at most.
        g.on_progress(SessionId(1), 150).unwrap();
        assert!(g.may_replace(SessionId(1)));
        assert!(!g.may_replace(SessionId(5)));
    }

    #[test]
    fn partial_progress_refills_retries() {
        // retry_cnt 1, two sessions: timeouts separated by progress inside
        // a long message never exhaust the budget; without progress the
        // session on its own is exhausted after two.
        let mut cfg = GroupConfig::DEFAULT;
        cfg.health.retry_cnt = 1;
        cfg.health.timeout_threshold = 9;
        let mut g = SessionGroup::<2>::new(&cfg, &specs(2), 7, Some(100), 0).unwrap();
        g.on_send(SessionId(0), 1 << 20, 1024, false, 0).unwrap();
        for k in 1..50u64 {
            assert!(g.on_timeout(SessionId(0), k * 200).is_ok());
            g.on_progress(SessionId(0), k * 200 + 100).unwrap();
        }
        let s = g.session(SessionId(0)).unwrap();
        assert!(s.health.is_up() && !s.health.is_exhausted());
        assert!(g.on_timeout(SessionId(0), 20_000).is_ok());
        assert!(g.on_timeout(SessionId(0), 20_200).is_ok());
        assert!(g.session(SessionId(0)).unwrap().health.is_exhausted());
    }

    #[test]
    fn retry_cnt_set_after_build() {
        // Built at RTR with no retries (the QP's retry_cnt comes at RTS):
        // one timeout per session would fail the QP. Set at RTS, each
        // session takes retry_cnt timeouts without progress first.
        let mut cfg = GroupConfig::DEFAULT;
        cfg.health.retry_cnt = 0;
        cfg.health.timeout_threshold = 9;
        let mut g = SessionGroup::<2>::new(&cfg, &specs(2), 7, Some(100), 0).unwrap();
        g.set_retry_cnt(3);
        g.on_send(SessionId(0), 4096, 4, false, 0).unwrap();
        for k in 1..=3u64 {
            assert!(g.on_timeout(SessionId(0), k * 200).is_ok());
            assert_eq!(
                g.session(SessionId(0)).unwrap().health.retries_left(),
                3 - k as u8
            );
        }
        assert!(!g.session(SessionId(0)).unwrap().health.is_exhausted());
        assert!(g.on_timeout(SessionId(0), 1000).is_ok());
        assert!(g.session(SessionId(0)).unwrap().health.is_exhausted());
        // The other session was never charged: the QP goes on there.
        assert!(!g.retry_exceeded());
        // 7: unlimited, as for a group built with it.
        g.set_retry_cnt(7);
        for k in 0..20u64 {
            assert!(g.on_timeout(SessionId(1), 2000 + k * 200).is_ok());
        }
        assert!(!g.session(SessionId(1)).unwrap().health.is_exhausted());
    }

    #[test]
    fn rejects_bad_specs() {
        let mut s = specs(2);
        assert!(SessionGroup::<1>::new(&GroupConfig::DEFAULT, &s, 0, None, 0).is_err());
        s[1] = s[0];
        assert_eq!(
            SessionGroup::<2>::new(&GroupConfig::DEFAULT, &s, 0, None, 0).err(),
            Some(SessionError::BadPort)
        );
        assert!(SessionGroup::<2>::new(&GroupConfig::DEFAULT, &[], 0, None, 0).is_err());
    }
}
