// SPDX-License-Identifier: GPL-2.0

//! sroce: a software RDMA over Converged Ethernet (RoCEv2) provider.
//!
//! Layers, each in its own directory:
//! - `rdma/`: safe abstractions over the kernel's RDMA core (the only code
//!   with raw bindings and `unsafe`);
//! - `sroce/`: the provider built on them;
//! - `proto/`: the protocol core (packet formats, PSN logic), plain `no_std`
//!   Rust with no kernel dependency, also built and tested on the host.

mod net;
mod rdma;
mod sroce;

#[path = "proto/src/roce/mod.rs"]
pub mod roce;

use core::sync::atomic::AtomicU32;
use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    sync::Arc,
};
use net::{ether::EthertypeReceiver, genl::FamilyRegistration, netns::PernetRegistration};
use rdma::{device::Registry, link::LinkRegistration, notifier::NetdevNotifier};
use sroce::{
    io::{
        roce_v1::{self, RoceV1Rx},
        sockets::SocketTable,
    },
    link::SroceDriver,
};

module! {
    type: SroceModule,
    name: "sroce",
    authors: ["The sroce developers"],
    description: "Software RoCEv2 RDMA provider with multi-session QPs",
    license: "GPL",
    alias: ["rdma-link-sroce"],
    params: {
        roce_v1: bool {
            default: false,
            description: "Devices created while set also speak RoCE v1 (Ethertype 0x8915, GRH, one Ethernet segment) beside RoCEv2; their GID tables list both types",
        },
        udp_segmentation: bool {
            default: true,
            description: "Send the equal-size packets of a message as one UDP-segmented datagram (cut into plain RoCEv2 datagrams by the stack, the NIC or the receiving host); 0 sends every packet alone",
        },
    },
}

struct SroceModule {
    driver: Arc<SroceDriver>,
    /// `/sys/kernel/debug/sroce/pinned_pages`.
    _pinned_file: Pin<KBox<File<()>>>,
    link: Option<LinkRegistration<SroceDriver>>,
    notifier: Option<NetdevNotifier<SroceDriver>>,
    pernet: Option<PernetRegistration<SocketTable>>,
    genl: Option<FamilyRegistration<SroceDriver>>,
    /// RoCE v1 frames' receive hook, with the module parameter `roce_v1`.
    roce_v1_rx: Option<EthertypeReceiver<RoceV1Rx>>,
}

impl kernel::Module for SroceModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let registry = Registry::new()?;
        let driver = Arc::new(
            SroceDriver {
                module,
                sockets: SocketTable::new(registry.clone())?,
                registry,
                debugfs: Dir::new(c"sroce"),
                next_id: AtomicU32::new(0),
                pass_threads: sroce::pass_threads::PassThreads::new()?,
            },
            GFP_KERNEL,
        )?;
        let pinned_file = KBox::pin_init(
            sroce::debugfs::pinned_pages_file(&driver.debugfs),
            GFP_KERNEL,
        )?;
        // Sockets must be closed when their namespace goes, before any
        // device can open one.
        let pernet = PernetRegistration::new(driver.sockets.clone())?;
        // The notifier first: a device may only exist while something will
        // remove it when its net device goes away.
        let notifier = NetdevNotifier::new(driver.clone())?;
        // Before any device: RoCE v1 frames have a receiver when one
        // speaks it.
        let roce_v1_rx = if module_parameters::roce_v1.value() {
            let rx = Arc::new(
                RoceV1Rx {
                    devices: driver.registry.clone(),
                },
                GFP_KERNEL,
            )?;
            Some(EthertypeReceiver::new(roce_v1::ETHERTYPE, rx)?)
        } else {
            None
        };
        let link = LinkRegistration::new(driver.clone())?;
        // The control interface (generic netlink family "sroce").
        let genl = FamilyRegistration::new(driver.clone(), module)?;
        pr_info!("loaded\n");
        Ok(Self {
            driver,
            _pinned_file: pinned_file,
            link: Some(link),
            notifier: Some(notifier),
            pernet: Some(pernet),
            genl: Some(genl),
            roce_v1_rx,
        })
    }
}

impl Drop for SroceModule {
    fn drop(&mut self) {
        // No control requests (they look devices up), then no new
        // devices, then none left, then stop watching net devices.
        drop(self.genl.take());
        drop(self.link.take());
        self.driver.registry.unregister_all();
        drop(self.roce_v1_rx.take());
        drop(self.notifier.take());
        // Devices closed their sockets as they went (each close waits for
        // running receive callbacks); any left belong to nothing now.
        drop(self.pernet.take());
        pr_info!("unloaded\n");
    }
}
