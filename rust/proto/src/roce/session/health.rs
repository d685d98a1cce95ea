//! Per-session health: the Up / Down / Probing state machine, retry
//! budgets, probes, and the failover timing math.
//!
//! # States
//!
//! ```text
//!            consecutive RTOs >= threshold, or no ACK progress for
//!            stall_rtos x RTO with data outstanding, or link down,
//!            or retry budget exhausted
//!   +----+  ------------------------------------------------------>  +------+
//!   | Up |                                                           | Down |
//!   +----+  <---------------- ACK progress -----------------------   +------+
//!      ^                                                 probe due |   ^
//!      |  probe reply, or ACK progress                   (every P, |   | probe timeout
//!      |                                                 link up)  v   | (RTO), link down
//!      +-------------------------------------------------------  +---------+
//!                                                                | Probing |
//!                                                                +---------+
//! ```
//!
//! The driver owns the QP's retransmit timer, as in any RC stack. When it
//! fires, the timeout is charged to the session that carried the oldest
//! unacknowledged packet ([`Health::on_timeout`]); ACK progress for packets
//! sent on a session is credited to it ([`Health::on_progress`]). The
//! stall rule and probe scheduling run from [`Health::poll`], called with
//! the current time from the same timer.
//!
//! # Retry budget and `RETRY_EXC_ERR`
//!
//! Each session has its own copy of the QP's `retry_cnt`, refilled by ACK
//! progress on that session (also inside a message not yet complete). A timeout charged to a session with budget
//! left spends one retry; a timeout charged to a session whose budget is
//! already 0 marks it *exhausted*. As in rxe, `retry_cnt == 7` never runs
//! out. The QP fails a WR with `IB_WC_RETRY_EXC_ERR` only when **every**
//! session of its group is exhausted; a one-session group therefore fails
//! on exactly the timeout rxe fails on (the `retry_cnt + 1`-th without
//! progress). Duplicate probes never spend retries; a canary is a real
//! message and its timeout is charged like any other.
//!
//! # Probes
//!
//! RoCEv2 has no ping. A probe of session *s* is sent on *s*'s 5-tuple as
//! one of two things (the group picks, see
//! [`ProbeKind`](super::group::ProbeKind)):
//!
//! - **duplicate probe**, when the QP has nothing outstanding: a zero-length
//!   RDMA WRITE Only (RETH va 0, rkey 0, length 0) with AckReq and PSN =
//!   the last acknowledged PSN ([`probe_psn`]). Every responder treats it as
//!   a duplicate SEND/WRITE and only re-ACKs it (IBTA C9-105; rxe
//!   `duplicate_request()`), with PSN = its last acknowledged PSN, which is
//!   the probe's PSN since nothing else was outstanding. No state changes,
//!   no completion, harmless when lost. The reply is the ACK with exactly
//!   that PSN, provided no retransmission could have caused the same
//!   re-ACK ([`probe_reply_matches`]).
//! - **canary**, when data is outstanding (a duplicate's re-ACK then cannot
//!   be told from ordinary ACKs): the next new message is sent on *s*. An
//!   ACK covering it is progress on *s* (→ Up). If it is lost the responder
//!   NAKs the next message (PSN sequence error) or the timer fires; either
//!   is charged to *s* and it goes back to Down, and go-back-N resends from
//!   the canary on a live session.

use super::super::psn::Psn;

/// Health state of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum State {
    /// Making progress; may carry new messages.
    #[default]
    Up,
    /// Failed; carries nothing except when no session is Up (fallback).
    Down,
    /// Down, with a probe in flight.
    Probing,
}

/// Thresholds of the health machine (per device, overridable per QP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HealthConfig {
    /// Consecutive retransmit timeouts charged to a session that mark it
    /// Down (default 2; 0 is treated as 1).
    pub timeout_threshold: u8,
    /// A session with data outstanding and no ACK progress for this many
    /// RTOs is marked Down (default 3; a backstop to the timeout rule).
    pub stall_rtos: u8,
    /// Interval `P` between probes of a Down session, in µs (default
    /// 10 ms).
    pub probe_interval_us: u64,
    /// The QP's `retry_cnt` (0..=7; 7 = unlimited, as rxe does).
    pub retry_cnt: u8,
}

impl HealthConfig {
    /// The defaults: threshold 2, stall 3 RTOs, probe every 10 ms,
    /// `retry_cnt` 7.
    pub const DEFAULT: HealthConfig = HealthConfig {
        timeout_threshold: 2,
        stall_rtos: 3,
        probe_interval_us: 10_000,
        retry_cnt: 7,
    };

    /// `timeout_threshold`, at least 1.
    pub const fn threshold(&self) -> u8 {
        if self.timeout_threshold == 0 {
            1
        } else {
            self.timeout_threshold
        }
    }

    /// `true` if the retry count never runs out (`retry_cnt == 7`).
    pub const fn unlimited_retries(&self) -> bool {
        self.retry_cnt >= 7
    }
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig::DEFAULT
    }
}

/// What a health transition asks of the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HealthEvent {
    /// Nothing changed.
    None,
    /// The session went Down: its unacknowledged packets must be resent
    /// (go-back-N) on another session.
    WentDown,
    /// A probe is due on this session (now Probing).
    ProbeDue,
    /// The probe got no reply within the RTO; back to Down.
    ProbeFailed,
    /// The session came back Up.
    WentUp,
}

/// Health of one session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Health {
    state: State,
    link_up: bool,
    exhausted: bool,
    consecutive_timeouts: u8,
    retries_left: u8,
    /// Start of the current no-progress period (last ACK progress, last
    /// timeout, or the send that made data outstanding).
    last_progress_us: u64,
    /// When the session last went Down (0 = never).
    failed_at_us: u64,
    next_probe_us: u64,
    probe_sent_us: u64,
}

impl Health {
    /// A healthy session at time `now`.
    pub const fn new(cfg: &HealthConfig, now: u64) -> Self {
        Health {
            state: State::Up,
            link_up: true,
            exhausted: false,
            consecutive_timeouts: 0,
            retries_left: cfg.retry_cnt,
            last_progress_us: now,
            failed_at_us: 0,
            next_probe_us: 0,
            probe_sent_us: 0,
        }
    }

    /// Current state.
    pub const fn state(&self) -> State {
        self.state
    }

    /// `true` if Up.
    pub const fn is_up(&self) -> bool {
        matches!(self.state, State::Up)
    }

    /// `true` if the retry budget is spent (see the module docs).
    pub const fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// `true` unless the netdev of the session's local address is down.
    pub const fn link_up(&self) -> bool {
        self.link_up
    }

    /// Retransmit timeouts charged since the last progress.
    pub const fn consecutive_timeouts(&self) -> u8 {
        self.consecutive_timeouts
    }

    /// Retries left in the budget.
    pub const fn retries_left(&self) -> u8 {
        self.retries_left
    }

    /// When the session last went Down (0 if never).
    pub const fn failed_at_us(&self) -> u64 {
        self.failed_at_us
    }

    /// When the next probe is due (meaningful while Down).
    pub const fn next_probe_us(&self) -> u64 {
        self.next_probe_us
    }

    fn go_down(&mut self, now: u64, cfg: &HealthConfig) {
        self.state = State::Down;
        self.failed_at_us = now;
        self.next_probe_us = now.saturating_add(cfg.probe_interval_us);
    }

    /// Data was sent on the session; `had_outstanding` tells whether it
    /// already had unacknowledged data (if not, the stall clock starts now).
    pub fn on_send(&mut self, now: u64, had_outstanding: bool) {
        if !had_outstanding {
            self.last_progress_us = now;
        }
    }

    /// The QP's retry count changed (`modify_qp` at RTS): the budget is
    /// `cfg.retry_cnt` from now on, full.
    pub fn set_retries(&mut self, cfg: &HealthConfig) {
        self.retries_left = cfg.retry_cnt;
        self.exhausted = false;
    }

    /// ACK progress for data sent on this session: refills the retry
    /// budget and brings a Down/Probing session (with its link up) back Up.
    pub fn on_progress(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        self.last_progress_us = now;
        self.consecutive_timeouts = 0;
        self.retries_left = cfg.retry_cnt;
        self.exhausted = false;
        if self.state != State::Up && self.link_up {
            self.state = State::Up;
            HealthEvent::WentUp
        } else {
            HealthEvent::None
        }
    }

    /// The reply to a duplicate probe arrived (see [`probe_reply_matches`]).
    pub fn on_probe_reply(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        self.on_progress(now, cfg)
    }

    /// A retransmit timeout charged to this session (it carried the oldest
    /// unacknowledged packet). Spends one retry, or marks the session
    /// exhausted if none is left; goes Down at the threshold, on exhaustion,
    /// or if it was Probing (a lost canary).
    pub fn on_timeout(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        if cfg.unlimited_retries() {
            // rxe: retry_cnt 7 never decrements.
        } else if self.retries_left == 0 {
            self.exhausted = true;
        } else {
            self.retries_left = self.retries_left.saturating_sub(1);
        }
        self.count_timeout(now, cfg)
    }

    /// A timeout of the session's own retransmit timer (multipath: a whole
    /// RTO silent with packets in flight, which were resent elsewhere):
    /// counts towards Down as a transport timeout does, but spends no
    /// retry. Retries are the QP's `retry_cnt`, spent by its transport
    /// timer alone, as over one path.
    pub fn on_session_timeout(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        self.count_timeout(now, cfg)
    }

    fn count_timeout(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        self.consecutive_timeouts = self.consecutive_timeouts.saturating_add(1);
        self.last_progress_us = now;
        match self.state {
            State::Up => {
                if self.consecutive_timeouts >= cfg.threshold() || self.exhausted {
                    self.go_down(now, cfg);
                    HealthEvent::WentDown
                } else {
                    HealthEvent::None
                }
            }
            State::Probing => {
                self.go_down(now, cfg);
                HealthEvent::ProbeFailed
            }
            State::Down => {
                // A fallback retransmission on a Down session failed again.
                self.failed_at_us = now;
                HealthEvent::None
            }
        }
    }

    /// A PSN sequence error NAK showed that a message sent on this session
    /// was lost while later ones (on other sessions) arrived. Ends a canary
    /// probe (back to Down); on an Up session it is an ordinary loss.
    pub fn on_sequence_nak(&mut self, now: u64, cfg: &HealthConfig) -> HealthEvent {
        if self.state == State::Probing {
            self.go_down(now, cfg);
            HealthEvent::ProbeFailed
        } else {
            HealthEvent::None
        }
    }

    /// Link state of the session's netdev changed. Down is immediate; Up
    /// makes a probe due at once (the session returns only when it answers).
    pub fn on_link(&mut self, up: bool, now: u64, cfg: &HealthConfig) -> HealthEvent {
        self.link_up = up;
        if up {
            if self.state != State::Up {
                self.state = State::Down;
                self.next_probe_us = now;
            }
            HealthEvent::None
        } else if self.state == State::Up {
            self.go_down(now, cfg);
            HealthEvent::WentDown
        } else {
            self.state = State::Down;
            HealthEvent::None
        }
    }

    /// Time-driven transitions at `now`: the stall rule (Up with data
    /// `outstanding` and no progress for `stall_rtos` x `rto_us`), probe
    /// timeouts, and due probes. `rto_us` is `None` for an infinite
    /// `local_ack_timeout`; probes then time out after the probe interval.
    pub fn poll(
        &mut self,
        now: u64,
        outstanding: bool,
        rto_us: Option<u64>,
        cfg: &HealthConfig,
    ) -> HealthEvent {
        match self.state {
            State::Up => {
                if let Some(rto) = rto_us {
                    let limit = rto.saturating_mul(u64::from(cfg.stall_rtos.max(1)));
                    if outstanding && now.saturating_sub(self.last_progress_us) >= limit {
                        self.go_down(now, cfg);
                        return HealthEvent::WentDown;
                    }
                }
                HealthEvent::None
            }
            State::Probing => {
                let timeout = rto_us.unwrap_or(cfg.probe_interval_us).max(1);
                if now.saturating_sub(self.probe_sent_us) >= timeout {
                    let failed_at = self.failed_at_us;
                    self.go_down(now, cfg);
                    // A failed probe is not a new failure of the path.
                    self.failed_at_us = failed_at;
                    HealthEvent::ProbeFailed
                } else {
                    HealthEvent::None
                }
            }
            State::Down => {
                if self.link_up && now >= self.next_probe_us {
                    self.state = State::Probing;
                    self.probe_sent_us = now;
                    HealthEvent::ProbeDue
                } else {
                    HealthEvent::None
                }
            }
        }
    }
}

/// The QP retransmit timeout for IBTA `local_ack_timeout` `t`:
/// 4.096 µs x 2^t, rounded up to whole µs (rxe: `nsecs_to_jiffies(4096ULL
/// << t)`, at least one jiffy). `None` for `t == 0` (infinite) and `t > 31`
/// (rejected by `modify_qp`).
pub const fn rto_us_from_local_ack_timeout(t: u8) -> Option<u64> {
    if t == 0 || t > 31 {
        None
    } else {
        Some((4096u64 << t).div_ceil(1000))
    }
}

/// Worst-case failover time in µs: from a path failure until the
/// unacknowledged data is resent on another session.
///
/// After the failure no ACK can move past the first lost packet, so the
/// last arming of the QP timer (ACK progress, a NAK-driven or timed-out
/// resend) is at most one round trip `rtt_us` after the failure. Each of
/// the `threshold` timeouts then fires at most `rto + tick` after the
/// previous arming (`tick_us`: how late the timer may fire, e.g. one
/// jiffy), and the last one fails over. Bound: `rtt + threshold x (rto +
/// tick)`. With the default threshold 2 this is within 3 x RTO whenever
/// `rtt + 2 x tick <= RTO`, which any working timeout satisfies (an RTO
/// below the RTT retransmits spuriously). A link-down notification fails
/// over at once (bound 0).
pub const fn failover_bound_us(rto_us: u64, threshold: u8, tick_us: u64, rtt_us: u64) -> u64 {
    let t = if threshold == 0 { 1 } else { threshold };
    rtt_us.saturating_add((t as u64).saturating_mul(rto_us.saturating_add(tick_us)))
}

/// Worst-case time in µs from a path's recovery until its session is Up
/// again: a probe sent just before the recovery is lost and times out
/// (`rto + tick`), the next is sent `P` later (`+ tick`), and its reply
/// takes one round trip `rtt <= rto`.
pub const fn return_bound_us(
    rto_us: u64,
    probe_interval_us: u64,
    rtt_us: u64,
    tick_us: u64,
) -> u64 {
    rto_us
        .saturating_add(probe_interval_us)
        .saturating_add(rtt_us)
        .saturating_add(tick_us.saturating_mul(2))
}

/// The PSN of a duplicate probe: the last acknowledged PSN, one before
/// the oldest unacknowledged one (`next_psn` when nothing is outstanding).
/// The responder has already accepted it, so it can only be a duplicate.
pub const fn probe_psn(oldest_unacked: Psn) -> Psn {
    oldest_unacked.wrapping_sub(1)
}

/// Whether an ACK with PSN `ack_psn` answers a duplicate probe with PSN
/// `probe`.
///
/// A responder re-ACKs a duplicate with the duplicate's own PSN (sroce) or
/// with its last acknowledged PSN (rxe). The probe's PSN is the last PSN the
/// requester saw acknowledged, and every ACK for new data carries a later
/// PSN, so an ACK with exactly the probe's PSN can only come from a
/// duplicate: the probe, or a retransmitted packet the responder already
/// had. The reply therefore matches iff `ack_psn == probe` and no such
/// duplicate can be in flight: `resend_near` must be `true` if any go-back-N
/// resend was sent from one RTO before the probe until now. (A re-ACK with a
/// later PSN, from an rxe responder that new data reached meanwhile, is
/// inconclusive: the probe is simply retried.)
pub fn probe_reply_matches(probe: Psn, ack_psn: Psn, resend_near: bool) -> bool {
    !resend_near && ack_psn == probe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_table() {
        assert_eq!(rto_us_from_local_ack_timeout(0), None);
        assert_eq!(rto_us_from_local_ack_timeout(1), Some(9));
        assert_eq!(rto_us_from_local_ack_timeout(14), Some(67_109));
        assert_eq!(rto_us_from_local_ack_timeout(31), Some(8_796_093_023));
        assert_eq!(rto_us_from_local_ack_timeout(32), None);
    }

    #[test]
    fn two_timeouts_then_down_then_probe_then_up() {
        let cfg = HealthConfig::DEFAULT;
        let mut h = Health::new(&cfg, 0);
        h.on_send(0, false);
        assert_eq!(h.on_timeout(100, &cfg), HealthEvent::None);
        assert_eq!(h.on_timeout(200, &cfg), HealthEvent::WentDown);
        assert_eq!(h.state(), State::Down);
        assert_eq!(h.poll(300, false, Some(100), &cfg), HealthEvent::None);
        assert_eq!(
            h.poll(10_200, false, Some(100), &cfg),
            HealthEvent::ProbeDue
        );
        assert_eq!(
            h.poll(10_300, false, Some(100), &cfg),
            HealthEvent::ProbeFailed
        );
        assert_eq!(h.failed_at_us(), 200);
        assert_eq!(
            h.poll(20_300, false, Some(100), &cfg),
            HealthEvent::ProbeDue
        );
        assert_eq!(h.on_probe_reply(20_350, &cfg), HealthEvent::WentUp);
        assert!(h.is_up());
    }

    #[test]
    fn retry_budget() {
        let cfg = HealthConfig {
            retry_cnt: 1,
            timeout_threshold: 9,
            ..HealthConfig::DEFAULT
        };
        let mut h = Health::new(&cfg, 0);
        assert_eq!(h.on_timeout(1, &cfg), HealthEvent::None);
        assert!(!h.is_exhausted());
        assert_eq!(h.on_timeout(2, &cfg), HealthEvent::WentDown);
        assert!(h.is_exhausted());
        h.on_progress(3, &cfg);
        assert!(!h.is_exhausted() && h.is_up());
    }

    #[test]
    fn session_timeouts_go_down_without_spending_retries() {
        let cfg = HealthConfig {
            retry_cnt: 1,
            ..HealthConfig::DEFAULT
        };
        let mut h = Health::new(&cfg, 0);
        assert_eq!(h.on_session_timeout(1, &cfg), HealthEvent::None);
        // One transport timeout after it: the threshold (2), counted
        // together; the retry it spends is the first.
        assert_eq!(h.on_timeout(2, &cfg), HealthEvent::WentDown);
        assert!(!h.is_exhausted());
        assert_eq!(h.retries_left(), 0);
        h.on_progress(3, &cfg);
        for t in 4..20 {
            let _ = h.on_session_timeout(t, &cfg);
        }
        assert_eq!(h.state(), State::Down);
        assert!(!h.is_exhausted() && h.retries_left() == 1);
    }

    #[test]
    fn link_and_stall() {
        let cfg = HealthConfig::DEFAULT;
        let mut h = Health::new(&cfg, 0);
        assert_eq!(h.on_link(false, 5, &cfg), HealthEvent::WentDown);
        assert_eq!(h.poll(1_000_000, false, Some(10), &cfg), HealthEvent::None);
        h.on_link(true, 1_000_001, &cfg);
        assert_eq!(
            h.poll(1_000_001, false, Some(10), &cfg),
            HealthEvent::ProbeDue
        );
        let mut h = Health::new(&cfg, 0);
        h.on_send(10, false);
        assert_eq!(h.poll(39, true, Some(10), &cfg), HealthEvent::None);
        assert_eq!(h.poll(40, true, Some(10), &cfg), HealthEvent::WentDown);
        assert_eq!(probe_psn(Psn::ZERO), Psn::MAX);
        assert!(probe_reply_matches(Psn::new(4), Psn::new(4), false));
        assert!(!probe_reply_matches(Psn::new(4), Psn::new(5), false));
        assert!(!probe_reply_matches(Psn::new(4), Psn::new(4), true));
        assert!(failover_bound_us(1000, 2, 400, 200) <= 3000);
    }
}
