// SPDX-License-Identifier: GPL-2.0

//! Memory region keys and the per-device table that resolves them.
//!
//! A key (lkey and rkey are equal, as in rxe) is `index << 8 | variant`:
//! `index` is the MR's slot in an XArray, so a key from a work request or a
//! packet finds its MR in O(1); `variant` tells successive registrations of
//! one slot apart, so a stale key does not reach a later MR. Indices are
//! handed out cyclically from 1 (key 0 is never valid; `local_dma_lkey` is 0
//! and unused), and the variant is the number of times the index space
//! wrapped, so one slot is reused only after every other index was, and
//! then with the next variant: a stale key matches again only after 2^32
//! registrations.
//!
//! Lookups run in any context, packet receive included, without a lock: RCU
//! protects the slot and a reference count the MR. The kernel's Rust
//! `XArray` only offers lookups under its (non-BH-safe) spinlock, hence
//! this small wrapper over the C API.

use super::{
    access::Access,
    bindings,
    device::{Device, Driver},
    mr::{Mr, MrRef},
    pd::Pd,
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::to_result, new_mutex, prelude::*, sync::Mutex, types::Opaque};

/// Highest MR index: 24 bits, the key's upper bits.
const MAX_INDEX: u32 = (1 << 24) - 1;

/// The key for slot `index` in variant `variant`.
fn encode_key(index: u32, variant: u8) -> u32 {
    (index << 8) | u32::from(variant)
}

/// The slot a key names.
fn key_index(key: u32) -> u32 {
    key >> 8
}

/// Why a key does not grant an access; each maps to its own completion
/// status in the data path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AccessError {
    /// No live MR has this key.
    BadKey,
    /// The MR belongs to another protection domain.
    WrongPd,
    /// The range is not inside the MR.
    OutOfRange,
    /// The MR lacks an access right the operation needs.
    NoPermission,
}

/// Where the next index search starts, and how often indices wrapped.
struct Cursor {
    next: u32,
    variant: u8,
}

/// The MRs of one device, by index.
///
/// # Invariants
///
/// - `xa` is an initialised allocating XArray. Each non-NULL entry at index
///   `i` points to a live `Mr<T>` whose key has index `i`, which holds one
///   reference on itself for the entry (dropped by [`MrTable::remove`]) and
///   whose memory is freed only an RCU grace period after its removal.
/// - The table is empty when it is dropped (the core destroys every MR
///   before it releases the device).
#[pin_data(PinnedDrop)]
pub(crate) struct MrTable<T: Driver> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    #[pin]
    cursor: Mutex<Cursor>,
    _p: PhantomData<T>,
}

// SAFETY: the XArray is internally locked and its entries are `Mr<T>`,
// which are `Send + Sync`.
unsafe impl<T: Driver> Send for MrTable<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for MrTable<T> {}

impl<T: Driver> MrTable<T> {
    /// An empty table.
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `xa` points to memory for an xarray, initialised here.
            xa <- Opaque::ffi_init(|xa| unsafe { bindings::sroce_xa_init_alloc(xa) }),
            cursor <- new_mutex!(Cursor { next: 1, variant: 0 }, "sroce::mr_table"),
            _p: PhantomData,
        })
    }

    /// Reserves a slot and returns the key for it. The slot reads as empty
    /// until [`Self::publish`].
    pub(super) fn reserve(&self) -> Result<u32> {
        let mut c = self.cursor.lock();
        let mut index = 0u32;
        let Cursor { next, variant } = &mut *c;
        // SAFETY: a live xarray (type invariant) and valid out-pointers; the
        // cursor's lock serialises `next`.
        let ret = unsafe {
            bindings::sroce_xa_reserve_cyclic(self.xa.get(), &mut index, 1, MAX_INDEX, next)
        };
        match ret {
            0 => {}
            1 => *variant = variant.wrapping_add(1),
            // Every index is in use.
            e if e == EBUSY.to_errno() => return Err(ENOMEM),
            e => return Err(Error::from_errno(e)),
        }
        Ok(encode_key(index, *variant))
    }

    /// Releases a slot [`Self::reserve`] returned and that was never
    /// published.
    pub(super) fn unreserve(&self, key: u32) {
        // SAFETY: a live xarray; the slot holds the reservation, no MR.
        unsafe { bindings::xa_erase(self.xa.get(), key_index(key) as usize) };
    }

    /// Makes `mr` findable by its key, in the slot reserved for it.
    ///
    /// # Safety
    ///
    /// `mr` is a live, fully initialised MR whose key came from
    /// [`Self::reserve`] of this table and whose reference count includes
    /// one reference for the table, kept until [`Self::remove`].
    pub(super) unsafe fn publish(&self, mr: NonNull<Mr<T>>) -> Result {
        // SAFETY: `mr` is live (caller).
        let index = key_index(unsafe { mr.as_ref() }.key());
        // SAFETY: a live xarray; replacing a reservation allocates nothing
        // and `xa_store` orders the MR's initialisation before the entry.
        to_result(unsafe {
            bindings::sroce_xa_store(self.xa.get(), index as usize, mr.as_ptr().cast())
        })?;
        Ok(())
    }

    /// Makes `mr` unfindable. Lookups that found it before keep their
    /// references; the caller then drops the table's reference.
    pub(super) fn remove(&self, mr: &Mr<T>) {
        // SAFETY: a live xarray; the slot holds `mr` (type invariant).
        unsafe { bindings::xa_erase(self.xa.get(), key_index(mr.key()) as usize) };
    }

    /// The MR with `key`, with a reference that keeps it registered (its
    /// deregistration waits) until the [`MrRef`] is dropped.
    pub(super) fn get(&self, key: u32) -> Option<MrRef<T>> {
        let _rcu = kernel::sync::rcu::read_lock();
        // SAFETY: a live xarray; RCU is held.
        let p = unsafe { bindings::xa_load(self.xa.get(), key_index(key) as usize) };
        let mr = NonNull::new(p.cast::<Mr<T>>())?;
        // SAFETY: an entry points to an MR whose memory lives at least until
        // a grace period after its removal, and we hold RCU (type invariant).
        unsafe { MrRef::try_new(mr, key) }.filter(|m| m.has_key(key))
    }

    /// The MR in the slot `key` names, whatever its current key (for the
    /// requests that change a fast-registration region's key or state).
    pub(super) fn get_slot(&self, key: u32) -> Option<MrRef<T>> {
        let _rcu = kernel::sync::rcu::read_lock();
        // SAFETY: a live xarray; RCU is held.
        let p = unsafe { bindings::xa_load(self.xa.get(), key_index(key) as usize) };
        let mr = NonNull::new(p.cast::<Mr<T>>())?;
        // SAFETY: as in `get`.
        unsafe { MrRef::try_new(mr, key) }
    }
}

#[pinned_drop]
impl<T: Driver> PinnedDrop for MrTable<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: a live xarray that no one uses any more; it is empty (type
        // invariant), so this only frees its nodes.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}

/// The data path's way to its MRs.
impl<T: Driver> Device<T> {
    /// The MR with local key `lkey`.
    #[expect(dead_code, reason = "the data path checks keys with check_mr_access")]
    pub(crate) fn mr_by_lkey(&self, lkey: u32) -> Option<MrRef<T>> {
        self.mrs().get(lkey)
    }

    /// The MR with remote key `rkey`.
    #[expect(dead_code, reason = "the data path checks keys with check_mr_access")]
    pub(crate) fn mr_by_rkey(&self, rkey: u32) -> Option<MrRef<T>> {
        self.mrs().get(rkey)
    }

    /// Checks that `key` grants `needed` on `len` bytes at `iova` to a
    /// queue pair of `pd`, and returns the MR. [`Access::NONE`] is a local
    /// read; remote accesses need the matching `REMOTE_*` right.
    pub(crate) fn check_mr_access(
        &self,
        key: u32,
        pd: &Pd<T>,
        iova: u64,
        len: u64,
        needed: Access,
    ) -> core::result::Result<MrRef<T>, AccessError> {
        let mr = self.mrs().get(key).ok_or(AccessError::BadKey)?;
        if !mr.belongs_to(pd) {
            return Err(AccessError::WrongPd);
        }
        mr.grants(needed, iova, len)?;
        Ok(mr)
    }
}
