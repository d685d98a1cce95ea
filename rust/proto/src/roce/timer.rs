//! Pure timer arithmetic: the requester's transport (local ACK) timeout
//! and the RNR NAK timer encoding.

/// The transport timer period for the QP attribute `timeout` (5 bits):
/// 4.096 µs × 2^`timeout`, in nanoseconds. `0` means the timer is
/// disabled (infinite) and gives `None`; values above 31 are taken
/// modulo 32, as only 5 bits exist in the QP context.
pub const fn transport_timeout_ns(timeout: u8) -> Option<u64> {
    let t = timeout & 0x1F;
    if t == 0 {
        None
    } else {
        // 4096 << 31 = 2^43: no overflow in u64.
        Some(4096u64 << t)
    }
}

/// The minimum RNR NAK timer, in microseconds, for the 5-bit code carried
/// in an RNR NAK (IBTA vol. 1, table 45; the kernel's `IB_RNR_TIMER_*`).
/// Code 0 is the longest, 655.36 ms. Values above 31 are taken modulo 32.
pub const fn rnr_timer_usec(code: u8) -> u32 {
    match code & 0x1F {
        0 => 655_360,
        1 => 10,
        2 => 20,
        3 => 30,
        4 => 40,
        5 => 60,
        6 => 80,
        7 => 120,
        8 => 160,
        9 => 240,
        10 => 320,
        11 => 480,
        12 => 640,
        13 => 960,
        14 => 1_280,
        15 => 1_920,
        16 => 2_560,
        17 => 3_840,
        18 => 5_120,
        19 => 7_680,
        20 => 10_240,
        21 => 15_360,
        22 => 20_480,
        23 => 30_720,
        24 => 40_960,
        25 => 61_440,
        26 => 81_920,
        27 => 122_880,
        28 => 163_840,
        29 => 245_760,
        30 => 327_680,
        _ => 491_520,
    }
}

/// The `rnr_retry` value (3-bit QP attribute) meaning "retry forever".
/// The transport `retry_cnt` has no such value: there 7 means seven
/// retries.
pub const RNR_RETRY_INFINITE: u8 = 7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_timeout() {
        assert_eq!(transport_timeout_ns(0), None);
        assert_eq!(transport_timeout_ns(1), Some(8_192));
        assert_eq!(transport_timeout_ns(14), Some(67_108_864)); // ~67 ms
        assert_eq!(transport_timeout_ns(31), Some(4096u64 << 31));
        assert_eq!(transport_timeout_ns(32), None);
        assert_eq!(transport_timeout_ns(33), transport_timeout_ns(1));
    }

    #[test]
    fn rnr_table() {
        assert_eq!(rnr_timer_usec(0), 655_360);
        assert_eq!(rnr_timer_usec(1), 10);
        assert_eq!(rnr_timer_usec(12), 640);
        assert_eq!(rnr_timer_usec(25), 61_440);
        assert_eq!(rnr_timer_usec(31), 491_520);
        assert_eq!(rnr_timer_usec(32), 655_360);
        // Strictly increasing from code 1 to 31.
        for c in 1..31u8 {
            assert!(rnr_timer_usec(c) < rnr_timer_usec(c + 1));
        }
    }
}
