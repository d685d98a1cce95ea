//! The multipath transport between two sroce peers: one RC connection's
//! messages over several sessions at once.
//!
//! A plain RoCEv2 responder accepts only the expected PSN, so messages
//! spread over paths of different delay arrive out of order and cost a
//! sequence NAK and a go-back-N each. Between two sroce peers that agreed
//! to it (see [`ext`] for the wire, [`negotiation`] for the agreement):
//!
//! - the responder holds requests that arrive ahead of the expected PSN,
//!   within a bounded window ([`reorder::ReorderBuffer`]), and hands them
//!   to the unchanged in-order responder engine once the gap before them
//!   is filled: RC semantics (completions in order, exactly once, nothing
//!   visible before it is complete) are the engine's, untouched;
//! - instead of a sequence NAK it tells the requester which PSNs it holds
//!   (a selective acknowledgement, [`ext::Sack`]);
//! - the requester resends only the PSNs that are missing and were
//!   overtaken on their own session by a later packet that arrived
//!   ([`scoreboard::Scoreboard`]): a packet is presumed lost only when its
//!   own path delivered something sent after it, so reordering *between*
//!   paths of different delay never causes a resend;
//! - a session whose packets in flight are all lost (nothing after them
//!   on it arrives to show it) is found by its own timer
//!   ([`quiet::QuietTimer`]), sooner than the QP's transport timer;
//! - with the responder tolerating reordering, the requester spreads
//!   messages over its sessions without the reorder guard.
//!
//! A peer that never agreed (rxe, hardware, an older sroce, a one-session
//! group) sees plain RoCEv2 only: the hello is a duplicate zero-length
//! RDMA WRITE, which every RC responder re-acknowledges and otherwise
//! ignores, and nothing else is sent before the peer answered it.

pub mod congestion;
pub mod ext;
pub mod negotiation;
pub mod quiet;
pub mod reorder;
pub mod scoreboard;
pub mod window;

pub use ext::{Caps, ExtKind, HelloAck, Sack, SackBits};
pub use negotiation::Negotiation;
pub use quiet::QuietTimer;
pub use reorder::{Offer, ReorderBuffer};
pub use scoreboard::Scoreboard;
pub use window::PathWindow;

/// `a` was sent before `b` in one session's order (wrapping).
pub(crate) const fn seq_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 1 << 31
}

/// Whether a packet sent as `seq` (a session's send sequence) was sent
/// before the point `since`, with `next_seq` the session's next: a point
/// 2^30 sends back is long past (sequence numbers wrap, and an old point
/// must not swallow what is sent after the wrap).
pub(crate) const fn sent_before(seq: u32, since: u32, next_seq: u32) -> bool {
    seq_before(seq, since) && next_seq.wrapping_sub(since) < 1 << 30
}
