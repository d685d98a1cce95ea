//! Sessions: several UDP 5-tuples per RC queue pair.
//!
//! A *session* is one UDP 5-tuple (local IP, remote IP, UDP, source port,
//! destination port 4791) that the kernel side assigns to a queue pair;
//! applications never choose it. A QP owns a *session group* of 1 to
//! [`MAX_SESSIONS`] sessions; every message goes out on one session chosen
//! by a [`Policy`]. A group of one session is plain RoCEv2: its source port
//! is the one `rdma_get_udp_sport()` gives (see [`port_range`]), so the
//! packets are byte-identical to rxe's.
//!
//! This module is pure logic with no I/O: the driver feeds it events (sends,
//! ACK progress, retransmit timeouts, link changes, the clock in
//! microseconds) and acts on what it returns.
//!
//! - [`port_range`]: the RoCEv2 source-port rule and the reserved-port
//!   allocator;
//! - [`rtt`]: Jacobson/Karels RTT estimation in fixed point;
//! - [`health`]: the per-session health state machine and the timing math;
//! - [`group`]: the session group and the selection policies;
//! - [`ledger`]: which session each unacknowledged message is counted on;
//! - [`receiver`]: which 5-tuples a QP accepts packets from.
//!
//! Ordering is unaffected by sessions: PSNs are per QP, the responder
//! accepts only the expected PSN, and a packet overtaking another on a
//! faster path is handled exactly like a loss on one path (sequence NAK,
//! go-back-N). See `docs/sessions.md` for the design.

pub mod ctl;
pub mod group;
pub mod health;
pub mod ledger;
pub mod port_range;
pub mod receiver;
pub mod rtt;

pub use group::{
    Choice, Counters, GroupConfig, Policy, PollResult, ProbeKind, Session, SessionGroup,
    SessionSpec, TimeoutAction,
};
pub use health::{Health, HealthConfig, HealthEvent, State};
pub use ledger::{Entry as LedgerEntry, EntryStore, Ledger, LedgerWith};
pub use port_range::{PortAllocator, PortRange};
pub use receiver::{FiveTuple, NetAddr, PeerKind, ReceiveFilter, Reject, RxSession, Verdict};
pub use rtt::RttEstimator;

/// The largest number of sessions in one group.
pub const MAX_SESSIONS: usize = 64;

/// The RoCEv2 UDP destination port (IANA).
pub const ROCE_V2_UDP_DPORT: u16 = 4791;

/// Index of a session inside its group, `0..group.len()`.
///
/// Session 0 is the *primary* session: it uses the standard RoCEv2 source
/// port and the QP's own source address, so a one-session group is plain
/// RoCEv2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u8);

impl SessionId {
    /// The primary session.
    pub const PRIMARY: SessionId = SessionId(0);

    /// The index as `usize`.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The session's bit in a [`SessionMask`].
    pub const fn bit(self) -> u64 {
        if self.0 < 64 {
            1u64 << self.0
        } else {
            0
        }
    }
}

/// A set of sessions of one group, bit `i` standing for [`SessionId`]`(i)`.
pub type SessionMask = u64;

/// Why a session operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionError {
    /// A group must have between 1 and its capacity (at most
    /// [`MAX_SESSIONS`]) sessions.
    BadGroupSize,
    /// Two sessions of a group would have the same source port (and so the
    /// same 5-tuple), or a port is outside its range.
    BadPort,
    /// The port range is empty, reversed or larger than the allocator's
    /// bitmap.
    BadRange,
    /// Not enough free ports in the reserved range.
    PortsExhausted,
    /// The port being freed is not allocated.
    NotAllocated,
    /// The session id is not in the group.
    NoSuchSession,
    /// Every session of the group has exhausted its retry budget: the QP
    /// must complete the WR with `IB_WC_RETRY_EXC_ERR`.
    RetryExceeded,
}

impl SessionError {
    /// A short, static, human-readable description.
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionError::BadGroupSize => "bad session group size",
            SessionError::BadPort => "duplicate or out-of-range source port",
            SessionError::BadRange => "bad port range",
            SessionError::PortsExhausted => "no free source ports",
            SessionError::NotAllocated => "port not allocated",
            SessionError::NoSuchSession => "no such session",
            SessionError::RetryExceeded => "retry count exceeded on every session",
        }
    }
}

impl core::fmt::Display for SessionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}
