//! The control interface's ABI: generic netlink family `sroce`.
//!
//! Shared by the kernel module (which registers the family) and the `sroce`
//! command-line tool, so both agree on numbers. All integer attributes are
//! in host byte order, as usual for generic netlink.
//!
//! Commands:
//! - [`CMD_DEV_GET`]: with [`ATTR_DEV_NAME`], one device; as a dump, every
//!   sroce device. The reply carries [`ATTR_DEV_NAME`], [`ATTR_IFINDEX`],
//!   [`ATTR_GROUP_SIZE`], [`ATTR_POLICY`], [`ATTR_PORT_MIN`] and
//!   [`ATTR_PORT_MAX`].
//! - [`CMD_DEV_SET`] (needs `CAP_NET_ADMIN`): [`ATTR_DEV_NAME`] and any of
//!   [`ATTR_GROUP_SIZE`], [`ATTR_POLICY`], [`ATTR_PORT_MIN`] with
//!   [`ATTR_PORT_MAX`]; all checked before anything changes.
//!
//! The values are a device's defaults for new queue pairs' session groups;
//! see `docs/sessions.md`.

use super::{Policy, MAX_SESSIONS};

/// Family name.
pub const FAMILY_NAME: &str = "sroce";
/// Family version.
pub const FAMILY_VERSION: u8 = 1;

/// Get one device (doit) or all (dump).
pub const CMD_DEV_GET: u8 = 1;
/// Change a device's settings.
pub const CMD_DEV_SET: u8 = 2;

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
/// The highest attribute type.
pub const ATTR_MAX: u16 = ATTR_PORT_MAX;

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
