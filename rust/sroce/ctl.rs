// SPDX-License-Identifier: GPL-2.0

//! The control interface: generic netlink family `sroce` (ABI in
//! `roce::session::ctl`), used by the `sroce` tool (`tools/sroce-cli`).
//!
//! Per device it holds the session defaults new queue pairs will take —
//! group size, selection policy, reserved source-port range — once the data
//! path uses sessions. Today nothing reads them: they are stored, reported
//! and validated, and no traffic changes.
//!
//! Devices are found by name in every network namespace, as the RDMA core
//! shows them in its default shared mode; changes need `CAP_NET_ADMIN` in
//! the initial user namespace.

use super::{device::SroceDevice, link::SroceDriver};
use crate::net::genl::{AttrPolicy, Dump, Family, Message, Op, Request};
use crate::rdma::device::{Device, PORT};
use crate::roce::session::{ctl as abi, GroupConfig, Policy, PortRange};
use core::cell::Cell;
use kernel::{prelude::*, str::CStr};

/// A device's session defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionDefaults {
    /// Group size and policy of new queue pairs.
    pub(crate) group: GroupConfig,
    /// Source ports extra sessions take.
    pub(crate) ports: PortRange,
}

impl SessionDefaults {
    /// The protocol core's defaults.
    pub(crate) const DEFAULT: Self = Self {
        group: GroupConfig::DEFAULT,
        ports: PortRange::DEFAULT,
    };
}

impl Family for SroceDriver {
    const NAME: &'static CStr = c"sroce";
    const VERSION: u32 = abi::FAMILY_VERSION as u32;
    const POLICY: &'static [AttrPolicy] = &[
        AttrPolicy::Reject,
        // ATTR_DEV_NAME
        AttrPolicy::String {
            max_len: abi::DEV_NAME_MAX,
        },
        // ATTR_IFINDEX (reported only)
        AttrPolicy::Reject,
        // ATTR_GROUP_SIZE
        AttrPolicy::U8 {
            min: abi::GROUP_SIZE_MIN,
            max: abi::GROUP_SIZE_MAX,
        },
        // ATTR_POLICY
        AttrPolicy::U8 {
            min: 0,
            max: abi::POLICY_MAX,
        },
        // ATTR_PORT_MIN
        AttrPolicy::U16,
        // ATTR_PORT_MAX
        AttrPolicy::U16,
    ];
    const OPS: &'static [Op] = &[
        Op {
            cmd: abi::CMD_DEV_GET,
            doit: true,
            dump: true,
            admin: false,
        },
        Op {
            cmd: abi::CMD_DEV_SET,
            doit: true,
            dump: false,
            admin: true,
        },
    ];

    fn doit(&self, cmd: u8, req: &Request<'_>) -> Result {
        let Some(name) = req.str(abi::ATTR_DEV_NAME) else {
            req.set_err(0, c"device name missing");
            return Err(EINVAL);
        };
        let r = match cmd {
            abi::CMD_DEV_GET => self
                .registry
                .with_device(|d| d.name() == name, snapshot)
                .ok_or(ENODEV)
                .and_then(|(s, ifindex)| {
                    req.reply(abi::CMD_DEV_GET, |m| fill(m, name, ifindex, &s))
                }),
            abi::CMD_DEV_SET => {
                let change = parse_set(req)?;
                self.registry
                    .with_device(|d| d.name() == name, |d| change.apply(d))
                    .ok_or(ENODEV)
            }
            _ => Err(EOPNOTSUPP),
        };
        if r == Err(ENODEV) {
            req.set_err(abi::ATTR_DEV_NAME, c"no such sroce device");
        }
        r
    }

    fn dump(&self, cmd: u8, cursor: &mut usize, out: &mut Dump<'_>) -> Result {
        if cmd != abi::CMD_DEV_GET {
            return Err(EOPNOTSUPP);
        }
        loop {
            let i = Cell::new(0usize);
            let want = *cursor;
            let done = self.registry.with_device(
                |_| {
                    let n = i.get();
                    i.set(n + 1);
                    n == want
                },
                |d| {
                    let (s, ifindex) = snapshot(d);
                    out.entry(abi::CMD_DEV_GET, |m| fill(m, d.name(), ifindex, &s))
                },
            );
            match done {
                None => return Ok(()),
                Some(r) => r?,
            }
            *cursor += 1;
        }
    }
}

/// A device's settings and its net device's ifindex (0 if it has none).
fn snapshot(d: &Device<SroceDevice>) -> (SessionDefaults, u32) {
    let ifindex = d
        .netdev(PORT)
        .map_or(0, |n| u32::try_from(n.ifindex()).unwrap_or(0));
    (*d.data().sessions.lock(), ifindex)
}

fn fill(m: &mut Message<'_>, name: &CStr, ifindex: u32, s: &SessionDefaults) -> Result {
    m.put(abi::ATTR_DEV_NAME, name)?;
    m.put(abi::ATTR_IFINDEX, &ifindex)?;
    m.put(abi::ATTR_GROUP_SIZE, &s.group.size)?;
    m.put(abi::ATTR_POLICY, &abi::policy_to_u8(s.group.policy))?;
    m.put(abi::ATTR_PORT_MIN, &s.ports.first())?;
    m.put(abi::ATTR_PORT_MAX, &s.ports.last())
}

/// A validated `DEV_SET`.
struct Change {
    size: Option<u8>,
    policy: Option<Policy>,
    ports: Option<PortRange>,
}

/// Checks every attribute of a `DEV_SET` before anything changes. The
/// policy already bounded the group size and the policy value.
fn parse_set(req: &Request<'_>) -> Result<Change> {
    let size = req.u8(abi::ATTR_GROUP_SIZE);
    let policy = match req.u8(abi::ATTR_POLICY) {
        None => None,
        Some(v) => match abi::policy_from_u8(v) {
            Some(p) => Some(p),
            None => {
                req.set_err(abi::ATTR_POLICY, c"unknown policy");
                return Err(EINVAL);
            }
        },
    };
    let ports = match (req.u16(abi::ATTR_PORT_MIN), req.u16(abi::ATTR_PORT_MAX)) {
        (None, None) => None,
        (Some(first), Some(last)) => match PortRange::new(first, last) {
            Ok(r) => Some(r),
            Err(_) => {
                req.set_err(
                    abi::ATTR_PORT_MIN,
                    c"port range: need 0 < PORT_MIN <= PORT_MAX",
                );
                return Err(ERANGE);
            }
        },
        (Some(_), None) | (None, Some(_)) => {
            req.set_err(0, c"PORT_MIN and PORT_MAX go together");
            return Err(EINVAL);
        }
    };
    if size.is_none() && policy.is_none() && ports.is_none() {
        req.set_err(0, c"nothing to change");
        return Err(EINVAL);
    }
    Ok(Change {
        size,
        policy,
        ports,
    })
}

impl Change {
    /// Applies the change at once (no reader sees half of it).
    ///
    /// Queue pairs will copy these defaults when they are created, once the
    /// data path uses sessions; existing ones keep theirs.
    fn apply(&self, d: &Device<SroceDevice>) {
        let mut s = d.data().sessions.lock();
        s.group = s.group.with_override(self.size, self.policy);
        if let Some(p) = self.ports {
            s.ports = p;
        }
    }
}
