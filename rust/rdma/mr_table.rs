// SPDX-License-Identifier: GPL-2.0

//! The per-device table of memory regions by key.
//!
//! Keys and their slots are [`super::key_slots`]'. An entry points to a
//! `Mr<T>`; a lookup under RCU takes a reference on the MR, which keeps it
//! registered until the reference is dropped.

use super::{
    access::Access,
    device::{Device, Driver},
    key_slots::{KeySlots, MR_INDICES},
    mr::{Mr, MrRef},
    pd::Pd,
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::prelude::*;

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

/// The MRs of one device, by key.
///
/// # Invariants
///
/// - Each entry of `slots` at index `i` points to a live `Mr<T>` whose key
///   has index `i`, which holds one reference on itself for the entry
///   (dropped by [`MrTable::remove`]) and whose memory is freed only an
///   RCU grace period after its removal.
/// - The table is empty when it is dropped (the core destroys every MR
///   before it releases the device).
#[pin_data]
pub(crate) struct MrTable<T: Driver> {
    #[pin]
    slots: KeySlots,
    _p: PhantomData<T>,
}

impl<T: Driver> MrTable<T> {
    /// An empty table.
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            slots <- KeySlots::new(MR_INDICES),
            _p: PhantomData,
        })
    }

    /// Reserves a slot and returns the key for it. The slot reads as empty
    /// until [`Self::publish`].
    pub(super) fn reserve(&self) -> Result<u32> {
        self.slots.reserve()
    }

    /// Releases a slot [`Self::reserve`] returned and that was never
    /// published.
    pub(super) fn unreserve(&self, key: u32) {
        self.slots.unreserve(key);
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
        let key = unsafe { mr.as_ref() }.key();
        self.slots.publish(key, mr.as_ptr().cast())
    }

    /// Makes `mr` unfindable. Lookups that found it before keep their
    /// references; the caller then drops the table's reference.
    pub(super) fn remove(&self, mr: &Mr<T>) {
        self.slots.remove(mr.key());
    }

    /// The MR with `key`, with a reference that keeps it registered (its
    /// deregistration waits) until the [`MrRef`] is dropped.
    pub(super) fn get(&self, key: u32) -> Option<MrRef<T>> {
        self.get_slot(key).filter(|m| m.has_key(key))
    }

    /// The MR in the slot `key` names, whatever its current key (for the
    /// requests that change a fast-registration region's key or state).
    pub(super) fn get_slot(&self, key: u32) -> Option<MrRef<T>> {
        let rcu = kernel::sync::rcu::read_lock();
        let mr = NonNull::new(self.slots.load(key, &rcu).cast::<Mr<T>>())?;
        // SAFETY: an entry points to an MR whose memory lives at least until
        // a grace period after its removal, and we hold RCU (type invariant).
        unsafe { MrRef::try_new(mr, key) }
    }
}

/// The data path's way to its MRs.
impl<T: Driver> Device<T> {
    /// The MR with local key `lkey`.
    #[expect(dead_code, reason = "the data path checks keys with check_mr_access")]
    pub(crate) fn mr_by_lkey(&self, lkey: u32) -> Option<MrRef<T>> {
        self.mrs().get(lkey)
    }

    /// The MR with remote key `rkey` (a region's; window rkeys go through
    /// `check_remote_access`).
    #[expect(dead_code, reason = "the data path checks keys with check_mr_access")]
    pub(crate) fn mr_by_rkey(&self, rkey: u32) -> Option<MrRef<T>> {
        self.mrs().get(rkey)
    }

    /// Faults `len` bytes at `iova` of the on-demand region with key `key`
    /// in (as much as fits in the region), writable if `write`, after the
    /// data path found them absent. Process context; sleeps. `EFAULT` if
    /// the key is gone or the memory is not mapped.
    pub(crate) fn fault_in(&self, key: u32, iova: u64, len: u64, write: bool) -> Result {
        let mr = self.mrs().get(key).ok_or(EFAULT)?;
        let room = mr
            .offset_of(iova, 0)
            .map(|o| mr.length() - o)
            .ok_or(EFAULT)?;
        mr.fault_in(iova, len.min(room), write, true)
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
