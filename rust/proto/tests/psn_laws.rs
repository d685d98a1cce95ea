//! Property tests: 24-bit PSN arithmetic laws and wrap-around.

use core::cmp::Ordering;
use proptest::prelude::*;
use sroce_proto::Psn;

const M: u32 = 1 << 24;

fn psn() -> impl Strategy<Value = Psn> {
    prop_oneof![
        (0u32..M).prop_map(Psn::new),
        // Bias toward the wrap point and the half-way point.
        (0u32..64).prop_map(|d| Psn::new(M - 32 + d)),
        (0u32..64).prop_map(|d| Psn::new((1 << 23) - 32 + d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn always_24_bits(a in psn(), n in any::<u32>()) {
        prop_assert!((a + n).value() < M);
        prop_assert!((a - n).value() < M);
        prop_assert_eq!(Psn::new(n).value(), n & (M - 1));
    }

    #[test]
    fn add_matches_modular_arithmetic(a in psn(), n in any::<u32>()) {
        let expect = ((u64::from(a.value()) + u64::from(n)) % u64::from(M)) as u32;
        prop_assert_eq!((a + n).value(), expect);
        let expect = ((u64::from(a.value()) + u64::from(M) * 256 - u64::from(n)) % u64::from(M)) as u32;
        prop_assert_eq!((a - n).value(), expect);
    }

    #[test]
    fn add_sub_inverse(a in psn(), n in any::<u32>()) {
        prop_assert_eq!(a + n - n, a);
        prop_assert_eq!(a - n + n, a);
        prop_assert_eq!(a + M, a);
    }

    #[test]
    fn add_associative(a in psn(), m in any::<u32>(), n in any::<u32>()) {
        prop_assert_eq!(a + m + n, a + m.wrapping_add(n));
    }

    #[test]
    fn distance_and_diff(a in psn(), b in psn()) {
        let d = a.distance_to(b);
        prop_assert!(d < M);
        prop_assert_eq!(a + d, b);
        let s = b.diff(a);
        prop_assert!((-(1 << 23)..(1 << 23)).contains(&s));
        prop_assert_eq!(a + (s as u32), b);
        prop_assert_eq!(a.diff(a), 0);
    }

    #[test]
    fn circular_order_is_antisymmetric(a in psn(), b in psn()) {
        prop_assert!(!(a.is_before(b) && b.is_before(a)));
        prop_assert_eq!(a.is_before(b), b.is_after(a));
        match a.circular_cmp(b) {
            Some(Ordering::Less) => prop_assert!(a.is_before(b) && b.diff(a) > 0 && a.diff(b) < 0),
            Some(Ordering::Greater) => prop_assert!(a.is_after(b) && a.diff(b) > 0),
            Some(Ordering::Equal) => prop_assert_eq!(a, b),
            None => {
                prop_assert_eq!(a.distance_to(b), 1 << 23);
                prop_assert!(!a.is_before(b) && !a.is_after(b));
            }
        }
        prop_assert_eq!(a.circular_cmp(b).map(Ordering::reverse), b.circular_cmp(a));
    }

    #[test]
    fn window_before(a in psn(), k in 1u32..(1 << 23)) {
        // Everything up to 2^23 - 1 ahead is after; wraps transparently.
        prop_assert!(a.is_before(a + k));
        prop_assert!((a + k).is_after(a));
        prop_assert!(!(a + k).is_before(a));
        prop_assert_eq!((a + k).diff(a), k as i32);
        prop_assert_eq!(a.diff(a + k), -(k as i32));
    }

    #[test]
    fn next_is_after(a in psn()) {
        prop_assert!(a.next().is_after(a));
        prop_assert_eq!(a.next().diff(a), 1);
    }
}

#[test]
fn wrap_examples() {
    assert_eq!(Psn::new(M - 1).next(), Psn::new(0));
    assert!(Psn::new(M - 1).is_before(Psn::new(0)));
    assert!(Psn::new(M - 1).is_before(Psn::new((1 << 23) - 2)));
    assert!(!Psn::new(M - 1).is_before(Psn::new((1 << 23) - 1)));
}
