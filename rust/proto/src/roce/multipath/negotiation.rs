//! Agreeing on the multipath transport, per direction of a connection.
//!
//! The requester of a multi-session group sends hellos (see
//! [`super::ext`]) while it has work and no answer, at most
//! [`MAX_HELLOS`] of them, spaced 1, 2, 4, ... ms apart, about 2 s in all
//! (the peer's QP may reach RTR after this side's first packets, and its
//! responder answers only once its work item has made the reorder buffer,
//! which a busy machine may run late). A responder that reads a
//! hello with [`Caps::SACK`] holds out-of-order requests and SACKs from
//! then on, and answers with a hello ACK; the requester sprays its
//! messages over its sessions once a hello ACK with [`Caps::REORDER`]
//! arrives. Each direction is agreed on its own (each side's requester
//! sends its own hellos), so nothing depends on which side starts.

use super::ext::{Caps, HelloAck};

/// Hellos sent before giving up (the peer stays plain RoCEv2).
pub const MAX_HELLOS: u8 = 12;

/// Gap before the second hello, µs; it doubles after each.
const FIRST_GAP_US: u64 = 1000;

/// One connection's agreement state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Negotiation {
    hellos: u8,
    last_hello_us: u64,
    /// The peer's responder holds out-of-order requests (its hello ACK).
    peer_reorders: bool,
    /// Its window, in PSNs.
    peer_window: u16,
    /// The peer's requester reads SACKs (its hello).
    peer_reads_sacks: bool,
}

impl Negotiation {
    /// Nothing agreed, no hello sent.
    pub const fn new() -> Self {
        Negotiation {
            hellos: 0,
            last_hello_us: 0,
            peer_reorders: false,
            peer_window: 0,
            peer_reads_sacks: false,
        }
    }

    /// Whether a hello should go out now (`now_us`), for a requester with
    /// work to send.
    pub fn hello_due(&self, now_us: u64) -> bool {
        if self.peer_reorders || self.hellos >= MAX_HELLOS {
            return false;
        }
        if self.hellos == 0 {
            return true;
        }
        let gap = FIRST_GAP_US
            .checked_shl(u32::from(self.hellos.saturating_sub(1)))
            .unwrap_or(u64::MAX);
        now_us.saturating_sub(self.last_hello_us) >= gap
    }

    /// A hello went out at `now_us`.
    pub fn hello_sent(&mut self, now_us: u64) {
        self.hellos = self.hellos.saturating_add(1);
        self.last_hello_us = now_us;
    }

    /// Hellos sent so far.
    pub const fn hellos(&self) -> u8 {
        self.hellos
    }

    /// A hello ACK arrived.
    pub fn on_hello_ack(&mut self, ack: &HelloAck) {
        if ack.caps.contains(Caps::REORDER) && ack.window > 1 {
            self.peer_reorders = true;
            self.peer_window = ack.window;
        }
    }

    /// A hello arrived announcing `caps`: whether to hold and SACK from
    /// now on, and the answer (with this side's `window`).
    pub fn on_hello(&mut self, caps: Caps, window: u16) -> HelloAck {
        if caps.contains(Caps::SACK) {
            self.peer_reads_sacks = true;
        }
        HelloAck {
            caps: Caps::ALL,
            window,
        }
    }

    /// Whether this side's requester may spread messages over its
    /// sessions regardless of order (the peer's responder reorders).
    pub const fn peer_reorders(&self) -> bool {
        self.peer_reorders
    }

    /// The peer responder's window, in PSNs (0 before it answered).
    pub const fn peer_window(&self) -> u16 {
        self.peer_window
    }

    /// Whether this side's responder holds out-of-order requests and sends
    /// SACKs (the peer's requester reads them).
    pub const fn peer_reads_sacks(&self) -> bool {
        self.peer_reads_sacks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_back_off_and_stop() {
        let mut n = Negotiation::new();
        let mut t = 0;
        let mut sent = std::vec::Vec::new();
        while t < 10_000_000 {
            if n.hello_due(t) {
                n.hello_sent(t);
                sent.push(t);
            }
            t += 100;
        }
        assert_eq!(
            sent,
            [0, 1000, 3000, 7000, 15000, 31000, 63000, 127000, 255000, 511000, 1023000, 2047000]
        );
        assert!(!n.peer_reorders());
    }

    #[test]
    fn agreement_is_per_direction() {
        let mut a = Negotiation::new();
        let mut b = Negotiation::new();
        // A's hello reaches B: B's responder will SACK; B answers.
        let ack = b.on_hello(Caps::ALL, 128);
        assert!(b.peer_reads_sacks() && !b.peer_reorders());
        a.on_hello_ack(&ack);
        assert!(a.peer_reorders() && !a.peer_reads_sacks());
        assert_eq!(a.peer_window(), 128);
        assert!(!a.hello_due(u64::MAX));
        // A hello without SACK support changes nothing on the responder.
        let mut c = Negotiation::new();
        let _ = c.on_hello(Caps::REORDER, 128);
        assert!(!c.peer_reads_sacks());
        // A hello ACK without REORDER (or no window) does not agree.
        let mut d = Negotiation::new();
        d.on_hello_ack(&HelloAck {
            caps: Caps::SACK,
            window: 128,
        });
        d.on_hello_ack(&HelloAck {
            caps: Caps::ALL,
            window: 1,
        });
        assert!(!d.peer_reorders());
    }
}
