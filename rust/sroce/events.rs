// SPDX-License-Identifier: GPL-2.0

//! Reactions to net device events.
//!
//! Port state and MTU are read live from the net device and the RDMA core
//! sends the port up/down events itself, so only a net device going away
//! needs sroce's action: its RDMA device must go too, or the net device's
//! unregistration would wait forever on the reference the device holds.

use super::link::SroceDriver;
use crate::rdma::{
    netdev::NetDevice,
    notifier::{NetdevEvent, NetdevHandler},
};
use kernel::prelude::*;

impl NetdevHandler for SroceDriver {
    fn event(&self, event: NetdevEvent, ndev: &NetDevice) {
        if event == NetdevEvent::Unregister && self.registry.unregister_for_netdev(ndev) {
            pr_info!("{} is going away; removing its sroce device\n", ndev.name());
        }
    }
}
