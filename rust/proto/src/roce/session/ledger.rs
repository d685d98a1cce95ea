//! Which session each unacknowledged message of an RC QP is counted on.
//!
//! The group keeps per-session outstanding counts (for `has_outstanding`,
//! which decides whether a session going down needs a resend, and for the
//! least-outstanding policy). A go-back resets them all, because every
//! unacknowledged message is then resent, on the session the go-back
//! picked. The resend reaches the messages one by one, though: a message
//! whose first transmission was delivered after all (a late packet on a
//! slower path) can complete before its resend is reported, and it must
//! then not be taken off any session's count, or the count of the session
//! it was first sent on drops below what that session really carries,
//! and a later link failure there would find "nothing outstanding" to
//! fail over. The ledger remembers per message whether and where it is
//! counted, so the counts always equal the messages they stand for.
//!
//! Messages are known by their tag (the work request's sequence number);
//! at most as many as the ledger has entries are unacknowledged at a time.

use super::{
    group::{Group, SessionStore},
    health::State,
    SessionId,
};

/// One unacknowledged message: an element of a ledger's storage (see
/// [`EntryStore`]), opaque outside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Its tag (the slot is `tag` modulo the ledger's entries).
    tag: u32,
    /// Sent and not completed.
    live: bool,
    /// The session of its latest transmission.
    sent_on: u8,
    /// The session whose outstanding count holds it.
    counted_on: Option<u8>,
    /// Sent more than once (no RTT sample then: Karn).
    resent: bool,
    /// Resent in the current go-back round.
    reported: bool,
    /// Its payload length.
    bytes: u32,
    /// When it was first sent (µs).
    sent_us: u64,
}

/// Where a ledger keeps its entries: a fixed array on the host
/// ([`Ledger`]), or a heap buffer in a kernel (a deep send queue's ledger
/// should not be built on the stack). Its length is the ledger's size.
pub trait EntryStore: AsRef<[Entry]> + AsMut<[Entry]> {}

impl<T> EntryStore for T where T: AsRef<[Entry]> + AsMut<[Entry]> {}

/// The messages of one QP in flight, indexed by tag modulo `W`.
pub type Ledger<const W: usize> = LedgerWith<[Entry; W]>;

/// The messages of one QP in flight, indexed by tag modulo the number of
/// entries of `S`.
#[derive(Clone, Debug)]
pub struct LedgerWith<S> {
    slots: S,
    /// Tag of the next message whose first packet is new.
    next_new: u32,
    /// Where the current go-back round resends.
    resend_on: SessionId,
}

impl<const W: usize> Default for Ledger<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const W: usize> Ledger<W> {
    /// A ledger for a QP that has sent nothing yet.
    pub const fn new() -> Self {
        LedgerWith::with_storage([EMPTY; W])
    }

    /// A ledger that takes over from `old` for a newly built group (see
    /// [`LedgerWith::take_over`]).
    pub fn rebuilt(old: &Self) -> Self {
        let mut l = Self::new();
        l.take_over(old);
        l
    }
}

const EMPTY: Entry = Entry {
    tag: 0,
    live: false,
    sent_on: 0,
    counted_on: None,
    resent: false,
    reported: false,
    bytes: 0,
    sent_us: 0,
};

impl<E: EntryStore> LedgerWith<E> {
    /// A ledger for a QP that has sent nothing yet, its entries kept in
    /// `storage` (each must be `Entry::default()`).
    pub const fn with_storage(storage: E) -> Self {
        Self {
            slots: storage,
            next_new: 0,
            resend_on: SessionId(0),
        }
    }

    /// Takes over from `old`, the ledger of the group this one's replaces,
    /// as a ledger that has sent nothing yet: the messages in flight stay
    /// known (first send time, next tag) but are counted nowhere and count
    /// as resent on session 0, which every group has. Both must have as
    /// many entries.
    pub fn take_over<T: EntryStore>(&mut self, old: &LedgerWith<T>) {
        self.next_new = old.next_new;
        self.resend_on = SessionId(0);
        for (n, o) in self
            .slots
            .as_mut()
            .iter_mut()
            .zip(old.slots.as_ref().iter())
        {
            *n = Entry {
                sent_on: 0,
                counted_on: None,
                resent: true,
                reported: false,
                ..*o
            };
        }
    }

    fn len(&self) -> usize {
        self.slots.as_ref().len()
    }

    fn entry(&self, tag: u32) -> Entry {
        let i = (tag as usize).checked_rem(self.len()).unwrap_or(0);
        self.slots.as_ref().get(i).copied().unwrap_or_default()
    }

    fn entry_mut(&mut self, tag: u32) -> Option<&mut Entry> {
        let i = (tag as usize).checked_rem(self.len())?;
        self.slots.as_mut().get_mut(i)
    }

    /// The session a packet of message `tag` (`bytes` of payload in
    /// `packets` packets) goes out on; `retransmit` if it is a resend. The
    /// first packet of a new message asks the group's policy; the first
    /// packet of each message resent in a go-back round goes on the
    /// round's session.
    pub fn on_packet<S: SessionStore>(
        &mut self,
        g: &mut Group<S>,
        tag: u32,
        retransmit: bool,
        bytes: u32,
        packets: u32,
        now: u64,
    ) -> SessionId {
        self.on_packet_preferring(g, tag, retransmit, bytes, packets, now, None)
    }

    /// [`LedgerWith::on_packet`], except that a new message goes on
    /// `prefer` instead of the policy's choice while that session is Up
    /// (the multipath transport keeps READs and atomics on one path, so
    /// their responses come back in order).
    #[expect(clippy::too_many_arguments, reason = "on_packet's and the preference")]
    pub fn on_packet_preferring<S: SessionStore>(
        &mut self,
        g: &mut Group<S>,
        tag: u32,
        retransmit: bool,
        bytes: u32,
        packets: u32,
        now: u64,
        prefer: Option<SessionId>,
    ) -> SessionId {
        let resend_on = self.resend_on;
        let new = !retransmit && tag == self.next_new;
        if new {
            self.next_new = self.next_new.wrapping_add(1);
        }
        let Some(e) = self.entry_mut(tag) else {
            return SessionId(0);
        };
        if retransmit && !e.reported {
            e.uncount(g);
            e.reported = true;
            e.resent = true;
            e.sent_on = resend_on.0;
            e.bytes = bytes;
            let sent = g.on_send(resend_on, u64::from(bytes), packets, true, now);
            e.counted_on = sent.is_ok().then_some(resend_on.0);
        } else if new {
            // A message that left the window without completing (an error
            // flushed it) is no longer outstanding anywhere.
            e.uncount(g);
            let preferred =
                prefer.filter(|&p| g.session(p).is_some_and(|s| s.state() == State::Up));
            let on = match preferred {
                Some(p) => p,
                None => g.choose().map_or(SessionId(0), |c| c.session),
            };
            *e = Entry {
                tag,
                live: true,
                sent_on: on.0,
                counted_on: None,
                resent: false,
                reported: false,
                bytes,
                sent_us: now,
            };
            let sent = g.on_send(on, u64::from(bytes), packets, false, now);
            e.counted_on = sent.is_ok().then_some(on.0);
        }
        SessionId(e.sent_on)
    }

    /// Message `tag` completed successfully at `now`: acknowledged on the
    /// session of its latest transmission, and no longer outstanding.
    pub fn on_completed<S: SessionStore>(&mut self, g: &mut Group<S>, tag: u32, now: u64) {
        let Some(e) = self.entry_mut(tag) else {
            return;
        };
        if e.tag != tag || !e.live {
            return;
        }
        e.uncount(g);
        e.live = false;
        let rtt =
            (!e.resent).then(|| u32::try_from(now.saturating_sub(e.sent_us)).unwrap_or(u32::MAX));
        let _ = g.on_ack(SessionId(e.sent_on), rtt, now);
    }

    /// Message `tag` left the session it started on partway (the
    /// multipath transport moved the rest of it): its completion is no
    /// round-trip sample of that session.
    pub fn spread(&mut self, tag: u32) {
        if let Some(e) = self.entry_mut(tag).filter(|e| e.tag == tag && e.live) {
            e.resent = true;
        }
    }

    /// Acknowledgements advanced inside message `tag`, still incomplete:
    /// progress of the session that carried it.
    pub fn on_partial_ack<S: SessionStore>(&mut self, g: &mut Group<S>, tag: u32, now: u64) {
        let _ = g.on_message_progress(self.session_of(tag), now);
    }

    /// A go-back round begins at `now`: every message in flight from
    /// `oldest` (the oldest unacknowledged one's tag) on is resent on `on`,
    /// and counts there from now on, before its resend goes out: a session
    /// the round is about to use holds them if its link goes down
    /// meanwhile.
    pub fn begin_round<S: SessionStore>(
        &mut self,
        g: &mut Group<S>,
        on: SessionId,
        oldest: Option<u32>,
        now: u64,
    ) {
        g.clear_outstanding();
        for e in self.slots.as_mut().iter_mut() {
            e.counted_on = None;
            e.reported = false;
        }
        self.resend_on = on;
        let Some(first) = oldest else {
            return;
        };
        let n = self.next_new.wrapping_sub(first).min(self.len() as u32);
        for k in 0..n {
            let tag = first.wrapping_add(k);
            if let Some(e) = self.entry_mut(tag) {
                if e.tag == tag && e.live && g.hold(on, u64::from(e.bytes), now) {
                    e.counted_on = Some(on.0);
                }
            }
        }
    }

    /// The session message `tag` was last sent on.
    pub fn session_of(&self, tag: u32) -> SessionId {
        SessionId(self.entry(tag).sent_on)
    }

    /// When message `tag` was first sent (µs).
    pub fn sent_us(&self, tag: u32) -> u64 {
        self.entry(tag).sent_us
    }
}

impl Entry {
    /// Takes the message off the count it is on, if any.
    fn uncount<S: SessionStore>(&mut self, g: &mut Group<S>) {
        if let Some(s) = self.counted_on.take() {
            g.forget(SessionId(s), u64::from(self.bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roce::session::{GroupConfig, Policy, SessionGroup, SessionSpec};

    fn group() -> SessionGroup<2> {
        let specs = [
            SessionSpec {
                src_port: 61000,
                local_addr: 0,
            },
            SessionSpec {
                src_port: 61001,
                local_addr: 1,
            },
        ];
        let mut cfg = GroupConfig::DEFAULT;
        cfg.policy = Policy::RoundRobin;
        cfg.reorder_guard = false;
        SessionGroup::<2>::new(&cfg, &specs, 0, Some(1000), 0).unwrap()
    }

    /// A message first sent on session 1 completes after a go-back but
    /// before its resend was reported (its late first copy was accepted),
    /// while a new message rides session 1: session 1 still counts that
    /// one, so its link going down must resend.
    #[test]
    fn completion_before_its_resend_leaves_the_other_counts() {
        let mut g = group();
        let mut l = Ledger::<8>::new();
        assert_eq!(l.on_packet(&mut g, 0, false, 100, 1, 0), SessionId(0));
        assert_eq!(l.on_packet(&mut g, 1, false, 100, 1, 0), SessionId(1));
        // A sequence NAK for message 0: go back, resend on session 0.
        let a = g.on_sequence_nak(SessionId(0), 10).unwrap();
        l.begin_round(&mut g, a.resend_on, Some(0), 10);
        assert_eq!(l.on_packet(&mut g, 0, true, 100, 1, 10), SessionId(0));
        // Message 0's resend and message 1's late original are accepted;
        // message 1 completes before its resend.
        l.on_completed(&mut g, 0, 20);
        l.on_completed(&mut g, 1, 20);
        // Message 2 goes out on session 1 (round-robin), then session 1's
        // link goes down while it is outstanding.
        let on = l.on_packet(&mut g, 2, false, 100, 1, 30);
        assert_eq!(g.session(on).unwrap().outstanding_msgs(), 1);
        let r = g.on_link(on.0, false, 40);
        assert!(r.went_down != 0);
        assert!(
            r.resend_on.is_some(),
            "the message on the dead link is resent"
        );
    }

    /// A ledger over heap entries indexes by its own length, and one that
    /// takes over keeps the messages' send times and counts them nowhere.
    #[test]
    fn heap_storage_and_take_over() {
        let mut g = group();
        let mut l = LedgerWith::with_storage(std::vec![Entry::default(); 3]);
        for tag in 0..3 {
            l.on_packet(&mut g, tag, false, 100, 1, 10 + u64::from(tag));
            l.on_completed(&mut g, tag, 20);
        }
        // Tag 3 takes tag 0's entry (3 entries), tag 4 tag 1's.
        assert_eq!(l.on_packet(&mut g, 3, false, 100, 1, 33), SessionId(1));
        assert_eq!(l.on_packet(&mut g, 4, false, 100, 1, 34), SessionId(0));
        assert_eq!((l.sent_us(0), l.sent_us(2), l.sent_us(3)), (33, 12, 33));
        let mut fresh = LedgerWith::with_storage(std::vec![Entry::default(); 3]);
        fresh.take_over(&l);
        assert_eq!((fresh.sent_us(3), fresh.sent_us(4)), (33, 34));
        assert_eq!(fresh.session_of(3), SessionId(0));
        // The next new message is the one after the old ledger's last.
        assert_eq!(fresh.on_packet(&mut g, 5, false, 100, 1, 40), SessionId(1));
        assert_eq!(fresh.sent_us(5), 40);
    }

    /// A message resent twice in one round is counted once.
    #[test]
    fn resend_counted_once_per_round() {
        let mut g = group();
        let mut l = Ledger::<8>::new();
        l.on_packet(&mut g, 0, false, 3000, 3, 0);
        l.begin_round(&mut g, SessionId(1), Some(0), 5);
        for _ in 0..3 {
            assert_eq!(l.on_packet(&mut g, 0, true, 3000, 3, 5), SessionId(1));
        }
        assert_eq!(g.session(SessionId(1)).unwrap().outstanding_msgs(), 1);
        assert_eq!(g.session(SessionId(0)).unwrap().outstanding_msgs(), 0);
        l.on_completed(&mut g, 0, 9);
        assert!(!g.has_outstanding());
    }

    /// A round sent to a session that carried nothing for a long time
    /// starts its stall clock: the health poll right after must not take
    /// the old quiet for a stall (the backup session of `failover`).
    #[test]
    fn round_on_an_idle_session_starts_its_stall_clock() {
        let mut g = group();
        let mut l = Ledger::<8>::new();
        assert_eq!(l.on_packet(&mut g, 0, false, 100, 1, 0), SessionId(0));
        // Session 1 has been quiet since 0; at 100 ms (100 RTOs) a round
        // moves message 0 there.
        l.begin_round(&mut g, SessionId(1), Some(0), 100_000);
        assert_eq!(g.session(SessionId(1)).unwrap().outstanding_msgs(), 1);
        assert_eq!(g.poll(100_001).went_down, 0);
        // Without progress for the stall limit it does go down.
        assert_ne!(g.poll(100_000 + 3 * 1000 + 1).went_down, 0);
    }
}
