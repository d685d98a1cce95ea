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
pub mod reorder;
pub mod scoreboard;
pub mod window;

pub use ext::{Caps, ExtKind, HelloAck, Sack, SackBits};
pub use negotiation::Negotiation;
pub use reorder::{Offer, ReorderBuffer};
pub use scoreboard::Scoreboard;
pub use window::PathWindow;
