// SPDX-License-Identifier: GPL-2.0

//! `struct ib_mr`: memory regions.
//!
//! Unlike PDs, MRs are allocated by the provider: `reg_user_mr` and
//! `get_dma_mr` return a `struct ib_mr *`, and `dereg_mr` must free it. An
//! [`Mr<T>`] is that allocation: the `ib_mr` at offset 0, then the key,
//! range, rights and memory the data path uses, then the driver's data.
//!
//! Lifetime: registration publishes the MR in the device's key table
//! ([`super::mr_table`]), which holds one reference. The data path takes
//! more with [`MrRef`] while it copies. `dereg_mr` unpublishes the MR,
//! drops the table's reference and waits for the data path's to go, so
//! when it returns the device no longer touches the memory (as the verbs
//! require) and the pages are unpinned in process context. [`MrRef`]s are
//! meant for one operation (a packet, a work request), never to be held
//! across waits, or deregistration would wait with them.

use super::{
    access::Access,
    bindings,
    device::{device_from_raw, Device, Driver},
    mr_fast::{FastReg, FastRegError, Registration},
    mr_memory::{MrMemory, UserPages},
    mr_odp::OdpPages,
    mr_odp_implicit::ImplicitOdp,
    mr_table::AccessError,
    pd::Pd,
};
use core::ptr::NonNull;
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed, Release},
        Completion, Refcount,
    },
    types::Opaque,
};
use pin_init::InPlaceWrite;

/// How a registration asks for memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MrKind {
    /// User memory at a virtual address (`ibv_reg_mr`).
    User,
    /// All memory, for a kernel consumer's PD (`get_dma_mr`).
    Dma,
    /// A fast-registration region of up to `max_pages` pages (`alloc_mr`).
    FastReg {
        /// Pages a mapping may have.
        max_pages: u32,
    },
}

/// A registration request, as the driver sees it before memory is pinned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrRequest {
    /// What memory is asked for.
    pub(crate) kind: MrKind,
    /// The address the region starts at in work requests and packets.
    pub(crate) iova: u64,
    /// Length in bytes.
    pub(crate) length: u64,
    /// Access rights, as given (not yet validated).
    pub(crate) access: Access,
}

/// A memory region of a device of driver `T`.
///
/// # Invariants
///
/// - `ib` is at offset 0; the object was allocated by `KBox` (kmalloc) and
///   is freed by `dereg` an RCU grace period after it left the key table.
/// - `users` counts the key table's reference (until `dereg`) and one per
///   live [`MrRef`]; `unused` is completed when it reaches zero, after which
///   no new reference is taken.
/// - `pd` is the address of the MR's PD, which outlives the MR (the core
///   holds a use count on it); it is only compared, never dereferenced.
///   It and `access` change in place on `ibv_rereg_mr`; every access
///   reads them anew.
/// - `[iova, iova + length)` does not wrap and, for user memory, maps onto
///   the pinned pages byte for byte.
/// - `windows` counts the memory windows bound to the region; each binding
///   keeps the region registered. [`WINDOWS_CLOSED`] once `dereg` started:
///   no window binds any more.
#[repr(C)]
#[pin_data]
pub(crate) struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    users: Refcount,
    #[pin]
    unused: Completion,
    key: u32,
    pd: Atomic<usize>,
    iova: u64,
    length: u64,
    access: Atomic<u32>,
    windows: Atomic<u32>,
    memory: MrMemory,
    data: T::Mr,
}

/// `Mr::windows` of a region being deregistered.
const WINDOWS_CLOSED: u32 = u32::MAX;

impl<T: Driver> Mr<T> {
    fn new(
        key: u32,
        pd: &Pd<T>,
        req: MrRequest,
        memory: MrMemory,
        data: T::Mr,
    ) -> impl PinInit<Self> {
        const { assert!(core::mem::offset_of!(Self, ib) == 0) };
        let pd = core::ptr::from_ref(pd) as usize;
        pin_init!(Self {
            ib: Opaque::new(bindings::ib_mr::default()),
            users: Refcount::new(1),
            unused <- Completion::new(),
            key,
            pd: Atomic::new(pd),
            iova: req.iova,
            length: req.length,
            access: Atomic::new(req.access.bits()),
            windows: Atomic::new(0),
            memory,
            data,
        })
    }

    /// The MR's key (lkey and rkey are the same).
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// Counts one more window bound to the region, unless it is being
    /// deregistered (then `false`).
    pub(super) fn hold_for_window(&self) -> bool {
        let mut n = self.windows.load(Relaxed);
        loop {
            if n == WINDOWS_CLOSED || n == WINDOWS_CLOSED - 1 {
                return false;
            }
            match self.windows.cmpxchg(n, n + 1, Full) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// A window bound by [`Self::hold_for_window`] let go of the region.
    pub(super) fn release_for_window(&self) {
        self.windows.fetch_sub(1u32, Full);
    }

    /// Drops one reference; the last one completes `unused`.
    fn put(&self) {
        if self.users.dec_and_test() {
            self.unused.complete_all();
        }
    }
}

/// What the data path does with an MR it looked up.
impl<T: Driver> Mr<T> {
    /// The first address of the region.
    #[expect(dead_code, reason = "for debugfs")]
    pub(crate) fn iova(&self) -> u64 {
        self.iova
    }

    /// The region's length in bytes.
    pub(crate) fn length(&self) -> u64 {
        self.length
    }

    /// The driver's data.
    #[expect(dead_code, reason = "for debugfs")]
    pub(crate) fn data(&self) -> &T::Mr {
        &self.data
    }

    /// Whether the MR belongs to `pd`.
    pub(crate) fn belongs_to(&self, pd: &Pd<T>) -> bool {
        self.pd.load(Relaxed) == core::ptr::from_ref(pd) as usize
    }

    /// The offset in the region of `len` bytes at `iova`, if they are all
    /// inside it. Never overflows.
    pub(crate) fn offset_of(&self, iova: u64, len: u64) -> Option<u64> {
        let offset = iova.checked_sub(self.iova)?;
        (offset.checked_add(len)? <= self.length).then_some(offset)
    }

    /// Whether `key` names the region now (a fast-registration region
    /// changes key and is only found while valid).
    pub(crate) fn has_key(&self, key: u32) -> bool {
        match &self.memory {
            MrMemory::FastReg(f) => f.matches(key),
            _ => self.key == key,
        }
    }

    /// The rights of a process's region (`None` for a kernel consumer's,
    /// which no window binds to).
    pub(crate) fn access(&self) -> Option<Access> {
        match self.memory {
            MrMemory::User(_) | MrMemory::OnDemand(_) | MrMemory::ImplicitOnDemand(_) => {
                Some(Access::from_bits(self.access.load(Relaxed)))
            }
            _ => None,
        }
    }

    /// Whether the region is paged on demand.
    pub(crate) fn on_demand(&self) -> bool {
        matches!(
            self.memory,
            MrMemory::OnDemand(_) | MrMemory::ImplicitOnDemand(_)
        )
    }

    /// The fast-registration state, if this is such a region.
    fn fast_reg(&self) -> Option<&FastReg> {
        match &self.memory {
            MrMemory::FastReg(f) => Some(f),
            _ => None,
        }
    }
}

/// A counted reference to a registered MR, from a key lookup. The MR stays
/// registered, its memory pinned, until every reference is dropped.
///
/// # Invariants
///
/// Holds one of the MR's `users` references; `key` is the key it was found
/// by, which accesses check again on a fast-registration region.
pub(crate) struct MrRef<T: Driver> {
    mr: NonNull<Mr<T>>,
    key: u32,
}

// SAFETY: the MR is `Sync` (its fields are immutable or atomic) and the
// reference may be dropped on any task or context (`complete_all` is
// IRQ-safe).
unsafe impl<T: Driver> Send for MrRef<T> {}
// SAFETY: `&MrRef` only gives `&Mr`.
unsafe impl<T: Driver> Sync for MrRef<T> {}

impl<T: Driver> MrRef<T> {
    /// Takes a reference unless the MR's last one is gone.
    ///
    /// # Safety
    ///
    /// `mr`'s memory must be valid for the call (the caller found it in the
    /// key table under RCU, or holds a window's binding to it).
    pub(super) unsafe fn try_new(mr: NonNull<Mr<T>>, key: u32) -> Option<Self> {
        // SAFETY: the memory is valid (caller); `Refcount` wraps a
        // `refcount_t` (transparent), which `refcount_inc_not_zero` takes.
        let got = unsafe {
            bindings::sroce_refcount_inc_not_zero(
                core::ptr::from_ref(&mr.as_ref().users).cast_mut().cast(),
            )
        };
        // INVARIANT: the increment succeeded. (Lazily: a reference built
        // when it failed would be dropped, releasing one never taken.)
        got.then(|| Self { mr, key })
    }

    /// Whether the region grants `needed` on `len` bytes at `iova` now.
    pub(crate) fn grants(
        &self,
        needed: Access,
        iova: u64,
        len: u64,
    ) -> core::result::Result<(), AccessError> {
        let (access, in_range) = match self.fast_reg() {
            Some(f) => {
                let (access, start, length) = f.view(self.key).ok_or(AccessError::BadKey)?;
                let end = iova.checked_sub(start).and_then(|o| o.checked_add(len));
                (access, end.is_some_and(|e| e <= length))
            }
            None => (
                Access::from_bits(self.access.load(Relaxed)),
                self.offset_of(iova, len).is_some(),
            ),
        };
        if !access.contains(needed) {
            return Err(AccessError::NoPermission);
        }
        if !in_range {
            return Err(AccessError::OutOfRange);
        }
        Ok(())
    }

    /// Copies `src` into the region at `iova`. `EFAULT` if it does not fit
    /// in the region (or a fast-registration region was invalidated),
    /// `EACCES` if the memory was not pinned writable.
    pub(crate) fn copy_to(&self, iova: u64, src: &[u8]) -> Result {
        if let Some(f) = self.fast_reg() {
            return f.copy_to(self.key, iova, src);
        }
        let offset = self.offset_of(iova, src.len() as u64).ok_or(EFAULT)?;
        self.memory.copy_to(offset, iova, src)
    }

    /// Fills `dst` from the region at `iova`. `EFAULT` if it does not fit.
    pub(crate) fn copy_from(&self, iova: u64, dst: &mut [u8]) -> Result {
        if let Some(f) = self.fast_reg() {
            return f.copy_from(self.key, iova, dst);
        }
        let offset = self.offset_of(iova, dst.len() as u64).ok_or(EFAULT)?;
        self.memory.copy_from(offset, iova, dst)
    }

    /// Faults `len` bytes at `iova` of an on-demand region in (writable if
    /// `write`), after an access failed with
    /// [`super::mr_odp::NOT_PRESENT`]; nothing to do for other regions.
    /// Process context; sleeps. `EFAULT` if the memory is not mapped.
    /// With `fault` false, only the pages present are taken in.
    pub(crate) fn fault_in(&self, iova: u64, len: u64, write: bool, fault: bool) -> Result {
        let offset = self.offset_of(iova, len).ok_or(EFAULT)?;
        match &self.memory {
            MrMemory::OnDemand(o) => o.fault_in(offset, len, write, fault),
            MrMemory::ImplicitOnDemand(o) => {
                if write && !o.writable() {
                    return Err(EACCES);
                }
                o.fault_in(offset, len, write, fault)
            }
            _ => Ok(()),
        }
    }

    /// Atomic compare-and-swap of the 8-byte aligned host-order `u64` at
    /// `iova`; returns the previous value. `EINVAL` if misaligned.
    pub(crate) fn atomic_compare_swap(&self, iova: u64, compare: u64, swap: u64) -> Result<u64> {
        if let Some(f) = self.fast_reg() {
            return f.with_atomic_u64(self.key, iova, |a| {
                a.cmpxchg(compare, swap, Full).unwrap_or_else(|old| old)
            });
        }
        let offset = self.offset_of(iova, 8).ok_or(EFAULT)?;
        self.memory.compare_swap(offset, iova, compare, swap)
    }

    /// Stores the 8-byte aligned host-order `u64` at `iova` at once (RDMA
    /// ATOMIC WRITE). `EINVAL` if misaligned.
    pub(crate) fn atomic_write(&self, iova: u64, value: u64) -> Result {
        if let Some(f) = self.fast_reg() {
            return f.with_atomic_u64(self.key, iova, |a| {
                a.xchg(value, Full);
            });
        }
        let offset = self.offset_of(iova, 8).ok_or(EFAULT)?;
        self.memory.store(offset, iova, value)
    }

    /// Atomic fetch-and-add of the 8-byte aligned host-order `u64` at
    /// `iova`; returns the previous value. `EINVAL` if misaligned.
    pub(crate) fn atomic_fetch_add(&self, iova: u64, add: u64) -> Result<u64> {
        if let Some(f) = self.fast_reg() {
            return f.with_atomic_u64(self.key, iova, |a| a.fetch_add(add, Full));
        }
        let offset = self.offset_of(iova, 8).ok_or(EFAULT)?;
        self.memory.fetch_add(offset, iova, add)
    }
}

impl<T: Driver> core::ops::Deref for MrRef<T> {
    type Target = Mr<T>;
    fn deref(&self) -> &Mr<T> {
        // SAFETY: the reference keeps the MR alive (type invariant).
        unsafe { self.mr.as_ref() }
    }
}

impl<T: Driver> Drop for MrRef<T> {
    fn drop(&mut self) {
        self.put();
    }
}

/// Registers an MR: the driver admits the request, `memory` provides the
/// pages, the key table publishes it. Every step is undone on failure.
fn register<T: Driver>(
    dev: &Device<T>,
    pd: &Pd<T>,
    req: MrRequest,
    memory: impl FnOnce(u32) -> Result<MrMemory>,
) -> Result<*mut bindings::ib_mr> {
    // Allocated first so that nothing after the driver's admission can
    // fail for lack of memory but the steps below, which undo it.
    let slot = KBox::<Mr<T>>::new_uninit(GFP_KERNEL)?;
    let data = T::reg_mr(dev, pd, &req)?;
    let key = match dev.mrs().reserve() {
        Ok(k) => k,
        Err(e) => {
            T::dereg_mr(dev, &data);
            return Err(e);
        }
    };
    let memory = match memory(key) {
        Ok(m) => m,
        Err(e) => {
            dev.mrs().unreserve(key);
            T::dereg_mr(dev, &data);
            return Err(e);
        }
    };
    let Ok(mr) = slot.write_pin_init(Mr::new(key, pd, req, memory, data));
    // SAFETY: the MR is never moved: the core and the key table refer to it
    // by address until `dereg` frees it.
    let p = KBox::into_raw(unsafe { Pin::into_inner_unchecked(mr) });
    // SAFETY: `p` is a fresh, initialised MR; it is not published yet, so
    // no one else reads `ib`. The core fills in device, pd, type and
    // uobject after we return.
    unsafe {
        let ib = (*p).ib.get();
        (*ib).lkey = key;
        (*ib).rkey = key;
        (*ib).iova = req.iova;
        (*ib).length = req.length;
        (*ib).page_size = PAGE_SIZE as u32;
    }
    // SAFETY: initialised, `key` reserved in this table, and the initial
    // `users` reference is the table's.
    if let Err(e) = unsafe { dev.mrs().publish(NonNull::new_unchecked(p)) } {
        dev.mrs().unreserve(key);
        // SAFETY: never published, so this is the only pointer to it.
        let mr = unsafe { KBox::from_raw(p) };
        T::dereg_mr(dev, &mr.data);
        return Err(e);
    }
    Ok(p.cast())
}

/// `ib_device_ops.reg_user_mr`.
///
/// # Safety
///
/// Called by the core with a live PD of a live `Device<T>`.
pub(super) unsafe extern "C" fn reg_user<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    dmah: *mut bindings::ib_dmah,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: forwarded from this function's contract.
    unsafe { try_reg_user::<T>(pd, start, length, iova, access, dmah) }
        .unwrap_or_else(Error::to_ptr)
}

/// `reg_user` with `Result` error handling.
///
/// # Safety
///
/// As for `reg_user`.
unsafe fn try_reg_user<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    dmah: *mut bindings::ib_dmah,
) -> Result<*mut bindings::ib_mr> {
    if !dmah.is_null() {
        // DMA handles steer hardware DMA; there is none here.
        return Err(EOPNOTSUPP);
    }
    // The translation maps iova onto the pinned pages byte for byte, so
    // both must sit at the same offset within a page (uverbs checks this
    // too; in-kernel callers may not).
    if start % PAGE_SIZE as u64 != iova % PAGE_SIZE as u64 {
        return Err(EINVAL);
    }
    // Implicit on-demand paging: the whole address space, as `ibv_reg_mr`
    // with NULL and SIZE_MAX asks for it; its iovas are addresses.
    let on_demand = Access::from_raw(access).contains(Access::ON_DEMAND);
    let implicit = on_demand && start == 0 && length == u64::MAX;
    if implicit && iova != 0 {
        return Err(EINVAL);
    }
    // The region's addresses must not wrap (a type invariant of `Mr`; the
    // core checks `start`, not the iova a process chose).
    if iova.checked_add(length).is_none() {
        return Err(EINVAL);
    }
    // SAFETY: `pd` is live and its `device` is ours (function contract).
    let dev = unsafe { device_from_raw::<T>((*pd).device) };
    // SAFETY: a live PD that `pd::alloc` initialised.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let req = MrRequest {
        kind: MrKind::User,
        iova,
        length,
        access: Access::from_raw(access),
    };
    register(dev, pd, req, |_| {
        if implicit {
            return Ok(MrMemory::ImplicitOnDemand(ImplicitOdp::new(
                dev, req.access,
            )?));
        }
        if req.access.contains(Access::ON_DEMAND) {
            return Ok(MrMemory::OnDemand(OdpPages::new(
                dev, start, length, req.access,
            )?));
        }
        Ok(MrMemory::User(UserPages::pin(
            dev, start, length, req.access,
        )?))
    })
}

/// `ibv_rereg_mr`'s changes (`IB_MR_REREG_*`).
const REREG_TRANS: u32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS;
const REREG_PD: u32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_PD;
const REREG_ACCESS: u32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;

/// `ib_device_ops.rereg_user_mr` (`ibv_rereg_mr`). A new translation
/// (`IB_MR_REREG_TRANS`) is a new region: it is registered with the new
/// range (and the new PD or rights, or the old ones) and returned, and the
/// core destroys this one once it has taken the new region's place (new
/// keys). A new PD or new rights alone change this region in place, as
/// rxe does: the data path reads both on every access.
///
/// # Safety
///
/// Called by the core with a live user MR of a live `Device<T>` and, when
/// `flags` has `IB_MR_REREG_PD`, a live PD of the same device.
pub(super) unsafe extern "C" fn rereg_user<T: Driver>(
    mr: *mut bindings::ib_mr,
    flags: kernel::ffi::c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let flags = flags as u32;
    if flags & !(REREG_TRANS | REREG_PD | REREG_ACCESS) != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: the core passes a live MR registered by `reg_user`.
    let this = unsafe { &*mr.cast::<Mr<T>>() };
    // No window may be bound while the region changes, nor bind meanwhile:
    // the windows' checks were made against its PD and rights (IBTA
    // 10.6.7.2.3: unbind them first).
    if this.windows.cmpxchg(0, WINDOWS_CLOSED, Full).is_err() {
        return EBUSY.to_ptr();
    }
    // SAFETY: forwarded from this function's contract.
    let r = unsafe { rereg_closed::<T>(mr, flags, start, length, iova, access, pd) };
    this.windows.store(0, Release);
    r
}

/// `rereg_user` once windows are kept out of the region.
///
/// # Safety
///
/// As for `rereg_user`.
unsafe fn rereg_closed<T: Driver>(
    mr: *mut bindings::ib_mr,
    flags: u32,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    pd: *mut bindings::ib_pd,
) -> *mut bindings::ib_mr {
    // SAFETY: the core passes a live MR registered by `reg_user`.
    let this = unsafe { &*mr.cast::<Mr<T>>() };
    // SAFETY: a live MR's device is a live `Device<T>`.
    let dev = unsafe { device_from_raw::<T>((*mr).device) };
    let pd = if flags & REREG_PD != 0 {
        pd
    } else {
        // SAFETY: a live MR's `pd` is its live PD (the core holds a use
        // count on it).
        unsafe { (*mr).pd }
    };
    let access = if flags & REREG_ACCESS != 0 {
        Access::from_raw(access)
    } else {
        Access::from_bits(this.access.load(Relaxed))
    };
    if flags & REREG_TRANS != 0 {
        // SAFETY: `pd` is a live PD of this device (function contract).
        return unsafe {
            try_reg_user::<T>(
                pd,
                start,
                length,
                iova,
                access.bits() as kernel::ffi::c_int,
                core::ptr::null_mut(),
            )
        }
        .unwrap_or_else(Error::to_ptr);
    }
    if let Err(e) = T::check_mr_access(dev, access) {
        return e.to_ptr();
    }
    // The rights the core pins pages writable for (`ib_access_writable`).
    let writes = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_ATOMIC)
        .union(Access::MW_BIND);
    // Paging on demand or pinned is a property of the translation.
    if access.contains(Access::ON_DEMAND) != this.on_demand() {
        return EINVAL.to_ptr();
    }
    let pinned_writable = match &this.memory {
        MrMemory::User(pages) => pages.writable(),
        MrMemory::OnDemand(pages) => pages.writable(),
        MrMemory::ImplicitOnDemand(pages) => pages.writable(),
        _ => return EINVAL.to_ptr(),
    };
    if access.intersects(writes) && !pinned_writable {
        // The pages were pinned for reading: new write rights need a new
        // translation (as the core's `ib_umem_check_rereg` says).
        return EACCES.to_ptr();
    }
    if flags & REREG_PD != 0 {
        // SAFETY: `pd` is a live PD that `pd::alloc` initialised.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        this.pd.store(core::ptr::from_ref(pd) as usize, Relaxed);
    }
    this.access.store(access.bits(), Relaxed);
    // NULL: the region stays, changed in place.
    core::ptr::null_mut()
}

/// `ib_device_ops.get_dma_mr`: an MR over all memory for a kernel PD.
///
/// # Safety
///
/// Called by the core with a live PD of a live `Device<T>`.
pub(super) unsafe extern "C" fn get_dma<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: kernel::ffi::c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is live and its `device` is ours (function contract).
    let dev = unsafe { device_from_raw::<T>((*pd).device) };
    // SAFETY: a live PD that `pd::alloc` initialised.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let req = MrRequest {
        kind: MrKind::Dma,
        iova: 0,
        length: u64::MAX,
        access: Access::from_raw(access),
    };
    register(dev, pd, req, |_| Ok(MrMemory::KernelVirtual)).unwrap_or_else(Error::to_ptr)
}

/// `ib_device_ops.dereg_mr`. Refused (`EBUSY`) while memory windows are
/// bound to the region; else waits until the data path holds no reference,
/// then unpins and frees.
///
/// # Safety
///
/// Called once by the core, in process context, for an MR `register`
/// returned.
pub(super) unsafe extern "C" fn dereg<T: Driver>(
    ib: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    let p = ib.cast::<Mr<T>>();
    // SAFETY: an MR `register` made, at offset 0 (type invariant); the core
    // set `device` to our device.
    let (mr, dev) = unsafe { (&*p, device_from_raw::<T>((*ib).device)) };
    if mr.windows.cmpxchg(0, WINDOWS_CLOSED, Full).is_err() {
        // As IBTA 10.6.7.2.6 has it (rxe says `EINVAL`). A process that
        // exits with windows bound is cleaned up all the same: the core
        // retries the regions after it deallocated the windows.
        return EBUSY.to_errno();
    }
    dev.mrs().remove(mr);
    mr.put();
    mr.unused.wait_for_completion();
    T::dereg_mr(dev, &mr.data);
    // SAFETY: no reference is left and none can be taken (`users` is 0), so
    // the fields are dropped once (the pages are unpinned here); only RCU
    // readers that found the entry before removal may still read `users`,
    // so the memory, a kmalloc allocation from `KBox`, is freed after a
    // grace period.
    unsafe {
        core::ptr::drop_in_place(p);
        bindings::sroce_kfree_rcu_mightsleep(p.cast());
    }
    0
}

/// `ib_device_ops.alloc_mr`: a fast-registration region, invalid until an
/// `IB_WR_REG_MR` registers it. Only `IB_MR_TYPE_MEM_REG` exists here.
///
/// # Safety
///
/// Called by the core with a live PD of a live `Device<T>`.
pub(super) unsafe extern "C" fn alloc<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return Error::to_ptr(EINVAL);
    }
    // SAFETY: `pd` is live and its `device` is ours (function contract).
    let dev = unsafe { device_from_raw::<T>((*pd).device) };
    // SAFETY: a live PD that `pd::alloc` initialised.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let req = MrRequest {
        kind: MrKind::FastReg {
            max_pages: max_num_sg,
        },
        iova: 0,
        length: 0,
        access: Access::NONE,
    };
    register(dev, pd, req, |key| {
        Ok(MrMemory::FastReg(FastReg::new(key, max_num_sg as usize)?))
    })
    .unwrap_or_else(Error::to_ptr)
}

/// `ib_device_ops.map_mr_sg`: stages the pages of a scatterlist for the
/// next registration (`ib_map_mr_sg` set `page_size` first). Returns how
/// many entries were mapped, as `ib_sg_to_pages` does.
///
/// # Safety
///
/// Called by the core for an MR of a live `Device<T>`, with a valid
/// scatterlist of `sg_nents` entries, DMA-mapped for this device.
pub(super) unsafe extern "C" fn map_sg<T: Driver>(
    ib: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: kernel::ffi::c_int,
    sg_offset: *mut kernel::ffi::c_uint,
) -> kernel::ffi::c_int {
    // SAFETY: an MR `register` made, at offset 0 (type invariant of `Mr`).
    let mr = unsafe { &*ib.cast::<Mr<T>>() };
    let Some(f) = mr.fast_reg() else {
        return EINVAL.to_errno();
    };
    // SAFETY: the core set `page_size` before calling; the consumer owns
    // the MR for the call.
    if let Err(e) = f.begin_map(unsafe { (*ib).page_size }) {
        return e.to_errno();
    }
    // SAFETY: the arguments are the core's (function contract); the
    // callback only appends to this MR's staged list.
    let n = unsafe { bindings::ib_sg_to_pages(ib, sg, sg_nents, sg_offset, Some(set_page::<T>)) };
    // SAFETY: `ib_sg_to_pages` set `iova` to the first byte's address.
    f.end_map(unsafe { (*ib).iova });
    n
}

/// `ib_sg_to_pages`' callback: one more page for `ib`'s staged list.
///
/// # Safety
///
/// `ib` is a fast-registration MR of a `Device<T>` (from `map_sg`).
unsafe extern "C" fn set_page<T: Driver>(
    ib: *mut bindings::ib_mr,
    addr: u64,
) -> kernel::ffi::c_int {
    // SAFETY: function contract.
    let mr = unsafe { &*ib.cast::<Mr<T>>() };
    match mr.fast_reg().map(|f| f.push_page(addr)) {
        Some(Ok(())) => 0,
        Some(Err(e)) => e.to_errno(),
        None => EINVAL.to_errno(),
    }
}

/// The local operations on fast-registration regions, for the send queue
/// (`IB_WR_REG_MR`, `IB_WR_LOCAL_INV`) and the responder (SEND with
/// invalidate).
impl<T: Driver> Device<T> {
    /// Registers the region `key` names (its index; its low 8 bits become
    /// the region's new key variant) for a QP of `pd`, over the pages last
    /// mapped, with `access`.
    pub(crate) fn fast_register(
        &self,
        pd: &Pd<T>,
        key: u32,
        access: Access,
    ) -> core::result::Result<(), FastRegError> {
        let mr = self.mrs().get_slot(key).ok_or(FastRegError::WrongIndex)?;
        let f = match mr.fast_reg() {
            Some(f) if mr.belongs_to(pd) => f,
            _ => return Err(FastRegError::WrongIndex),
        };
        // SAFETY: the MR is live (`mr` holds a reference); `iova` and
        // `length` were set by the consumer's mapping before it posted the
        // request that runs this (ordered by the send queue's lock).
        let (iova, length) = unsafe {
            let ib = mr.ib.get();
            ((*ib).iova, (*ib).length)
        };
        f.register(&Registration {
            key,
            access,
            iova,
            length,
        })
    }

    /// Invalidates the region whose current key is `key`, for a QP of `pd`.
    pub(crate) fn invalidate_key(
        &self,
        pd: &Pd<T>,
        key: u32,
    ) -> core::result::Result<(), FastRegError> {
        let mr = self.mrs().get_slot(key).ok_or(FastRegError::WrongKey)?;
        match mr.fast_reg() {
            Some(f) if mr.belongs_to(pd) => f.invalidate(key),
            _ => Err(FastRegError::WrongKey),
        }
    }
}
