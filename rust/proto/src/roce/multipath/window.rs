//! Each session's congestion window, and which session has the most room.
//!
//! With the multipath transport the requester knows per session what it
//! delivered (acknowledged, or held by the responder) and what it lost (a
//! later packet on the same session arrived first: see
//! [`super::scoreboard`]). Each session keeps a window of packets in
//! flight from that, as TCP does per connection (RFC 5681's slow start and
//! congestion avoidance; one cut per window of data, as NewReno's
//! recovery): it doubles per round trip up to the threshold, then grows by
//! one packet per window delivered; a loss halves it once per round of
//! sends; a transport timeout with packets in flight on the session drops
//! it to the minimum.
//!
//! New packets go only where there is room, so a congested or slow path
//! gets less, and a loss on one path does not slow the others. Among the
//! sessions with room, [`drain_time`] estimates when a packet would be
//! delivered on each (what is ahead of it over the session's rate, its
//! window per round-trip time): the choice follows both windows and RTTs.

use super::sent_before;

/// A session's congestion window, in packets. `cwnd` 0: not in use (the
/// connection does not spread; nothing is limited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathWindow {
    cwnd: u32,
    ssthresh: u32,
    /// Deliveries towards the next packet of growth (congestion avoidance).
    acc: u32,
    /// The session's send sequence number at the last cut: a loss of a
    /// packet sent before it belongs to the same episode.
    recover: Option<u32>,
    /// Cuts so far (losses and timeouts that reduced the window).
    cuts: u32,
}

impl PathWindow {
    /// The smallest window (packets): room for a loss to be detected by a
    /// later packet on the same session.
    pub const MIN: u32 = 2;
    /// The window a session starts with.
    pub const INITIAL: u32 = 16;
    /// The largest window (the responder holds 256 PSNs per connection).
    pub const MAX: u32 = 256;

    /// Not in use.
    pub const UNUSED: PathWindow = PathWindow {
        cwnd: 0,
        ssthresh: 0,
        acc: 0,
        recover: None,
        cuts: 0,
    };

    /// A fresh window (a new session or a new 5-tuple): slow start from
    /// [`Self::INITIAL`]. The cut count is kept.
    pub fn start(&mut self) {
        *self = PathWindow {
            cwnd: Self::INITIAL,
            ssthresh: Self::MAX,
            acc: 0,
            recover: None,
            cuts: self.cuts,
        };
    }

    /// A fresh window for what the session sends from `next_seq` on (a new
    /// 5-tuple): as [`Self::start`], and the loss of a packet sent before
    /// (on the old path) does not cut it: it says nothing of the path the
    /// window is for now.
    pub fn start_at(&mut self, next_seq: u32) {
        self.start();
        self.recover = Some(next_seq);
    }

    /// Whether the window is in use.
    pub const fn is_active(&self) -> bool {
        self.cwnd != 0
    }

    /// The window, packets (0: not in use).
    pub const fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold, packets.
    pub const fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// How many times the window was cut.
    pub const fn cuts(&self) -> u32 {
        self.cuts
    }

    /// Whether one more packet fits with `in_flight` on its way (always,
    /// when not in use).
    pub const fn has_room(&self, in_flight: u32) -> bool {
        self.cwnd == 0 || in_flight < self.cwnd
    }

    /// `n` packets of the session were delivered (acknowledged, or held by
    /// the responder).
    pub fn on_delivered(&mut self, n: u32) {
        if self.cwnd == 0 || n == 0 {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd = self
                .cwnd
                .saturating_add(n)
                .min(self.ssthresh.max(Self::MIN));
            return;
        }
        self.acc = self.acc.saturating_add(n);
        while self.acc >= self.cwnd && self.cwnd < Self::MAX {
            self.acc = self.acc.saturating_sub(self.cwnd);
            self.cwnd = self.cwnd.saturating_add(1);
        }
        if self.cwnd >= Self::MAX {
            self.cwnd = Self::MAX;
            self.acc = 0;
        }
    }

    /// A packet the session sent as its `seq`-th was lost, the session's
    /// next send being `next_seq`: the window halves, unless the loss
    /// belongs to the episode of the last cut (sent before it). Whether
    /// it was cut.
    pub fn on_loss(&mut self, seq: u32, next_seq: u32) -> bool {
        let episode = self.recover.is_some_and(|r| sent_before(seq, r, next_seq));
        if self.cwnd == 0 || episode {
            return false;
        }
        self.ssthresh = (self.cwnd / 2).max(Self::MIN);
        self.cwnd = self.ssthresh;
        self.acc = 0;
        self.recover = Some(next_seq);
        self.cuts = self.cuts.saturating_add(1);
        true
    }

    /// The transport timer expired with packets of the session in flight
    /// (`next_seq`: its next send): back to the minimum, slow start to
    /// half the window.
    pub fn on_timeout(&mut self, next_seq: u32) {
        if self.cwnd == 0 {
            return;
        }
        self.ssthresh = (self.cwnd / 2).max(Self::MIN);
        self.cwnd = Self::MIN;
        self.acc = 0;
        self.recover = Some(next_seq);
        self.cuts = self.cuts.saturating_add(1);
    }
}

/// When a packet sent now on a session would be delivered, in the units
/// of `srtt_us` over the window: `(in_flight + 1) * srtt / cwnd`, the
/// packets ahead of it at the session's rate (a window per round trip).
/// An unknown RTT (0) counts as `default_rtt_us`; a window not in use as
/// [`PathWindow::MAX`].
pub fn drain_time(in_flight: u32, w: &PathWindow, srtt_us: u64, default_rtt_us: u64) -> u64 {
    let rtt = if srtt_us == 0 {
        default_rtt_us
    } else {
        srtt_us
    };
    let cwnd = if w.cwnd == 0 { PathWindow::MAX } else { w.cwnd };
    u64::from(in_flight)
        .saturating_add(1)
        .saturating_mul(rtt.max(1))
        .saturating_mul(1024)
        .checked_div(u64::from(cwnd))
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> PathWindow {
        let mut w = PathWindow::UNUSED;
        w.start();
        w
    }

    #[test]
    fn unused_windows_limit_nothing() {
        let mut w = PathWindow::UNUSED;
        assert!(w.has_room(u32::MAX - 1));
        w.on_delivered(10);
        assert!(!w.on_loss(0, 1));
        w.on_timeout(1);
        assert_eq!(w, PathWindow::UNUSED);
    }

    #[test]
    fn slow_start_then_one_packet_per_window() {
        let mut w = started();
        assert_eq!(w.cwnd(), PathWindow::INITIAL);
        assert!(w.has_room(15) && !w.has_room(16));
        w.on_delivered(16);
        assert_eq!(w.cwnd(), 32);
        // A loss halves it and ends slow start.
        assert!(w.on_loss(40, 50));
        assert_eq!((w.cwnd(), w.ssthresh()), (16, 16));
        // Congestion avoidance: one packet per window delivered.
        w.on_delivered(15);
        assert_eq!(w.cwnd(), 16);
        w.on_delivered(1);
        assert_eq!(w.cwnd(), 17);
        w.on_delivered(17 + 18);
        assert_eq!(w.cwnd(), 19);
    }

    #[test]
    fn one_cut_per_episode() {
        let mut w = started();
        w.on_delivered(48);
        assert_eq!(w.cwnd(), 64);
        assert!(w.on_loss(10, 100));
        // Sent before the cut: same episode.
        assert!(!w.on_loss(99, 120));
        assert_eq!(w.cwnd(), 32);
        // Sent after it: a new one.
        assert!(w.on_loss(100, 130));
        assert_eq!(w.cwnd(), 16);
        assert_eq!(w.cuts(), 2);
        // Never below the minimum.
        for s in 0..10u32 {
            let _ = w.on_loss(200 + s * 10, 200 + s * 10 + 1);
        }
        assert_eq!(w.cwnd(), PathWindow::MIN);
        // A recovery point 2^30 sends or more behind is over.
        let mut w = started();
        assert!(w.on_loss(5, 10));
        assert!(!w.on_loss(9, 1 << 29));
        assert!(w.on_loss(9, (1 << 30) + 10));
        // Sequence numbers wrap.
        let mut w = started();
        assert!(w.on_loss(u32::MAX - 1, u32::MAX));
        assert!(!w.on_loss(u32::MAX - 2, 3));
        assert!(w.on_loss(u32::MAX, 4));
    }

    #[test]
    fn timeouts_restart_slowly_and_growth_stops_at_the_maximum() {
        let mut w = started();
        w.on_delivered(1000);
        assert_eq!(w.cwnd(), PathWindow::MAX);
        w.on_delivered(100_000);
        assert_eq!(w.cwnd(), PathWindow::MAX);
        w.on_timeout(7);
        assert_eq!((w.cwnd(), w.ssthresh()), (PathWindow::MIN, 128));
        w.on_delivered(2);
        assert_eq!(w.cwnd(), 4);
        // A fresh start keeps the cut count.
        w.start();
        assert_eq!((w.cwnd(), w.cuts()), (PathWindow::INITIAL, 1));
    }

    #[test]
    fn a_window_started_at_a_point_ignores_older_losses() {
        let mut w = PathWindow::UNUSED;
        w.start_at(500);
        // Sent before the start (the replaced 5-tuple): no cut.
        assert!(!w.on_loss(499, 510));
        assert!(!w.on_loss(100, 520));
        assert_eq!(w.cwnd(), PathWindow::INITIAL);
        // Sent after it: a cut.
        assert!(w.on_loss(500, 530));
        assert_eq!((w.cwnd(), w.cuts()), (PathWindow::INITIAL / 2, 1));
    }

    #[test]
    fn drain_time_prefers_room_and_short_round_trips() {
        let w16 = started();
        let mut w32 = started();
        w32.on_delivered(16);
        // Same RTT: the larger window drains sooner.
        assert!(drain_time(8, &w32, 100, 100) < drain_time(8, &w16, 100, 100));
        // Same window: the shorter RTT.
        assert!(drain_time(8, &w16, 50, 100) < drain_time(8, &w16, 100, 100));
        // More ahead: later.
        assert!(drain_time(1, &w16, 100, 100) < drain_time(2, &w16, 100, 100));
        // Unknown RTT takes the default.
        assert_eq!(drain_time(3, &w16, 0, 70), drain_time(3, &w16, 70, 1));
    }
}
