//! Per-session retransmit timers of the multipath transport.
//!
//! The QP's one transport timer (`local_ack_timeout`) fires when the oldest
//! unacknowledged PSN made no progress for a whole RTO. The scoreboard
//! finds most losses sooner: a packet is presumed lost once a packet sent
//! after it on the same session arrived. What it cannot find is a session
//! whose packets in flight are *all* lost (a tail loss, a burst that took a
//! whole window, a path that just failed): nothing sent after them on that
//! session arrives, so no SACK shows them, and they wait for the QP's
//! timer while the other sessions carry on.
//!
//! So each session keeps a timer of its own, as TCP keeps one per
//! connection (RFC 6298, 5.1-5.3): it runs while the session has packets
//! in flight, from the moment it started sending after being idle or from
//! its last delivery (acknowledged, or held by the responder), whichever
//! is later. Its period is the session's RTO estimate (SRTT + 4 RTTVAR, at
//! least [`MIN_PERIOD_US`]), doubled after each expiry without a delivery
//! in between, and at most half the QP's RTO, so it fires before the
//! transport timer would. On expiry the caller presumes the session's
//! packets in flight lost, counts them against its loss meter
//! (`super::congestion`), resends them on another Up session and cuts
//! the session's window to the minimum.
//!
//! Health is charged at the QP's scale, not the session timer's: an expiry
//! charges the session one timeout only after a whole QP RTO of silence
//! (packets in flight, nothing delivered) since it went silent or was last
//! charged, by this timer or the transport timer. So a session timer finds
//! lost packets sooner, and fails a path only after a whole RTO without a
//! delivery on it. Its charges spend no retry (`Health::on_session_timeout`): the
//! QP's `retry_cnt` is spent by the transport timer alone, as over one
//! path, so a QP whose peer is unreachable fails after as many timeouts
//! as without session timers.

/// The shortest period, in µs: below it an expiry would more likely be a
/// late delivery (a scheduling delay of the receiving or sending host)
/// than a loss.
pub const MIN_PERIOD_US: u64 = 5_000;

/// The longest period when the QP waits forever (`local_ack_timeout` 0):
/// a session's lost tail is still resent elsewhere.
pub const MAX_PERIOD_US: u64 = 1_000_000;

/// Doublings of the period at most.
const MAX_BACKOFF: u8 = 16;

/// One session's timer. Times in µs on the caller's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QuietTimer {
    /// Start of the running period (meaningful while the session has
    /// packets in flight).
    started_us: u64,
    /// Since when the session has delivered nothing with packets in
    /// flight, or was last charged a timeout: the health's clock.
    charge_from_us: u64,
    /// Expiries since the last delivery.
    backoff: u8,
}

impl QuietTimer {
    /// A timer that has not run.
    pub const fn new() -> Self {
        QuietTimer {
            started_us: 0,
            charge_from_us: 0,
            backoff: 0,
        }
    }

    /// The session sent a packet at `now`; `was_idle`: it had none in
    /// flight before. An idle session's timer starts now; after an expiry
    /// (backed off) its silence goes on.
    pub fn on_sent(&mut self, now: u64, was_idle: bool) {
        if !was_idle {
            return;
        }
        self.started_us = now;
        if self.backoff == 0 {
            self.charge_from_us = now;
        }
    }

    /// The session delivered packets at `now`: its timer restarts and its
    /// silence ends.
    pub fn on_delivered(&mut self, now: u64) {
        self.started_us = now;
        self.charge_from_us = now;
        self.backoff = 0;
    }

    /// The transport timer charged the session a timeout at `now` (its
    /// next charge is a whole QP RTO away).
    pub fn on_charged(&mut self, now: u64) {
        self.charge_from_us = now;
    }

    /// The session's silence at `now` says nothing about its path: the
    /// requester is going back N or waits out an RNR NAK, or responses to
    /// an earlier READ or atomic are still coming in (acknowledgements
    /// wait for them). Its period and the health's clock start again;
    /// its backoff stays.
    pub fn restart(&mut self, now: u64) {
        self.started_us = now;
        self.charge_from_us = now;
    }

    /// The session got a fresh 5-tuple at `now`: a new path, a new timer.
    pub fn reset(&mut self, now: u64) {
        *self = QuietTimer {
            started_us: now,
            charge_from_us: now,
            backoff: 0,
        };
    }

    /// The period the timer runs for now: `est_rto_us` (the session's RTO
    /// estimate) at least [`MIN_PERIOD_US`], doubled per expiry, at most
    /// half of `qp_rto_us` ([`MAX_PERIOD_US`] if the QP waits forever);
    /// that most if the session has no RTT sample yet (a session whose
    /// messages all moved partway to another gives none). `None` (no
    /// timer) when even the minimum is above that (the transport timer is
    /// as quick), or the estimate is: the path's round trips (a deep
    /// queue) are too long for a silence that short to tell a loss from
    /// a delay.
    pub fn period_us(&self, est_rto_us: Option<u64>, qp_rto_us: Option<u64>) -> Option<u64> {
        let cap = qp_rto_us.map_or(MAX_PERIOD_US, |r| r / 2);
        if cap < MIN_PERIOD_US || est_rto_us.is_some_and(|e| e > cap) {
            return None;
        }
        let base = est_rto_us.unwrap_or(cap).max(MIN_PERIOD_US);
        Some(base.saturating_mul(1 << self.backoff).min(cap))
    }

    /// When the running period ends, for `period_us` (see
    /// [`Self::period_us`]).
    pub const fn deadline_us(&self, period_us: u64) -> u64 {
        self.started_us.saturating_add(period_us)
    }

    /// The timer expired at `now` (the caller presumes the session's
    /// packets in flight lost): the next period is twice as long. Returns
    /// whether the session is charged a timeout: `qp_rto_us` has passed
    /// since it went silent or was last charged.
    pub fn on_expired(&mut self, now: u64, qp_rto_us: Option<u64>) -> bool {
        self.started_us = now;
        self.backoff = self.backoff.saturating_add(1).min(MAX_BACKOFF);
        let charge = qp_rto_us.is_some_and(|r| now.saturating_sub(self.charge_from_us) >= r);
        if charge {
            self.charge_from_us = now;
        }
        charge
    }

    /// Expiries since the last delivery.
    pub const fn backoff(&self) -> u8 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn period_follows_the_estimate_within_its_bounds() {
        let t = QuietTimer::new();
        // Below the minimum: the minimum; no sample yet: the most.
        assert_eq!(t.period_us(Some(100), Some(67_000)), Some(MIN_PERIOD_US));
        assert_eq!(t.period_us(None, Some(67_000)), Some(33_500));
        assert_eq!(t.period_us(Some(12_000), Some(67_000)), Some(12_000));
        // At most half the QP's RTO; an estimate above it: no timer.
        assert_eq!(t.period_us(Some(33_500), Some(67_000)), Some(33_500));
        assert_eq!(t.period_us(Some(200_000), Some(67_000)), None);
        // A QP RTO too short for the minimum: the transport timer alone.
        assert_eq!(t.period_us(Some(100), Some(8_000)), None);
        // Waiting forever: bounded all the same.
        assert_eq!(t.period_us(Some(500_000), None), Some(500_000));
        assert_eq!(t.period_us(Some(5_000_000), None), None);
        // Backed off as far as it goes: still the most.
        let mut t = QuietTimer::new();
        for _ in 0..20 {
            let _ = t.on_expired(0, None);
        }
        assert_eq!(t.period_us(Some(900_000), None), Some(MAX_PERIOD_US));
        assert_eq!(t.period_us(None, Some(67_000)), Some(33_500));
    }

    #[test]
    fn expiries_back_off_and_a_delivery_resets() {
        let mut t = QuietTimer::new();
        t.on_sent(1_000, true);
        let rto = Some(67_000);
        let p0 = t.period_us(Some(6_000), rto).unwrap();
        assert_eq!(t.deadline_us(p0), 7_000);
        assert!(!t.on_expired(7_000, rto));
        let p1 = t.period_us(Some(6_000), rto).unwrap();
        assert_eq!(p1, 12_000);
        // Resent elsewhere; the next packet on it finds it idle, but the
        // silence goes on and the period stays backed off.
        t.on_sent(8_000, true);
        assert_eq!(t.deadline_us(p1), 20_000);
        assert!(!t.on_expired(20_000, rto));
        assert_eq!(t.period_us(Some(6_000), rto), Some(24_000));
        t.on_delivered(21_000);
        assert_eq!(t.backoff(), 0);
        assert_eq!(
            t.deadline_us(t.period_us(Some(6_000), rto).unwrap()),
            27_000
        );
        // Sending more while packets are in flight moves nothing.
        t.on_sent(22_000, false);
        assert_eq!(t.deadline_us(6_000), 27_000);
    }

    #[test]
    fn charges_once_per_qp_rto_of_silence() {
        let rto = 67_000;
        let mut t = QuietTimer::new();
        t.on_sent(0, true);
        let mut now = 0;
        let mut charges = Vec::new();
        while now < 300_000 {
            now = t.deadline_us(t.period_us(Some(5_000), Some(rto)).unwrap());
            if t.on_expired(now, Some(rto)) {
                charges.push(now);
            }
            t.on_sent(now, true);
        }
        assert!(!charges.is_empty());
        assert!(charges[0] >= rto);
        for w in charges.windows(2) {
            assert!(w[1] - w[0] >= rto, "{charges:?}");
        }
        // A charge by the transport timer counts too.
        let mut t = QuietTimer::new();
        t.on_sent(0, true);
        t.on_charged(60_000);
        assert!(!t.on_expired(70_000, Some(rto)));
        assert!(t.on_expired(127_000, Some(rto)));
    }
}
