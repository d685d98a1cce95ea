// SPDX-License-Identifier: GPL-2.0

//! The session groups of a UD queue pair: one per destination (the address
//! handle's source and destination addresses), built before the first send
//! there from the device's defaults and the QP's override, so a UD QP's
//! datagrams to one peer spread over, or stick to, paths exactly as an RC
//! QP's messages do (same ports, same routing, same policies).
//!
//! UD has no acknowledgements: a group picks a session per datagram by its
//! policy (`hash` stays on one, `round-robin` rotates; the ACK-driven
//! policies and health have nothing to go on, so they behave like `hash`
//! with every session up). With a one-session default nothing is built
//! and datagrams leave on the plain RoCEv2 flow, as before.
//!
//! A group's ports are sockets, made and released in process context,
//! never under the QP's lock: the data path asks for a group
//! ([`UdSessions::flow`] answers `None`) and the QP's work item builds it
//! ([`build_wanted`]) before its next pass.

use super::{
    device::SroceDevice,
    io,
    qp::QpInner,
    rc_sessions::{Origin, QpSessions, SessionOverride},
};
use crate::rdma::{device::Device, qp::Qp};
use kernel::{alloc::KVBox, prelude::*};

/// Destinations a UD QP keeps groups for; beyond this the oldest group is
/// dropped (its ports released) for the new one.
const MAX_GROUPS: usize = 16;

/// One destination's group.
struct UdGroup {
    flow0: io::Flow,
    /// `None`: the group could not be built (no ports left, no memory);
    /// the destination gets the plain RoCEv2 flow.
    sessions: Option<KVBox<QpSessions<1>>>,
}

/// The groups of one UD QP.
#[derive(Default)]
pub(crate) struct UdSessions {
    groups: KVec<UdGroup>,
    /// The destination (its plain flow) a pass waits to have a group for.
    wanted: Option<io::Flow>,
    /// There was no memory for the table: every destination without a
    /// group takes the plain flow.
    plain: bool,
}

impl UdSessions {
    /// The flow the next datagram (`bytes` long) to `base`'s destination
    /// leaves on, or `None` if that destination needs a group built first
    /// (asked for here; the caller schedules the work item). `base` (the
    /// plain RoCEv2 flow) when the QP's groups have one session.
    pub(crate) fn flow(
        &mut self,
        dev: &Device<SroceDevice>,
        base: io::Flow,
        bytes: u32,
        ov: &SessionOverride,
    ) -> Option<io::Flow> {
        let same = |f: &io::Flow| f.src == base.src && f.dst == base.dst;
        if let Some(g) = self.groups.iter_mut().find(|g| same(&g.flow0)) {
            let flow = g.sessions.as_mut().and_then(|s| s.next_flow(bytes));
            return Some(flow.unwrap_or(base));
        }
        let defaults = *dev.data().sessions.lock();
        if ov.apply(defaults.group).size <= 1 || self.plain {
            return Some(base);
        }
        self.wanted = Some(base);
        None
    }

    /// Every group's sessions, for listing.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &QpSessions<1>> {
        self.groups.iter().filter_map(|g| g.sessions.as_deref())
    }

    /// Adds `g`, first making room (the oldest group, returned to be
    /// dropped unlocked, goes when the table is full); hands `g` back if
    /// there is no memory for it.
    fn insert(&mut self, g: UdGroup) -> (Option<UdGroup>, Option<UdGroup>) {
        let evicted = if self.groups.len() >= MAX_GROUPS {
            self.groups.remove(0).ok()
        } else {
            None
        };
        (
            evicted,
            self.groups.push_within_capacity(g).err().map(|e| e.0),
        )
    }
}

/// Whether a pass of the QP asked for a session group.
pub(crate) fn wanted(inner: &QpInner) -> bool {
    inner.ud_sessions.wanted.is_some()
}

/// Builds the session group a pass asked for, unlocked (it makes
/// sockets), and installs it. The QP's work item, process context.
pub(crate) fn build_wanted(qp: &Qp<SroceDevice>) {
    let d = qp.data();
    let Some((base, ov)) = ({
        let mut inner = d.lock();
        let ov = inner.sessions_override;
        inner.ud_sessions.wanted.take().map(|b| (b, ov))
    }) else {
        return;
    };
    let dev = qp.device();
    let defaults = *dev.data().sessions.lock();
    let origin = Origin {
        qpn: d.qpn(),
        flow0: base,
        ports: defaults.ports,
        retry_cnt: 0,
        rto_us: None,
    };
    let g = UdGroup {
        flow0: base,
        sessions: QpSessions::new(dev, origin, &ov.apply(defaults.group), 0).ok(),
    };
    // The table's room (all of it, once), allocated unlocked.
    let mut room = KVec::<UdGroup>::new();
    if d.lock().ud_sessions.groups.capacity() < MAX_GROUPS
        && room.reserve(MAX_GROUPS, GFP_KERNEL).is_err()
    {
        // No memory: this QP's datagrams take the plain flow from now on.
        d.lock().ud_sessions.plain = true;
        drop(g);
        return;
    }
    let mut inner = d.lock();
    let groups = &mut inner.ud_sessions.groups;
    if groups.capacity() < room.capacity() {
        // At most MAX_GROUPS: all fit.
        for old in groups.drain_all() {
            let _ = room.push_within_capacity(old);
        }
        core::mem::swap(groups, &mut room);
    }
    let (evicted, refused) = inner.ud_sessions.insert(g);
    drop(inner);
    // Ports released unlocked.
    drop((evicted, refused, room));
}
