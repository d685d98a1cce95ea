// SPDX-License-Identifier: GPL-2.0

//! `struct ib_mw`: memory windows (IBTA 10.6.7), types 1 and 2B.
//!
//! A window is an rkey for a range of a registered region with remote
//! rights of its own. `ibv_alloc_mw` makes one, unbound; a *bind* work
//! request on a send queue binds it to a range of a region (the region
//! must allow `MW_BIND`, and local write if the window grants remote write
//! or atomics), under a new key variant the request chooses. A type 1
//! window is rebound by later binds (or unbound by a bind of length 0) and
//! is never invalidated; a type 2 window is bound once, to the queue pair
//! that bound it, which alone may use it, until a local invalidate or a
//! peer's SEND with invalidate frees it for the next bind. A zero-based
//! window (type 2 only) is addressed from 0 rather than by the region's
//! addresses.
//!
//! A bound window keeps its region registered: `dereg_mr` of a region with
//! windows bound is refused (`EBUSY`) until they are unbound, invalidated
//! or deallocated, so the window's pointer to the region stays valid while
//! it is bound. The region counts its windows ([`Mr::hold_for_window`]).
//!
//! Windows live in their own key table ([`WindowTable`], keys from
//! [`super::key_slots::MW_INDICES`]). The core allocates and frees the
//! `ib_mw`; the window's state is a separate allocation the table points to,
//! freed an RCU grace period after it left the table, so a lookup in the
//! receive path only needs RCU and the window's IRQ-safe lock.

use super::{
    access::Access,
    bindings,
    device::{device_from_raw, Device, Driver},
    key_slots::{is_window_key, KeySlots, MW_INDICES},
    mr::{Mr, MrRef},
    mr_table::AccessError,
    object::CoreObject,
    pd::Pd,
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::from_result, new_spinlock_irq, prelude::*, sync::SpinLockIrq};

/// A window's type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WindowType {
    /// Bound by `ibv_bind_mw`, rebound at will, usable on any QP of its PD.
    One,
    /// Bound by a bind work request to the posting QP; invalidated to be
    /// bound again.
    Two,
}

/// What a bind work request asks for (`IBV_WR_BIND_MW`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct BindRequest {
    /// The window's current rkey.
    pub(crate) window_key: u32,
    /// The key to bind under (its low 8 bits are the new variant).
    pub(crate) new_key: u32,
    /// The region's lkey (ignored for a bind of length 0).
    pub(crate) region_key: u32,
    /// First address of the range in the region.
    pub(crate) addr: u64,
    /// Length of the range; 0 unbinds a type 1 window.
    pub(crate) length: u64,
    /// The window's rights (`IB_ACCESS_REMOTE_*`, `IB_ZERO_BASED`).
    pub(crate) access: u32,
}

/// Why a bind is refused; every reason completes the request with
/// `IB_WC_MW_BIND_ERR`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BindError {
    /// No window has the key.
    NoWindow,
    /// The window, the region or the queue pair are of different PDs.
    WrongPd,
    /// A type 2 window that is still bound.
    NotFree,
    /// No usable region under the lkey (unknown, not user memory, without
    /// `MW_BIND`, being deregistered), or none given to a type 2 window.
    BadRegion,
    /// Rights a window cannot have, or remote write/atomic rights over a
    /// region without local write.
    BadRights,
    /// The range is not inside the region.
    OutOfRange,
}

/// A window's binding.
///
/// # Invariants
///
/// `region` is a live MR whose window count includes this binding (taken
/// by [`Mr::hold_for_window`]), so it stays registered until
/// [`Binding::release`]; `[addr, addr + length)` is inside it.
struct Binding<T: Driver> {
    region: NonNull<Mr<T>>,
    addr: u64,
    length: u64,
    access: Access,
    /// The queue pair a type 2 window is bound to.
    owner: Option<u64>,
}

impl<T: Driver> Binding<T> {
    /// Gives the region's window count back.
    fn release(self) {
        // SAFETY: the binding's count keeps the region live (invariant).
        unsafe { self.region.as_ref() }.release_for_window();
    }

    /// The region's address of `len` bytes at the window's address `iova`,
    /// if they are inside the window.
    fn translate(&self, iova: u64, len: u64) -> Option<u64> {
        if self.access.contains(Access::ZERO_BASED) {
            if iova.checked_add(len)? > self.length {
                return None;
            }
            self.addr.checked_add(iova)
        } else {
            let offset = iova.checked_sub(self.addr)?;
            (offset.checked_add(len)? <= self.length).then_some(iova)
        }
    }
}

/// A window's mutable state.
struct WindowState<T: Driver> {
    /// The current rkey.
    key: u32,
    /// Cleared by `dealloc_mw`; a lookup that raced with it finds nothing.
    live: bool,
    binding: Option<Binding<T>>,
}

/// A memory window.
///
/// # Invariants
///
/// `pd` is the address of the window's PD (which outlives it); it is only
/// compared. Once `live` is false the state never changes again.
#[pin_data]
pub(crate) struct Window<T: Driver> {
    #[pin]
    state: SpinLockIrq<WindowState<T>>,
    kind: WindowType,
    pd: usize,
}

// SAFETY: the state is behind a lock; the region pointer in a binding is
// to a `Sync` MR that any context may use.
unsafe impl<T: Driver> Send for Window<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for Window<T> {}

impl<T: Driver> Window<T> {
    fn new(key: u32, kind: WindowType, pd: &Pd<T>) -> impl PinInit<Self> {
        let pd = core::ptr::from_ref(pd) as usize;
        pin_init!(Self {
            state <- new_spinlock_irq!(
                WindowState {
                    key,
                    live: true,
                    binding: None,
                },
                "sroce::window"
            ),
            kind,
            pd,
        })
    }

    fn belongs_to(&self, pd: &Pd<T>) -> bool {
        self.pd == core::ptr::from_ref(pd) as usize
    }
}

/// The windows of one device, by key.
///
/// # Invariants
///
/// Each entry of `slots` points to a `Window<T>` allocated by `KBox`, freed
/// by `dealloc` an RCU grace period after it left the table. The table is
/// empty when dropped (the core deallocates every window first).
#[pin_data]
pub(crate) struct WindowTable<T: Driver> {
    #[pin]
    slots: KeySlots,
    _p: PhantomData<T>,
}

impl<T: Driver> WindowTable<T> {
    /// An empty table.
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            slots <- KeySlots::new(MW_INDICES),
            _p: PhantomData,
        })
    }

    /// Runs `f` on the live window whose current key is `key`, under its
    /// lock.
    fn with<R>(&self, key: u32, f: impl FnOnce(&Window<T>, &mut WindowState<T>) -> R) -> Option<R> {
        let rcu = kernel::sync::rcu::read_lock();
        let w = NonNull::new(self.slots.load(key, &rcu).cast::<Window<T>>())?;
        // SAFETY: an entry's window is freed only a grace period after its
        // removal, and RCU is held (type invariant).
        let w = unsafe { w.as_ref() };
        let mut st = w.state.lock();
        if !st.live || st.key != key {
            return None;
        }
        Some(f(w, &mut st))
    }
}

/// The `ib_mw` with the window it stands for.
type MwObject<T> = CoreObject<bindings::ib_mw, NonNull<Window<T>>>;

/// Bytes the core allocates for an `ib_mw`.
pub(super) const fn size<T: Driver>() -> usize {
    MwObject::<T>::SIZE
}

/// `ib_device_ops.alloc_mw`.
///
/// # Safety
///
/// Called by the core with a zeroed object of `size_ib_mw` bytes whose
/// `device` is a live `Device<T>` and whose `pd` and `type` are set.
pub(super) unsafe extern "C" fn alloc<T: Driver>(
    mw: *mut bindings::ib_mw,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid per the function contract.
        let (dev, kind) = unsafe { (device_from_raw::<T>((*mw).device), (*mw).type_) };
        // SAFETY: the core set `pd` and holds the PD while the window lives.
        let pd = unsafe { Pd::<T>::from_raw((*mw).pd) };
        let kind = match kind {
            bindings::ib_mw_type_IB_MW_TYPE_1 => WindowType::One,
            bindings::ib_mw_type_IB_MW_TYPE_2 => WindowType::Two,
            _ => return Err(EINVAL),
        };
        // Charged to the process's memory cgroup, as its other objects are.
        let window = KBox::pin_init(Window::new(0, kind, pd), GFP_KERNEL_ACCOUNT)?;
        T::alloc_mw(dev)?;
        let key = match dev.windows().slots.reserve() {
            Ok(k) => k,
            Err(e) => {
                T::dealloc_mw(dev);
                return Err(e);
            }
        };
        window.state.lock().key = key;
        // SAFETY: the window is never moved: the table and the `ib_mw` refer
        // to it by address until `dealloc` frees it.
        let p = KBox::into_raw(unsafe { Pin::into_inner_unchecked(window) });
        if let Err(e) = dev.windows().slots.publish(key, p.cast()) {
            dev.windows().slots.unreserve(key);
            // SAFETY: never published, so this is the only pointer to it.
            drop(unsafe { KBox::from_raw(p) });
            T::dealloc_mw(dev);
            return Err(e);
        }
        // SAFETY: a fresh object of `size::<T>()` bytes; `rkey` is read by
        // the core after we return.
        unsafe {
            (*mw).rkey = key;
            MwObject::<T>::init(mw, NonNull::new_unchecked(p));
        }
        Ok(0)
    })
}

/// `ib_device_ops.dealloc_mw`: unbinds the window and frees it.
///
/// # Safety
///
/// Called once by the core, in process context, for a window `alloc`
/// initialised.
pub(super) unsafe extern "C" fn dealloc<T: Driver>(mw: *mut bindings::ib_mw) -> kernel::ffi::c_int {
    // Freed without being dropped (lookups may still be reading it until
    // the grace period ends): nothing in it owns anything.
    const { assert!(!core::mem::needs_drop::<Window<T>>()) };
    // SAFETY: live and initialised (function contract).
    let (dev, p) = unsafe {
        let obj = &*mw.cast::<MwObject<T>>();
        (device_from_raw::<T>((*mw).device), *obj.data())
    };
    // SAFETY: the window lives until it is freed below.
    let w = unsafe { p.as_ref() };
    // Out of the table first, outside the window's lock: the XArray's lock
    // is not softirq-safe, the window's is (the receive path takes it).
    // The slot is the same under every key variant.
    let key = w.state.lock().key;
    dev.windows().slots.remove(key);
    {
        let mut st = w.state.lock();
        st.live = false;
        if let Some(b) = st.binding.take() {
            b.release();
        }
    }
    T::dealloc_mw(dev);
    // SAFETY: the data is a pointer, and not used again.
    unsafe { MwObject::<T>::drop_data(mw) };
    // SAFETY: out of the table, so only RCU readers that found it before
    // may still read it; a `KBox` (kmalloc) allocation, freed after a grace
    // period.
    unsafe { bindings::sroce_kfree_rcu_mightsleep(p.as_ptr().cast()) };
    0
}

/// What the data path does with windows.
impl<T: Driver> Device<T> {
    /// Checks that the rkey `key` (a region's or a window's) grants
    /// `needed` on `len` bytes at `iova` to the queue pair `owner` of
    /// `pd`; returns the region and the address in it.
    pub(crate) fn check_remote_access(
        &self,
        key: u32,
        pd: &Pd<T>,
        owner: u64,
        iova: u64,
        len: u64,
        needed: Access,
    ) -> core::result::Result<(MrRef<T>, u64), AccessError> {
        if !is_window_key(key) {
            return self
                .check_mr_access(key, pd, iova, len, needed)
                .map(|mr| (mr, iova));
        }
        self.windows()
            .with(key, |w, st| {
                if !w.belongs_to(pd) {
                    return Err(AccessError::WrongPd);
                }
                let b = st.binding.as_ref().ok_or(AccessError::BadKey)?;
                if b.owner.is_some_and(|o| o != owner) {
                    return Err(AccessError::BadKey);
                }
                if !b.access.contains(needed) {
                    return Err(AccessError::NoPermission);
                }
                let at = b.translate(iova, len).ok_or(AccessError::OutOfRange)?;
                // SAFETY: a bound region is live (invariant of `Binding`).
                let region = unsafe { b.region.as_ref() };
                // SAFETY: as above: valid memory for the call.
                let mr = unsafe { MrRef::try_new(b.region, region.key()) };
                Ok((mr.ok_or(AccessError::BadKey)?, at))
            })
            .unwrap_or(Err(AccessError::BadKey))
    }

    /// Binds a window for the queue pair `owner` of `pd` (a bind work
    /// request reached the head of its send queue).
    pub(crate) fn bind_window(
        &self,
        pd: &Pd<T>,
        owner: u64,
        req: &BindRequest,
    ) -> core::result::Result<(), BindError> {
        let rights = Access::REMOTE_READ
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_ATOMIC)
            .union(Access::ZERO_BASED);
        // Local rights mean nothing to a window; programs pass them along
        // (rxe accepts them too) and they are dropped.
        let local = Access::LOCAL_WRITE.union(Access::MW_BIND);
        let given = Access::from_bits(req.access);
        if given.without(rights.union(local)) != Access::NONE {
            return Err(BindError::BadRights);
        }
        let access = given.without(local);
        let region = if req.length > 0 {
            Some(self.mrs().get(req.region_key).ok_or(BindError::BadRegion)?)
        } else {
            None
        };
        self.windows()
            .with(req.window_key, |w, st| {
                if !w.belongs_to(pd) {
                    return Err(BindError::WrongPd);
                }
                match w.kind {
                    WindowType::One if access.contains(Access::ZERO_BASED) => {
                        return Err(BindError::BadRights)
                    }
                    WindowType::Two if st.binding.is_some() => return Err(BindError::NotFree),
                    WindowType::Two if region.is_none() => return Err(BindError::BadRegion),
                    _ => {}
                }
                let binding = match &region {
                    None => None,
                    Some(mr) => Some(bind_region(mr, pd, access, req, w.kind, owner)?),
                };
                if let Some(old) = core::mem::replace(&mut st.binding, binding) {
                    old.release();
                }
                st.key = (st.key & !0xff) | (req.new_key & 0xff);
                Ok(())
            })
            .unwrap_or(Err(BindError::NoWindow))
    }

    /// Invalidates the bound type 2 window whose key is `key`, for a queue
    /// pair of `pd`; for a peer's SEND with invalidate, `owner` is the
    /// queue pair it arrived on, which the window must be bound to.
    pub(crate) fn invalidate_window(
        &self,
        pd: &Pd<T>,
        key: u32,
        owner: Option<u64>,
    ) -> core::result::Result<(), AccessError> {
        self.windows()
            .with(key, |w, st| {
                if w.kind != WindowType::Two {
                    return Err(AccessError::BadKey);
                }
                if !w.belongs_to(pd) {
                    return Err(AccessError::WrongPd);
                }
                // Only a bound window is invalidated (as in rxe); a peer's
                // invalidation only through the QP it is bound to.
                let b = st.binding.as_ref().ok_or(AccessError::BadKey)?;
                if owner.is_some() && b.owner != owner {
                    return Err(AccessError::BadKey);
                }
                if let Some(b) = st.binding.take() {
                    b.release();
                }
                Ok(())
            })
            .unwrap_or(Err(AccessError::BadKey))
    }
}

/// Checks a bind's region and takes one of its window references.
fn bind_region<T: Driver>(
    mr: &MrRef<T>,
    pd: &Pd<T>,
    access: Access,
    req: &BindRequest,
    kind: WindowType,
    owner: u64,
) -> core::result::Result<Binding<T>, BindError> {
    if !mr.belongs_to(pd) {
        return Err(BindError::WrongPd);
    }
    let region_access = mr.access().ok_or(BindError::BadRegion)?;
    if !region_access.contains(Access::MW_BIND) {
        return Err(BindError::BadRegion);
    }
    let writes = Access::REMOTE_WRITE.union(Access::REMOTE_ATOMIC);
    if access.intersects(writes) && !region_access.contains(Access::LOCAL_WRITE) {
        return Err(BindError::BadRights);
    }
    mr.offset_of(req.addr, req.length)
        .ok_or(BindError::OutOfRange)?;
    if !mr.hold_for_window() {
        return Err(BindError::BadRegion);
    }
    // INVARIANT: the count was taken above, the range checked.
    Ok(Binding {
        region: NonNull::from(&**mr),
        addr: req.addr,
        length: req.length,
        access,
        owner: (kind == WindowType::Two).then_some(owner),
    })
}
