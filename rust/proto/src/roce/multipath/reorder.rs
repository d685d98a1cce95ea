//! The responder's reorder buffer: requests that arrived ahead of the
//! expected PSN, held until the gap before them is filled.
//!
//! The buffer only stores and orders; the responder engine still sees
//! every request at its expected PSN, one at a time, exactly as on a
//! single in-order path. A request `d` PSNs ahead (`1 <= d < W`, `W` the
//! storage's length rounded down to a power of two, at most
//! [`MAX_WINDOW`]) is held in slot `psn mod W`;
//! two PSNs of one window never share a slot. Everything else is given
//! back: the expected PSN itself (for the engine now), a duplicate of a
//! held PSN, anything `W` or more ahead (counted by the driver as a drop:
//! the bound on what a peer can make the QP hold), and anything behind
//! (for the engine's duplicate handling).

use super::super::psn::Psn;
use super::ext::{SackBits, SACK_SPAN};

/// Most PSNs a window spans (what one SACK's bitmap can describe).
pub const MAX_WINDOW: usize = SACK_SPAN as usize;

/// The largest power of two not above `n` (0 for 0).
pub(super) const fn power_of_two_floor(n: usize) -> usize {
    match n.checked_ilog2() {
        Some(b) => 1usize.wrapping_shl(b),
        None => 0,
    }
}

/// A held request and its PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held<T> {
    /// The request's PSN.
    pub psn: Psn,
    /// The request (for the driver: the received packet).
    pub item: T,
}

/// What [`ReorderBuffer::offer`] did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Offer<T> {
    /// Held until its turn.
    Held,
    /// Not held, for the engine now: the expected PSN, or one behind it
    /// (a duplicate the engine answers), or the buffer is not in use.
    Process(T),
    /// The same PSN is already held: drop this copy.
    Duplicate(T),
    /// Too far ahead to hold: drop it (the requester resends it).
    Beyond(T),
}

/// The reorder buffer over storage `S` (its slots, all `None` to start).
#[derive(Clone, Debug)]
pub struct ReorderBuffer<T, S> {
    slots: S,
    held: usize,
    _item: core::marker::PhantomData<T>,
}

impl<T, S: AsRef<[Option<Held<T>>]> + AsMut<[Option<Held<T>>]>> ReorderBuffer<T, S> {
    /// A buffer over `slots`, which must all be `None`; its window is
    /// their number, at most [`MAX_WINDOW`] (more are not used).
    pub fn with_storage(slots: S) -> Self {
        ReorderBuffer {
            slots,
            held: 0,
            _item: core::marker::PhantomData,
        }
    }

    /// The window: how many PSNs from the expected one (included) it
    /// covers: the storage's length, at most [`MAX_WINDOW`], rounded down
    /// to a power of two (which divides the PSN space, so slot `psn mod W`
    /// stays unique within a window across the PSN wrap).
    pub fn window(&self) -> usize {
        power_of_two_floor(self.slots.as_ref().len().min(MAX_WINDOW))
    }

    /// Requests held.
    pub const fn len(&self) -> usize {
        self.held
    }

    /// Whether nothing is held.
    pub const fn is_empty(&self) -> bool {
        self.held == 0
    }

    fn slot_of(&self, psn: Psn) -> Option<usize> {
        let w = u32::try_from(self.window()).ok().filter(|&w| w != 0)?;
        usize::try_from(psn.value().checked_rem(w)?).ok()
    }

    /// Offers request `psn` (`item`) while the engine expects `expected`.
    pub fn offer(&mut self, expected: Psn, psn: Psn, item: T) -> Offer<T> {
        let ahead = psn.diff(expected);
        if ahead <= 0 || self.window() == 0 {
            return Offer::Process(item);
        }
        if usize::try_from(ahead).map_or(true, |a| a >= self.window()) {
            return Offer::Beyond(item);
        }
        let Some(slot) = self
            .slot_of(psn)
            .and_then(|i| self.slots.as_mut().get_mut(i))
        else {
            return Offer::Beyond(item);
        };
        match slot {
            Some(h) if h.psn == psn => Offer::Duplicate(item),
            // A stale entry (a PSN the engine passed without taking it:
            // inside a READ's response range, which no honest requester
            // sends): replaced.
            Some(h) => {
                *h = Held { psn, item };
                Offer::Held
            }
            None => {
                *slot = Some(Held { psn, item });
                self.held = self.held.saturating_add(1);
                Offer::Held
            }
        }
    }

    /// The held request at `expected`, if there is one, taken out.
    pub fn take(&mut self, expected: Psn) -> Option<T> {
        let i = self.slot_of(expected)?;
        let slot = self.slots.as_mut().get_mut(i)?;
        if slot.as_ref().is_some_and(|h| h.psn == expected) {
            self.held = self.held.saturating_sub(1);
            return slot.take().map(|h| h.item);
        }
        None
    }

    /// Puts back the request [`ReorderBuffer::take`] just gave for
    /// `psn` (the engine could not take it yet: it waits behind READ
    /// responses or a page fault). Gives it back if its slot is taken.
    pub fn restore(&mut self, psn: Psn, item: T) -> Result<(), T> {
        let Some(slot) = self
            .slot_of(psn)
            .and_then(|i| self.slots.as_mut().get_mut(i))
        else {
            return Err(item);
        };
        if slot.is_some() {
            return Err(item);
        }
        *slot = Some(Held { psn, item });
        self.held = self.held.saturating_add(1);
        Ok(())
    }

    /// Takes out one request the engine went past without taking it (its
    /// PSN now behind `expected`: stale, to be dropped), if any.
    pub fn take_stale(&mut self, expected: Psn) -> Option<T> {
        let slot = self
            .slots
            .as_mut()
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|h| h.psn.diff(expected) < 0))?;
        self.held = self.held.saturating_sub(1);
        slot.take().map(|h| h.item)
    }

    /// Takes out any held request (to drop everything: the connection
    /// ends or restarts).
    pub fn take_any(&mut self) -> Option<T> {
        let slot = self.slots.as_mut().iter_mut().find(|s| s.is_some())?;
        self.held = self.held.saturating_sub(1);
        slot.take().map(|h| h.item)
    }

    /// The SACK bitmap while the engine expects `expected`: bit `i` set if
    /// PSN `expected + i` is held.
    pub fn bitmap(&self, expected: Psn) -> SackBits {
        let mut bits = SackBits::EMPTY;
        for h in self.slots.as_ref().iter().flatten() {
            let ahead = h.psn.diff(expected);
            if let Ok(i) = u32::try_from(ahead) {
                if i != 0 && i < SACK_SPAN {
                    bits.set(i);
                }
            }
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Buf = ReorderBuffer<u32, [Option<Held<u32>>; 8]>;

    fn buf() -> Buf {
        ReorderBuffer::with_storage([None; 8])
    }

    #[test]
    fn holds_within_the_window_and_gives_back_the_rest() {
        let mut b = buf();
        let e = Psn::new(0xFF_FFFE);
        assert_eq!(b.offer(e, e, 0), Offer::Process(0));
        assert_eq!(b.offer(e, e.wrapping_sub(1), 1), Offer::Process(1));
        assert_eq!(b.offer(e, e.wrapping_add(1), 2), Offer::Held);
        assert_eq!(b.offer(e, e.wrapping_add(1), 3), Offer::Duplicate(3));
        assert_eq!(b.offer(e, e.wrapping_add(7), 4), Offer::Held);
        assert_eq!(b.offer(e, e.wrapping_add(8), 5), Offer::Beyond(5));
        assert_eq!(b.len(), 2);
        let bits = b.bitmap(e);
        assert!(bits.is_set(1) && bits.is_set(7) && bits.count() == 2);
        assert_eq!(b.take(e), None);
        assert_eq!(b.take(e.wrapping_add(1)), Some(2));
        assert_eq!(b.restore(e.wrapping_add(1), 2), Ok(()));
        assert_eq!(b.restore(e.wrapping_add(9), 6), Err(6));
        assert_eq!(b.take(e.wrapping_add(1)), Some(2));
        assert_eq!(b.take(e.wrapping_add(2)), None);
        assert_eq!(b.take_stale(e.wrapping_add(2)), None);
        // The expected PSN itself is not stale: it is next.
        assert_eq!(b.take_stale(e.wrapping_add(7)), None);
        assert_eq!(b.take_stale(e.wrapping_add(9)), Some(4));
        assert!(b.is_empty());
    }

    #[test]
    fn an_empty_storage_holds_nothing() {
        let mut b: ReorderBuffer<u32, [Option<Held<u32>>; 0]> = ReorderBuffer::with_storage([]);
        assert_eq!(b.offer(Psn::ZERO, Psn::new(1), 7), Offer::Process(7));
        assert_eq!(b.take(Psn::new(1)), None);
    }

    #[test]
    fn take_any_empties_it() {
        let mut b = buf();
        for i in 1..8 {
            assert_eq!(b.offer(Psn::ZERO, Psn::new(i), i), Offer::Held);
        }
        let mut n = 0;
        while b.take_any().is_some() {
            n += 1;
        }
        assert_eq!(n, 7);
        assert!(b.is_empty());
    }
}
