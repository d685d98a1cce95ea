// SPDX-License-Identifier: GPL-2.0

//! The session groups of a UD queue pair: one per destination (the address
//! handle's source and destination addresses), built on the first send
//! there from the device's defaults and the QP's override, so a UD QP's
//! datagrams to one peer spread over, or stick to, paths exactly as an RC
//! QP's messages do (same ports, same routing, same policies).
//!
//! UD has no acknowledgements: a group picks a session per datagram by its
//! policy (`hash` stays on one, `round-robin` rotates; the ACK-driven
//! policies and health have nothing to go on, so they behave like `hash`
//! with every session up). With a one-session default nothing is built
//! and datagrams leave on the plain RoCEv2 flow, as before.

use super::{
    device::SroceDevice,
    io,
    rc_sessions::{Origin, QpSessions, SessionOverride},
};
use crate::rdma::device::Device;
use kernel::{alloc::KVBox, prelude::*};

/// Destinations a UD QP keeps groups for; beyond this the oldest group is
/// dropped (its ports released) for the new one.
const MAX_GROUPS: usize = 16;

/// One destination's group.
struct UdGroup {
    flow0: io::Flow,
    sessions: KVBox<QpSessions<1>>,
}

/// The groups of one UD QP.
#[derive(Default)]
pub(crate) struct UdSessions {
    groups: KVec<UdGroup>,
}

impl UdSessions {
    /// The flow the next datagram (`bytes` long) of QP `qpn` to `base`'s
    /// destination leaves on. Falls back to `base` (the plain RoCEv2 flow) when the
    /// group has one session or cannot be built (no ports left, no memory).
    pub(crate) fn flow(
        &mut self,
        dev: &Device<SroceDevice>,
        qpn: u32,
        base: io::Flow,
        bytes: u32,
        ov: &SessionOverride,
    ) -> io::Flow {
        let same = |f: &io::Flow| f.src == base.src && f.dst == base.dst;
        if let Some(g) = self.groups.iter_mut().find(|g| same(&g.flow0)) {
            return g.sessions.next_flow(bytes).unwrap_or(base);
        }
        let defaults = *dev.data().sessions.lock();
        let cfg = ov.apply(defaults.group);
        if cfg.size <= 1 {
            return base;
        }
        let origin = Origin {
            qpn,
            flow0: base,
            ports: defaults.ports,
            retry_cnt: 0,
            rto_us: None,
        };
        let Ok(sessions) = QpSessions::new(dev, origin, &cfg, 0) else {
            return base;
        };
        if self.groups.len() >= MAX_GROUPS {
            drop(self.groups.remove(0));
        }
        if self.groups.reserve(1, GFP_KERNEL).is_err() {
            return base;
        }
        let mut g = UdGroup {
            flow0: base,
            sessions,
        };
        let flow = g.sessions.next_flow(bytes).unwrap_or(base);
        // Room was reserved: cannot fail.
        let _ = self.groups.push_within_capacity(g);
        flow
    }

    /// Every group's sessions, for listing.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &QpSessions<1>> {
        self.groups.iter().map(|g| &*g.sessions)
    }

    /// Drops every group (the QP was reset), releasing their ports.
    pub(crate) fn clear(&mut self) {
        self.groups.clear();
    }
}
