//! 24-bit packet sequence numbers with circular (modulo 2^24) arithmetic.

use core::cmp::Ordering;
use core::ops::{Add, AddAssign, Sub, SubAssign};

use super::error::Error;

/// A 24-bit packet sequence number (PSN).
///
/// Arithmetic wraps modulo 2^24. PSNs have no total order: comparisons treat
/// the space as a circle, where `a` is *before* `b` when `b` is 1 to 2^23 - 1
/// steps ahead of `a` (see [`Psn::is_before`]). `Ord` is therefore not
/// implemented; use [`Psn::circular_cmp`] or [`Psn::diff`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

impl Psn {
    /// Number of bits in a PSN.
    pub const BITS: u32 = 24;
    /// Mask of the valid PSN bits.
    pub const MASK: u32 = 0x00FF_FFFF;
    /// Half the PSN space, 2^23: the largest forward distance that is
    /// still ambiguous (neither before nor after).
    pub const HALF: u32 = 1 << 23;
    /// PSN zero.
    pub const ZERO: Psn = Psn(0);
    /// The largest PSN, 2^24 - 1.
    pub const MAX: Psn = Psn(Self::MASK);

    /// Makes a PSN from the low 24 bits of `v` (higher bits are dropped).
    pub const fn new(v: u32) -> Self {
        Psn(v & Self::MASK)
    }

    /// Makes a PSN from `v`, failing if `v` does not fit in 24 bits.
    pub const fn try_new(v: u32) -> Result<Self, Error> {
        if v > Self::MASK {
            Err(Error::ValueOutOfRange)
        } else {
            Ok(Psn(v))
        }
    }

    /// The PSN as an integer in `0..2^24`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    pub const fn wrapping_add(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_add(n))
    }

    /// `self - n` modulo 2^24.
    pub const fn wrapping_sub(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The next PSN (`self + 1` modulo 2^24).
    pub const fn next(self) -> Self {
        self.wrapping_add(1)
    }

    /// How many steps forward from `self` to reach `to`, in `0..2^24`
    /// (`(to - self) mod 2^24`).
    pub const fn distance_to(self, to: Psn) -> u32 {
        to.0.wrapping_sub(self.0) & Self::MASK
    }

    /// Signed circular difference `self - other`, in `-2^23..2^23`.
    ///
    /// Positive when `self` is after `other`, negative when before. The one
    /// ambiguous distance, exactly 2^23 apart, yields `-2^23`.
    pub const fn diff(self, other: Psn) -> i32 {
        let d = other.distance_to(self);
        if d >= Self::HALF {
            // d < 2^24, so d - 2^24 fits in i32 without overflow.
            (d | !Self::MASK) as i32
        } else {
            d as i32
        }
    }

    /// `true` if `self` comes before `other`: `(other - self) mod 2^24` is in
    /// `1..2^23`.
    pub const fn is_before(self, other: Psn) -> bool {
        let d = self.distance_to(other);
        d != 0 && d < Self::HALF
    }

    /// `true` if `self` comes after `other` (i.e. `other.is_before(self)`).
    pub const fn is_after(self, other: Psn) -> bool {
        other.is_before(self)
    }

    /// Circular comparison: `Less` if `self` is before `other`, `Greater` if
    /// after, `Equal` if equal, and `None` when exactly 2^23 apart (the
    /// ambiguous point of the circle).
    pub const fn circular_cmp(self, other: Psn) -> Option<Ordering> {
        let d = self.distance_to(other);
        if d == 0 {
            Some(Ordering::Equal)
        } else if d < Self::HALF {
            Some(Ordering::Less)
        } else if d == Self::HALF {
            None
        } else {
            Some(Ordering::Greater)
        }
    }
}

impl From<Psn> for u32 {
    fn from(p: Psn) -> u32 {
        p.0
    }
}

impl TryFrom<u32> for Psn {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self, Error> {
        Psn::try_new(v)
    }
}

impl Add<u32> for Psn {
    type Output = Psn;

    /// Wrapping addition modulo 2^24.
    fn add(self, n: u32) -> Psn {
        self.wrapping_add(n)
    }
}

impl Sub<u32> for Psn {
    type Output = Psn;

    /// Wrapping subtraction modulo 2^24.
    fn sub(self, n: u32) -> Psn {
        self.wrapping_sub(n)
    }
}

impl AddAssign<u32> for Psn {
    fn add_assign(&mut self, n: u32) {
        *self = self.wrapping_add(n);
    }
}

impl SubAssign<u32> for Psn {
    fn sub_assign(&mut self, n: u32) {
        *self = self.wrapping_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_2_pow_24() {
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::ZERO - 1, Psn::MAX);
        assert_eq!(Psn::new(0x00FF_FFF0) + 0x20, Psn::new(0x10));
        assert_eq!(Psn::new(0x0123_4567).value(), 0x23_4567);
        assert_eq!(Psn::try_new(0x0100_0000), Err(Error::ValueOutOfRange));
        let mut p = Psn::MAX;
        p += 2;
        assert_eq!(p.value(), 1);
        p -= 2;
        assert_eq!(p, Psn::MAX);
    }

    #[test]
    fn circular_order() {
        let a = Psn::new(0x00FF_FFFE);
        let b = Psn::new(3);
        assert!(a.is_before(b));
        assert!(b.is_after(a));
        assert_eq!(b.diff(a), 5);
        assert_eq!(a.diff(b), -5);
        assert_eq!(a.circular_cmp(b), Some(Ordering::Less));
        assert_eq!(a.circular_cmp(a), Some(Ordering::Equal));
        let h = Psn::new(Psn::HALF);
        assert!(!Psn::ZERO.is_before(h) && !Psn::ZERO.is_after(h));
        assert_eq!(Psn::ZERO.circular_cmp(h), None);
        assert_eq!(Psn::ZERO.diff(h), -(1 << 23));
        assert_eq!(h.diff(Psn::ZERO), -(1 << 23));
        assert_eq!(Psn::new(Psn::HALF - 1).diff(Psn::ZERO), (1 << 23) - 1);
    }
}
