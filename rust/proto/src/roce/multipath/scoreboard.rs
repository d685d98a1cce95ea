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
//! Per session it also counts the packets *in flight* (sent, neither
//! acknowledged, held nor presumed lost: what is still on its way over
//! that path) and those delivered since the caller last asked, for the
//! sessions' congestion windows ([`super::window`]).
//!
//! Entries live in slot `psn mod W` (`W` the storage's length rounded
//! down to a power of two) and carry
//! their PSN, so an entry left from an older window is recognised as such.
//! PSNs `W` or more past the oldest unacknowledged one are not tracked
//! (the timer covers them).

use super::super::psn::Psn;
use super::ext::{SackBits, SACK_SPAN};
use super::seq_before;

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
/// Presumed lost (reported, or the requester went back over it): no
/// longer on its way.
const LOST: u8 = 8;

/// Whether an entry counts as in flight on its session.
const fn flying(e: &Entry) -> bool {
    e.flags & (TRACKED | HELD | LOST) == TRACKED
}

/// The scoreboard over storage `S` (its entries, default to start).
#[derive(Clone, Debug)]
pub struct Scoreboard<S> {
    entries: S,
    next_seq: [u32; MAX_SESSIONS],
    /// Packets in flight per session.
    in_flight: [u32; MAX_SESSIONS],
    /// Packets delivered per session since [`Scoreboard::take_delivered`].
    delivered: [u32; MAX_SESSIONS],
    /// The oldest unacknowledged PSN as last told.
    una: Psn,
}

impl<S: AsRef<[Entry]> + AsMut<[Entry]>> Scoreboard<S> {
    /// A scoreboard over `entries` (all default).
    pub const fn with_storage(entries: S) -> Self {
        Scoreboard {
            entries,
            next_seq: [0; MAX_SESSIONS],
            in_flight: [0; MAX_SESSIONS],
            delivered: [0; MAX_SESSIONS],
            una: Psn::ZERO,
        }
    }

    /// The entry tracking `psn` and its slot, if any.
    fn tracked_at(&self, psn: Psn) -> Option<(usize, Entry)> {
        let i = self.index(psn)?;
        let e = *self.entries.as_ref().get(i)?;
        (e.flags & TRACKED != 0 && e.psn == psn).then_some((i, e))
    }

    /// Entry `e` in slot `i` was acknowledged: delivered, no longer
    /// tracked.
    fn untrack(&mut self, i: usize, e: &Entry) {
        self.land(e, true);
        if let Some(slot) = self.entries.as_mut().get_mut(i) {
            *slot = Entry::default();
        }
    }

    /// Entry `e` in slot `i` is presumed lost: no longer on its way, and
    /// reported (once).
    fn presume_lost(&mut self, i: usize, e: &Entry) {
        self.land(e, false);
        if let Some(slot) = self.entries.as_mut().get_mut(i) {
            slot.flags |= REPORTED | LOST;
        }
    }

    /// Entry `e` stops counting as in flight (if it did); `delivered`:
    /// because it arrived.
    fn land(&mut self, e: &Entry, delivered: bool) {
        if !flying(e) {
            return;
        }
        let s = usize::from(e.session);
        if let Some(n) = self.in_flight.get_mut(s) {
            *n = n.saturating_sub(1);
        }
        if delivered {
            if let Some(n) = self.delivered.get_mut(s) {
                *n = n.saturating_add(1);
            }
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

    fn entry(&self, psn: Psn) -> Option<Entry> {
        self.tracked_at(psn).map(|(_, e)| e)
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
        let Some(i) = self.index(psn) else {
            return false;
        };
        let Some(old) = self.entries.as_ref().get(i).copied() else {
            return false;
        };
        // Its previous transmission (or an entry of an older window).
        self.land(&old, false);
        let new = Entry {
            psn,
            seq,
            session,
            flags: TRACKED,
        };
        if let Some(e) = self.entries.as_mut().get_mut(i) {
            *e = new;
        }
        if let Some(n) = self.in_flight.get_mut(usize::from(session)) {
            *n = n.saturating_add(1);
        }
        true
    }

    /// The responder acknowledged everything before `una`: those PSNs are
    /// delivered and no longer tracked.
    pub fn acked_through(&mut self, una: Psn) {
        let window = self.window();
        let ahead = self.una.distance_to(una);
        if ahead >= window {
            // A jump past everything tracked (or back: a restart).
            for i in 0..self.entries.as_ref().len() {
                let Some(e) = self.entries.as_ref().get(i).copied() else {
                    break;
                };
                if e.flags & TRACKED != 0 && e.psn.is_before(una) {
                    self.untrack(i, &e);
                }
            }
        } else {
            let mut psn = self.una;
            for _ in 0..ahead {
                if let Some((i, e)) = self.tracked_at(psn) {
                    self.untrack(i, &e);
                }
                psn = psn.next();
            }
        }
        self.una = una;
    }

    /// Packets of each session delivered since the last call, as
    /// `(session, count)` for each session that delivered any.
    pub fn take_delivered(&mut self, mut f: impl FnMut(u8, u32)) {
        for (s, n) in self.delivered.iter_mut().enumerate() {
            if *n != 0 {
                f(u8::try_from(s).unwrap_or(u8::MAX), core::mem::take(n));
            }
        }
    }

    /// The session that last carried `psn` and its place in that
    /// session's order, if tracked.
    pub fn sent_as(&self, psn: Psn) -> Option<(u8, u32)> {
        self.entry(psn).map(|e| (e.session, e.seq))
    }

    /// The place in `session`'s order its next packet gets.
    pub fn next_seq(&self, session: u8) -> u32 {
        self.next_seq
            .get(usize::from(session))
            .copied()
            .unwrap_or(0)
    }

    /// The requester goes back N: nothing it sent is on its way any more
    /// (what is resent counts again). `forget_held`: what the responder
    /// said it holds may be gone too (it is resent). Returns the sessions
    /// that had packets in flight (bit `i`: session `i`).
    pub fn go_back(&mut self, forget_held: bool) -> u64 {
        let mut had = 0u64;
        for (s, n) in self.in_flight.iter_mut().enumerate() {
            if *n != 0 {
                had |= 1 << s;
            }
            *n = 0;
        }
        for e in self.entries.as_mut().iter_mut() {
            if e.flags & TRACKED == 0 {
                continue;
            }
            if e.flags & HELD == 0 {
                e.flags |= LOST;
            } else if forget_held {
                e.flags = (e.flags & !HELD) | LOST;
            }
        }
        had
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

    /// Packets of `session` sent and neither acknowledged, held by the
    /// responder nor presumed lost: what is still on its way over that
    /// path. A policy that sends where this is smallest follows each
    /// path's delivery rate.
    pub fn in_flight(&self, session: u8) -> u32 {
        self.in_flight
            .get(usize::from(session))
            .copied()
            .unwrap_or(0)
    }

    /// Packets in flight on the sessions of `mask` (bit `i`: session
    /// `i`), which cannot deliver them any more (down): each is presumed
    /// lost, once; calls `lost` with each, in PSN order from the oldest
    /// unacknowledged one, and returns how many.
    pub fn strand(&mut self, mask: u64, mut lost: impl FnMut(Psn)) -> usize {
        let mut count: usize = 0;
        let mut psn = self.una;
        for _ in 0..self.window() {
            if let Some((i, e)) = self.tracked_at(psn) {
                if flying(&e) && e.session < 64 && mask & (1u64 << e.session) != 0 {
                    self.presume_lost(i, &e);
                    count = count.saturating_add(1);
                    lost(psn);
                }
            }
            psn = psn.next();
        }
        count
    }

    /// Forgets what the responder said it holds (it may have dropped it:
    /// a go-back-N after a second timeout in a row resends everything, and
    /// they count again when resent).
    pub fn forget_held(&mut self) {
        for e in self.entries.as_mut().iter_mut() {
            if e.flags & HELD != 0 {
                e.flags = (e.flags & !HELD) | LOST;
            }
        }
    }

    /// Forgets everything (the requester restarts at `una`).
    pub fn clear(&mut self, una: Psn) {
        self.entries.as_mut().fill(Entry::default());
        self.in_flight = [0; MAX_SESSIONS];
        self.delivered = [0; MAX_SESSIONS];
        self.una = una;
    }

    /// A SACK: the responder expects `expected` and holds the PSNs of
    /// `held` (bit `i`: `expected + i`). Calls `lost` with each PSN
    /// presumed lost (see the module documentation), in PSN order, once
    /// per transmission; returns how many.
    pub fn on_sack(&mut self, expected: Psn, held: &SackBits, mut lost: impl FnMut(Psn)) -> usize {
        let window = self.window();
        let mut newest: [Option<u32>; MAX_SESSIONS] = [None; MAX_SESSIONS];
        let mut highest: Option<Psn> = None;
        let Scoreboard {
            entries,
            in_flight,
            delivered,
            ..
        } = self;
        for e in entries.as_mut().iter_mut() {
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
            // earlier one goes if this one does not repeat it (and the
            // packet is no longer anywhere: it is resent at the timeout).
            if i == 0 || !held.is_set(i) {
                if e.flags & HELD != 0 {
                    e.flags = (e.flags & !HELD) | LOST;
                }
                continue;
            }
            if flying(e) {
                let s = usize::from(e.session);
                if let (Some(f), Some(d)) = (in_flight.get_mut(s), delivered.get_mut(s)) {
                    *f = f.saturating_sub(1);
                    *d = d.saturating_add(1);
                }
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
            if let Some((i, e)) = self.tracked_at(psn) {
                let overtaken = newest
                    .get(usize::from(e.session))
                    .copied()
                    .flatten()
                    .is_some_and(|n| seq_before(e.seq, n));
                if e.flags & (HELD | REPORTED) == 0 && overtaken {
                    self.presume_lost(i, &e);
                    count = count.saturating_add(1);
                    lost(psn);
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
    fn in_flight_counts_what_is_neither_acked_held_nor_lost() {
        let mut b = board();
        for p in 0..8 {
            assert!(b.record(Psn::ZERO, Psn::new(p), (p % 2) as u8));
        }
        assert_eq!((b.in_flight(0), b.in_flight(1)), (4, 4));
        // 1, 3, 5 held; 0 still on its way.
        let _ = lost(&mut b, 0, &[1, 3, 5]);
        assert_eq!((b.in_flight(0), b.in_flight(1)), (4, 1));
        let mut got = Vec::new();
        b.take_delivered(|s, n| got.push((s, n)));
        assert_eq!(got, [(1, 3)]);
        // Acknowledged through 3: 0 and 2 delivered (1 and 3 were already).
        b.acked_through(Psn::new(4));
        assert_eq!((b.in_flight(0), b.in_flight(1)), (2, 1));
        got.clear();
        b.take_delivered(|s, n| got.push((s, n)));
        assert_eq!(got, [(0, 2)]);
        // 6 overtaken by 8 on session 0: lost, not in flight; its resend
        // on session 1 is.
        assert!(b.record(Psn::new(4), Psn::new(8), 0));
        assert_eq!(lost(&mut b, 4, &[5, 7, 8]), [4, 6]);
        assert_eq!((b.in_flight(0), b.in_flight(1)), (0, 0));
        assert!(b.record(Psn::new(4), Psn::new(6), 1));
        assert_eq!(b.in_flight(1), 1);
        assert_eq!(b.sent_as(Psn::new(6)), Some((1, 4)));
        assert_eq!(b.next_seq(1), 5);
        // Going back: nothing is on its way; held marks kept or not.
        assert_eq!(b.go_back(false), 0b10);
        assert_eq!((b.in_flight(0), b.in_flight(1)), (0, 0));
        assert!(b.is_held(Psn::new(5)));
        let _ = b.go_back(true);
        assert!(!b.is_held(Psn::new(5)));
        b.clear(Psn::new(9));
        assert_eq!(b.session_of(Psn::new(6)), None);
        // Session 1 goes down: what is in flight on it is stranded, once.
        for p in 9..13 {
            assert!(b.record(Psn::new(9), Psn::new(p), (p % 2) as u8));
        }
        let mut out = Vec::new();
        assert_eq!(b.strand(0b10, |p| out.push(p.value())), 2);
        assert_eq!(out, [9, 11]);
        assert_eq!((b.in_flight(0), b.in_flight(1)), (2, 0));
        assert_eq!(b.strand(0b10, |_| {}), 0);
    }

    #[test]
    fn untracked_psns_are_refused() {
        let mut b = board();
        assert!(!b.record(Psn::new(5), Psn::new(4), 0));
        assert!(!b.record(Psn::new(5), Psn::new(21), 0));
        assert!(!b.record(Psn::new(5), Psn::new(6), 64));
        assert!(b.record(Psn::new(5), Psn::new(20), 63));
        assert_eq!(b.session_of(Psn::new(20)), Some(63));
        b.clear(Psn::new(5));
        assert_eq!(b.session_of(Psn::new(20)), None);
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(0, u32::MAX));
        assert!(!seq_before(3, 3));
    }
}
