//! Round-trip time estimation (Jacobson/Karels, RFC 6298) in fixed point.
//!
//! Times are integer microseconds. As in Linux TCP, the smoothed RTT is
//! kept scaled by 8 and the mean deviation scaled by 4, so the EWMA gains
//! 1/8 and 1/4 are shifts:
//!
//! ```text
//! first sample m:  SRTT = m,  RTTVAR = m / 2
//! later samples:   err = m - SRTT
//!                  SRTT   += err / 8
//!                  RTTVAR += (|err| - RTTVAR) / 4
//! RTO estimate:    SRTT + max(G, 4 * RTTVAR)
//! ```
//!
//! Samples must follow Karn's rule: only from a message that was sent once
//! (never retransmitted), measured from its send to the ACK covering it.
//! RoCE's retransmit timeout is fixed by the QP's `local_ack_timeout`, so
//! the estimate is reported in the session counters and used to rank
//! sessions, not to set the QP timer.

/// Jacobson/Karels estimator state for one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// Smoothed RTT in µs, scaled by 8 (0 = no sample yet).
    srtt8: u64,
    /// Mean deviation in µs, scaled by 4.
    rttvar4: u64,
    samples: u64,
}

/// Clock granularity `G` of the RTO estimate, in µs.
pub const RTO_GRANULARITY_US: u64 = 1;

impl RttEstimator {
    /// An estimator without samples.
    pub const fn new() -> Self {
        RttEstimator {
            srtt8: 0,
            rttvar4: 0,
            samples: 0,
        }
    }

    /// Adds one RTT sample of `m` µs.
    pub fn sample(&mut self, m: u32) {
        let m = u64::from(m);
        if self.samples == 0 {
            self.srtt8 = m.saturating_mul(8);
            self.rttvar4 = m.saturating_mul(2); // m/2 scaled by 4
        } else {
            let srtt = self.srtt8 >> 3;
            // srtt8 += m - srtt, computed without signed arithmetic.
            self.srtt8 = self.srtt8.saturating_add(m).saturating_sub(srtt);
            let err = m.abs_diff(srtt);
            // rttvar4 += |err| - rttvar4 / 4
            self.rttvar4 = self
                .rttvar4
                .saturating_add(err)
                .saturating_sub(self.rttvar4 >> 2);
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// Smoothed RTT in µs (0 before the first sample).
    pub const fn srtt_us(&self) -> u64 {
        self.srtt8 >> 3
    }

    /// RTT mean deviation in µs.
    pub const fn rttvar_us(&self) -> u64 {
        self.rttvar4 >> 2
    }

    /// Number of samples taken.
    pub const fn samples(&self) -> u64 {
        self.samples
    }

    /// `SRTT + max(G, 4 * RTTVAR)` in µs, or `None` before the first sample.
    pub fn rto_estimate_us(&self) -> Option<u64> {
        if self.samples == 0 {
            None
        } else {
            let var = self.rttvar4; // 4 * RTTVAR exactly
            Some(self.srtt_us().saturating_add(var.max(RTO_GRANULARITY_US)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_tracks_variance() {
        let mut r = RttEstimator::new();
        assert_eq!(r.rto_estimate_us(), None);
        r.sample(100);
        assert_eq!(r.srtt_us(), 100);
        assert_eq!(r.rttvar_us(), 50);
        assert_eq!(r.rto_estimate_us(), Some(300));
        for _ in 0..200 {
            r.sample(100);
        }
        assert_eq!(r.srtt_us(), 100);
        assert!(r.rttvar_us() <= 1);
        for _ in 0..200 {
            r.sample(1000);
        }
        assert!(r.srtt_us() >= 990 && r.srtt_us() <= 1000);
        r.sample(u32::MAX);
        assert!(r.srtt_us() > 1000);
    }
}
