// SPDX-License-Identifier: GPL-2.0

//! The control interface: generic netlink family `sroce` (ABI in
//! `roce::session::ctl`), used by the `sroce` tool (`tools/sroce-cli`).
//!
//! Per device it holds the session defaults that RC queue pairs take when
//! they connect — group size, selection policy, reorder guard, reserved
//! source-port range — and it lists every connected queue pair's sessions
//! with their 5-tuples, state and counters.
//!
//! Devices are found by name in every network namespace, as the RDMA core
//! shows them in its default shared mode; changes need `CAP_NET_ADMIN` in
//! the initial user namespace.

use super::rc::RxFlows;
use super::{
    device::SroceDevice,
    io,
    link::SroceDriver,
    rc_sessions::{QpSessions, SessionOverride},
};
use crate::net::addr::IpAddr;
use crate::net::genl::{AttrPolicy, Dump, Family, Message, Op, Request};
use crate::rdma::device::{Device, PORT};
use crate::rdma::qp::QpType;
use crate::roce::session::{
    ctl as abi, GroupConfig, NetAddr, Policy, PortRange, RxSession, Session,
};
use core::cell::Cell;
use kernel::{prelude::*, str::CStr};

/// [`abi::MCGRP_EVENTS`], as the C string the family registers.
pub(super) const MCGRP_EVENTS: &CStr = c"sroce-events";
const _: () = {
    let (a, b) = (MCGRP_EVENTS.to_bytes(), abi::MCGRP_EVENTS.as_bytes());
    assert!(a.len() == b.len());
    let mut i = 0;
    while i < a.len() {
        assert!(a[i] == b[i]);
        i += 1;
    }
};
/// Index of [`MCGRP_EVENTS`] in the family's groups.
pub(super) const GROUP_EVENTS: u32 = 0;

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
        // ATTR_REORDER_GUARD
        AttrPolicy::U8 { min: 0, max: 1 },
        // ATTR_QPN
        AttrPolicy::U32,
        // ATTR_SESSION_ID ..= ATTR_WINDOW_CUTS (reported only)
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
        AttrPolicy::Reject,
    ];
    const MCGRPS: &'static [&'static CStr] = &[MCGRP_EVENTS];
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
        Op {
            cmd: abi::CMD_SESSION_GET,
            doit: false,
            dump: true,
            admin: false,
        },
        Op {
            cmd: abi::CMD_QP_SET,
            doit: true,
            dump: false,
            admin: true,
        },
        Op {
            cmd: abi::CMD_RX_FLOW_GET,
            doit: false,
            dump: true,
            admin: false,
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
            abi::CMD_QP_SET => {
                let Some(qpn) = req.u32(abi::ATTR_QPN) else {
                    req.set_err(0, c"queue pair number missing");
                    return Err(EINVAL);
                };
                let change = parse_set(req)?;
                if change.ports.is_some() {
                    req.set_err(abi::ATTR_PORT_MIN, c"the port range is per device");
                    return Err(EINVAL);
                }
                let ov = SessionOverride {
                    size: change.size,
                    policy: change.policy,
                    reorder_guard: change.reorder_guard,
                };
                let r = self
                    .registry
                    .with_device(|d| d.name() == name, |d| set_qp(d, qpn, &ov))
                    .ok_or(ENODEV)
                    .and_then(|r| r);
                if r == Err(ENOENT) {
                    req.set_err(abi::ATTR_QPN, c"no such queue pair");
                } else if r == Err(EADDRINUSE) {
                    req.set_err(
                        abi::ATTR_GROUP_SIZE,
                        c"not enough free source ports in the range",
                    );
                }
                r
            }
            _ => Err(EOPNOTSUPP),
        };
        if r == Err(ENODEV) {
            req.set_err(abi::ATTR_DEV_NAME, c"no such sroce device");
        }
        r
    }

    fn dump(&self, cmd: u8, cursor: &mut usize, out: &mut Dump<'_>) -> Result {
        if cmd == abi::CMD_SESSION_GET || cmd == abi::CMD_RX_FLOW_GET {
            return self.dump_per_qp(cmd, cursor, out);
        }
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

impl SroceDriver {
    /// Every session of every connected queue pair of every device whose
    /// net device is in the requester's network namespace, one entry each,
    /// from `*cursor` on (a [`Position`]: the walk restarts per message and
    /// resumes after the last entry an earlier message carried). Sessions
    /// are addresses and ports of connections: another namespace's are
    /// none of the requester's business, as its sockets would not be
    /// (devices themselves are listed everywhere, as the RDMA core's shared
    /// mode shows them).
    ///
    /// With `cmd` [`abi::CMD_RX_FLOW_GET`], the connections' received flows
    /// instead, by the same rule.
    fn dump_per_qp(&self, cmd: u8, cursor: &mut usize, out: &mut Dump<'_>) -> Result {
        let requester = out.requester_net();
        let start = Position::unpack(*cursor);
        let mut dev_index = start.dev;
        loop {
            let i = Cell::new(0usize);
            let done = self.registry.with_device(
                |_| {
                    let n = i.get();
                    i.set(n + 1);
                    n == dev_index
                },
                |d| -> Result {
                    let here = d.netdev(PORT).is_some_and(|n| n.net().key() == requester);
                    if !here {
                        return Ok(());
                    }
                    // In QP number order (the table's), so a QP that comes
                    // or goes between messages moves nothing before it.
                    for shared in d.data().qps_snapshot()?.iter() {
                        let r = shared.link().with(|qp| -> Result {
                            let qpn = qp.data().qpn();
                            let skip = match dev_index == start.dev {
                                true if qpn < start.qpn => return Ok(()),
                                true if qpn == start.qpn => start.item,
                                _ => 0,
                            };
                            let inner = qp.data().lock();
                            let mut list = Listing {
                                dev: d,
                                at: Position {
                                    dev: dev_index,
                                    qpn,
                                    item: 0,
                                },
                                skip,
                                cursor: &mut *cursor,
                                out: &mut *out,
                            };
                            if cmd == abi::CMD_RX_FLOW_GET {
                                if let Some(rc) = inner.rc.as_ref() {
                                    list.rx_flows(&rc.rx_flows, rc.local_addr(), rc.roce_v1())?;
                                }
                                return Ok(());
                            }
                            // An RC QP's group, or a UD QP's per destination.
                            if let Some(rc) = inner.rc.as_ref() {
                                list.group(&rc.sessions)?;
                            }
                            for g in inner.ud_sessions.groups() {
                                list.group(g)?;
                            }
                            Ok(())
                        });
                        r.unwrap_or(Ok(()))?;
                    }
                    Ok(())
                },
            );
            match done {
                None => return Ok(()),
                Some(r) => r?,
            }
            dev_index += 1;
        }
    }
}

/// Where a per-QP dump resumes, kept in the dump's cursor between
/// messages: after item `item` - 1 of queue pair `qpn` of the `dev`-th
/// device.
#[derive(Clone, Copy)]
struct Position {
    dev: usize,
    qpn: u32,
    item: usize,
}

// Packed into one machine word: 16 bits of device index, 32 of QPN, 16 of
// item (a QP has at most 64 sessions, 16 UD groups of them, 9 flows).
const _: () = assert!(usize::BITS == 64);

impl Position {
    fn unpack(c: usize) -> Self {
        Self {
            dev: c >> 48,
            qpn: ((c >> 16) & 0xffff_ffff) as u32,
            item: c & 0xffff,
        }
    }

    fn pack(self) -> usize {
        (self.dev.min(0xffff) << 48) | ((self.qpn as usize) << 16) | self.item.min(0xffff)
    }
}

/// One queue pair's part of a dump.
struct Listing<'a, 'b> {
    dev: &'a Device<SroceDevice>,
    /// This QP's position; `item` counts its entries so far.
    at: Position,
    /// Entries of this QP an earlier message carried.
    skip: usize,
    cursor: &'a mut usize,
    out: &'a mut Dump<'b>,
}

impl Listing<'_, '_> {
    /// Adds the QP's next entry unless an earlier message carried it.
    fn entry(&mut self, cmd: u8, fill: impl FnOnce(&mut Message<'_>) -> Result) -> Result {
        let item = self.at.item;
        self.at.item += 1;
        if item < self.skip {
            return Ok(());
        }
        self.out.entry(cmd, fill)?;
        *self.cursor = self.at.pack();
        Ok(())
    }

    /// One entry per session of `g`.
    fn group<const W: usize>(&mut self, g: &QpSessions<W>) -> Result {
        let policy = abi::policy_to_u8(g.policy());
        let (name, qpn) = (self.dev.name(), self.at.qpn);
        for (id, (sess, flow)) in g.sessions().enumerate() {
            self.entry(abi::CMD_SESSION_GET, |m| {
                m.put(abi::ATTR_DEV_NAME, name)?;
                m.put(abi::ATTR_QPN, &qpn)?;
                m.put(abi::ATTR_POLICY, &policy)?;
                fill_session(m, id, sess, flow)
            })?;
        }
        Ok(())
    }

    /// One entry per received flow of a connection, then one for the flows
    /// beyond the table if anything came on them.
    fn rx_flows(&mut self, f: &RxFlows, local: IpAddr, roce_v1: bool) -> Result {
        let others = (f.other_packets() > 0).then(|| RxSession {
            src: NetAddr::default(),
            sport: 0,
            packets: f.other_packets(),
            bytes: f.other_bytes(),
        });
        let flows = f.rx_sessions().iter().enumerate();
        let all = Iterator::chain(
            flows,
            others.iter().map(|o| (usize::from(abi::RX_FLOW_OTHERS), o)),
        );
        let (name, qpn) = (self.dev.name(), self.at.qpn);
        for (id, r) in all {
            self.entry(abi::CMD_RX_FLOW_GET, |m| {
                m.put(abi::ATTR_DEV_NAME, name)?;
                m.put(abi::ATTR_QPN, &qpn)?;
                m.put(abi::ATTR_RX_FLOW, &u8::try_from(id).unwrap_or(u8::MAX))?;
                if id != usize::from(abi::RX_FLOW_OTHERS) {
                    m.put(abi::ATTR_SRC_ADDR, &r.src.0[..])?;
                    m.put(abi::ATTR_SPORT, &r.sport)?;
                }
                m.put(abi::ATTR_DST_ADDR, &addr16(local)[..])?;
                m.put(abi::ATTR_RX_PACKETS, &r.packets)?;
                m.put(abi::ATTR_RX_BYTES, &r.bytes)?;
                if roce_v1 {
                    m.put(abi::ATTR_ROCE_V1, &1u8)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// Overrides queue pair `qpn`'s group: kept for its next connection and,
/// if it is connected now, applied at once. Nothing changes on failure.
fn set_qp(d: &Device<SroceDevice>, qpn: u32, ov: &SessionOverride) -> Result {
    let shared = d.data().qp(qpn).ok_or(ENOENT)?;
    shared
        .link()
        .with(|qp| -> Result {
            // A UC connection has no acknowledgements to judge its
            // sessions by: it keeps one (whatever the device's default).
            let unacknowledged = qp.data().qp_type() == QpType::Uc;
            if unacknowledged && ov.size.is_some_and(|s| s > 1) {
                return Err(EOPNOTSUPP);
            }
            // Serialised with modify: the connection read here stays.
            let _control = qp.data().control();
            let (merged, connected) = {
                let inner = qp.data().lock();
                let merged = inner.sessions_override.merge(*ov);
                (merged, inner.rc.as_ref().map(|rc| rc.sessions_origin()))
            };
            // Nor has a RoCE v1 connection a UDP source port to vary (kept
            // for its next connection, which may be RoCEv2).
            let roce_v1 = connected
                .as_ref()
                .is_some_and(|(origin, _, _)| origin.flow0.encap.is_roce_v1());
            if roce_v1 && ov.size.is_some_and(|s| s > 1) {
                return Err(EOPNOTSUPP);
            }
            let mut cfg = merged.apply(d.data().sessions.lock().group);
            if unacknowledged || roce_v1 {
                cfg.size = 1;
            }
            // New ports are sockets: made unlocked.
            let fresh = match connected {
                Some((origin, size, now_us)) => {
                    QpSessions::rebuilt_for(d, origin, size, &cfg, now_us)?
                }
                None => None,
            };
            let mut inner = qp.data().lock();
            let old = match inner.rc.as_mut() {
                Some(rc) => rc.reconfigure_sessions(&cfg, fresh),
                // The connection ended meanwhile: nothing to apply.
                None => fresh,
            };
            inner.sessions_override = merged;
            drop(inner);
            drop(old);
            Ok(())
        })
        .unwrap_or(Err(ENOENT))
}

/// A 16-byte address: IPv6, or IPv4 mapped into IPv6.
fn addr16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(b) => b,
        IpAddr::V4(b) => [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, b[0], b[1], b[2], b[3],
        ],
    }
}

/// The attributes of one session (a dump entry's, an event's).
pub(super) fn fill_session(m: &mut Message<'_>, id: usize, s: &Session, f: &io::Flow) -> Result {
    let c = s.counters();
    m.put(abi::ATTR_SESSION_ID, &u8::try_from(id).unwrap_or(u8::MAX))?;
    m.put(abi::ATTR_SPORT, &s.src_port())?;
    m.put(abi::ATTR_SRC_ADDR, &addr16(f.src)[..])?;
    m.put(abi::ATTR_DST_ADDR, &addr16(f.dst)[..])?;
    m.put(abi::ATTR_STATE, &abi::state_to_u8(s.state()))?;
    m.put(abi::ATTR_TX_PACKETS, &c.tx_packets)?;
    m.put(abi::ATTR_TX_BYTES, &c.tx_bytes)?;
    m.put(abi::ATTR_RETRANSMITS, &c.retransmits)?;
    m.put(abi::ATTR_TIMEOUTS, &c.timeouts)?;
    m.put(abi::ATTR_ACKED, &c.acked_messages)?;
    let srtt = u32::try_from(s.rtt().srtt_us()).unwrap_or(u32::MAX);
    m.put(abi::ATTR_SRTT_US, &srtt)?;
    m.put(abi::ATTR_REPLACEMENTS, &c.replacements)?;
    let w = s.window();
    if w.is_active() {
        m.put(abi::ATTR_CWND, &w.cwnd())?;
        m.put(abi::ATTR_WINDOW_CUTS, &w.cuts())?;
    }
    if f.encap.is_roce_v1() {
        m.put(abi::ATTR_ROCE_V1, &1u8)?;
    }
    Ok(())
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
    m.put(abi::ATTR_PORT_MAX, &s.ports.last())?;
    m.put(abi::ATTR_REORDER_GUARD, &u8::from(s.group.reorder_guard))
}

/// A validated `DEV_SET`.
struct Change {
    size: Option<u8>,
    policy: Option<Policy>,
    ports: Option<PortRange>,
    reorder_guard: Option<bool>,
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
    let reorder_guard = req.u8(abi::ATTR_REORDER_GUARD).map(|v| v != 0);
    if size.is_none() && policy.is_none() && ports.is_none() && reorder_guard.is_none() {
        req.set_err(0, c"nothing to change");
        return Err(EINVAL);
    }
    Ok(Change {
        size,
        policy,
        ports,
        reorder_guard,
    })
}

impl Change {
    /// Applies the change at once (no reader sees half of it).
    ///
    /// Queue pairs take these defaults when they connect (RTR); connected
    /// ones keep theirs.
    fn apply(&self, d: &Device<SroceDevice>) {
        let mut s = d.data().sessions.lock();
        s.group = s.group.with_override(self.size, self.policy);
        if let Some(g) = self.reorder_guard {
            s.group.reorder_guard = g;
        }
        if let Some(p) = self.ports {
            s.ports = p;
        }
    }
}
