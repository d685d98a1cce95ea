// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: a user memory region whose pages are not pinned.
//!
//! C header: `include/rdma/ib_umem_odp.h`.
//!
//! The RDMA core's ODP umem watches the range with an MMU interval
//! notifier and faults pages in through HMM (`hmm_range_fault`). sroce
//! keeps its own translation table of the pages faulted in, one entry per
//! page, under a bottom-half spinlock the data path takes around each
//! access: the notifier's invalidation clears the entries under that lock
//! before the core lets the pages go (unmapped, migrated, swapped out), so
//! an access that found a page present finishes before the page can be
//! reused, and every later one finds it absent. An absent page is never
//! faulted in by the data path itself (it runs in softirq or under a
//! spinlock): the access fails with [`NOT_PRESENT`] and the caller asks
//! for [`OdpPages::fault_in`] in process context, then retries.
//!
//! The table is written only with the core's umem mutex held after a
//! fault that the notifier's sequence count validated (the core's
//! `ib_umem_odp_map_dma_and_lock`), so it never holds a page an
//! invalidation already removed; the core's own PFN list, which HMM
//! fills without that mutex, is never read by the data path.

use super::{
    access::Access,
    bh_lock::{new_spinlock_bh, SpinLockBh},
    bindings,
    device::{Device, Driver},
};
use core::ptr::NonNull;
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    error::from_err_ptr,
    new_mutex,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Mutex,
};

/// The error of an access that found a page of an ODP region absent (or
/// read-only for a write): fault the range in, in process context, then
/// access again.
pub(crate) const NOT_PRESENT: Error = EAGAIN;

/// A table entry's flag: the page was faulted in writable.
const WRITABLE: usize = 1;
/// A table entry's flag: the device wrote to the page. Its folio is marked
/// dirty when the entry goes (the user's page table never saw the write),
/// or reclaim could drop the data as clean.
const WRITTEN: usize = 2;
/// The flags of an entry (a `struct page` is aligned far beyond them).
const FLAGS: usize = WRITABLE | WRITTEN;

/// Pages faulted in and entered at a time: the table's lock (which the
/// data path takes in softirq) and the core's umem mutex (which
/// invalidations wait for) are held for at most this many entries.
const FAULT_CHUNK_PAGES: u64 = 512;

/// Whether the RDMA core was built with on-demand paging
/// (`CONFIG_INFINIBAND_ON_DEMAND_PAGING`).
pub(crate) fn available() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { bindings::sroce_odp_available() }
}

/// Called on each invalidation that dropped pages of a region.
pub(super) type InvalidatedHook = fn(*const core::ffi::c_void);

/// `access` as the core's ODP umem takes it: the core refuses
/// ON_DEMAND|HUGETLB with huge-page granularity the table does not have,
/// so that hint is dropped (huge pages are still used, page by page).
pub(super) fn core_access(access: Access) -> Result<kernel::ffi::c_int> {
    kernel::ffi::c_int::try_from(access.without(Access::HUGETLB).bits()).map_err(|_| EINVAL)
}

/// The pages of an ODP region that are faulted in.
///
/// # Invariants
///
/// - `odp` is a umem `ib_umem_odp_get` returned for this region, released
///   on drop; its `private` points to this (pinned) value from
///   construction until the release, so the notifier reaches `table`.
/// - `table` has one entry per page of `[start, start + pages * PAGE_SIZE)`:
///   0, or the address of the `struct page` mapped there (with
///   [`WRITABLE`] if it may be written, [`WRITTEN`] once it was), valid
///   until the entry is cleared.
/// - Entries are filled only by [`OdpPages::fault_in`] with `faulting`
///   held, so the core's PFN list it reads (shared by every fault of the
///   umem, and written by HMM without the umem mutex) was written by that
///   fault alone and validated by its notifier sequence.
/// - The region's byte 0 is at `first_offset` in the first page and it has
///   `length` bytes inside the table's pages.
#[pin_data(PinnedDrop)]
pub(crate) struct OdpPages {
    odp: NonNull<bindings::ib_umem_odp>,
    start: u64,
    first_offset: usize,
    length: u64,
    writable: bool,
    #[pin]
    table: SpinLockBh<KVVec<usize>>,
    /// Serialises faults of this region (see the invariants).
    #[pin]
    faulting: Mutex<()>,
    /// The device's hook and itself, told of invalidations (counters).
    hook: InvalidatedHook,
    hook_arg: *const core::ffi::c_void,
}

// SAFETY: the umem is not tied to the task that registered it (the core
// keeps its mm and pid); the table is behind a lock; the hook argument is
// the device, which is `Sync` and outlives its regions.
unsafe impl Send for OdpPages {}
// SAFETY: as above; shared access goes through the lock or the core's
// umem mutex.
unsafe impl Sync for OdpPages {}

impl OdpPages {
    /// Registers `length` bytes at user address `addr` of the current
    /// process for on-demand paging: nothing is pinned or faulted now.
    /// `T::odp_invalidated(dev)` runs on each invalidation that dropped
    /// faulted pages.
    pub(crate) fn new<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        length: u64,
        access: Access,
    ) -> Result<Pin<KBox<Self>>> {
        addr.checked_add(length).ok_or(EINVAL)?;
        let access = core_access(access)?;
        // SAFETY: a live device; the core takes `current->mm`, checks the
        // range and registers the notifier, or returns an ERR_PTR.
        let odp = from_err_ptr(unsafe {
            bindings::sroce_umem_odp_get(dev.as_raw(), addr, length, access)
        })?;
        let hook_arg = core::ptr::from_ref(dev).cast::<core::ffi::c_void>();
        // SAFETY: a umem just made, ours.
        unsafe { Self::wrap(odp, addr, length, invalidated::<T>, hook_arg) }
    }

    /// The pages of `length` bytes at `addr`, a piece of the implicit
    /// region whose root umem is `root` (see [`super::mr_odp_implicit`]),
    /// with the root's device hook. Process context.
    ///
    /// # Safety
    ///
    /// `root` is a live implicit umem, and outlives the returned value;
    /// `hook_arg` is a device that outlives it and `hook` its hook.
    pub(super) unsafe fn child(
        root: NonNull<bindings::ib_umem_odp>,
        addr: u64,
        length: u64,
        hook: InvalidatedHook,
        hook_arg: *const core::ffi::c_void,
    ) -> Result<Pin<KBox<Self>>> {
        // SAFETY: `root` is a live implicit umem (function contract); the
        // core registers the child's notifier on its mm.
        let odp = from_err_ptr(unsafe {
            bindings::sroce_umem_odp_alloc_child(root.as_ptr(), addr, length)
        })?;
        // SAFETY: a umem just made, ours; the rest is the caller's.
        unsafe { Self::wrap(odp, addr, length, hook, hook_arg) }
    }

    /// The device hook of a region on `dev`.
    pub(super) fn hook_of<T: Driver>(
        dev: &Device<T>,
    ) -> (InvalidatedHook, *const core::ffi::c_void) {
        (
            invalidated::<T>,
            core::ptr::from_ref(dev).cast::<core::ffi::c_void>(),
        )
    }

    /// Wraps umem `odp` (`length` bytes at `addr`) with an empty table.
    ///
    /// # Safety
    ///
    /// `odp` is a live ODP umem (or an error pointer's NULL) that the
    /// caller gives away; `hook_arg` is a device that outlives the value
    /// and `hook` its hook.
    unsafe fn wrap(
        odp: *mut bindings::ib_umem_odp,
        addr: u64,
        length: u64,
        hook: InvalidatedHook,
        hook_arg: *const core::ffi::c_void,
    ) -> Result<Pin<KBox<Self>>> {
        let odp = NonNull::new(odp).ok_or(ENOMEM)?;
        let release = |e: Error| {
            // SAFETY: the umem was never shared; released here.
            unsafe { bindings::sroce_umem_odp_release(odp.as_ptr()) };
            e
        };
        let mask = PAGE_SIZE as u64 - 1;
        let start = addr & !mask;
        let first_offset = (addr & mask) as usize;
        // The core checked that the page-aligned end does not wrap.
        let pages = (addr + length + mask - start) >> PAGE_SHIFT;
        let pages = usize::try_from(pages).map_err(|_| release(EINVAL))?;
        // Charged to the process's memory cgroup: an ODP region costs no
        // pinned memory, but its table is the process's doing.
        let mut table =
            KVVec::with_capacity(pages, GFP_KERNEL_ACCOUNT).map_err(|e| release(e.into()))?;
        table
            .resize(pages, 0, GFP_KERNEL_ACCOUNT)
            .map_err(|e| release(e.into()))?;
        // SAFETY: a live umem; `writable` is set at creation.
        let writable = unsafe { (*odp.as_ptr()).umem.writable() != 0 };
        let init = try_pin_init!(Self {
            odp,
            start,
            first_offset,
            length,
            writable,
            table <- new_spinlock_bh!(table, "sroce::odp_table"),
            faulting <- new_mutex!((), "sroce::odp_faulting"),
            hook,
            hook_arg,
        }? Error);
        let this = KBox::pin_init(init, GFP_KERNEL).map_err(release)?;
        // INVARIANT: from here the notifier finds the table (an
        // invalidation before this had no entries to clear).
        // SAFETY: `odp` is live; `this` is pinned and outlives the umem
        // (released first in drop).
        unsafe {
            bindings::sroce_umem_odp_set_private(
                odp.as_ptr(),
                core::ptr::from_ref(&*this).cast_mut().cast(),
            )
        };
        Ok(this)
    }

    /// Whether the region may be written (it was registered with a write
    /// right).
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// Calls `f(page, offset in page, range of the caller's buffer)` for
    /// each page piece of `len` bytes at region byte `offset`, with the
    /// pages held present; [`NOT_PRESENT`] (and `f` not called at all) if
    /// one is absent, or read-only while `write`. Any context where bottom
    /// halves can be disabled; `f` must not sleep.
    pub(crate) fn with_pieces(
        &self,
        offset: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(*mut bindings::page, usize, core::ops::Range<usize>),
    ) -> Result {
        let end = offset.checked_add(len as u64).ok_or(EFAULT)?;
        if end > self.length {
            return Err(EFAULT);
        }
        if write && !self.writable {
            return Err(EACCES);
        }
        let first = self.first_offset as u64 + offset;
        let mut table = self.table.lock();
        let pages = (first / PAGE_SIZE as u64) as usize
            ..(first + len as u64).div_ceil(PAGE_SIZE as u64) as usize;
        let entries = table.get_mut(pages).ok_or(EFAULT)?;
        let want = if write { WRITABLE } else { 0 };
        if entries.iter().any(|&e| e == 0 || e & want != want) {
            return Err(NOT_PRESENT);
        }
        if write {
            for e in entries.iter_mut() {
                *e |= WRITTEN;
            }
        }
        let mut done = 0usize;
        while done < len {
            let pos = first + done as u64;
            let Some(&e) = table.get((pos / PAGE_SIZE as u64) as usize) else {
                return Err(EFAULT);
            };
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let n = (PAGE_SIZE - in_page).min(len - done);
            f((e & !FLAGS) as *mut bindings::page, in_page, done..done + n);
            done += n;
        }
        drop(table);
        Ok(())
    }

    /// Faults `len` bytes at region byte `offset` in (writable if
    /// `write`; with `fault` false, only the pages present are looked up)
    /// and enters them in the table, a chunk at a time. Process context;
    /// sleeps. The core's HMM fault's errors: `EFAULT` if the memory is not
    /// mapped, `EPERM` if it is not writable for a write, `EBUSY` if the
    /// range kept changing, `ENOMEM`, `EINVAL` when its process is gone.
    pub(crate) fn fault_in(&self, offset: u64, len: u64, write: bool, fault: bool) -> Result {
        let end = offset.checked_add(len).ok_or(EFAULT)?;
        if end > self.length || len == 0 {
            return Err(EFAULT);
        }
        if write && !self.writable {
            return Err(EACCES);
        }
        let page = PAGE_SIZE as u64;
        let first = self.first_offset as u64 + offset;
        let last = first + len;
        let _faulting = self.faulting.lock();
        let mut at = first;
        while at < last {
            // To the end of the chunk of pages `at` is in.
            let chunk_end = ((at / page) / FAULT_CHUNK_PAGES + 1) * FAULT_CHUNK_PAGES * page;
            let upto = chunk_end.min(last);
            self.fault_chunk(at, upto - at, write, fault)?;
            at = upto;
        }
        Ok(())
    }

    /// [`OdpPages::fault_in`] of `len` bytes at table byte `first` (from
    /// `start`), at most [`FAULT_CHUNK_PAGES`] pages, `faulting` held.
    fn fault_chunk(&self, first: u64, len: u64, write: bool, fault: bool) -> Result {
        let addr = self.start + first;
        // SAFETY: a live umem (type invariant), a range inside it; on
        // success the core holds the umem mutex for us.
        kernel::error::to_result(unsafe {
            bindings::sroce_umem_odp_fault_and_lock(self.odp.as_ptr(), addr, len, write, fault)
        })?;
        let page = PAGE_SIZE as u64;
        let pages = (first / page)..(first + len).div_ceil(page);
        let mut table = self.table.lock();
        for i in pages {
            let mut w = false;
            // SAFETY: the umem mutex is held and the sequence count of this
            // fault was validated; no other fault of the umem ran since
            // (`faulting`), so the core's PFN list is this fault's for the
            // range; `i` is inside the umem.
            let p = unsafe { bindings::sroce_umem_odp_page(self.odp.as_ptr(), i, &mut w) };
            if let Some(e) = table.get_mut(i as usize) {
                // The same page still entered keeps what the device did to
                // it. Another cannot be (an invalidation clears the entry
                // before its page goes).
                let same = !p.is_null() && *e & !FLAGS == p as usize;
                let written = *e & WRITTEN;
                // INVARIANT: the page stays until the notifier, which
                // needs the umem mutex we hold and then this lock, clears
                // the entry.
                *e = if p.is_null() {
                    0
                } else {
                    let w = if w { WRITABLE } else { 0 };
                    p as usize | w | if same { written } else { 0 }
                };
            }
        }
        drop(table);
        // SAFETY: taken by the successful fault above.
        unsafe { bindings::sroce_umem_odp_unlock(self.odp.as_ptr()) };
        Ok(())
    }

    /// Drops the entries of user addresses `[start, end)`; called by the
    /// notifier with the umem mutex held.
    fn invalidate(&self, start: u64, end: u64) {
        let page = PAGE_SIZE as u64;
        let from = (start.saturating_sub(self.start) / page) as usize;
        let to = (end.saturating_sub(self.start).div_ceil(page)) as usize;
        if self.release(from..to) {
            (self.hook)(self.hook_arg);
        }
    }

    /// Clears the entries `range`, then marks the folios the device wrote
    /// to dirty; whether any page was entered. The umem mutex must be held:
    /// it keeps the pages of the entries cleared here valid (no
    /// invalidation can finish, no fault refill) until they are marked,
    /// which happens outside the table's lock (marking a file's folio
    /// dirty takes locks the receive softirq must not wait behind).
    fn release(&self, range: core::ops::Range<usize>) -> bool {
        /// Pages marked per round of the lock.
        const BATCH: usize = 32;
        let mut any = false;
        let mut at = range.start;
        while at < range.end {
            let mut written = [core::ptr::null_mut::<bindings::page>(); BATCH];
            let mut n = 0;
            let mut table = self.table.lock();
            let end = range.end.min(table.len());
            while at < end && n < BATCH {
                if let Some(e) = table.get_mut(at) {
                    if *e & WRITTEN != 0 {
                        written[n] = (*e & !FLAGS) as *mut bindings::page;
                        n += 1;
                    }
                    any |= *e != 0;
                    *e = 0;
                }
                at += 1;
            }
            if at >= end {
                at = range.end;
            }
            drop(table);
            for &p in &written[..n] {
                // SAFETY: the page was entered until just now and the umem
                // mutex (held, function contract) keeps it valid.
                unsafe { bindings::sroce_odp_page_written(p) };
            }
        }
        any
    }
}

/// [`Driver::odp_invalidated`] for a device given as an untyped pointer.
fn invalidated<T: Driver>(dev: *const core::ffi::c_void) {
    // SAFETY: `dev` is the `Device<T>` the region was registered on
    // (`OdpPages::new`), which outlives its regions.
    let dev = unsafe { &*dev.cast::<Device<T>>() };
    T::odp_invalidated(dev);
}

#[pinned_drop]
impl PinnedDrop for OdpPages {
    fn drop(self: Pin<&mut Self>) {
        // The pages the device wrote to are dirty; the core's release
        // would drop them without saying so.
        // SAFETY: a live umem (type invariant); process context.
        unsafe { bindings::sroce_umem_odp_lock(self.odp.as_ptr()) };
        self.release(0..usize::MAX);
        // SAFETY: taken just above.
        unsafe { bindings::sroce_umem_odp_unlock(self.odp.as_ptr()) };
        // SAFETY: we own the umem (type invariant). Releasing it removes
        // the notifier (waiting for a running invalidation), so nothing
        // reaches `self` afterwards. Process context: regions are dropped
        // by `dereg_mr` or a failed registration.
        unsafe { bindings::sroce_umem_odp_release(self.odp.as_ptr()) };
    }
}

/// `ib_device_ops.advise_mr` (`ibv_advise_mr`): faults the listed ranges
/// of on-demand regions in now (`PREFETCH`, `PREFETCH_WRITE`), or takes in
/// what is present (`PREFETCH_NO_FAULT`), so the data path finds them.
/// Done at once, whether or not the caller asked to wait
/// (`IB_UVERBS_ADVISE_MR_FLAG_FLUSH`). `EINVAL` for a key that is not an
/// on-demand region of the PD or a range outside it, `EPERM` for
/// `PREFETCH_WRITE` on a region without write rights.
///
/// # Safety
///
/// Called by the core in process context with a live PD of a live
/// `Device<T>` and `num_sge` entries at `sg_list`.
pub(super) unsafe extern "C" fn advise<T: Driver>(
    pd: *mut bindings::ib_pd,
    advice: bindings::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut bindings::ib_sge,
    num_sge: u32,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> kernel::ffi::c_int {
    use bindings::{
        ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH as PREFETCH,
        ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT as NO_FAULT,
        ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE as PREFETCH_WRITE,
        ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH as FLUSH,
    };
    let (write, fault) = match advice {
        PREFETCH => (false, true),
        PREFETCH_WRITE => (true, true),
        NO_FAULT => (false, false),
        _ => return EOPNOTSUPP.to_errno(),
    };
    if flags & !FLUSH != 0 {
        return EOPNOTSUPP.to_errno();
    }
    // SAFETY: `pd` is live and its `device` is ours (function contract).
    let dev = unsafe { super::device::device_from_raw::<T>((*pd).device) };
    // SAFETY: a live PD that `pd::alloc` initialised.
    let pd = unsafe { super::pd::Pd::<T>::from_raw(pd) };
    let sges: &[bindings::ib_sge] = if num_sge == 0 || sg_list.is_null() {
        &[]
    } else {
        // SAFETY: the core passes `num_sge` entries (function contract).
        unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) }
    };
    for sge in sges {
        let len = u64::from(sge.length);
        let Ok(mr) = dev.check_mr_access(sge.lkey, pd, sge.addr, len, Access::NONE) else {
            return EINVAL.to_errno();
        };
        if !mr.on_demand() {
            return EINVAL.to_errno();
        }
        if write && !mr.access().is_some_and(|a| a.contains(Access::LOCAL_WRITE)) {
            return EPERM.to_errno();
        }
        if len == 0 {
            continue;
        }
        if let Err(e) = mr.fault_in(sge.addr, len, write, fault) {
            return e.to_errno();
        }
    }
    0
}

/// The notifier's call: drop the translations of `[start, end)`.
///
/// # Safety
///
/// `private` is the `OdpPages` whose umem is being invalidated (set by
/// `OdpPages::new`, live until the umem's release), and the caller holds
/// that umem's mutex.
#[no_mangle]
unsafe extern "C" fn sroce_odp_invalidated(private: *mut core::ffi::c_void, start: u64, end: u64) {
    // SAFETY: the function's contract.
    let pages = unsafe { &*private.cast::<OdpPages>() };
    pages.invalidate(start, end);
}
