// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 receive sockets: UDP port 4791, IPv4 and IPv6, one pair per
//! network namespace that has sroce devices.
//!
//! The first device whose net device is in a namespace opens the pair, the
//! last one to go closes it ([`SocketTable::acquire`], [`NsSockets`]). A
//! namespace that is dismantled while devices still hold its sockets (its
//! net devices are gone, their RDMA devices being unregistered
//! asynchronously) closes them from its pernet `exit`, since kernel sockets
//! must not outlive their namespace; the devices' references then find
//! nothing to release.
//!
//! Only one socket may hold port 4791 in a namespace: if rxe (or anyone)
//! does, creating the first sroce device there fails with `EADDRINUSE`.

use super::ROCE_V2_UDP_PORT;
use crate::net::{
    netns::{Net, NetKey, NetnsExit},
    skb::SkBuff,
    udp_tunnel::{EncapHandler, Family, TunnelSocket},
};
use crate::rdma::{
    device::{DeviceRef, Registry},
    netdev::NetDevice,
};
use crate::sroce::device::SroceDevice;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

/// What the sockets of one namespace share with the receive path.
pub(crate) struct NsRx {
    /// Packets that arrived on a net device without an sroce device.
    no_device: AtomicU64,
    /// Where the device a packet is for is found.
    devices: Arc<Registry<SroceDevice>>,
}

impl NsRx {
    /// The registered sroce device bound to `ndev`, if any.
    pub(super) fn device_for_netdev(&self, ndev: &NetDevice) -> Option<DeviceRef<SroceDevice>> {
        self.devices.device_for_netdev(ndev)
    }

    /// Counts a packet no sroce device was found for.
    pub(super) fn count_no_device(&self) {
        self.no_device.fetch_add(1, Ordering::Relaxed);
    }

    /// Packets no sroce device was found for, in this namespace.
    pub(crate) fn no_device(&self) -> u64 {
        self.no_device.load(Ordering::Relaxed)
    }
}

impl EncapHandler for NsRx {
    fn receive(&self, skb: SkBuff, ingress: &NetDevice) {
        super::rx::receive(self, skb, ingress);
    }
}

/// The open sockets of one namespace.
struct Entry {
    key: NetKey,
    /// Distinguishes this entry from a later one with the same key.
    id: u64,
    users: usize,
    rx: Arc<NsRx>,
    _v4: TunnelSocket<NsRx>,
    _v6: Option<TunnelSocket<NsRx>>,
}

/// The receive sockets of every namespace that has sroce devices.
#[pin_data]
pub(crate) struct SocketTable {
    #[pin]
    entries: Mutex<KVec<Entry>>,
    next_id: AtomicU64,
    devices: Arc<Registry<SroceDevice>>,
}

impl SocketTable {
    /// An empty table whose sockets deliver to `devices`.
    pub(crate) fn new(devices: Arc<Registry<SroceDevice>>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                entries <- new_mutex!(KVec::new(), "sroce::sockets"),
                next_id: AtomicU64::new(1),
                devices,
            }),
            GFP_KERNEL,
        )
    }

    /// A reference to `net`'s receive sockets, opening them if this is the
    /// namespace's first device. `EADDRINUSE` if another socket holds port
    /// 4791 there. Process context.
    pub(crate) fn acquire(self: &Arc<Self>, net: &Net) -> Result<NsSockets> {
        let key = net.key();
        let mut entries = self.entries.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.key == key) {
            e.users += 1;
            return Ok(NsSockets {
                table: self.clone(),
                id: e.id,
                rx: e.rx.clone(),
            });
        }
        let rx = Arc::new(
            NsRx {
                no_device: AtomicU64::new(0),
                devices: self.devices.clone(),
            },
            GFP_KERNEL,
        )?;
        let v4 = TunnelSocket::new(net, Family::V4, ROCE_V2_UDP_PORT, rx.clone())?;
        let v6 = match TunnelSocket::new(net, Family::V6, ROCE_V2_UDP_PORT, rx.clone()) {
            Ok(s) => Some(s),
            // IPv6 disabled: IPv4 only, as rxe does.
            Err(e) if e == EAFNOSUPPORT => None,
            Err(e) => return Err(e),
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        entries.push(
            Entry {
                key,
                id,
                users: 1,
                rx: rx.clone(),
                _v4: v4,
                _v6: v6,
            },
            GFP_KERNEL,
        )?;
        Ok(NsSockets {
            table: self.clone(),
            id,
            rx,
        })
    }

    /// Takes the first entry for which `f` returns true out of the table.
    fn take(&self, f: impl Fn(&mut Entry) -> bool) -> Option<Entry> {
        let mut entries = self.entries.lock();
        let i = entries.iter_mut().position(f)?;
        entries.remove(i).ok()
    }
}

impl NetnsExit for SocketTable {
    fn exit(&self, net: &Net) {
        let key = net.key();
        // Closed outside the lock: closing waits for an RCU grace period.
        if let Some(e) = self.take(|e| e.key == key) {
            pr_info!("network namespace going away with sroce devices; closing their sockets\n");
            drop(e);
        }
    }
}

/// One device's hold on its namespace's receive sockets; the last one
/// dropped closes them (process context: closing sleeps).
pub(crate) struct NsSockets {
    table: Arc<SocketTable>,
    id: u64,
    rx: Arc<NsRx>,
}

impl NsSockets {
    /// What the namespace's sockets count.
    pub(crate) fn rx(&self) -> &NsRx {
        &self.rx
    }
}

impl Drop for NsSockets {
    fn drop(&mut self) {
        let id = self.id;
        let last = self.table.take(|e| {
            if e.id != id {
                return false;
            }
            e.users -= 1;
            e.users == 0
        });
        // Closed outside the lock (see `exit`).
        drop(last);
    }
}
