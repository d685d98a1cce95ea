// SPDX-License-Identifier: GPL-2.0

//! Keys of memory regions and memory windows, and the XArray of slots that
//! resolves them.
//!
//! A key (an MR's lkey and rkey are equal, as in rxe; a window has an rkey)
//! is `index << 8 | variant`: `index` is the object's slot, so a key from
//! a work request or a packet finds its object in O(1); `variant` tells
//! successive regions of one slot apart, so a stale key does not reach a
//! later one. (A window's variant is what its last bind chose, so stale
//! window keys are told apart by the window's PD and state, not by it.) Regions and windows take their indices from disjoint ranges
//! ([`MR_INDICES`], [`MW_INDICES`]), so a key's index alone says which
//! table to look in. Indices are handed out cyclically within a range, and
//! the variant is the number of times the range wrapped, so one slot is
//! reused only after every other index was, and then with the next variant.
//!
//! Lookups run in any context, packet receive included, without a lock:
//! RCU protects the slot, and each table says what keeps its objects alive
//! beyond that. The kernel's Rust `XArray` only offers lookups under its
//! (non-BH-safe) spinlock, hence this small wrapper over the C API.

use super::bindings;
use core::ops::RangeInclusive;
use kernel::{error::to_result, new_mutex, prelude::*, sync::Mutex, types::Opaque};

/// Highest index: 24 bits, the key's upper bits.
const MAX_INDEX: u32 = (1 << 24) - 1;

/// First index of a memory window; regions use the ones below it.
const FIRST_MW_INDEX: u32 = 1 << 23;

/// Indices of memory regions (key 0 is never valid: `local_dma_lkey` is 0
/// and unused).
pub(super) const MR_INDICES: RangeInclusive<u32> = 1..=FIRST_MW_INDEX - 1;

/// Indices of memory windows.
pub(super) const MW_INDICES: RangeInclusive<u32> = FIRST_MW_INDEX..=MAX_INDEX;

/// The key for slot `index` in variant `variant`.
fn encode_key(index: u32, variant: u8) -> u32 {
    (index << 8) | u32::from(variant)
}

/// The slot a key names.
pub(super) fn key_index(key: u32) -> u32 {
    key >> 8
}

/// Whether `key` names a memory window (else, possibly, a region).
pub(crate) fn is_window_key(key: u32) -> bool {
    MW_INDICES.contains(&key_index(key))
}

/// Where the next index search starts, and how often indices wrapped.
struct Cursor {
    next: u32,
    variant: u8,
}

/// Slots of one kind of keyed object, indexed within `indices`.
///
/// # Invariants
///
/// `xa` is an initialised allocating XArray whose entries are at indices
/// in `indices`; what an entry points to is the owning table's business.
#[pin_data(PinnedDrop)]
pub(super) struct KeySlots {
    #[pin]
    xa: Opaque<bindings::xarray>,
    #[pin]
    cursor: Mutex<Cursor>,
    indices: RangeInclusive<u32>,
}

// SAFETY: the XArray is internally locked; entries are only raw pointers
// here, which the owning tables give meaning (and thread safety) to.
unsafe impl Send for KeySlots {}
// SAFETY: as above.
unsafe impl Sync for KeySlots {}

impl KeySlots {
    /// No slots, indices from `indices`.
    pub(super) fn new(indices: RangeInclusive<u32>) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `xa` points to memory for an xarray, initialised here.
            xa <- Opaque::ffi_init(|xa| unsafe { bindings::sroce_xa_init_alloc(xa) }),
            cursor <- new_mutex!(
                Cursor { next: *indices.start(), variant: 0 },
                "sroce::key_slots"
            ),
            indices,
        })
    }

    /// Reserves a slot and returns the key for it. The slot reads as empty
    /// until [`Self::publish`]. `ENOMEM` when every index is in use.
    pub(super) fn reserve(&self) -> Result<u32> {
        let mut c = self.cursor.lock();
        let mut index = 0u32;
        let Cursor { next, variant } = &mut *c;
        // SAFETY: a live xarray (type invariant) and valid out-pointers; the
        // cursor's lock serialises `next`.
        let ret = unsafe {
            bindings::sroce_xa_reserve_cyclic(
                self.xa.get(),
                &mut index,
                *self.indices.start(),
                *self.indices.end(),
                next,
            )
        };
        match ret {
            0 => {}
            1 => *variant = variant.wrapping_add(1),
            e if e == EBUSY.to_errno() => return Err(ENOMEM),
            e => return Err(Error::from_errno(e)),
        }
        Ok(encode_key(index, *variant))
    }

    /// Releases a slot [`Self::reserve`] returned that holds no object.
    pub(super) fn unreserve(&self, key: u32) {
        // SAFETY: a live xarray; the slot holds the reservation.
        unsafe { bindings::xa_erase(self.xa.get(), key_index(key) as usize) };
    }

    /// Makes `entry` findable under `key`'s slot, which [`Self::reserve`]
    /// returned. Replacing a reservation allocates nothing, and
    /// `xa_store` orders the entry's initialisation before it is seen.
    pub(super) fn publish(&self, key: u32, entry: *mut core::ffi::c_void) -> Result {
        // SAFETY: a live xarray; the entry is an opaque pointer to it.
        to_result(unsafe {
            bindings::sroce_xa_store(self.xa.get(), key_index(key) as usize, entry)
        })
    }

    /// Empties `key`'s slot. Readers that loaded the entry before keep
    /// their pointer until their RCU read section ends.
    pub(super) fn remove(&self, key: u32) {
        // SAFETY: a live xarray.
        unsafe { bindings::xa_erase(self.xa.get(), key_index(key) as usize) };
    }

    /// The entry in `key`'s slot, or NULL. What it points to is valid at
    /// least until `_rcu` ends.
    pub(super) fn load(&self, key: u32, _rcu: &kernel::sync::rcu::Guard) -> *mut core::ffi::c_void {
        // SAFETY: a live xarray; RCU is held (`_rcu`).
        unsafe { bindings::xa_load(self.xa.get(), key_index(key) as usize) }
    }
}

#[pinned_drop]
impl PinnedDrop for KeySlots {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: a live xarray that no one uses any more; its owner removed
        // every entry, so this only frees its nodes.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}
