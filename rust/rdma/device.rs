// SPDX-License-Identifier: GPL-2.0

//! `struct ib_device`: allocation, registration, callbacks and teardown.
//!
//! A provider's device is a [`Device<T>`]: the C `ib_device` at offset 0
//! (the RDMA core requires it), then the driver's data `T`. Allocation gives
//! a [`NewDevice`] the driver configures and registers; after registration
//! the RDMA core owns the lifetime (`rdma link delete`, netdev removal or
//! module unload unregister it, and `dealloc_driver` drops `T`). A
//! [`Registry`] keeps the driver's live devices so module unload can
//! unregister exactly its own devices, never another provider's that shares
//! the driver id (sroce presents rxe's id for userspace compatibility).
//!
//! For the same reason the port's net device is not handed to the core with
//! `ib_device_set_netdev()`: that puts the device in the core's table that
//! `ib_device_get_by_netdev()` searches, and rdma_rxe searches it with
//! `RDMA_DRIVER_RXE` (its netdev notifier and its UDP receive path), so it
//! would take an sroce device for one of its own `rxe_dev`s and write past
//! the end of it. The device keeps its net device itself and answers the
//! core through the `get_netdev` callback; the [`Registry`] finds devices
//! by net device, and sroce's own netdev notifier sends the port events the
//! core sends only for devices in its table.

use super::{
    access::Access,
    ah::{self, Ah},
    attr::{DeviceAttr, PortAttr, PortImmutable},
    av::AddressVector,
    bindings,
    cq::{self, Cq, CqRequest, NotifyOn},
    kwr::{RecvWrs, SendWrs},
    mr::{self, MrRequest},
    mr_table::MrTable,
    mw::{self, WindowTable},
    netdev::NetDevice,
    pd::{self, Pd},
    qp::{self, Qp, QpAttrChange, QpAttrs, QpCreated, QpLink, QpRequest},
    queue::{self, MmapInfo},
    srq::{self, Srq, SrqAttrs, SrqRequest},
    stats::{self, StatDesc},
    ucontext::{self, UContext},
};
use core::{marker::PhantomData, mem::size_of, ptr::NonNull};
use kernel::{
    error::{from_result, to_result},
    new_mutex, new_spinlock_irq,
    prelude::*,
    str::CStr,
    sync::{Arc, Mutex, SpinLockIrq},
    types::Opaque,
    ThisModule,
};
use pin_init::PinInit;

/// The port number of a single-port device. The RDMA core numbers ports from 1.
pub(crate) const PORT: u32 = 1;

/// What a provider implements: the device's data type and its verbs.
///
/// Verbs without a method here are left NULL in `ib_device_ops`, so the core
/// answers `EOPNOTSUPP` for them.
pub(crate) trait Driver: Sized + Send + Sync + 'static {
    /// State of one user context (one open of `/dev/infiniband/uverbsN`).
    type UContext: Send + Sync;
    /// State of one protection domain.
    type Pd: Send + Sync;
    /// State of one completion queue.
    type Cq: Send + Sync;
    /// State of one queue pair.
    type Qp: Send + Sync;
    /// State of one shared receive queue.
    type Srq: Send + Sync;
    /// State of one address handle.
    type Ah: Send + Sync;
    /// State of one memory region.
    type Mr: Send + Sync;

    /// `RDMA_DRIVER_*` id, which userspace uses to pick its provider library.
    const DRIVER_ID: u32;
    /// Version of the provider's userspace ABI.
    const UVERBS_ABI_VERSION: u32;

    /// Device attributes (`ibv_query_device`).
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;
    /// Port attributes (`ibv_query_port`). `port` is already checked.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;
    /// Immutable port facts, read once at registration.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;
    /// P_Key table entry `index`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;
    /// A new user context.
    fn alloc_ucontext(dev: &Device<Self>) -> Result<Self::UContext>;
    /// A new protection domain.
    fn alloc_pd(dev: &Device<Self>) -> Result<Self::Pd>;
    /// A protection domain is going away (nothing uses it any more).
    fn dealloc_pd(_dev: &Device<Self>, _pd: &Self::Pd) {}
    /// A new completion queue, and how many entries it holds.
    fn create_cq(
        dev: &Device<Self>,
        req: CqRequest<'_, Self>,
    ) -> Result<(impl PinInit<Self::Cq, Error>, u32)>;
    /// A completion queue is going away (nothing uses it any more).
    fn destroy_cq(_cq: &Cq<Self>) {}
    /// Resizes a user's completion queue; returns the new capacity.
    fn resize_cq(
        cq: &Cq<Self>,
        entries: u32,
        user: Option<(&UContext<Self>, crate::rdma::udata::UData)>,
    ) -> Result<u32>;
    /// Moves a kernel consumer's completions into `out`.
    fn poll_cq(_cq: &Cq<Self>, _out: &mut cq::WcOut<'_>) {}
    /// Arms the CQ's completion event; returns whether completions are
    /// already waiting.
    fn req_notify_cq(cq: &Cq<Self>, on: NotifyOn) -> bool;
    /// A new queue pair.
    fn create_qp(
        dev: &Device<Self>,
        req: QpRequest<'_, Self>,
    ) -> Result<(impl PinInit<Self::Qp, Error>, QpCreated)>;
    /// Driver attributes of a queue pair for `rdma resource show qp`.
    fn fill_qp_attrs(_qp: &Qp<Self>, _out: &mut crate::rdma::restrack::DriverAttrs<'_>) -> Result {
        Ok(())
    }
    /// A queue pair is going away. Deferred work may still hold the QP's
    /// link; the rdma layer revokes it right after this returns.
    fn destroy_qp(_qp: &Qp<Self>) {}
    /// The link through which the driver's deferred work reaches the QP
    /// (see [`QpLink`]).
    fn qp_link(qp: &Self::Qp) -> &QpLink<Self>;
    /// The send doorbell of a user QP: work requests were written to its
    /// send queue ring.
    fn post_send(qp: &Qp<Self>) -> Result;
    /// Posts a kernel consumer's send work requests, in order; on failure
    /// `wrs` stays at the request that failed. May be called in atomic
    /// context: must not sleep.
    fn post_send_wrs(_qp: &Qp<Self>, _wrs: &mut SendWrs<'_, Self>) -> Result {
        Err(EOPNOTSUPP)
    }
    /// Posts a kernel consumer's receive work requests, as
    /// [`Self::post_send_wrs`].
    fn post_recv_wrs(_qp: &Qp<Self>, _wrs: &mut RecvWrs<'_>) -> Result {
        Err(EOPNOTSUPP)
    }
    /// Applies attribute changes the core's state rules allow.
    fn modify_qp(qp: &Qp<Self>, change: &QpAttrChange) -> Result;
    /// The current attributes.
    fn qp_attrs(qp: &Qp<Self>) -> QpAttrs;
    /// A new shared receive queue, and the sizes granted.
    fn create_srq(
        dev: &Device<Self>,
        req: SrqRequest<'_, Self>,
    ) -> Result<(impl PinInit<Self::Srq, Error>, SrqAttrs)>;
    /// A shared receive queue is going away (no QP uses it any more).
    fn destroy_srq(_srq: &Srq<Self>) {}
    /// Posts a kernel consumer's receive work requests to a shared receive
    /// queue, as [`Self::post_send_wrs`].
    fn post_srq_recv_wrs(_srq: &Srq<Self>, _wrs: &mut RecvWrs<'_>) -> Result {
        Err(EOPNOTSUPP)
    }
    /// Resizes the SRQ to at least `max_wr` WQEs, keeping those posted, and
    /// returns the granted size. For a process's SRQ (`uctx`), `publish`
    /// tells it the new ring's mapping before the old one is given up; if
    /// it fails, nothing changed.
    fn resize_srq(
        _srq: &Srq<Self>,
        _max_wr: u32,
        _uctx: Option<&UContext<Self>>,
        _publish: impl FnOnce(MmapInfo) -> Result,
    ) -> Result<u32> {
        Err(EOPNOTSUPP)
    }
    /// Arms (or with 0 disarms) the SRQ's limit event.
    fn set_srq_limit(srq: &Srq<Self>, limit: u32) -> Result;
    /// The SRQ's sizes and limit.
    fn srq_attrs(srq: &Srq<Self>) -> SrqAttrs;
    /// A new address handle; `udata` is the provider's response for user
    /// AHs.
    fn create_ah(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        av: AddressVector,
        udata: Option<crate::rdma::udata::UData>,
    ) -> Result<Self::Ah>;
    /// An address handle is going away.
    fn destroy_ah(_ah: &Ah<Self>) {}
    /// The address an AH stands for.
    fn ah_address(ah: &Ah<Self>) -> AddressVector;
    /// Admits a memory registration (rights, size, budget) before the
    /// memory is pinned; undone by `dereg_mr`.
    fn reg_mr(dev: &Device<Self>, pd: &Pd<Self>, req: &MrRequest) -> Result<Self::Mr>;
    /// Checks new rights for a registered region (`ibv_rereg_mr` without a
    /// new translation); refused unless the driver checks them.
    fn check_mr_access(_dev: &Device<Self>, _access: Access) -> Result {
        Err(EOPNOTSUPP)
    }
    /// A memory region is going away; the data path no longer uses it.
    fn dereg_mr(_dev: &Device<Self>, _mr: &Self::Mr) {}
    /// An on-demand region of the device lost pages it had faulted in (the
    /// process unmapped, freed or moved them). Any context that may sleep
    /// or not; must not take the data path's locks.
    fn odp_invalidated(_dev: &Device<Self>) {}
    /// Admits a memory window (the device's budget); undone by
    /// `dealloc_mw`. Refused unless the driver implements windows.
    fn alloc_mw(_dev: &Device<Self>) -> Result {
        Err(EOPNOTSUPP)
    }
    /// A memory window is gone.
    fn dealloc_mw(_dev: &Device<Self>) {}

    /// Names of the port's counters (`rdma statistic`); none by default.
    const PORT_STATS: &'static [StatDesc] = &[];
    /// Current values of the port's counters, one per [`Self::PORT_STATS`]
    /// entry, in that order. May be called in any context that can sleep.
    fn port_stats(_dev: &Device<Self>, _values: &mut [u64]) {}
}

/// A registered or registering RDMA device with driver data `T`.
///
/// # Invariants
///
/// - `ib` is at offset 0 and was allocated by `_ib_alloc_device` with the size
///   of `Self`; the RDMA core owns the allocation.
/// - `registry`, `netdev`, `mrs`, `windows` and `data` are initialised from
///   the moment the core can call any driver callback until
///   `dealloc_driver`, which drops them; `mrs` and `windows` are never
///   moved.
/// - `netdev` changes only before registration.
#[repr(C)]
pub(crate) struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    registry: Arc<Registry<T>>,
    /// The port's net device, held from `set_netdev` until `dealloc_driver`.
    netdev: Option<NetDevRef>,
    mrs: MrTable<T>,
    windows: WindowTable<T>,
    data: T,
}

impl<T: Driver> Device<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T {
        &self.data
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The device's memory regions by key.
    pub(super) fn mrs(&self) -> &MrTable<T> {
        &self.mrs
    }

    /// The device's memory windows by key.
    pub(super) fn windows(&self) -> &WindowTable<T> {
        &self.windows
    }

    /// Borrows the device from the `ib_device` the core passed to a callback.
    ///
    /// # Safety
    ///
    /// `ib` must be the `ib_device` of a live `Device<T>` of this `T`, which
    /// holds whenever the core calls one of the callbacks [`VTable<T>`]
    /// installed, until `dealloc_driver` returns.
    unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is at offset 0 of a live `Device<T>` (caller).
        unsafe { &*ib.cast::<Self>() }
    }

    /// The net device bound to `port`, with a reference held until the
    /// returned value is dropped. Does not sleep or lock.
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDevRef> {
        if port != PORT {
            return None;
        }
        self.netdev.as_deref().map(NetDevRef::hold)
    }

    /// Tells the core's event handlers (`ibv_get_async_event`) whether the
    /// port went up or down, if its state changed since the last call.
    pub(crate) fn dispatch_port_state_event(&self) {
        if let Some(ndev) = &self.netdev {
            // SAFETY: both devices are live; the core compares the net
            // device's state with the port's last one under its own lock.
            unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), ndev.as_raw()) };
        }
    }

    /// The RoCE GID at `index` of `port`'s table, if that slot holds one,
    /// and whether it is of type RoCE v1 (else v2).
    pub(crate) fn roce_gid(&self, port: u32, index: u8) -> Option<([u8; 16], bool)> {
        let mut gid = [0u8; 16];
        let mut roce_v1 = false;
        // SAFETY: a live ib_device; `gid` has the 16 bytes and `roce_v1`
        // the flag written.
        let r = unsafe {
            bindings::sroce_roce_gid(
                self.as_raw(),
                port,
                u32::from(index),
                gid.as_mut_ptr(),
                &mut roce_v1,
            )
        };
        (r == 0).then_some((gid, roce_v1))
    }

    /// Whether `gid` is a RoCE v1 GID of `port`'s table. Any context.
    pub(crate) fn has_roce_v1_gid(&self, port: u32, gid: &[u8; 16]) -> bool {
        // SAFETY: a live ib_device; `gid` is 16 readable bytes.
        unsafe { bindings::sroce_has_roce_v1_gid(self.as_raw(), port, gid.as_ptr()) }
    }

    /// The link speed and width of `port`, derived from its net device.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: a live ib_device and two valid out-pointers.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }
}

/// A net device reference taken by [`Device::netdev`]; released on drop.
///
/// # Invariants
///
/// Holds one `dev_hold` reference on a live net device.
pub(crate) struct NetDevRef(NonNull<bindings::net_device>);

impl NetDevRef {
    /// Takes a reference on `ndev`.
    pub(crate) fn hold(ndev: &NetDevice) -> Self {
        // SAFETY: `ndev` is live for the call, so taking a reference on it is
        // allowed; the reference keeps it allocated afterwards.
        unsafe { bindings::sroce_dev_hold(ndev.as_raw()) };
        // INVARIANT: the reference was taken above; `NetDevice` is a
        // transparent wrapper of `net_device`.
        Self(NonNull::from(ndev).cast())
    }

    /// Gives the reference to the caller (a C function that returns a held
    /// net device).
    fn into_raw(self) -> *mut bindings::net_device {
        let raw = self.0.as_ptr();
        core::mem::forget(self);
        raw
    }
}

impl core::ops::Deref for NetDevRef {
    type Target = NetDevice;
    fn deref(&self) -> &NetDevice {
        // SAFETY: the held reference keeps the net device alive while `self` lives.
        unsafe { NetDevice::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetDevRef {
    fn drop(&mut self) {
        // SAFETY: releases the reference this value owns (type invariant).
        unsafe { bindings::sroce_dev_put(self.0.as_ptr()) };
    }
}

/// A device allocated and configured but not (yet) registered.
///
/// # Invariants
///
/// Owns the allocation of a `Device<T>` whose `registry` and `data` are
/// initialised and whose ops are installed; dropping it frees the device.
pub(crate) struct NewDevice<T: Driver>(NonNull<Device<T>>);

impl<T: Driver> NewDevice<T> {
    /// Allocates a device in the initial network namespace, as software
    /// providers do in the RDMA core's shared-namespace mode.
    pub(crate) fn new(
        module: &'static ThisModule,
        registry: &Arc<Registry<T>>,
        data: impl PinInit<T, Error>,
    ) -> Result<Self> {
        const {
            assert!(core::mem::offset_of!(Device<T>, ib) == 0);
            // kzalloc guarantees 8-byte alignment for these sizes.
            assert!(core::mem::align_of::<Device<T>>() <= 8);
        }
        // SAFETY: `init_net` is a static that lives forever; the size is
        // at least that of `ib_device` since `ib` is the first field.
        let ib = unsafe {
            bindings::_ib_alloc_device(size_of::<Device<T>>(), &raw mut bindings::init_net)
        };
        let dev = NonNull::new(ib.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let p = dev.as_ptr();

        // SAFETY: `p` is a fresh, zeroed allocation of `Device<T>` size and
        // alignment; the fields are written before anything reads them.
        unsafe {
            (&raw mut (*p).registry).write(registry.clone());
            (&raw mut (*p).netdev).write(None);
        }
        // SAFETY: as above; the core never relocates the allocation.
        let Ok(()) = unsafe { MrTable::<T>::new().__init(&raw mut (*p).mrs) };
        // SAFETY: as above.
        let Ok(()) = unsafe { WindowTable::<T>::new().__init(&raw mut (*p).windows) };
        // SAFETY: as above; `data` is never moved afterwards (the core owns
        // the allocation and never relocates it).
        if let Err(e) = unsafe { data.__init(&raw mut (*p).data) } {
            // SAFETY: ops are not installed yet, so `ib_dealloc_device` does
            // not call `dealloc_driver`; drop what was initialised here.
            unsafe {
                core::ptr::drop_in_place(&raw mut (*p).windows);
                core::ptr::drop_in_place(&raw mut (*p).mrs);
                core::ptr::drop_in_place(&raw mut (*p).netdev);
                core::ptr::drop_in_place(&raw mut (*p).registry);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        let ops = VTable::<T>::build(module);
        // SAFETY: `ib` is a live, unregistered ib_device; the core copies `ops`.
        unsafe {
            bindings::ib_set_device_ops(ib, &ops);
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = PORT;
            (*ib).local_dma_lkey = 0;
            // Write commands the core only forwards to drivers that opt in.
            (*ib).uverbs_cmd_mask |= (1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ)
                | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);
        }
        // INVARIANT: fields initialised and ops installed above.
        Ok(Self(dev))
    }

    fn ib(&self) -> *mut bindings::ib_device {
        self.0.as_ptr().cast()
    }

    /// Sets the node GUID (a big-endian value stored as `u64`).
    pub(crate) fn set_node_guid(&mut self, guid_be: u64) {
        // SAFETY: the device is not registered, so nothing else reads it.
        unsafe { (*self.ib()).node_guid = guid_be };
    }

    /// Sets the node description shown by `ibv_devinfo -v`.
    pub(crate) fn set_node_desc(&mut self, desc: &CStr) {
        // SAFETY: the device is not registered; the copy is bounded by the
        // destination size and leaves a terminating NUL.
        unsafe {
            let dst = &mut (*self.ib()).node_desc;
            let src = desc.to_bytes();
            let n = src.len().min(dst.len() - 1);
            for (d, s) in dst.iter_mut().zip(&src[..n]) {
                *d = *s as kernel::ffi::c_char;
            }
        }
    }

    /// Sets how many completion vectors the device offers.
    pub(crate) fn set_num_comp_vectors(&mut self, n: u32) {
        // SAFETY: the device is not registered.
        unsafe { (*self.ib()).num_comp_vectors = n.clamp(1, i32::MAX as u32) as i32 };
    }

    /// Binds the device's port to `ndev`, which stays referenced until the
    /// device is released. The driver must unregister the device when
    /// `ndev` is unregistered (or `ndev`'s unregistration waits for it).
    pub(crate) fn set_netdev(&mut self, ndev: &NetDevice) {
        let held = Some(NetDevRef::hold(ndev));
        // SAFETY: the device is not registered, so nothing else reads the
        // field; `&mut self` excludes other writers.
        unsafe { (*self.0.as_ptr()).netdev = held };
    }

    /// Registers the device under `name`. From here on the RDMA core owns it.
    pub(crate) fn register(self, name: &CStr) -> Result {
        // SAFETY: `data` is initialised (type invariant).
        let registry = unsafe { &(*self.0.as_ptr()).registry }.clone();
        registry.add(self.0)?;
        // SAFETY: a live, configured, unregistered device and a valid name;
        // software providers pass no DMA device.
        let ret = unsafe {
            bindings::sroce_ib_mark_name_assigned_by_user(self.ib());
            bindings::ib_register_device(self.ib(), name.as_char_ptr(), core::ptr::null_mut())
        };
        if ret != 0 {
            registry.remove(self.0);
            // Dropping `self` deallocates, as `ib_register_device` requires
            // of its caller on failure.
            return Err(Error::from_errno(ret));
        }
        core::mem::forget(self);
        Ok(())
    }
}

impl<T: Driver> Drop for NewDevice<T> {
    fn drop(&mut self) {
        // SAFETY: we own an unregistered device; `ib_dealloc_device` calls
        // `dealloc_driver`, which drops `registry` and `data`.
        unsafe { bindings::ib_dealloc_device(self.ib()) };
    }
}

/// A raw device pointer kept in a [`Registry`].
struct Entry<T: Driver>(NonNull<Device<T>>);

// SAFETY: the pointer is only dereferenced under the registry lock while the
// device is known to be alive (it is removed in `dealloc_driver`).
unsafe impl<T: Driver> Send for Entry<T> {}

/// A device in a [`Registry`]'s index by net device.
struct Bound<T: Driver> {
    ndev: *mut bindings::net_device,
    dev: Entry<T>,
}

// SAFETY: `ndev` is only compared, never dereferenced; see `Entry`.
unsafe impl<T: Driver> Send for Bound<T> {}

/// The live devices of one driver.
///
/// A device is in the registry from just before `ib_register_device` until
/// its `dealloc_driver`, so a pointer found under either lock is always a
/// live device.
#[pin_data]
pub(crate) struct Registry<T: Driver> {
    /// Every device, for control paths that may sleep.
    #[pin]
    devices: Mutex<KVec<Entry<T>>>,
    /// The same devices by bound net device, for the receive softirq (one
    /// device per net device). Taken inside `devices` when both are held.
    #[pin]
    by_netdev: SpinLockIrq<KVec<Bound<T>>>,
}

impl<T: Driver> Registry<T> {
    /// An empty registry.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- new_mutex!(KVec::new(), "sroce::registry"),
                by_netdev <- new_spinlock_irq!(KVec::new(), "sroce::registry_by_netdev"),
            }),
            GFP_KERNEL,
        )
    }

    /// Adds a device about to be registered; `EEXIST` if another device of
    /// this driver is bound to the same net device.
    fn add(&self, dev: NonNull<Device<T>>) -> Result {
        // SAFETY: `dev` is live and unregistered; its `netdev` no longer
        // changes.
        let ndev = unsafe { dev.as_ref() }
            .netdev
            .as_deref()
            .map(NetDevice::as_raw);
        let mut devices = self.devices.lock();
        devices.push(Entry(dev), GFP_KERNEL)?;
        let Some(ndev) = ndev else { return Ok(()) };
        let mut index = self.by_netdev.lock();
        let added = if index.iter().any(|b| b.ndev == ndev) {
            Err(EEXIST)
        } else {
            // Atomic: under a spinlock. One small entry per device.
            index
                .push(
                    Bound {
                        ndev,
                        dev: Entry(dev),
                    },
                    GFP_ATOMIC,
                )
                .map_err(Error::from)
        };
        drop(index);
        if added.is_err() {
            devices.retain(|e| e.0 != dev);
        }
        added
    }

    fn remove(&self, dev: NonNull<Device<T>>) {
        let mut devices = self.devices.lock();
        self.by_netdev.lock().retain(|b| b.dev.0 != dev);
        devices.retain(|e| e.0 != dev);
    }

    /// Whether a device of this driver (registered or not yet) is bound to
    /// `ndev`.
    pub(crate) fn is_bound(&self, ndev: &NetDevice) -> bool {
        let ndev = ndev.as_raw();
        self.by_netdev.lock().iter().any(|b| b.ndev == ndev)
    }

    /// The registered device bound to `ndev`, if any. Does not sleep:
    /// callable from the receive softirq.
    pub(crate) fn device_for_netdev(&self, ndev: &NetDevice) -> Option<DeviceRef<T>> {
        let ndev = ndev.as_raw();
        let index = self.by_netdev.lock();
        let b = index.iter().find(|b| b.ndev == ndev)?;
        // SAFETY: a device in the index is live until `dealloc_driver`
        // removes it, which needs the lock held here.
        unsafe { DeviceRef::try_get(b.dev.0) }
    }

    /// Queues the unregistration of this driver's device bound to `ndev`, if
    /// any. Used when the net device goes away.
    pub(crate) fn unregister_for_netdev(&self, ndev: &NetDevice) -> bool {
        let Some(dev) = self.device_for_netdev(ndev) else {
            return false;
        };
        // SAFETY: the device is registered and `dev` holds a registration
        // reference; the core queues the work and takes its own reference.
        unsafe { bindings::ib_unregister_device_queued(dev.as_raw()) };
        true
    }

    /// Runs `f` on the first live device `pick` accepts, under the registry
    /// lock (so the device cannot be released meanwhile; `f` must not
    /// register or release devices). For control paths such as debugfs.
    pub(crate) fn with_device<R>(
        &self,
        pick: impl Fn(&Device<T>) -> bool,
        f: impl FnOnce(&Device<T>) -> R,
    ) -> Option<R> {
        let devices = self.devices.lock();
        devices
            .iter()
            .find_map(|e| {
                // SAFETY: a device in the registry is live until its
                // `dealloc_driver` removes it, which needs the lock we hold.
                let dev = unsafe { e.0.as_ref() };
                pick(dev).then_some(dev)
            })
            .map(f)
    }

    /// Runs `f` on every live device, under the registry lock (`f` must not
    /// register or release devices).
    pub(crate) fn for_each_device(&self, mut f: impl FnMut(&Device<T>)) {
        for e in self.devices.lock().iter() {
            // SAFETY: as in `with_device`.
            f(unsafe { e.0.as_ref() });
        }
    }

    /// Unregisters every device of this driver and waits until each has been
    /// released by `dealloc_driver`. Call after new devices can no longer be
    /// created (the link type is unregistered).
    pub(crate) fn unregister_all(&self) {
        loop {
            let ib = {
                let devices = self.devices.lock();
                let Some(e) = devices.first() else { break };
                let ib: *mut bindings::ib_device = e.0.as_ptr().cast();
                // SAFETY: the device is live while in the registry and we hold
                // the lock that `dealloc_driver` needs to remove it; this
                // reference keeps the memory alive after we drop the lock.
                unsafe { bindings::get_device(&raw mut (*ib).__bindgen_anon_1.dev) };
                ib
            };
            // SAFETY: we hold a device reference. `ib_unregister_device`
            // unregisters it, or waits for a concurrent unregistration, and
            // in both cases `dealloc_driver` has run when it returns.
            unsafe {
                bindings::ib_unregister_device(ib);
                bindings::put_device(&raw mut (*ib).__bindgen_anon_1.dev);
            }
        }
    }
}

/// The `ib_device_ops` callbacks for a driver `T`.
struct VTable<T: Driver>(PhantomData<T>);

impl<T: Driver> VTable<T> {
    fn build(module: &'static ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: module.as_ptr().cast(),
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            dealloc_driver: Some(Self::dealloc_driver),
            get_netdev: Some(Self::get_netdev),
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: Some(Self::get_link_layer),
            query_pkey: Some(Self::query_pkey),
            alloc_ucontext: Some(ucontext::alloc::<T>),
            dealloc_ucontext: Some(ucontext::dealloc::<T>),
            disassociate_ucontext: Some(ucontext::disassociate),
            size_ib_ucontext: UContext::<T>::SIZE,
            alloc_pd: Some(pd::alloc::<T>),
            dealloc_pd: Some(pd::dealloc::<T>),
            size_ib_pd: Pd::<T>::SIZE,
            create_cq: Some(cq::create::<T>),
            destroy_cq: Some(cq::destroy::<T>),
            resize_user_cq: Some(cq::resize::<T>),
            req_notify_cq: Some(cq::req_notify::<T>),
            poll_cq: Some(cq::poll::<T>),
            size_ib_cq: Cq::<T>::SIZE,
            create_qp: Some(qp::create::<T>),
            destroy_qp: Some(qp::destroy::<T>),
            modify_qp: Some(qp::modify::<T>),
            query_qp: Some(qp::query::<T>),
            fill_res_qp_entry: Some(crate::rdma::restrack::fill_qp_entry::<T>),
            post_send: Some(qp::post_send::<T>),
            post_recv: Some(qp::post_recv::<T>),
            size_ib_qp: Qp::<T>::SIZE,
            create_srq: Some(srq::create::<T>),
            destroy_srq: Some(srq::destroy::<T>),
            modify_srq: Some(srq::modify::<T>),
            query_srq: Some(srq::query::<T>),
            post_srq_recv: Some(srq::post_recv::<T>),
            size_ib_srq: Srq::<T>::SIZE,
            create_ah: Some(ah::create::<T>),
            create_user_ah: Some(ah::create::<T>),
            destroy_ah: Some(ah::destroy::<T>),
            query_ah: Some(ah::query::<T>),
            size_ib_ah: Ah::<T>::SIZE,
            mmap: Some(queue::mmap),
            mmap_free: Some(queue::mmap_free),
            reg_user_mr: Some(mr::reg_user::<T>),
            get_dma_mr: Some(mr::get_dma::<T>),
            alloc_mr: Some(mr::alloc::<T>),
            map_mr_sg: Some(mr::map_sg::<T>),
            dereg_mr: Some(mr::dereg::<T>),
            rereg_user_mr: Some(mr::rereg_user::<T>),
            advise_mr: Some(super::mr_odp::advise::<T>),
            alloc_mw: Some(mw::alloc::<T>),
            dealloc_mw: Some(mw::dealloc::<T>),
            size_ib_mw: mw::size::<T>(),
            alloc_hw_port_stats: (!T::PORT_STATS.is_empty()).then_some(stats::alloc_port::<T>),
            get_hw_stats: (!T::PORT_STATS.is_empty()).then_some(stats::get::<T>),
            ..Default::default()
        }
    }

    /// # Safety
    ///
    /// Called once by the core, after which it never calls into `T` again.
    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        let p = ib.cast::<Device<T>>();
        // SAFETY: the fields are initialised (type invariant of `Device`) and
        // this is their last use; the core frees the memory afterwards.
        unsafe {
            (*p).registry.remove(NonNull::new_unchecked(p));
            core::ptr::drop_in_place(&raw mut (*p).data);
            core::ptr::drop_in_place(&raw mut (*p).windows);
            core::ptr::drop_in_place(&raw mut (*p).mrs);
            core::ptr::drop_in_place(&raw mut (*p).netdev);
            core::ptr::drop_in_place(&raw mut (*p).registry);
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver, possibly
    /// under its spinlocks: must not sleep.
    unsafe extern "C" fn get_netdev(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::net_device {
        // SAFETY: callback on a live device of this driver.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // The core releases the reference it gets here.
        dev.netdev(port)
            .map_or(core::ptr::null_mut(), NetDevRef::into_raw)
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver and valid
    /// argument pointers.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: `udata` is NULL or a valid ib_udata from the core.
            if !udata.is_null() && unsafe { (*udata).inlen != 0 || (*udata).outlen != 0 } {
                // Provider-specific query data is not part of the rxe ABI.
                return Err(EINVAL);
            }
            // SAFETY: callback on a live device of this driver.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::query_device(dev)?;
            // SAFETY: `attr` points to a valid struct owned by the caller.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver and valid
    /// argument pointers.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            if port != PORT {
                return Err(EINVAL);
            }
            // SAFETY: callback on a live device of this driver.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` points to a valid struct owned by the caller.
            let out = unsafe { &mut *attr };
            a.write_to(out);
            if let Ok((speed, width)) = dev.eth_speed(port) {
                out.active_speed = speed;
                out.active_width = width;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver and valid
    /// argument pointers.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            if port != PORT {
                return Err(EINVAL);
            }
            // SAFETY: callback on a live device of this driver.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let im = T::port_immutable(dev, port)?;
            // SAFETY: `out` points to a valid struct owned by the caller.
            let out = unsafe { &mut *out };
            out.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
            if im.roce_v1 {
                out.core_cap_flags |= bindings::RDMA_CORE_PORT_IBA_ROCE;
            }
            out.pkey_tbl_len = i32::try_from(im.pkey_tbl_len).map_err(|_| EINVAL)?;
            out.gid_tbl_len = i32::try_from(im.gid_tbl_len).map_err(|_| EINVAL)?;
            out.max_mad_size = im.max_mad_size;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver and valid
    /// argument pointers.
    unsafe extern "C" fn get_link_layer(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a live device of this driver and valid
    /// argument pointers.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            if port != PORT {
                return Err(EINVAL);
            }
            // SAFETY: callback on a live device of this driver.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let v = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is a valid out-pointer from the caller.
            unsafe { *pkey = v };
            Ok(0)
        })
    }
}

/// Borrows the device behind a core object's `device` pointer.
///
/// # Safety
///
/// `ib` must belong to a live `Device<T>` (as in [`Device::from_raw`]).
pub(super) unsafe fn device_from_raw<'a, T: Driver>(ib: *mut bindings::ib_device) -> &'a Device<T> {
    // SAFETY: forwarded to the caller.
    unsafe { Device::from_raw(ib) }
}

/// Whether any RDMA device (of any provider) is bound to `ndev`.
pub(crate) fn netdev_has_rdma_device(ndev: &NetDevice) -> bool {
    // SAFETY: `ndev` is live; a non-NULL result carries a registration
    // reference, dropped right away.
    let ib = unsafe {
        bindings::ib_device_get_by_netdev(
            ndev.as_raw(),
            bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        )
    };
    if ib.is_null() {
        return false;
    }
    // SAFETY: releases the reference taken above.
    unsafe { bindings::ib_device_put(ib) };
    true
}

/// A registration reference on a device of driver `T`, taken from a context
/// with no other guarantee that the device lives (e.g. the packet receive
/// path). While it exists the device cannot finish unregistering, so its
/// data stays valid.
///
/// # Invariants
///
/// Holds one `ib_device_try_get` reference on a registered `Device<T>`.
pub(crate) struct DeviceRef<T: Driver>(NonNull<Device<T>>);

impl<T: Driver> DeviceRef<T> {
    /// Takes a registration reference unless the device is unregistering
    /// (or not registered yet).
    ///
    /// # Safety
    ///
    /// `dev`'s memory must be valid for the call.
    unsafe fn try_get(dev: NonNull<Device<T>>) -> Option<Self> {
        let ib: *mut bindings::ib_device = dev.as_ptr().cast();
        // SAFETY: the memory is valid (caller); `refcount` is the
        // registration count `ib_device_try_get` increments.
        let got = unsafe { bindings::sroce_refcount_inc_not_zero(&raw mut (*ib).refcount) };
        // INVARIANT: the increment succeeded. (Lazily: a reference built
        // when it failed would be dropped, releasing one never taken.)
        got.then(|| Self(dev))
    }
}

impl<T: Driver> core::ops::Deref for DeviceRef<T> {
    type Target = Device<T>;
    fn deref(&self) -> &Device<T> {
        // SAFETY: the held reference keeps the device and its data alive.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: releases the reference this value owns (type invariant).
        unsafe { bindings::ib_device_put(self.0.as_ptr().cast()) };
    }
}
