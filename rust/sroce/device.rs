// SPDX-License-Identifier: GPL-2.0

//! One sroce device: its state and the device/port queries.

use super::{
    ah,
    budget::Budget,
    cq,
    ctl::SessionDefaults,
    debugfs::DevDebug,
    io::{counters, counters::Counter, counters::IoCounters, sockets::NsSockets},
    limits,
    mr::{self, SroceMemoryRegion},
    pass_threads::PassThreads,
    qp,
    rc::QpShared,
    recv::OpcodeCounts,
    slot_table::SlotTable,
    srq,
};
use crate::rdma::{
    access::Access,
    ah::Ah,
    attr::{DeviceAttr, IbMtu, PhysState, PortAttr, PortImmutable, PortState},
    av::AddressVector,
    cq::{Cq, CqRequest, NotifyOn, WcOut},
    device::{Device, Driver},
    kwr::{RecvWrs, SendWrs},
    mr::MrRequest,
    pd::Pd,
    qp::{Qp, QpAttrChange, QpAttrs, QpCreated, QpLink, QpRequest},
    queue::MmapInfo,
    srq::{Srq, SrqAttrs, SrqRequest},
    stats::StatDesc,
    ucontext::UContext,
    udata::UData,
};
use kernel::{
    debugfs::Scope,
    id_pool::IdPool,
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex, SpinLockIrq,
    },
};

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
    /// Queue pair numbers in use; their count is bounded by `max_qp`.
    #[pin]
    qpns: Mutex<QpnPool>,
    /// Shared receive queues in use, against `max_srq`.
    pub(crate) srqs: Budget,
    /// Address handle numbers in use (from 1; 0 means "no AH" in a WQE).
    /// Behind an IRQ-safe spinlock: kernel consumers create and destroy
    /// AHs in atomic context.
    #[pin]
    ah_nums: SpinLockIrq<IdPool>,
    /// Memory regions in use, against `max_mr`.
    pub(super) mrs: Budget,
    /// Memory windows in use, against `max_mw`.
    mws: Budget,
    /// The next queue pair serial number: what a type 2 memory window is
    /// bound to (QP numbers are reused, serials never).
    qp_serials: Atomic<u64>,
    /// Live queue pairs by number (index `qpn - QPN_BASE`), for the
    /// receive path (any context); grows as numbers are handed out.
    #[pin]
    qps: SlotTable<Arc<QpShared>>,
    /// The general services QP (QP1) of the MAD layer, if created.
    #[pin]
    gsi: SpinLockIrq<Option<Arc<QpShared>>>,
    /// Address handles' addresses by number (UD sends name them).
    #[pin]
    ahs: SlotTable<ah::AhEntry>,
    /// Packet I/O state.
    pub(crate) io: DeviceIo,
    /// Received packets by opcode (until queue pairs consume them).
    pub(crate) rx_opcodes: Arc<OpcodeCounts>,
    /// Identifies the device to its debugfs files.
    pub(crate) id: u32,
    /// The device's debugfs directory.
    #[pin]
    debug: Scope<DevDebug>,
    /// Session defaults for new queue pairs (generic netlink `DEV_SET`);
    /// read under QP locks, in the receive softirq too.
    #[pin]
    pub(crate) sessions: SpinLockIrq<SessionDefaults>,
    /// Whether the device speaks RoCE v1 beside RoCEv2 (module parameter
    /// `roce_v1` when it was created; fixed for its life, like its GID
    /// types).
    pub(crate) roce_v1: bool,
    /// The module's threads that run its QPs' passes.
    pub(crate) pass_threads: Arc<PassThreads>,
}

/// One past the highest queue pair number handed out.
const QPN_END: u32 = limits::QPN_BASE + limits::MAX_QP;

/// Queue pair numbers in use, and where the search for the next one starts.
struct QpnPool {
    ids: IdPool,
    next: u32,
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
        roce_v1: bool,
        pass_threads: Arc<PassThreads>,
    ) -> impl PinInit<Self, Error> + 'a {
        try_pin_init!(Self {
            sys_image_guid_be: guid_be,
            pds: Budget::new(limits::MAX_PD),
            cqs: Budget::new(limits::MAX_CQ),
            qpns <- new_mutex!(
                QpnPool {
                    ids: IdPool::with_capacity(QPN_END as usize, GFP_KERNEL)?,
                    next: limits::QPN_BASE,
                },
                "sroce::qpns"
            ),
            srqs: Budget::new(limits::MAX_SRQ),
            ah_nums <- new_spinlock_irq!(
                IdPool::with_capacity(limits::MAX_AH as usize + 1, GFP_KERNEL)?,
                "sroce::ah_nums"
            ),
            mrs: Budget::new(limits::MAX_MR),
            mws: Budget::new(limits::MAX_MW),
            qp_serials: Atomic::new(1),
            qps <- SlotTable::new(),
            gsi <- new_spinlock_irq!(None, "sroce::gsi"),
            ahs <- SlotTable::new(),
            io: DeviceIo {
                sockets,
                counters: IoCounters::new(),
            },
            rx_opcodes,
            id,
            debug <- debug,
            sessions <- new_spinlock_irq!(SessionDefaults::DEFAULT, "sroce::sessions"),
            roce_v1,
            pass_threads,
        })
    }
}

impl SroceDevice {
    /// A serial number for a new queue pair, never reused (a `u64`).
    pub(crate) fn next_qp_serial(&self) -> u64 {
        self.qp_serials.fetch_add(1, Relaxed)
    }

    /// A free queue pair number (QPs 0 and 1 are the special management
    /// QPs; numbers below `QPN_BASE` are never handed out). Numbers are
    /// handed out in turn, not lowest first, so a new QP does not take the
    /// number of one just destroyed: its peer may still be resending to
    /// that number, and those packets would land in the new connection.
    pub(crate) fn alloc_qpn(&self) -> Result<u32> {
        let mut pool = self.qpns.lock();
        let QpnPool { ids, next } = &mut *pool;
        let mut free_from = |start: u32| {
            ids.find_unused_id(start as usize)
                .map(|id| id.as_u32())
                .filter(|&n| n < QPN_END)
        };
        let n = free_from(*next)
            .or_else(|| free_from(limits::QPN_BASE))
            .ok_or(ENOMEM)?;
        // `n` is free and the lock is held: the search finds `n` itself.
        ids.find_unused_id(n as usize).ok_or(ENOMEM)?.acquire();
        *next = if n + 1 < QPN_END {
            n + 1
        } else {
            limits::QPN_BASE
        };
        Ok(n)
    }

    /// Returns a queue pair number (the fixed QP1 is not from the pool).
    pub(crate) fn free_qpn(&self, qpn: u32) {
        if qpn < limits::QPN_BASE {
            return;
        }
        self.qpns.lock().ids.release_id(qpn as usize);
    }

    /// A free address handle number, bounded by `max_ah`.
    pub(crate) fn alloc_ah_num(&self) -> Result<u32> {
        let mut pool = self.ah_nums.lock();
        let id = pool.find_unused_id(1).ok_or(ENOMEM)?;
        let n = id.as_u32();
        if n > limits::MAX_AH {
            return Err(ENOMEM);
        }
        id.acquire();
        Ok(n)
    }

    /// Returns an address handle number.
    pub(crate) fn free_ah_num(&self, num: u32) {
        self.ah_nums.lock().release_id(num as usize);
    }

    /// Makes a QP findable by the receive path. Process context: a larger
    /// table is allocated outside the lock.
    pub(crate) fn insert_qp(&self, qpn: u32, qp: Arc<QpShared>) -> Result {
        if qpn == limits::GSI_QPN {
            let mut gsi = self.gsi.lock();
            if gsi.is_some() {
                return Err(EBUSY);
            }
            *gsi = Some(qp);
            return Ok(());
        }
        let i = qpn.checked_sub(limits::QPN_BASE).ok_or(EINVAL)?;
        self.qps.insert(i as usize, qp, GFP_KERNEL)
    }

    /// Makes a QP unfindable.
    pub(crate) fn remove_qp(&self, qpn: u32) {
        if qpn == limits::GSI_QPN {
            // The reference is dropped outside the lock.
            let old = self.gsi.lock().take();
            drop(old);
            return;
        }
        if let Some(i) = qpn.checked_sub(limits::QPN_BASE) {
            // The reference is dropped outside the lock.
            drop(self.qps.take(i as usize));
        }
    }

    /// The QP with number `qpn`, if it lives. Any context.
    pub(crate) fn qp(&self, qpn: u32) -> Option<Arc<QpShared>> {
        if qpn == limits::GSI_QPN {
            return self.gsi.lock().clone();
        }
        let i = qpn.checked_sub(limits::QPN_BASE)?;
        self.qps.get(i as usize)
    }

    /// The queue pairs that exist now (for listings), in QPN order.
    pub(crate) fn qps_snapshot(&self) -> Result<KVec<Arc<QpShared>>> {
        self.qps.snapshot()
    }

    /// Makes address handle `num`'s address findable by UD sends; `gfp`
    /// for growing the table (kernel AHs may be created in atomic context).
    pub(crate) fn insert_ah(
        &self,
        num: u32,
        entry: ah::AhEntry,
        gfp: kernel::alloc::Flags,
    ) -> Result {
        self.ahs.insert(num as usize, entry, gfp)
    }

    /// Forgets address handle `num`.
    pub(crate) fn remove_ah(&self, num: u32) {
        let _ = self.ahs.take(num as usize);
    }

    /// The address of address handle `num`, if it belongs to `pd`.
    pub(crate) fn ah(&self, num: u32, pd: &Pd<SroceDevice>) -> Option<AddressVector> {
        self.ahs.get(num as usize).and_then(|e| e.address_for(pd))
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
    type Qp = qp::SroceQp;
    type Srq = srq::SroceSrq;
    type Ah = ah::SroceAh;
    type Mr = SroceMemoryRegion;
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

    fn port_immutable(dev: &Device<Self>, _port: u32) -> Result<PortImmutable> {
        Ok(limits::port_immutable(dev.data().roce_v1))
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

    fn create_qp(
        dev: &Device<Self>,
        req: QpRequest<'_, Self>,
    ) -> Result<(impl PinInit<qp::SroceQp, Error>, QpCreated)> {
        qp::create(dev, req)
    }

    fn destroy_qp(qp: &Qp<Self>) {
        qp::destroy(qp)
    }

    fn fill_qp_attrs(qp: &Qp<Self>, out: &mut crate::rdma::restrack::DriverAttrs<'_>) -> Result {
        super::qp_res::fill(qp, out)
    }

    fn qp_link(qp: &qp::SroceQp) -> &QpLink<Self> {
        qp.link()
    }

    fn post_send(qp: &Qp<Self>) -> Result {
        qp::post_send(qp)
    }

    fn post_send_wrs(qp: &Qp<Self>, wrs: &mut SendWrs<'_, Self>) -> Result {
        qp::post_send_wrs(qp, wrs)
    }

    fn post_recv_wrs(qp: &Qp<Self>, wrs: &mut RecvWrs<'_>) -> Result {
        qp::post_recv_wrs(qp, wrs)
    }

    fn post_srq_recv_wrs(srq: &Srq<Self>, wrs: &mut RecvWrs<'_>) -> Result {
        srq::post_recv_wrs(srq, wrs)
    }

    fn poll_cq(cq: &Cq<Self>, out: &mut WcOut<'_>) {
        cq::poll(cq, out)
    }

    fn modify_qp(qp: &Qp<Self>, change: &QpAttrChange) -> Result {
        qp::modify(qp, change)
    }

    fn qp_attrs(qp: &Qp<Self>) -> QpAttrs {
        qp::attrs(qp)
    }

    fn create_srq(
        dev: &Device<Self>,
        req: SrqRequest<'_, Self>,
    ) -> Result<(impl PinInit<srq::SroceSrq, Error>, SrqAttrs)> {
        srq::create(dev, req)
    }

    fn destroy_srq(srq: &Srq<Self>) {
        srq::destroy(srq)
    }

    fn resize_srq(
        srq: &Srq<Self>,
        max_wr: u32,
        uctx: Option<&UContext<Self>>,
        publish: impl FnOnce(MmapInfo) -> Result,
    ) -> Result<u32> {
        srq::resize(srq, max_wr, uctx, publish)
    }

    fn set_srq_limit(srq: &Srq<Self>, limit: u32) -> Result {
        srq::set_limit(srq, limit)
    }

    fn srq_attrs(srq: &Srq<Self>) -> SrqAttrs {
        srq::attrs(srq)
    }

    fn create_ah(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        av: AddressVector,
        udata: Option<UData>,
    ) -> Result<ah::SroceAh> {
        ah::create(dev, pd, av, udata)
    }

    fn destroy_ah(ah: &Ah<Self>) {
        ah::destroy(ah)
    }

    fn ah_address(ah: &Ah<Self>) -> AddressVector {
        ah::address(ah)
    }

    fn reg_mr(dev: &Device<Self>, _pd: &Pd<Self>, req: &MrRequest) -> Result<SroceMemoryRegion> {
        mr::admit(dev, req)
    }

    fn check_mr_access(_dev: &Device<Self>, access: Access) -> Result {
        mr::check_access(access)
    }

    fn odp_invalidated(dev: &Device<Self>) {
        dev.data().io.counters.inc(Counter::OdpInvalidations);
    }

    fn dereg_mr(dev: &Device<Self>, mr: &SroceMemoryRegion) {
        mr::release(dev, mr);
    }

    fn alloc_mw(dev: &Device<Self>) -> Result {
        dev.data().mws.take()
    }

    fn dealloc_mw(dev: &Device<Self>) {
        dev.data().mws.give();
    }

    const PORT_STATS: &'static [StatDesc] = &counters::PORT_STATS;

    fn port_stats(dev: &Device<Self>, values: &mut [u64]) {
        let io = &dev.data().io;
        io.counters.fill(io.sockets.rx().no_device(), values);
    }
}
