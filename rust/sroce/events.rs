// SPDX-License-Identifier: GPL-2.0

//! Reactions to net device events.
//!
//! Port state and MTU are read live from the net device. sroce acts on
//! three things:
//! - a net device going away: its RDMA device must go too, or the net
//!   device's unregistration would wait forever on the reference the device
//!   holds;
//! - its net device going up or down: the port's event (`IBV_EVENT_PORT_ERR`
//!   or `_ACTIVE`) goes to the device's users. The RDMA core sends these
//!   only for devices in its table by net device, which sroce's are not
//!   (see `rdma::device`);
//! - any net device of a namespace with sroce devices going up or down
//!   (administratively or by carrier): sessions leave through links other
//!   than the bound one, so every queue pair with several sessions there is
//!   told to look at its links again (its next pass does, under the QP's
//!   lock: see `rc_sessions::QpSessions::refresh_links`).

use super::link::SroceDriver;
use crate::rdma::{
    device::PORT,
    netdev::NetDevice,
    notifier::{NetdevEvent, NetdevHandler},
};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Bumped on every link state change of any net device: a QP whose last
/// look at its links saw another value looks again.
static LINK_EPOCH: Atomic<u32> = Atomic::new(0);

/// The current link epoch.
pub(crate) fn link_epoch() -> u32 {
    LINK_EPOCH.load(Relaxed)
}

impl NetdevHandler for SroceDriver {
    fn event(&self, event: NetdevEvent, ndev: &NetDevice) {
        match event {
            NetdevEvent::Unregister => {
                if self.registry.unregister_for_netdev(ndev) {
                    pr_info!("{} is going away; removing its sroce device\n", ndev.name());
                }
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                if let Some(dev) = self.registry.device_for_netdev(ndev) {
                    dev.dispatch_port_state_event();
                }
                LINK_EPOCH.fetch_add(1, Relaxed);
                let net = ndev.net().key();
                self.registry.for_each_device(|dev| {
                    let same_net = dev.netdev(PORT).is_some_and(|b| b.net().key() == net);
                    if !same_net {
                        return;
                    }
                    if let Ok(qps) = dev.data().qps_snapshot() {
                        for qp in qps.iter() {
                            qp.schedule();
                        }
                    }
                });
            }
            NetdevEvent::ChangeMtu => {}
        }
    }
}
