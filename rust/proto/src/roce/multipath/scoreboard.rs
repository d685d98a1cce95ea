//! The requester's scoreboard: which session carried each unacknowledged
//! PSN, in what order, and what the responder said it holds.
//!
//! Loss rule: a PSN the responder does not hold (below the highest one it
//! holds) is presumed lost when a packet sent *after* it *on the same
//! session* is held: a session is one path, and a path delivers in
//! order. Packets overtaken by another, faster session are never resent
//! for it. Each presumed loss is reported once; the resend gets a fresh
//! place in its session's order ([`Scoreboard::record`]), so a lost resend
//! is found the same way. The transport timer stays the backstop.
//!
//! Entries live in slot `psn mod W` (`W` the storage's length rounded
//! down to a power of two) and carry
//! their PSN, so an entry left from an older window is recognised as such.
//! PSNs `W` or more past the oldest unacknowledged one are not tracked
//! (the timer covers them).

use super::super::psn::Psn;
use super::ext::{SackBits, SACK_SPAN};

/// Most sessions a group has (session ids are below this).
pub const MAX_SESSIONS: usize = 64;

/// One tracked PSN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Entry {
    psn: Psn,
    seq: u32,
    session: u8,
    flags: u8,
}

const TRACKED: u8 = 1;
const HELD: u8 = 2;
const REPORTED: u8 = 4;

/// `a` was sent before `b` in one session's order (wrapping).
const fn seq_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 1 << 31
}

/// The scoreboard over storage `S` (its entries, default to start).
#[derive(Clone, Debug)]
pub struct Scoreboard<S> {
    entries: S,
    next_seq: [u32; MAX_SESSIONS],
}

impl<S: AsRef<[Entry]> + AsMut<[Entry]>> Scoreboard<S> {
    /// A scoreboard over `entries` (all default).
    pub const fn with_storage(entries: S) -> Self {
        Scoreboard {
            entries,
            next_seq: [0; MAX_SESSIONS],
        }
    }

    /// Entries in use: the storage's length rounded down to a power of
    /// two, at most 2^24 (so `psn mod W` is unique within a window across
    /// the PSN wrap).
    fn window(&self) -> u32 {
        let n = self.entries.as_ref().len().min(1 << 24);
        u32::try_from(super::reorder::power_of_two_floor(n)).unwrap_or(0)
    }

    fn index(&self, psn: Psn) -> Option<usize> {
        usize::try_from(psn.value().checked_rem(self.window())?).ok()
    }

    fn entry(&self, psn: Psn) -> Option<&Entry> {
        let e = self.entries.as_ref().get(self.index(psn)?)?;
        (e.flags & TRACKED != 0 && e.psn == psn).then_some(e)
    }

    /// Request packet `psn` went out (first time or again) on `session`,
    /// the oldest unacknowledged PSN being `una`. False if it is not
    /// tracked (too far past `una`, or a bad session id).
    pub fn record(&mut self, una: Psn, psn: Psn, session: u8) -> bool {
        let ahead = psn.diff(una);
        if ahead < 0 || u32::try_from(ahead).map_or(true, |a| a >= self.window()) {
            return false;
        }
        let Some(next) = self.next_seq.get_mut(usize::from(session)) else {
            return false;
        };
        let seq = *next;
        *next = next.wrapping_add(1);
        let Some(e) = self
            .index(psn)
            .and_then(|i| self.entries.as_mut().get_mut(i))
        else {
            return false;
        };
        *e = Entry {
            psn,
            seq,
            session,
            flags: TRACKED,
        };
        true
    }

    /// Whether the responder said it holds `psn` (a go-back-N resend can
    /// skip it).
    pub fn is_held(&self, psn: Psn) -> bool {
        self.entry(psn).is_some_and(|e| e.flags & HELD != 0)
    }

    /// The session that last carried `psn`, if tracked.
    pub fn session_of(&self, psn: Psn) -> Option<u8> {
        self.entry(psn).map(|e| e.session)
    }

    /// Packets of `session` sent and neither acknowledged (`una` is the
    /// oldest unacknowledged PSN) nor held by the responder: what is still
    /// on its way over that path. A policy that sends where this is
    /// smallest follows each path's delivery rate.
    pub fn in_flight(&self, una: Psn, session: u8) -> u32 {
        let window = self.window();
        let mut n: u32 = 0;
        for e in self.entries.as_ref() {
            if e.flags & (TRACKED | HELD) != TRACKED || e.session != session {
                continue;
            }
            if u32::try_from(e.psn.diff(una)).is_ok_and(|d| d < window) {
                n = n.saturating_add(1);
            }
        }
        n
    }

    /// Forgets what the responder said it holds (it may have dropped it:
    /// a go-back-N after a second timeout in a row resends everything).
    pub fn forget_held(&mut self) {
        for e in self.entries.as_mut().iter_mut() {
            e.flags &= !HELD;
        }
    }

    /// Forgets everything (the requester restarts).
    pub fn clear(&mut self) {
        self.entries.as_mut().fill(Entry::default());
    }

    /// A SACK: the responder expects `expected` and holds the PSNs of
    /// `held` (bit `i`: `expected + i`). Calls `lost` with each PSN
    /// presumed lost (see the module documentation), in PSN order, once
    /// per transmission; returns how many.
    pub fn on_sack(&mut self, expected: Psn, held: &SackBits, mut lost: impl FnMut(Psn)) -> usize {
        let window = self.window();
        let mut newest: [Option<u32>; MAX_SESSIONS] = [None; MAX_SESSIONS];
        let mut highest: Option<Psn> = None;
        for e in self.entries.as_mut().iter_mut() {
            if e.flags & TRACKED == 0 {
                continue;
            }
            let Ok(i) = u32::try_from(e.psn.diff(expected)) else {
                continue;
            };
            if i >= window.min(SACK_SPAN) {
                continue;
            }
            // Each SACK says all the responder holds now: a mark from an
            // earlier one goes if this one does not repeat it.
            if i == 0 || !held.is_set(i) {
                e.flags &= !HELD;
                continue;
            }
            e.flags |= HELD;
            match highest {
                Some(h) if !h.is_before(e.psn) => {}
                _ => highest = Some(e.psn),
            }
            if let Some(n) = newest.get_mut(usize::from(e.session)) {
                match n {
                    Some(s) if !seq_before(*s, e.seq) => {}
                    _ => *n = Some(e.seq),
                }
            }
        }
        let Some(highest) = highest else {
            return 0;
        };
        // Missing PSNs below the highest held one, in PSN order.
        let mut count: usize = 0;
        let mut psn = expected;
        while psn.is_before(highest) {
            if let Some(i) = self.index(psn) {
                if let Some(e) = self.entries.as_mut().get_mut(i) {
                    let overtaken = newest
                        .get(usize::from(e.session))
                        .copied()
                        .flatten()
                        .is_some_and(|n| seq_before(e.seq, n));
                    if e.psn == psn && e.flags & (TRACKED | HELD | REPORTED) == TRACKED && overtaken
                    {
                        e.flags |= REPORTED;
                        count = count.saturating_add(1);
                        lost(psn);
                    }
                }
            }
            psn = psn.next();
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn board() -> Scoreboard<[Entry; 16]> {
        Scoreboard::with_storage([Entry::default(); 16])
    }

    fn lost(b: &mut Scoreboard<[Entry; 16]>, expected: u32, held: &[u32]) -> Vec<u32> {
        let mut bits = SackBits::EMPTY;
        for &p in held {
            bits.set(p.wrapping_sub(expected) & 0xFF_FFFF);
        }
        let mut out = Vec::new();
        b.on_sack(Psn::new(expected), &bits, |p| out.push(p.value()));
        out
    }

    #[test]
    fn reordering_between_sessions_is_not_loss() {
        let mut b = board();
        let una = Psn::new(10);
        // 10..14 on session 0 (slow), 14..18 on session 1 (fast).
        for p in 10..14 {
            assert!(b.record(una, Psn::new(p), 0));
        }
        for p in 14..18 {
            assert!(b.record(una, Psn::new(p), 1));
        }
        assert_eq!(lost(&mut b, 10, &[14, 15, 16, 17]), Vec::<u32>::new());
        assert!(b.is_held(Psn::new(15)));
        assert!(!b.is_held(Psn::new(11)));
    }

    #[test]
    fn a_gap_overtaken_on_its_own_session_is_lost_once() {
        let mut b = board();
        let una = Psn::new(0);
        for p in 0..6 {
            assert!(b.record(una, Psn::new(p), (p % 2) as u8));
        }
        // 0 and 2 (session 0) lost, 4 arrived; 1, 3, 5 arrived.
        assert_eq!(lost(&mut b, 0, &[1, 3, 4, 5]), [0, 2]);
        // Reported once.
        assert_eq!(lost(&mut b, 0, &[1, 3, 4, 5]), Vec::<u32>::new());
        // Resent on session 1; that resend is lost too, and a later packet
        // of session 1 arrives: reported again.
        assert!(b.record(una, Psn::new(0), 1));
        assert!(b.record(una, Psn::new(6), 1));
        assert_eq!(lost(&mut b, 0, &[1, 3, 4, 5, 6]), [0]);
        // A later SACK no longer listing 4 unmarks it; forget_held all.
        assert!(b.is_held(Psn::new(4)));
        let _ = lost(&mut b, 0, &[1, 3, 5, 6]);
        assert!(!b.is_held(Psn::new(4)) && b.is_held(Psn::new(5)));
        b.forget_held();
        assert!(!b.is_held(Psn::new(5)));
    }

    #[test]
    fn in_flight_counts_what_is_neither_acked_nor_held() {
        let mut b = board();
        for p in 0..8 {
            assert!(b.record(Psn::ZERO, Psn::new(p), (p % 2) as u8));
        }
        assert_eq!(
            (b.in_flight(Psn::ZERO, 0), b.in_flight(Psn::ZERO, 1)),
            (4, 4)
        );
        // 1, 3, 5 held; 0 still on its way.
        let _ = lost(&mut b, 0, &[1, 3, 5]);
        assert_eq!(
            (b.in_flight(Psn::ZERO, 0), b.in_flight(Psn::ZERO, 1)),
            (4, 1)
        );
        // Acknowledged through 3.
        assert_eq!(
            (b.in_flight(Psn::new(4), 0), b.in_flight(Psn::new(4), 1)),
            (2, 1)
        );
    }

    #[test]
    fn untracked_psns_are_refused() {
        let mut b = board();
        assert!(!b.record(Psn::new(5), Psn::new(4), 0));
        assert!(!b.record(Psn::new(5), Psn::new(21), 0));
        assert!(!b.record(Psn::new(5), Psn::new(6), 64));
        assert!(b.record(Psn::new(5), Psn::new(20), 63));
        assert_eq!(b.session_of(Psn::new(20)), Some(63));
        b.clear();
        assert_eq!(b.session_of(Psn::new(20)), None);
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(0, u32::MAX));
        assert!(!seq_before(3, 3));
    }
}
