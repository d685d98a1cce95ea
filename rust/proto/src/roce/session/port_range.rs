//! UDP source ports: the standard RoCEv2 rule and the reserved-port
//! allocator for extra sessions.
//!
//! # The standard source port (session 0)
//!
//! Linux derives a RoCEv2 QP's UDP source port with `rdma_get_udp_sport()`
//! (`include/rdma/ib_verbs.h`):
//!
//! ```text
//! rdma_calc_flow_label(lqpn, rqpn):      v = (u64)lqpn * rqpn
//!                                        v ^= v >> 20;  v ^= v >> 40
//!                                        return v & 0xFFFFF
//! rdma_flow_label_to_udp_sport(fl):      low = fl & 0x3FFF, high = fl & 0xFC000
//!                                        low ^= high >> 14
//!                                        return low | 0xC000
//! rdma_get_udp_sport(fl, lqpn, rqpn):    if fl == 0 { fl = rdma_calc_flow_label(lqpn, rqpn) }
//!                                        return rdma_flow_label_to_udp_sport(fl)
//! ```
//!
//! `fl` is the flow label of the QP's address vector (GRH); the product of
//! the two QP numbers is symmetric, so both ends compute the same port.
//! rxe applies it when `modify_qp` sets `IB_QP_AV` with a GRH (always, on
//! RoCE); before that, and for UD QPs (whose AV is per WR, so `IB_QP_AV` is
//! never set), rxe uses the port chosen at creation:
//! `0xC000 + (hash_32(qpn, 14) & 0x3FFF)`, `hash_32(v, b) = (v *
//! 0x61C88647) >> (32 - b)`. [`roce_v2_sport`] and [`rxe_initial_sport`]
//! implement both bit-exactly (known answers computed with the kernel's own
//! C code are in the tests), so session 0 of every group uses exactly the
//! port rxe would.
//!
//! # Reserved ports (sessions 1..)
//!
//! Extra sessions take distinct ports from a [`PortRange`] reserved on the
//! host: the kernel holds one bound UDP socket per reserved port so that no
//! other socket can use it, and the [`PortAllocator`] hands each port to at
//! most one session at a time. An extra session's 5-tuple is therefore
//! unique on the host. The default range is [`PortRange::DEFAULT`],
//! 61000..=65535: inside the RoCEv2 convention 0xC000..=0xFFFF (so switch
//! ECMP, ACL and QoS rules written for RoCEv2 source ports still apply) and
//! above Linux's default ephemeral range (`ip_local_port_range` 32768..=60999),
//! so reserving it takes nothing from `connect()`/`bind(0)`. Session 0's
//! standard port is computed, not allocated: like every RoCEv2 stack, two
//! QPs may share it (the BTH destination QP separates them).

use super::SessionError;

/// Lowest RoCEv2 source port by convention (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`).
pub const ROCE_V2_SPORT_MIN: u16 = 0xC000;
/// Highest RoCEv2 source port (`IB_ROCE_UDP_ENCAP_VALID_PORT_MAX`).
pub const ROCE_V2_SPORT_MAX: u16 = 0xFFFF;
/// Mask of the 20-bit GRH flow label (`IB_GRH_FLOWLABEL_MASK`).
pub const FLOW_LABEL_MASK: u32 = 0x000F_FFFF;
/// The kernel's 32-bit multiplicative hash constant (`GOLDEN_RATIO_32`).
pub const GOLDEN_RATIO_32: u32 = 0x61C8_8647;

/// `rdma_calc_flow_label()`: the symmetric 20-bit flow label Linux derives
/// from the local and remote QP numbers when the GRH flow label is 0.
pub const fn calc_flow_label(lqpn: u32, rqpn: u32) -> u32 {
    // A u32 x u32 product always fits in u64.
    let mut v = (lqpn as u64).wrapping_mul(rqpn as u64);
    v ^= v >> 20;
    v ^= v >> 40;
    (v as u32) & FLOW_LABEL_MASK
}

/// `rdma_flow_label_to_udp_sport()`: folds a 20-bit flow label into a 14-bit
/// value and places it in 0xC000..=0xFFFF. Bits above the 20-bit label are
/// ignored, as in the kernel.
pub const fn flow_label_to_udp_sport(fl: u32) -> u16 {
    let low = fl & 0x3FFF;
    let high = fl & 0x000F_C000;
    let folded = low ^ (high >> 14);
    (folded as u16) | ROCE_V2_SPORT_MIN
}

/// `rdma_get_udp_sport()`: the RoCEv2 UDP source port of an RC/UC QP whose
/// address vector has flow label `fl` (0 = none), local QP number `lqpn`
/// and remote QP number `rqpn`.
pub const fn roce_v2_sport(fl: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if fl == 0 {
        calc_flow_label(lqpn, rqpn)
    } else {
        fl
    };
    flow_label_to_udp_sport(fl)
}

/// The kernel's `hash_32(val, bits)` for `bits` in `1..=32` (other values
/// are clamped into that range).
pub const fn hash_32(val: u32, bits: u32) -> u32 {
    let bits = if bits == 0 {
        1
    } else if bits > 32 {
        32
    } else {
        bits
    };
    // bits in 1..=32, so the shift is in 0..=31.
    val.wrapping_mul(GOLDEN_RATIO_32) >> (32u32.wrapping_sub(bits))
}

/// rxe's source port before an address vector is set, and for UD QPs:
/// `0xC000 + (hash_32(qpn, 14) & 0x3FFF)` (`rxe_qp.c`).
pub const fn rxe_initial_sport(qpn: u32) -> u16 {
    ((hash_32(qpn, 14) & 0x3FFF) as u16) | ROCE_V2_SPORT_MIN
}

/// An inclusive range of UDP source ports reserved for extra sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    first: u16,
    last: u16,
}

impl PortRange {
    /// The default reserved range, 61000..=65535 (4536 ports): inside the
    /// RoCEv2 0xC000..=0xFFFF convention, outside Linux's default ephemeral
    /// range 32768..=60999.
    pub const DEFAULT: PortRange = PortRange {
        first: 61000,
        last: 0xFFFF,
    };

    /// The whole RoCEv2 convention, 0xC000..=0xFFFF (16384 ports). Reserving
    /// it all overlaps the default ephemeral range; use only if
    /// `ip_local_port_range` has been moved below 0xC000.
    pub const ROCE_V2: PortRange = PortRange {
        first: ROCE_V2_SPORT_MIN,
        last: ROCE_V2_SPORT_MAX,
    };

    /// The range `first..=last`; fails if `first > last` or `first` is 0.
    pub const fn new(first: u16, last: u16) -> Result<Self, SessionError> {
        if first == 0 || first > last {
            Err(SessionError::BadRange)
        } else {
            Ok(PortRange { first, last })
        }
    }

    /// The first port.
    pub const fn first(self) -> u16 {
        self.first
    }

    /// The last port.
    pub const fn last(self) -> u16 {
        self.last
    }

    /// Number of ports, `1..=65535`.
    pub const fn len(self) -> u32 {
        // first <= last by construction.
        (self.last as u32)
            .wrapping_sub(self.first as u32)
            .wrapping_add(1)
    }

    /// Always `false`: a range holds at least one port.
    pub const fn is_empty(self) -> bool {
        false
    }

    /// `true` if `port` is in the range.
    pub const fn contains(self, port: u16) -> bool {
        port >= self.first && port <= self.last
    }

    /// Whether every port of the range is in the RoCEv2 convention
    /// 0xC000..=0xFFFF.
    pub const fn is_roce_v2(self) -> bool {
        self.first >= ROCE_V2_SPORT_MIN
    }
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange::DEFAULT
    }
}

/// Number of 64-bit bitmap words needed for `ports` ports.
pub const fn words_for(ports: u32) -> usize {
    (ports.div_ceil(64)) as usize
}

/// A [`PortAllocator`] sized for [`PortRange::DEFAULT`].
pub type DefaultPortAllocator = PortAllocator<{ words_for(4536) }>;

/// A [`PortAllocator`] sized for the whole RoCEv2 range.
pub type RoceV2PortAllocator = PortAllocator<{ words_for(16384) }>;

/// Hands out distinct ports of a [`PortRange`], one owner per port.
///
/// A fixed-capacity bitmap of `WORDS * 64` ports (bit set = allocated); no
/// allocation, O(range / 64) per call in the worst case. Allocation of
/// several ports is all-or-nothing, so a failed request leaks nothing.
#[derive(Clone, Debug)]
pub struct PortAllocator<const WORDS: usize> {
    range: PortRange,
    bits: [u64; WORDS],
    used: u32,
}

impl<const WORDS: usize> PortAllocator<WORDS> {
    /// An allocator over `range` with every port free; fails with
    /// [`SessionError::BadRange`] if the range does not fit `WORDS * 64`.
    pub fn new(range: PortRange) -> Result<Self, SessionError> {
        let cap = (WORDS as u64).saturating_mul(64);
        if u64::from(range.len()) > cap {
            return Err(SessionError::BadRange);
        }
        Ok(PortAllocator {
            range,
            bits: [0; WORDS],
            used: 0,
        })
    }

    /// The managed range.
    pub fn range(&self) -> PortRange {
        self.range
    }

    /// Number of ports in the range.
    pub fn capacity(&self) -> u32 {
        self.range.len()
    }

    /// Number of allocated ports.
    pub fn in_use(&self) -> u32 {
        self.used
    }

    /// Number of free ports.
    pub fn available(&self) -> u32 {
        self.capacity().saturating_sub(self.used)
    }

    fn offset(&self, port: u16) -> Option<u32> {
        if self.range.contains(port) {
            Some(u32::from(port).wrapping_sub(u32::from(self.range.first)))
        } else {
            None
        }
    }

    fn bit(&self, off: u32) -> bool {
        match self.bits.get((off / 64) as usize) {
            Some(w) => w & (1u64 << (off % 64)) != 0,
            None => true,
        }
    }

    fn set(&mut self, off: u32, on: bool) {
        if let Some(w) = self.bits.get_mut((off / 64) as usize) {
            let m = 1u64 << (off % 64);
            if on {
                *w |= m;
            } else {
                *w &= !m;
            }
        }
    }

    /// `true` if `port` is in the range and allocated.
    pub fn is_allocated(&self, port: u16) -> bool {
        match self.offset(port) {
            Some(off) => self.bit(off),
            None => false,
        }
    }

    /// Allocates one free port, searching from `hint` (any value; taken
    /// modulo the range length) upward, wrapping around.
    pub fn allocate_one(&mut self, hint: u32) -> Result<u16, SessionError> {
        let mut out = [0u16; 1];
        self.allocate(&mut out, hint, &[])?;
        Ok(out.first().copied().unwrap_or(0))
    }

    /// Allocates `out.len()` distinct free ports, none of them in `exclude`,
    /// searching from `hint` upward (wrapping). All or nothing: on error no
    /// port is taken and `out` is unspecified.
    ///
    /// Spreading the hint (e.g. with the QP number) spreads groups over
    /// the range; the ports of one group are consecutive free ports.
    pub fn allocate(
        &mut self,
        out: &mut [u16],
        hint: u32,
        exclude: &[u16],
    ) -> Result<(), SessionError> {
        let len = self.range.len();
        if out.len() as u64 > u64::from(self.available()) {
            return Err(SessionError::PortsExhausted);
        }
        let start = hint.checked_rem(len).unwrap_or(0);
        let mut found = 0usize;
        let mut step = 0u32;
        while found < out.len() && step < len {
            let off = {
                let o = start.wrapping_add(step);
                if o >= len {
                    o.wrapping_sub(len)
                } else {
                    o
                }
            };
            step = step.wrapping_add(1);
            // Skip a whole full word quickly when aligned to it.
            if off % 64 == 0 {
                if let Some(&w) = self.bits.get((off / 64) as usize) {
                    if w == u64::MAX {
                        step = step.wrapping_add(63);
                        continue;
                    }
                }
            }
            if self.bit(off) {
                continue;
            }
            // off < len <= 65535, first + off <= last <= 65535.
            let port = self.range.first.wrapping_add(off as u16);
            if exclude.contains(&port) {
                continue;
            }
            if let Some(slot) = out.get_mut(found) {
                *slot = port;
            }
            found = found.wrapping_add(1);
        }
        if found < out.len() {
            return Err(SessionError::PortsExhausted);
        }
        for &port in out.iter() {
            if let Some(off) = self.offset(port) {
                self.set(off, true);
            }
        }
        self.used = self.used.saturating_add(out.len() as u32);
        Ok(())
    }

    /// Marks `port` used without handing it out (e.g. the kernel could not
    /// bind its reservation socket because another socket holds it). Fails
    /// with [`SessionError::BadPort`] if it is outside the range or already
    /// used.
    pub fn mark_used(&mut self, port: u16) -> Result<(), SessionError> {
        match self.offset(port) {
            Some(off) if !self.bit(off) => {
                self.set(off, true);
                self.used = self.used.saturating_add(1);
                Ok(())
            }
            _ => Err(SessionError::BadPort),
        }
    }

    /// Frees `port`; fails with [`SessionError::NotAllocated`] (changing
    /// nothing) if it is outside the range or not allocated.
    pub fn free(&mut self, port: u16) -> Result<(), SessionError> {
        match self.offset(port) {
            Some(off) if self.bit(off) => {
                self.set(off, false);
                self.used = self.used.saturating_sub(1);
                Ok(())
            }
            _ => Err(SessionError::NotAllocated),
        }
    }

    /// Frees every port of `ports` that is allocated; returns how many were
    /// freed. Ports outside the range (such as a session 0 standard port)
    /// are ignored.
    pub fn free_all(&mut self, ports: &[u16]) -> u32 {
        let mut n = 0u32;
        for &p in ports {
            if self.free(p).is_ok() {
                n = n.saturating_add(1);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers from the kernel's own C functions (ib_verbs.h and
    /// linux/hash.h compiled with gcc): (fl, lqpn, rqpn, sport, calc_fl).
    const KAT: [(u32, u32, u32, u16, u32); 14] = [
        (0x0, 0x11, 0x12, 0xc132, 0x00132),
        (0x0, 0x1, 0x1, 0xc001, 0x00001),
        (0x0, 0x0, 0x5, 0xc000, 0x00000),
        (0x0, 0xffffff, 0xffffff, 0xff21, 0xfff1e),
        (0x0, 0x123456, 0xabcdef, 0xc3c8, 0xac3e3),
        (0x0, 0x2, 0x3, 0xc006, 0x00006),
        (0x0, 0x40, 0x41, 0xd040, 0x01040),
        (0x1, 0x7, 0x8, 0xc001, 0x00038),
        (0xfffff, 0x1, 0x2, 0xffc0, 0x00002),
        (0x12345, 0x9, 0x9, 0xe341, 0x00051),
        (0xffffffff, 0x0, 0x0, 0xffc0, 0x00000),
        (0x4000, 0x1, 0x1, 0xc001, 0x00001),
        (0x0, 0xffffffff, 0xffffffff, 0xdff1, 0x01ff1),
        (0x0, 0x12, 0x11, 0xc132, 0x00132),
    ];

    #[test]
    fn kernel_known_answers() {
        for (fl, l, r, sport, cfl) in KAT {
            assert_eq!(calc_flow_label(l, r), cfl, "calc {l:#x} {r:#x}");
            assert_eq!(
                roce_v2_sport(fl, l, r),
                sport,
                "sport {fl:#x} {l:#x} {r:#x}"
            );
        }
        for (qpn, sport) in [
            (1, 0xd872),
            (2, 0xf0e4),
            (0x11, 0xdf94),
            (0x40, 0xdc88),
            (0x123456, 0xc168),
            (0xffffff, 0xf94d),
        ] {
            assert_eq!(rxe_initial_sport(qpn), sport, "qpn {qpn:#x}");
        }
    }

    #[test]
    fn default_range() {
        let r = PortRange::DEFAULT;
        assert_eq!(r.len(), 4536);
        assert!(r.is_roce_v2());
        assert!(!r.contains(60999));
        assert_eq!(words_for(r.len()), 71);
        assert!(DefaultPortAllocator::new(r).is_ok());
        assert!(DefaultPortAllocator::new(PortRange::ROCE_V2).is_err());
        assert!(RoceV2PortAllocator::new(PortRange::ROCE_V2).is_ok());
        assert_eq!(PortRange::new(5, 4), Err(SessionError::BadRange));
        assert_eq!(PortRange::new(0, 4), Err(SessionError::BadRange));
    }
}
