//! When a session's congestion calls for a fresh 5-tuple.
//!
//! With the multipath transport each session's losses are known: a packet
//! a SACK shows lost was lost on the session that carried it (see
//! [`super::scoreboard`]), and so were the packets in flight when the
//! session's own timer expired ([`super::quiet`]; on a lossy path with a
//! small window a lost burst is often all of them). A session whose loss
//! rate stays above a threshold for consecutive epochs of its own packets
//! is replaced by a fresh 5-tuple (another source port: in a fabric that
//! hashes flows onto paths, another path), as the sessions patent family's
//! US 12,284,115 proposes. The other sessions' shares follow from the policy (with
//! `least-outstanding`, from what each path delivers).

use super::sent_before;

/// When to replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplaceConfig {
    /// Packets sent on the session per epoch.
    pub epoch_packets: u32,
    /// Losses per thousand packets above which an epoch is congested.
    pub loss_per_mille: u32,
    /// Congested epochs in a row that replace the session.
    pub epochs: u8,
}

impl ReplaceConfig {
    /// 128-packet epochs, 3% loss, three in a row. Short epochs: a lossy
    /// session's congestion window keeps its share of the packets small.
    /// (At 1% random loss of single packets an epoch is above 3% with
    /// probability 0.04, three in a row 6.4e-5; at 10%, 0.998. Losses
    /// of whole segmented datagrams, several packets each, make an epoch
    /// either clean or well above.)
    pub const DEFAULT: ReplaceConfig = ReplaceConfig {
        epoch_packets: 128,
        loss_per_mille: 30,
        epochs: 3,
    };
}

/// One session's losses in the current epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LossMeter {
    sent: u32,
    lost: u32,
    congested: u8,
    /// The session's send sequence when the meter started over for a
    /// fresh 5-tuple: losses of packets sent before are the old path's.
    since: Option<u32>,
}

impl LossMeter {
    /// Nothing counted.
    pub const fn new() -> Self {
        LossMeter {
            sent: 0,
            lost: 0,
            congested: 0,
            since: None,
        }
    }

    /// A packet the session sent as `seq` (its send sequence; `next_seq`
    /// is the session's next) was presumed lost. Not counted if it was
    /// sent before the meter started over ([`Self::reset_at`]): it left on
    /// the 5-tuple that was replaced.
    pub fn on_lost(&mut self, seq: u32, next_seq: u32) {
        if self.since.is_some_and(|s| sent_before(seq, s, next_seq)) {
            return;
        }
        self.lost = self.lost.saturating_add(1);
    }

    /// A packet went out on the session; true when this ends the epoch
    /// that makes `cfg.epochs` congested ones in a row (the meter starts
    /// over: the caller replaces the session).
    pub fn on_sent(&mut self, cfg: &ReplaceConfig) -> bool {
        self.sent = self.sent.saturating_add(1);
        if self.sent < cfg.epoch_packets.max(1) {
            return false;
        }
        let congested = u64::from(self.lost).saturating_mul(1000)
            > u64::from(cfg.loss_per_mille).saturating_mul(u64::from(self.sent));
        self.sent = 0;
        self.lost = 0;
        self.congested = if congested {
            self.congested.saturating_add(1)
        } else {
            0
        };
        if self.congested >= cfg.epochs.max(1) {
            self.congested = 0;
            return true;
        }
        false
    }

    /// Starts over for the session's fresh 5-tuple, whose first packet
    /// will be sent as `next_seq`: the losses of what was sent before are
    /// not counted.
    pub fn reset_at(&mut self, next_seq: u32) {
        *self = LossMeter {
            since: Some(next_seq),
            ..LossMeter::new()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(meter: &mut LossMeter, cfg: &ReplaceConfig, packets: u32, loss_every: u32) -> u32 {
        let mut replaced = 0;
        for i in 1..=packets {
            if loss_every != 0 && i % loss_every == 0 {
                // The packet just before this one was lost.
                meter.on_lost(i.wrapping_sub(1), i);
            }
            if meter.on_sent(cfg) {
                replaced += 1;
            }
        }
        replaced
    }

    #[test]
    fn sustained_loss_replaces_and_clean_paths_never() {
        let cfg = ReplaceConfig::DEFAULT;
        let mut m = LossMeter::new();
        // 1% loss: never.
        assert_eq!(run(&mut m, &cfg, 100_000, 100), 0);
        // 10% loss: every third epoch.
        let mut m = LossMeter::new();
        assert_eq!(run(&mut m, &cfg, 6 * 128, 10), 2);
        // Two bad epochs between clean ones: never.
        let mut m = LossMeter::new();
        assert_eq!(run(&mut m, &cfg, 2 * 128, 10), 0);
        assert_eq!(run(&mut m, &cfg, 128, 0), 0);
        assert_eq!(run(&mut m, &cfg, 2 * 128, 10), 0);
    }

    #[test]
    fn losses_of_the_replaced_tuple_do_not_count() {
        let cfg = ReplaceConfig::DEFAULT;
        let mut m = LossMeter::new();
        // Replaced when the session's next packet is seq 5000: the 256
        // packets still in flight on the old (cut) path are all lost
        // afterwards, while the new path delivers: no replacement again.
        m.reset_at(5000);
        let mut replaced = 0;
        for k in 0..3 * 128u32 {
            if k < 256 {
                m.on_lost(5000 - 256 + k, 5000 + k);
            }
            replaced += u32::from(m.on_sent(&cfg));
        }
        assert_eq!(replaced, 0);
        // The new path's own losses count as before.
        assert_eq!(run(&mut m, &cfg, 6 * 128, 10), 2);
        // Across the wrap of the send sequence.
        let mut m = LossMeter::new();
        m.reset_at(5);
        m.on_lost(u32::MAX - 3, 6);
        m.on_lost(5, 6);
        assert_eq!(m.lost, 1);
        // A starting point 2^30 sends back is long over.
        m.on_lost(4, 5 + (1 << 30));
        assert_eq!(m.lost, 2);
    }
}
