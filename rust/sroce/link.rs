// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type sroce netdev DEV`.

use super::{
    debugfs, device::SroceDevice, guid::eui64_from_mac, io::sockets::SocketTable,
    pass_threads::PassThreads, recv::OpcodeCounts,
};
use crate::rdma::{
    device::{NewDevice, Registry},
    link::LinkType,
    netdev::NetDevice,
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{debugfs::Dir, prelude::*, str::CStr, sync::Arc, ThisModule};

/// The driver as a whole: what `newlink` and the netdev notifier share.
pub(crate) struct SroceDriver {
    pub(crate) module: &'static ThisModule,
    pub(crate) registry: Arc<Registry<SroceDevice>>,
    /// The RoCEv2 receive sockets of every namespace with devices.
    pub(crate) sockets: Arc<SocketTable>,
    /// `/sys/kernel/debug/sroce`.
    pub(crate) debugfs: Dir,
    /// Source of device ids.
    pub(crate) next_id: AtomicU32,
    /// The threads that run QPs' passes, for every device.
    pub(crate) pass_threads: Arc<PassThreads>,
}

impl LinkType for SroceDriver {
    const NAME: &'static CStr = c"sroce";

    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result {
        check_netdev(ndev)?;
        if self.registry.is_bound(ndev) || crate::rdma::device::netdev_has_rdma_device(ndev) {
            pr_err!("{}: {} already has an RDMA device\n", name, ndev.name());
            return Err(EEXIST);
        }
        let mac = ndev.mac().ok_or(EINVAL)?;
        let guid_be = u64::from_ne_bytes(eui64_from_mac(mac));
        let sockets = self.sockets.acquire(ndev.net()).inspect_err(|e| {
            if *e == EADDRINUSE {
                pr_err!(
                    "{}: UDP port 4791 is taken in {}'s network namespace (by rdma_rxe?)\n",
                    name,
                    ndev.name()
                );
            } else {
                pr_err!("{}: cannot open the RoCEv2 sockets: {:?}\n", name, e);
            }
        })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let opcodes = OpcodeCounts::new_arc()?;
        let debug = debugfs::device_dir(
            &self.debugfs,
            name,
            id,
            self.registry.clone(),
            opcodes.clone(),
        );
        let roce_v1 = crate::module_parameters::roce_v1.value();
        let data = SroceDevice::new(
            guid_be,
            sockets,
            id,
            opcodes,
            debug,
            roce_v1,
            self.pass_threads.clone(),
        );
        let mut dev = NewDevice::new(self.module, &self.registry, data)?;
        dev.set_node_guid(guid_be);
        dev.set_node_desc(c"sroce");
        dev.set_num_comp_vectors(kernel::cpu::nr_cpu_ids());
        dev.set_netdev(ndev);
        dev.register(name).map_err(|e| {
            // The RDMA core reports a name clash as ENFILE; say what it is.
            if e == ENFILE {
                pr_err!("{}: an RDMA device of that name exists\n", name);
                EEXIST
            } else {
                pr_err!("{}: registration failed: {:?}\n", name, e);
                e
            }
        })?;
        pr_info!("{}: created on {}\n", name, ndev.name());
        Ok(())
    }
}

/// sroce runs over Ethernet: RoCEv2 needs an Ethernet-framed device with a
/// MAC address, and a loopback device has no peer to talk to.
fn check_netdev(ndev: &NetDevice) -> Result {
    if ndev.is_loopback() {
        pr_err!(
            "{} is a loopback device; sroce needs an Ethernet device\n",
            ndev.name()
        );
        return Err(EINVAL);
    }
    if !ndev.is_ethernet() {
        pr_err!(
            "{} is not an Ethernet device (type {}); sroce needs one\n",
            ndev.name(),
            ndev.link_type()
        );
        return Err(EOPNOTSUPP);
    }
    Ok(())
}
