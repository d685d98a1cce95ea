// SPDX-License-Identifier: GPL-2.0

//! One sroce device: its state and the device/port queries.

use super::{
    budget::Budget,
    cq,
    debugfs::DevDebug,
    io::{counters, counters::IoCounters, sockets::NsSockets},
    limits,
    recv::OpcodeCounts,
};
use crate::rdma::{
    attr::{DeviceAttr, IbMtu, PhysState, PortAttr, PortImmutable, PortState},
    cq::{Cq, CqRequest, NotifyOn},
    device::{Device, Driver},
    stats::StatDesc,
    ucontext::UContext,
    udata::UData,
};
use kernel::{debugfs::Scope, prelude::*, sync::Arc};

/// `RDMA_DRIVER_RXE`: rdma-core picks its `rxe` provider library by this id,
/// which is what makes unmodified userspace work with sroce.
const RDMA_DRIVER_RXE: u32 = crate::rdma::bindings::rdma_driver_id_RDMA_DRIVER_RXE;
/// The rxe provider's userspace ABI version (`RXE_UVERBS_ABI_VERSION`).
const RXE_UVERBS_ABI_VERSION: u32 = 2;

/// Per-device state of sroce.
#[pin_data]
pub(crate) struct SroceDevice {
    /// System image GUID, equal to the node GUID (one port, one node).
    sys_image_guid_be: u64,
    /// Protection domains in use, against `max_pd`.
    pds: Budget,
    /// Completion queues in use, against `max_cq`.
    pub(crate) cqs: Budget,
    /// Packet I/O state.
    pub(crate) io: DeviceIo,
    /// Received packets by opcode (until queue pairs consume them).
    pub(crate) rx_opcodes: Arc<OpcodeCounts>,
    /// Identifies the device to its debugfs files.
    pub(crate) id: u32,
    /// The device's debugfs directory.
    #[pin]
    debug: Scope<DevDebug>,
}

/// A device's packet I/O state.
pub(crate) struct DeviceIo {
    /// Its share of its namespace's RoCEv2 receive sockets.
    pub(crate) sockets: NsSockets,
    /// Its counters.
    pub(crate) counters: IoCounters,
}

impl SroceDevice {
    /// State for a device whose node GUID is `guid_be`.
    pub(crate) fn new<'a>(
        guid_be: u64,
        sockets: NsSockets,
        id: u32,
        rx_opcodes: Arc<OpcodeCounts>,
        debug: impl PinInit<Scope<DevDebug>, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a {
        try_pin_init!(Self {
            sys_image_guid_be: guid_be,
            pds: Budget::new(limits::MAX_PD),
            cqs: Budget::new(limits::MAX_CQ),
            io: DeviceIo {
                sockets,
                counters: IoCounters::new(),
            },
            rx_opcodes,
            id,
            debug <- debug,
        })
    }
}

/// Per-user-context state. Empty until the verbs that need it arrive.
pub(crate) struct SroceUContext;

/// Per-protection-domain state. The PD's identity (its address) is what
/// memory and queue pair access checks compare.
pub(crate) struct SroceProtectionDomain;

impl Driver for SroceDevice {
    type UContext = SroceUContext;
    type Pd = SroceProtectionDomain;
    type Cq = cq::SroceCq;
    const DRIVER_ID: u32 = RDMA_DRIVER_RXE;
    const UVERBS_ABI_VERSION: u32 = RXE_UVERBS_ABI_VERSION;

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        Ok(limits::device_attr(dev.data().sys_image_guid_be))
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        // The port follows its net device: state and MTU are read live, so
        // `ip link set` changes show at the next query.
        let state = ndev.ib_port_state();
        let phys_state = match state {
            PortState::Active => PhysState::LinkUp,
            PortState::Down if ndev.is_up() => PhysState::Polling,
            PortState::Down => PhysState::Disabled,
        };
        Ok(PortAttr {
            state,
            phys_state,
            max_mtu: limits::MAX_IB_MTU,
            active_mtu: limits::ib_mtu_for(ndev.mtu()).unwrap_or(IbMtu::Mtu256),
            phys_mtu: ndev.mtu(),
            gid_tbl_len: limits::GID_TABLE_LEN,
            port_cap_flags: limits::PORT_CAP_CM_SUP,
            max_msg_sz: limits::MAX_MSG_SIZE,
            pkey_tbl_len: 1,
            max_vl_num: 1,
        })
    }

    fn port_immutable(_dev: &Device<Self>, _port: u32) -> Result<PortImmutable> {
        Ok(limits::port_immutable())
    }

    fn query_pkey(_dev: &Device<Self>, _port: u32, index: u16) -> Result<u16> {
        match index {
            0 => Ok(limits::DEFAULT_PKEY),
            _ => Err(EINVAL),
        }
    }

    fn alloc_ucontext(_dev: &Device<Self>) -> Result<SroceUContext> {
        Ok(SroceUContext)
    }

    fn alloc_pd(dev: &Device<Self>) -> Result<SroceProtectionDomain> {
        dev.data().pds.take()?;
        Ok(SroceProtectionDomain)
    }

    fn dealloc_pd(dev: &Device<Self>, _pd: &SroceProtectionDomain) {
        dev.data().pds.give();
    }

    fn create_cq(
        dev: &Device<Self>,
        req: CqRequest<'_, Self>,
    ) -> Result<(impl PinInit<cq::SroceCq, Error>, u32)> {
        cq::create(dev, req)
    }

    fn destroy_cq(cq: &Cq<Self>) {
        cq::destroy(cq)
    }

    fn resize_cq(
        cq: &Cq<Self>,
        entries: u32,
        user: Option<(&UContext<Self>, UData)>,
    ) -> Result<u32> {
        cq::resize(cq, entries, user)
    }

    fn req_notify_cq(cq: &Cq<Self>, on: NotifyOn) -> bool {
        cq::req_notify(cq, on)
    }

    const PORT_STATS: &'static [StatDesc] = &counters::PORT_STATS;

    fn port_stats(dev: &Device<Self>, values: &mut [u64]) {
        let io = &dev.data().io;
        io.counters.fill(io.sockets.rx().no_device(), values);
    }
}
