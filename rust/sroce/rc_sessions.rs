// SPDX-License-Identifier: GPL-2.0

//! The session group of an RC queue pair in the data path: which UDP
//! 5-tuple each message goes out on, and where a go-back-N resends.
//!
//! Every message is sent on a session, also with one session (then the
//! session is the plain RoCEv2 flow out of the device's net device, and the
//! requester's own retry budget applies, exactly as in rxe). With more:
//! - session 0 keeps the RoCEv2 source port; sessions 1.. take ports from
//!   the device's range, each held by a bound kernel socket
//!   ([`ReservedPort`]) so no other socket on the host can use it while the
//!   QP lives;
//! - sessions leave where the host's routing sends them, so multipath
//!   routes spread them over links; ports are picked so the sessions leave
//!   through different net devices when the routing table offers several,
//!   and on two links or more each session of an RC group stays pinned to
//!   its link (see `QpSessions::new`);
//! - the protocol core's [`SessionGroup`] picks a session per message, is
//!   told of ACKs, timeouts and sequence NAKs, and answers where to resend;
//!   a work request fails with `RETRY_EXC_ERR` only once every session
//!   has spent its retries.

use super::{device::SroceDevice, engine_store::EngineStore, io};
use crate::net::port_reservation::ReservedPort;
use crate::rdma::{
    device::{Device, PORT},
    qp::Qp,
};
use crate::roce::{
    multipath::PathWindow,
    psn::Psn,
    requester::RequestPacket,
    session::{
        group::{Group, GroupConfig, Policy, PollResult, Session, SessionSpec},
        health::{probe_reply_matches, State},
        ledger::{Entry as LedgerEntry, LedgerWith},
        port_range::PortRange,
        SessionId, MAX_SESSIONS,
    },
};
use crate::sroce::io::counters::Counter;
use kernel::{alloc::KVBox, prelude::*};

mod replace;
pub(crate) use replace::replace_wanted;

/// What made the requester go back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoBack {
    /// The transport timer expired.
    Timeout,
    /// A PSN sequence error NAK.
    SequenceNak,
    /// A missing READ or atomic response (implicit NAK).
    Other,
}

/// The sessions of a group, on the heap (64 of them are 10 KiB).
pub(crate) type SessionSlots = EngineStore<Session>;

/// An administrator's override of a queue pair's group (`QP_SET`); unset
/// fields take the device's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SessionOverride {
    pub(crate) size: Option<u8>,
    pub(crate) policy: Option<Policy>,
    pub(crate) reorder_guard: Option<bool>,
}

impl SessionOverride {
    /// `cfg` with this override applied.
    pub(crate) fn apply(&self, cfg: GroupConfig) -> GroupConfig {
        let mut c = cfg.with_override(self.size, self.policy);
        if let Some(g) = self.reorder_guard {
            c.reorder_guard = g;
        }
        c
    }

    /// This override with the fields `later` sets replaced.
    pub(crate) fn merge(self, later: SessionOverride) -> SessionOverride {
        SessionOverride {
            size: later.size.or(self.size),
            policy: later.policy.or(self.policy),
            reorder_guard: later.reorder_guard.or(self.reorder_guard),
        }
    }
}

/// Source of group generations.
static GENERATION: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Candidate ports tried per extra session for one on a new net device.
const PATH_TRIES: u32 = 32;
/// Candidate ports tried per extra session in all.
const PORT_TRIES: u32 = 512;

/// The sessions of one RC QP and what the data path remembers per work
/// request (indexed by tag modulo `W`).
pub(crate) struct QpSessions<const W: usize> {
    group: Group<SessionSlots>,
    /// The 5-tuple of each session (index = session id).
    flows: KVec<io::Flow>,
    /// Holds the source ports of sessions 1.. for the QP's lifetime.
    ports: KVec<ReservedPort>,
    /// Holds session 0's port once it was replaced (before, it is the
    /// computed RoCEv2 port, held by no socket, as in any RoCEv2 stack).
    port0: Option<ReservedPort>,
    /// A session whose congestion stayed high, to get a fresh 5-tuple
    /// (the work item does it: reserving a port sleeps).
    replace_wanted: Option<SessionId>,
    /// Tells this group from one built after it (a replacement found
    /// unlocked applies only to the group it was found for).
    generation: u32,
    /// The session each WQE in flight was last sent on.
    ledger: LedgerWith<EngineStore<LedgerEntry>>,
    /// What the group was built from, to rebuild it.
    origin: Origin,
    /// The distinct links (out net devices) the sessions leave through;
    /// a session's `local_addr` in the group is its link's index here.
    links: KVec<Link>,
    /// The link epoch (`events::link_epoch`) when the links were last read.
    seen_epoch: u32,
    /// When the last work request completed (µs).
    last_progress_us: u64,
    /// A failover is under way: since when traffic has stalled (µs).
    stalled_since_us: Option<u64>,
    /// How long the last failover took: from the stall (the later of the
    /// oldest unacknowledged request's first send and the last completion)
    /// to the first completion after the resend on another session (µs).
    last_failover_us: Option<u64>,
    /// The longest failover so far (µs).
    max_failover_us: u64,
    /// The duplicate probe in flight: its session and PSN.
    probe: Option<(u8, Psn)>,
    /// Each session's state as last reported ([`Self::state_changes`]).
    reported: [State; MAX_SESSIONS],
    /// The reorder guard as configured (the group's own is off while the
    /// peer reorders).
    configured_guard: bool,
    /// The peer's responder holds out-of-order requests (multipath agreed):
    /// messages are spread without the reorder guard.
    multipath: bool,
}

/// What [`QpSessions::poll`] asks of the work item.
pub(crate) struct Polled {
    /// Keep waking up for the sessions' health.
    pub(crate) keep_polling: bool,
    /// Send a duplicate probe on this session (the QP is idle).
    pub(crate) probe: Option<SessionId>,
    /// A session holding unacknowledged requests stalled and is down:
    /// resend them now, on a live one.
    pub(crate) resend: bool,
}

/// A net device sessions leave through, as last seen.
#[derive(Clone, Copy)]
struct Link {
    ifindex: i32,
    up: bool,
}

/// What a QP's group is built from.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    /// The QP's number.
    pub(crate) qpn: u32,
    /// Its plain RoCEv2 flow (session 0).
    pub(crate) flow0: io::Flow,
    /// The device's source-port range for extra sessions.
    pub(crate) ports: PortRange,
    /// The QP's `retry_cnt`.
    pub(crate) retry_cnt: u8,
    /// The QP's retransmit timeout, µs (`None`: infinite).
    pub(crate) rto_us: Option<u64>,
}

impl<const W: usize> QpSessions<W> {
    /// The group for QP `qpn` whose plain RoCEv2 flow is `flow0`: `cfg`'s
    /// size and policy, extra ports from `ports`. `retry_cnt` is the QP's.
    pub(crate) fn new(
        dev: &Device<SroceDevice>,
        origin: Origin,
        cfg: &GroupConfig,
        now_us: u64,
    ) -> Result<KVBox<Self>> {
        let Origin {
            qpn,
            flow0,
            ports,
            retry_cnt,
            rto_us,
        } = origin;
        let size = usize::from(cfg.size).clamp(1, MAX_SESSIONS);
        let mut flows = KVec::with_capacity(size, GFP_KERNEL)?;
        let mut held = KVec::with_capacity(size.saturating_sub(1), GFP_KERNEL)?;
        let mut first = flow0;
        if size > 1 {
            first.out = io::OutPort::Routed;
        }
        flows.push(first, GFP_KERNEL)?;
        if size > 1 {
            pick_ports(dev, qpn, &mut flows, &mut held, size, ports)?;
        }
        // Links are watched only when there is somewhere else to go.
        let mut links: KVec<Link> = KVec::new();
        let mut specs = KVec::with_capacity(size, GFP_KERNEL)?;
        let net_dev = dev.netdev(PORT);
        for f in flows.iter() {
            let mut local_addr = 0u8;
            if let (true, Some(nd), Ok(ifindex)) =
                (size > 1, net_dev.as_ref(), io::out_ifindex(dev, f))
            {
                let i = match links.iter().position(|l| l.ifindex == ifindex) {
                    Some(i) => i,
                    None => {
                        let up = nd.net().link_up(ifindex);
                        links.push(Link { ifindex, up }, GFP_KERNEL)?;
                        links.len() - 1
                    }
                };
                local_addr = u8::try_from(i).unwrap_or(u8::MAX);
            }
            specs.push(
                SessionSpec {
                    src_port: f.src_port,
                    local_addr,
                },
                GFP_KERNEL,
            )?;
        }
        drop(net_dev);
        // On two links or more, each session of an RC group keeps the link
        // it was found on: its health, window and RTT are that path's.
        // Routed by the 5-tuple's hash, it would move when the multipath
        // route changes (a link down and up again rehashes every flow),
        // possibly onto the link just back up, which drops what it is given
        // until the kernel has activated it, and with the others: one
        // failure would then take all sessions. A group on one link (also
        // `lo`: QPs of one host) follows the routing, as does a UD group
        // (`W` 1: no acknowledgements, so no health to fail over with; the
        // routing skips a dead link by itself).
        if W > 1 && links.len() > 1 {
            pin_to_links(&mut flows, &specs, &links);
        }
        let mut gcfg = *cfg;
        // The group's `retry_cnt` 7 means unlimited; the QP's means seven.
        gcfg.health.retry_cnt = retry_cnt.min(6);
        let hash_key = spread_key(dev, qpn, &flows);
        let slots = EngineStore::filled(size, Session::EMPTY)?;
        let ledger = LedgerWith::with_storage(EngineStore::filled(W, LedgerEntry::default())?);
        let group = Group::with_storage(slots, &gcfg, &specs, hash_key, rto_us, now_us)
            .map_err(|_| EINVAL)?;
        let mut reported = [State::Up; MAX_SESSIONS];
        for (r, s) in reported.iter_mut().zip(group.sessions()) {
            *r = s.state();
        }
        Ok(KVBox::new(
            Self {
                group,
                flows,
                ports: held,
                port0: None,
                replace_wanted: None,
                generation: GENERATION.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
                ledger,
                origin,
                links,
                seen_epoch: super::events::link_epoch(),
                last_progress_us: now_us,
                stalled_since_us: None,
                last_failover_us: None,
                max_failover_us: 0,
                probe: None,
                reported,
                configured_guard: cfg.reorder_guard,
                multipath: false,
            },
            GFP_KERNEL,
        )?)
    }

    /// A group for `cfg` to replace this one with, if `cfg` changes its
    /// size (new ports); `None` if it applies in place. Sleeps: call it
    /// without the QP's lock, with `self`'s origin read under it.
    pub(crate) fn rebuilt_for(
        dev: &Device<SroceDevice>,
        origin: Origin,
        size_now: usize,
        cfg: &GroupConfig,
        now_us: u64,
    ) -> Result<Option<KVBox<Self>>> {
        if usize::from(cfg.size.max(1)) == size_now {
            return Ok(None);
        }
        Self::new(dev, origin, cfg, now_us).map(Some)
    }

    /// The origin the group was built from, and its size.
    pub(crate) fn origin_and_size(&self) -> (Origin, usize) {
        (self.origin, self.group.len())
    }

    /// Changes the group to `cfg` now: policy and reorder guard in place,
    /// or (a new size) the group `fresh` from [`Self::rebuilt_for`] takes
    /// over and sends what follows (the old ports are released when the
    /// returned group is dropped, unlocked). Messages in flight complete
    /// normally; their sessions' bookkeeping starts afresh.
    pub(crate) fn reconfigure(
        &mut self,
        cfg: &GroupConfig,
        fresh: Option<KVBox<Self>>,
    ) -> Option<KVBox<Self>> {
        let Some(mut fresh) = fresh.filter(|_| usize::from(cfg.size.max(1)) != self.group.len())
        else {
            self.group.set_policy(cfg.policy);
            self.configured_guard = cfg.reorder_guard;
            self.group
                .set_reorder_guard(cfg.reorder_guard && !self.multipath);
            return None;
        };
        fresh.ledger.take_over(&self.ledger);
        fresh.set_multipath(self.multipath);
        fresh.last_failover_us = self.last_failover_us;
        fresh.max_failover_us = self.max_failover_us;
        core::mem::swap(self, &mut *fresh);
        Some(fresh)
    }

    /// The QP's transport timeout and retry count as set at RTS (the group
    /// is built at RTR, before they are known): the sessions' budgets and
    /// stall detection follow them, and so does a group rebuilt later.
    pub(crate) fn set_transport(&mut self, retry_cnt: u8, rto_us: Option<u64>) {
        self.origin.retry_cnt = retry_cnt;
        self.origin.rto_us = rto_us;
        // The group's `retry_cnt` 7 means unlimited; the QP's means seven.
        self.group.set_retry_cnt(retry_cnt.min(6));
        self.group.set_rto_us(rto_us);
    }

    /// The peer's responder reorders (multipath agreed): the reorder guard
    /// is lifted, messages go where the policy says.
    pub(crate) fn set_multipath(&mut self, on: bool) {
        self.multipath = on;
        self.group.set_reorder_guard(self.configured_guard && !on);
        // Each session's congestion window follows what the peer's SACKs
        // tell (`rc::multipath`).
        self.group.set_windows(on);
    }

    /// Session `id`'s congestion window, to update.
    pub(crate) fn window_mut(&mut self, id: SessionId) -> Option<&mut PathWindow> {
        self.group.window_mut(id)
    }

    /// `n` packets session `id` carried were delivered (acknowledged, or
    /// held by the peer): its window grows, and it made progress (its
    /// retries are refilled, as by a completion). With the multipath
    /// transport a message's packets may take several sessions: each is
    /// credited with what it delivered.
    pub(crate) fn on_delivered(&mut self, id: SessionId, n: u32, now_us: u64) {
        if let Some(w) = self.group.window_mut(id) {
            w.on_delivered(n);
        }
        // (Not a failover's end: that is the next completion.)
        let _ = self.group.on_progress(id, now_us);
    }

    /// Session `id`'s own timer charged it a timeout (a whole RTO silent
    /// with packets in flight). Whether it went Down.
    pub(crate) fn session_timeout(&mut self, id: SessionId, now_us: u64) -> bool {
        self.group.on_session_timeout(id, now_us).unwrap_or(false)
    }

    /// The QP's transport timeout (`None`: it waits forever).
    pub(crate) fn rto_us(&self) -> Option<u64> {
        self.group.rto_us()
    }

    /// Asks for session `id` to get a fresh 5-tuple (its congestion stayed
    /// high); one at a time. Whether the work item has to run for it.
    pub(crate) fn want_replace(&mut self, id: SessionId) -> bool {
        // A failing session is the health machine's (probes, failover): a
        // fresh 5-tuple would declare it Up at once.
        if !self.is_multi()
            || !self.group.may_replace(id)
            || self.replace_wanted.is_some()
            || usize::from(id.0) >= self.flows.len()
        {
            return false;
        }
        self.replace_wanted = Some(id);
        true
    }

    /// Whether the next new message is a canary: a probe of a session
    /// that is not Up, which only real traffic can bring back (see
    /// `roce::session::health`).
    pub(crate) fn canary_pending(&self) -> bool {
        self.group.canary_pending()
    }

    /// Whether a replacement waits for the work item.
    pub(crate) fn replace_pending(&self) -> bool {
        self.replace_wanted.is_some()
    }

    /// Whether a duplicate probe is in flight (its re-ACK must stay
    /// unambiguous).
    pub(crate) fn probe_in_flight(&self) -> bool {
        self.probe.is_some()
    }

    /// Where a packet presumed lost on session `lost` is sent again: the
    /// next Up session after it (another path) not in `except` (bit `i`:
    /// session `i`), else `lost` itself; `None` if `lost` is in `except`
    /// too.
    pub(crate) fn resend_flow(
        &self,
        lost: Option<u8>,
        except: u64,
    ) -> Option<(SessionId, io::Flow)> {
        let n = self.group.len();
        let from = usize::from(lost.unwrap_or(0));
        let usable = |i: usize| i >= 64 || except & (1 << i) == 0;
        let up = (1..=n)
            .map(|k| from.wrapping_add(k) % n.max(1))
            .find(|&i| {
                usable(i)
                    && self
                        .group
                        .sessions()
                        .get(i)
                        .is_some_and(|s| s.state() == State::Up)
            })
            .or_else(|| usable(from).then_some(from))?;
        let id = u8::try_from(up).ok()?;
        Some((SessionId(id), *self.flows.get(up)?))
    }

    /// Session `id`.
    pub(crate) fn session(&self, id: SessionId) -> Option<&Session> {
        self.group.session(id)
    }

    /// Whether session `id` is Up.
    pub(crate) fn is_up(&self, id: SessionId) -> bool {
        self.group
            .session(id)
            .is_some_and(|s| s.state() == State::Up)
    }

    /// Whether session `id` is Down (not probing).
    pub(crate) fn is_down(&self, id: SessionId) -> bool {
        self.group
            .session(id)
            .is_some_and(|s| s.state() == State::Down)
    }

    /// How many sessions the group has.
    pub(crate) fn len(&self) -> usize {
        self.group.len()
    }

    /// Whether the group has several sessions (and so decides retries).
    pub(crate) fn is_multi(&self) -> bool {
        self.group.len() > 1
    }

    /// The sessions with their 5-tuples, for listing.
    pub(crate) fn sessions(&self) -> impl Iterator<Item = (&Session, &io::Flow)> {
        self.group.sessions().iter().zip(self.flows.iter())
    }

    /// Calls `report` with the index, state and 5-tuple of each session
    /// whose health state changed since the last call (or since the group
    /// was built).
    pub(crate) fn state_changes(&mut self, mut report: impl FnMut(usize, &Session, &io::Flow)) {
        let mut back_up = 0u64;
        let sessions = self.group.sessions().iter().zip(self.flows.iter());
        for (id, ((s, f), r)) in sessions.zip(self.reported.iter_mut()).enumerate() {
            if *r != s.state() {
                *r = s.state();
                report(id, s, f);
                if s.state() == State::Up && id < 64 {
                    back_up |= 1 << id;
                }
            }
        }
        // A session back Up starts its window over (what it could carry
        // before it failed says nothing now).
        // (Its set bits only: this runs every pass.)
        while back_up != 0 {
            let id = back_up.trailing_zeros() as u8;
            back_up &= back_up - 1;
            if let Some(w) = self.group.window_mut(SessionId(id)) {
                if w.is_active() {
                    w.start();
                }
            }
        }
    }

    /// The policy in use.
    pub(crate) fn policy(&self) -> Policy {
        self.group.config().policy
    }

    /// The sessions that are Up.
    pub(crate) fn up_ids(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.group
            .sessions()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state() == State::Up)
            .filter_map(|(i, _)| u8::try_from(i).ok().map(SessionId))
    }

    /// The session and flow packet `p` of a `wqe_len`-byte message goes
    /// out on; the first packet of each message (or of its resend) is
    /// reported to the group. A new message goes on `prefer` instead of
    /// the policy's choice while that session is Up (the multipath
    /// transport's choices: see `rc::multipath::preferred_session`).
    pub(crate) fn flow_for(
        &mut self,
        p: &RequestPacket,
        wqe_len: u32,
        mtu: u32,
        prefer: Option<SessionId>,
        now_us: u64,
    ) -> Option<(SessionId, io::Flow)> {
        let packets = wqe_len.div_ceil(mtu.max(1)).max(1);
        let sid = self.ledger.on_packet_preferring(
            &mut self.group,
            p.tag,
            p.retransmit,
            wqe_len,
            packets,
            now_us,
            prefer,
        );
        match self.flows.get(usize::from(sid.0)) {
            Some(f) => Some((sid, *f)),
            None => self.flows.first().map(|f| (SessionId(0), *f)),
        }
    }

    /// A packet (`bytes` of payload) of message `tag` went out on `to`,
    /// which may not be the session the message was counted on.
    pub(crate) fn sent_on(&mut self, tag: u32, to: SessionId, bytes: u32) {
        let from = self.ledger.session_of(tag);
        self.group.moved_packet(from, to, u64::from(bytes));
    }

    /// Message `tag` continued on another session than it started on, or
    /// a packet of it was resent: its completion gives no RTT sample.
    pub(crate) fn spread(&mut self, tag: u32) {
        self.ledger.spread(tag);
    }

    /// Work request `tag` completed successfully.
    pub(crate) fn on_completed(&mut self, tag: u32, now_us: u64) {
        self.progressed(now_us);
        self.ledger.on_completed(&mut self.group, tag, now_us);
    }

    /// Acknowledgements (or READ responses) advanced inside the message
    /// `tag`, still incomplete: the session that carried it delivers, so
    /// its retries are refilled as by a completion (a long message is
    /// acknowledged in parts, and a slow but steady one must not run out).
    pub(crate) fn on_partial_ack(&mut self, tag: u32, now_us: u64) {
        self.progressed(now_us);
        self.ledger.on_partial_ack(&mut self.group, tag, now_us);
    }

    /// The requester goes back to its oldest unacknowledged request
    /// (`oldest`) because of `why`: charges the session that carried it
    /// (`carrier`, if known per packet, else the message's) and picks
    /// where to resend. `Err` when every session has spent its retries
    /// (the request fails with `RETRY_EXC_ERR`).
    pub(crate) fn go_back(
        &mut self,
        why: GoBack,
        oldest: Option<u32>,
        carrier: Option<SessionId>,
        now_us: u64,
    ) -> Result {
        let charged = carrier
            .filter(|id| usize::from(id.0) < self.group.len())
            .unwrap_or_else(|| oldest.map_or(SessionId(0), |t| self.ledger.session_of(t)));
        let r = match why {
            GoBack::Timeout => self.group.on_timeout(charged, now_us),
            GoBack::SequenceNak => self.group.on_sequence_nak(charged, now_us),
            GoBack::Other => {
                self.ledger
                    .begin_round(&mut self.group, charged, oldest, now_us);
                return Ok(());
            }
        };
        let a = r.map_err(|_| ETIMEDOUT)?;
        if a.failed_over {
            self.stall_began(oldest);
        }
        self.ledger
            .begin_round(&mut self.group, a.resend_on, oldest, now_us);
        Ok(())
    }

    /// Traffic moved at `now_us`: a stall (if any) ended.
    fn progressed(&mut self, now_us: u64) {
        if let Some(since) = self.stalled_since_us.take() {
            let took = now_us.saturating_sub(since);
            self.last_failover_us = Some(took);
            self.max_failover_us = self.max_failover_us.max(took);
        }
        self.last_progress_us = now_us;
    }

    /// Notes that traffic stalled on a session and moves to another; the
    /// stall began when the oldest unacknowledged request was first sent,
    /// or at the last completion if that came later.
    fn stall_began(&mut self, oldest: Option<u32>) {
        if self.stalled_since_us.is_none() {
            let sent = oldest.map_or(0, |t| self.ledger.sent_us(t));
            self.stalled_since_us = Some(sent.max(self.last_progress_us));
        }
    }

    /// A session went down holding packets that are resent on a live one
    /// now (the multipath transport's stranded packets; `oldest` is the
    /// oldest unacknowledged request's tag): a failover, timed until the
    /// next completion.
    pub(crate) fn failover_began(&mut self, oldest: Option<u32>) {
        self.stall_began(oldest);
    }

    /// How long the last failover took (µs), if there was one.
    pub(crate) fn last_failover_us(&self) -> Option<u64> {
        self.last_failover_us
    }

    /// How long the longest failover took (µs).
    pub(crate) fn max_failover_us(&self) -> u64 {
        self.max_failover_us
    }

    /// Looks at the sessions' links again if any net device changed state
    /// since the last look: a session whose link went down is marked down
    /// at once (and one whose link came back is probed). Returns whether
    /// the unacknowledged requests must be resent now, on a live session
    /// (`oldest` is the oldest unacknowledged request's tag).
    pub(crate) fn refresh_links(
        &mut self,
        dev: &Device<SroceDevice>,
        oldest: Option<u32>,
        now_us: u64,
    ) -> bool {
        let epoch = super::events::link_epoch();
        if epoch == self.seen_epoch || self.links.is_empty() {
            return false;
        }
        self.seen_epoch = epoch;
        let Some(ndev) = dev.netdev(PORT) else {
            return false;
        };
        let mut resend = false;
        for i in 0..self.links.len() {
            let Some(l) = self.links.get_mut(i) else {
                break;
            };
            let up = ndev.net().link_up(l.ifindex);
            if up == l.up {
                continue;
            }
            l.up = up;
            let r = self
                .group
                .on_link(u8::try_from(i).unwrap_or(u8::MAX), up, now_us);
            resend |= self.resend_round(&r, oldest, now_us);
        }
        resend
    }

    /// Starts the go-back round the group asked for in `r`, if it did (a
    /// session holding unacknowledged requests went down; `oldest` is the
    /// oldest one's tag): whether to resend now.
    fn resend_round(&mut self, r: &PollResult, oldest: Option<u32>, now_us: u64) -> bool {
        let Some(on) = r.resend_on else {
            return false;
        };
        self.stall_began(oldest);
        self.ledger.begin_round(&mut self.group, on, oldest, now_us);
        true
    }

    /// Time-driven health (stall detection, probe scheduling): whether the
    /// work item should keep waking up for it, and a session to probe with
    /// a duplicate (one at a time, so its reply is unambiguous), or a
    /// resend because a session stalled (`oldest` is the oldest
    /// unacknowledged request's tag).
    pub(crate) fn poll(&mut self, oldest: Option<u32>, now_us: u64) -> Polled {
        if !self.is_multi() {
            return Polled {
                keep_polling: false,
                probe: None,
                resend: false,
            };
        }
        let r = self.group.poll(now_us);
        let resend = self.resend_round(&r, oldest, now_us);
        let due = r.duplicate_probes;
        let probe = (due != 0).then(|| SessionId(due.trailing_zeros() as u8));
        Polled {
            keep_polling: self.group.up_mask().count_ones() as usize != self.group.len(),
            probe,
            resend,
        }
    }

    /// The flow for the next datagram (`bytes` long) of a UD group: the
    /// policy's choice, with no acknowledgement to wait for.
    pub(crate) fn next_flow(&mut self, bytes: u32) -> Option<io::Flow> {
        let sid = self.group.choose().map_or(0, |c| c.session.0);
        let _ = self.group.on_datagram(SessionId(sid), u64::from(bytes));
        self.flows.get(usize::from(sid)).copied()
    }

    /// The 5-tuple of session `id`.
    pub(crate) fn flow(&self, id: SessionId) -> Option<io::Flow> {
        self.flows.get(usize::from(id.0)).copied()
    }

    /// A duplicate probe with PSN `psn` went out on session `id`.
    pub(crate) fn probe_sent(&mut self, id: SessionId, psn: Psn) {
        self.probe = Some((id.0, psn));
    }

    /// An ACK with PSN `psn` arrived while nothing was outstanding: if it
    /// answers the probe in flight, the probed session is healthy.
    pub(crate) fn on_idle_ack(&mut self, psn: Psn, now_us: u64) {
        if let Some((s, probe)) = self.probe {
            if probe_reply_matches(probe, psn, false) {
                self.probe = None;
                let _ = self.group.on_probe_reply(SessionId(s), now_us);
            }
        }
    }
}

/// Sends each flow of a group out through the link its session is on
/// (`specs`' local addresses index `links`).
fn pin_to_links(flows: &mut [io::Flow], specs: &[SessionSpec], links: &[Link]) {
    for (f, spec) in flows.iter_mut().zip(specs) {
        if let Some(l) = links.get(usize::from(spec.local_addr)) {
            f.out = io::OutPort::Ifindex(l.ifindex);
        }
    }
}

/// The `hash` policy's key for QP `qpn`: the session that leaves through
/// the (`qpn` mod number of links)-th of the group's distinct out links (in
/// ifindex order), so QPs with consecutive numbers spread over the links
/// deterministically; `qpn` when the routes cannot be looked up.
fn spread_key(dev: &Device<SroceDevice>, qpn: u32, flows: &[io::Flow]) -> u32 {
    let mut outs = [0i32; MAX_SESSIONS];
    for (o, f) in outs.iter_mut().zip(flows) {
        match io::out_ifindex(dev, f) {
            Ok(i) => *o = i,
            Err(_) => return qpn,
        }
    }
    let outs = &outs[..flows.len().min(MAX_SESSIONS)];
    // Kept in ifindex order as it fills: a few links want an insertion,
    // not `sort_unstable`, whose ordering-violation panic objtool does not
    // know as noreturn.
    let mut distinct = [0i32; MAX_SESSIONS];
    let mut n = 0;
    for &o in outs {
        let at = distinct[..n].partition_point(|&d| d < o);
        if at < n && distinct[at] == o {
            continue;
        }
        distinct.copy_within(at..n, at + 1);
        distinct[at] = o;
        n += 1;
    }
    let distinct = &distinct[..n];
    let Some(&want) = distinct.get(qpn as usize % n.max(1)) else {
        return qpn;
    };
    outs.iter()
        .position(|&o| o == want)
        .map_or(qpn, |i| i as u32)
}

/// Reserves `size - 1` extra source ports from `range` for the group whose
/// session 0 is `flows[0]`, preferring ports that leave through a net
/// device no session uses yet.
fn pick_ports(
    dev: &Device<SroceDevice>,
    qpn: u32,
    flows: &mut KVec<io::Flow>,
    held: &mut KVec<ReservedPort>,
    size: usize,
    range: PortRange,
) -> Result {
    let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
    let net = ndev.net();
    let base = flows.first().copied().ok_or(EINVAL)?;
    let mut used_devs: KVec<i32> = KVec::with_capacity(size, GFP_KERNEL)?;
    if let Ok(i) = io::out_ifindex(dev, &base) {
        used_devs.push(i, GFP_KERNEL)?;
    }
    let span = range.len().max(1);
    // Spread groups over the range: start where this QP's hash lands.
    let mut cursor = crate::roce::session::port_range::hash_32(qpn, 16) % span;
    while flows.len() < size {
        let mut fallback: Option<ReservedPort> = None;
        let mut chosen = None;
        let mut tries = 0u32;
        while tries < PORT_TRIES {
            let port = (u32::from(range.first()) + cursor % span) as u16;
            cursor = cursor.wrapping_add(1);
            tries += 1;
            if flows.iter().any(|f| f.src_port == port) {
                continue;
            }
            let candidate = io::Flow {
                src_port: port,
                ..base
            };
            let out = io::out_ifindex(dev, &candidate).ok();
            match out {
                Some(o) if !used_devs.contains(&o) => {
                    // A path no session takes yet.
                    if let Ok(r) = ReservedPort::new(net, port) {
                        used_devs.push(o, GFP_KERNEL)?;
                        chosen = Some(r);
                        break;
                    }
                }
                _ if fallback.is_none() => fallback = ReservedPort::new(net, port).ok(),
                _ if tries > PATH_TRIES => break,
                _ => {}
            }
        }
        let r = chosen.or(fallback).ok_or(EADDRINUSE)?;
        let mut f = base;
        f.src_port = r.port();
        f.out = io::OutPort::Routed;
        flows.push(f, GFP_KERNEL)?;
        held.push(r, GFP_KERNEL)?;
    }
    Ok(())
}
