//! The control interface's ABI: generic netlink family `sroce`.
//!
//! Shared by the kernel module (which registers the family) and the `sroce`
//! command-line tool, so both agree on numbers. All integer attributes are
//! in host byte order, as usual for generic netlink.
//!
//! Commands:
//! - [`CMD_DEV_GET`]: with [`ATTR_DEV_NAME`], one device; as a dump, every
//!   sroce device. The reply carries [`ATTR_DEV_NAME`], [`ATTR_IFINDEX`],
//!   [`ATTR_GROUP_SIZE`], [`ATTR_POLICY`], [`ATTR_PORT_MIN`],
//!   [`ATTR_PORT_MAX`] and [`ATTR_REORDER_GUARD`].
//! - [`CMD_DEV_SET`] (needs `CAP_NET_ADMIN`): [`ATTR_DEV_NAME`] and any of
//!   [`ATTR_GROUP_SIZE`], [`ATTR_POLICY`], [`ATTR_PORT_MIN`] with
//!   [`ATTR_PORT_MAX`], [`ATTR_REORDER_GUARD`]; all checked before anything
//!   changes.
//!
//! - [`CMD_SESSION_GET`] (dump only, unprivileged): one entry per session
//!   of every connected RC queue pair of every sroce device:
//!   [`ATTR_DEV_NAME`], [`ATTR_QPN`], [`ATTR_POLICY`], [`ATTR_SESSION_ID`],
//!   the 5-tuple ([`ATTR_SRC_ADDR`], [`ATTR_DST_ADDR`] as 16-byte IPv6 or
//!   IPv4-mapped addresses, [`ATTR_SPORT`]; the destination port is
//!   always 4791), [`ATTR_STATE`] (see [`state_name`]) and the counters
//!   [`ATTR_TX_PACKETS`], [`ATTR_TX_BYTES`], [`ATTR_RETRANSMITS`],
//!   [`ATTR_TIMEOUTS`], [`ATTR_ACKED`] (`u64`, 4-byte aligned) and
//!   [`ATTR_SRTT_US`] (`u32`), [`ATTR_REPLACEMENTS`]; [`ATTR_ROCE_V1`] on a
//!   RoCE v1 connection's session; [`ATTR_CWND`] and [`ATTR_WINDOW_CUTS`]
//!   while the multipath transport is in use.
//!
//! - [`CMD_RX_FLOW_GET`] (dump only, unprivileged): received packets per
//!   flow they came on, per connected queue pair.
//! - [`CMD_SESSION_EVENT`]: sent, never requested, to the multicast group
//!   [`MCGRP_EVENTS`] when a session goes down, up or probing.
//!
//! The `DEV_SET` values are a device's defaults for the session groups of
//! queue pairs that connect afterwards; see `docs/sessions.md`.

use super::{health::State, Policy, MAX_SESSIONS};

/// Family name.
pub const FAMILY_NAME: &str = "sroce";
/// Family version.
pub const FAMILY_VERSION: u8 = 1;

/// Get one device (doit) or all (dump).
pub const CMD_DEV_GET: u8 = 1;
/// Change a device's settings.
pub const CMD_DEV_SET: u8 = 2;
/// List the sessions (dump).
pub const CMD_SESSION_GET: u8 = 3;
/// Override a queue pair's group (needs `CAP_NET_ADMIN`): [`ATTR_DEV_NAME`],
/// [`ATTR_QPN`] and any of [`ATTR_GROUP_SIZE`], [`ATTR_POLICY`],
/// [`ATTR_REORDER_GUARD`]. A connected RC queue pair changes at once (a new
/// size rebuilds its group; messages in flight complete normally); the
/// override also applies whenever it connects again.
pub const CMD_QP_SET: u8 = 4;
/// A session's health changed (never a request: sent to the
/// [`MCGRP_EVENTS`] group of the device's network namespace): the
/// attributes of a [`CMD_SESSION_GET`] entry, [`ATTR_STATE`] the new state.
pub const CMD_SESSION_EVENT: u8 = 5;
/// List what the connected RC/UC queue pairs received, per flow it came
/// on (dump, unprivileged; the namespace rule of [`CMD_SESSION_GET`]): per
/// peer UDP source port (a sroce peer's sessions), [`ATTR_DEV_NAME`],
/// [`ATTR_QPN`], [`ATTR_RX_FLOW`], [`ATTR_SRC_ADDR`] (the peer),
/// [`ATTR_DST_ADDR`], [`ATTR_SPORT`] (the peer's port), [`ATTR_RX_PACKETS`],
/// [`ATTR_RX_BYTES`], and [`ATTR_ROCE_V1`] on a RoCE v1 connection.
pub const CMD_RX_FLOW_GET: u8 = 6;

/// The multicast group of session events.
pub const MCGRP_EVENTS: &str = "sroce-events";

/// RDMA device name (NUL-terminated string).
pub const ATTR_DEV_NAME: u16 = 1;
/// Interface index of the device's net device (`u32`, in that device's
/// network namespace).
pub const ATTR_IFINDEX: u16 = 2;
/// Default session group size (`u8`, `1..=MAX_SESSIONS`).
pub const ATTR_GROUP_SIZE: u16 = 3;
/// Default selection policy (`u8`, see [`policy_to_u8`]).
pub const ATTR_POLICY: u16 = 4;
/// First reserved UDP source port (`u16`).
pub const ATTR_PORT_MIN: u16 = 5;
/// Last reserved UDP source port (`u16`).
pub const ATTR_PORT_MAX: u16 = 6;
/// Reorder guard (`u8`, 0 or 1): change a busy QP's session only when
/// nothing is outstanding (1, the default) or per message (0).
pub const ATTR_REORDER_GUARD: u16 = 7;
/// Queue pair number (`u32`).
pub const ATTR_QPN: u16 = 8;
/// Session index in its group (`u8`; 0 is the plain RoCEv2 flow).
pub const ATTR_SESSION_ID: u16 = 9;
/// UDP source port of the session (`u16`).
pub const ATTR_SPORT: u16 = 10;
/// Local address (16 bytes).
pub const ATTR_SRC_ADDR: u16 = 11;
/// Peer address (16 bytes).
pub const ATTR_DST_ADDR: u16 = 12;
/// Health state (`u8`: 0 up, 1 down, 2 probing).
pub const ATTR_STATE: u16 = 13;
/// Packets sent on the session (`u64`).
pub const ATTR_TX_PACKETS: u16 = 14;
/// Payload bytes sent on the session (`u64`).
pub const ATTR_TX_BYTES: u16 = 15;
/// Messages resent on the session (`u64`).
pub const ATTR_RETRANSMITS: u16 = 16;
/// Retransmit timeouts charged to the session (`u64`).
pub const ATTR_TIMEOUTS: u16 = 17;
/// Messages acknowledged on the session (`u64`).
pub const ATTR_ACKED: u16 = 18;
/// Smoothed round-trip time, µs (`u32`; 0 before the first sample).
pub const ATTR_SRTT_US: u16 = 19;
/// Present (`u8` 1) on the session of a RoCE v1 connection: Ethernet frames
/// with a GRH, no UDP; the addresses are its GIDs' and the port means
/// nothing.
pub const ATTR_ROCE_V1: u16 = 20;
/// Index of a received flow in its queue pair's table (`u8`;
/// [`RX_FLOW_OTHERS`] for what came on flows beyond the table).
pub const ATTR_RX_FLOW: u16 = 21;
/// Packets received (`u64`).
pub const ATTR_RX_PACKETS: u16 = 22;
/// Transport bytes received (`u64`).
pub const ATTR_RX_BYTES: u16 = 23;
/// Times the session's 5-tuple was replaced by a fresh one because its
/// congestion stayed high (`u64`).
pub const ATTR_REPLACEMENTS: u16 = 24;
/// In a [`CMD_SESSION_EVENT`] for a replacement: the source port the
/// session left from before (`u16`); [`ATTR_SPORT`] is the new one.
pub const ATTR_REPLACED_SPORT: u16 = 25;
/// The session's congestion window, packets (`u32`); present while the
/// multipath transport is in use on the queue pair.
pub const ATTR_CWND: u16 = 26;
/// Times the session's congestion window was cut (`u32`; with
/// [`ATTR_CWND`]).
pub const ATTR_WINDOW_CUTS: u16 = 27;
/// The highest attribute type.
pub const ATTR_MAX: u16 = ATTR_WINDOW_CUTS;

/// [`ATTR_RX_FLOW`] of the entry that counts the flows beyond the table.
pub const RX_FLOW_OTHERS: u8 = u8::MAX;

/// The wire value of a session state.
pub const fn state_to_u8(s: State) -> u8 {
    match s {
        State::Up => 0,
        State::Down => 1,
        State::Probing => 2,
    }
}

/// The name of a session state's wire value.
pub const fn state_name(v: u8) -> &'static str {
    match v {
        0 => "up",
        1 => "down",
        2 => "probing",
        _ => "unknown",
    }
}

/// Longest device name, without its NUL (`IB_DEVICE_NAME_MAX - 1`).
pub const DEV_NAME_MAX: u16 = 63;
/// Smallest group size.
pub const GROUP_SIZE_MIN: u8 = 1;
/// Largest group size.
pub const GROUP_SIZE_MAX: u8 = MAX_SESSIONS as u8;
/// Largest policy value.
pub const POLICY_MAX: u8 = 3;

/// The wire value of a policy.
pub const fn policy_to_u8(p: Policy) -> u8 {
    match p {
        Policy::Hash => 0,
        Policy::RoundRobin => 1,
        Policy::LeastOutstanding => 2,
        Policy::Failover => 3,
    }
}

/// The policy of a wire value, if any.
pub const fn policy_from_u8(v: u8) -> Option<Policy> {
    Some(match v {
        0 => Policy::Hash,
        1 => Policy::RoundRobin,
        2 => Policy::LeastOutstanding,
        3 => Policy::Failover,
        _ => return None,
    })
}

/// The policy's name on the command line.
pub const fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Hash => "hash",
        Policy::RoundRobin => "round-robin",
        Policy::LeastOutstanding => "least-outstanding",
        Policy::Failover => "failover",
    }
}

/// The policy named `name` on the command line.
pub fn policy_from_name(name: &str) -> Option<Policy> {
    [
        Policy::Hash,
        Policy::RoundRobin,
        Policy::LeastOutstanding,
        Policy::Failover,
    ]
    .into_iter()
    .find(|p| policy_name(*p) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names() {
        assert_eq!(state_name(state_to_u8(State::Up)), "up");
        assert_eq!(state_name(state_to_u8(State::Down)), "down");
        assert_eq!(state_name(state_to_u8(State::Probing)), "probing");
        assert_eq!(state_name(9), "unknown");
    }

    #[test]
    fn policy_numbers_round_trip() {
        for v in 0..=u8::MAX {
            match policy_from_u8(v) {
                Some(p) => {
                    assert!(v <= POLICY_MAX);
                    assert_eq!(policy_to_u8(p), v);
                    assert_eq!(policy_from_name(policy_name(p)), Some(p));
                }
                None => assert!(v > POLICY_MAX),
            }
        }
        assert_eq!(policy_from_name("Hash"), None);
        assert_eq!(usize::from(GROUP_SIZE_MAX), MAX_SESSIONS);
    }
}
