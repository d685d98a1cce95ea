// SPDX-License-Identifier: GPL-2.0

//! `struct ib_umem`: user memory pinned for the device.
//!
//! C header: `include/rdma/ib_umem.h`.
//!
//! The RDMA core pins the pages (`pin_user_pages_fast` with
//! `FOLL_LONGTERM`, plus `FOLL_WRITE` when the access flags let the device
//! write) and charges them to the process's `mm->pinned_vm`, refusing with
//! `ENOMEM` beyond `RLIMIT_MEMLOCK` unless the caller has `CAP_IPC_LOCK`
//! (and with `EPERM` when the limit is 0). A software provider has no DMA
//! device: with `CONFIG_INFINIBAND_VIRT_DMA` the scatter list's "DMA
//! addresses" are kernel virtual addresses, so sroce reads the `struct page`
//! of each pinned page instead, as rxe does.

use super::{
    access::Access,
    bindings,
    device::{Device, Driver},
};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{error::from_err_ptr, page::PAGE_SIZE, prelude::*};

/// A range of user memory pinned by the RDMA core; unpinned on drop.
///
/// # Invariants
///
/// `0` is a umem returned by `ib_umem_get_va` and not yet released. Its
/// `sgt_append.sgt` lists the pinned pages and does not change until release.
pub(crate) struct Umem(NonNull<bindings::ib_umem>);

// SAFETY: a umem is plain data about pinned pages plus an `mm` reference;
// nothing ties it to the task that pinned it, and `ib_umem_release` may run
// on any task in process context.
unsafe impl Send for Umem {}
// SAFETY: shared references only read the immutable page list.
unsafe impl Sync for Umem {}

/// Pages the module's umems hold pinned, all devices together: what a test
/// reads to tell that every registration let go of its pages (the
/// system-wide `FOLL_PIN` counters also move with other subsystems' I/O).
static PINNED_PAGES: AtomicUsize = AtomicUsize::new(0);

/// Pages pinned by live [`Umem`]s.
pub(crate) fn pinned_pages() -> usize {
    PINNED_PAGES.load(Ordering::Relaxed)
}

impl Umem {
    /// Pins `len` bytes of the current process's memory at `addr`.
    ///
    /// Errors are the core's: `EFAULT` when part of the range is not mapped
    /// (or not writable while `access` needs writing), `ENOMEM` beyond
    /// `RLIMIT_MEMLOCK`, `EPERM` with a zero `RLIMIT_MEMLOCK`, `EINVAL` for
    /// an empty or wrapping range.
    pub(crate) fn pin<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let access = kernel::ffi::c_int::try_from(access.bits()).map_err(|_| EINVAL)?;
        // SAFETY: a live device; no attribute bundle, so the core pins
        // `addr`/`len` of `current->mm` and returns a umem or an ERR_PTR.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(dev.as_raw(), core::ptr::null(), 0, addr, len, access)
        })?;
        // INVARIANT: a umem `ib_umem_get_*` returned.
        let umem = NonNull::new(umem).map(Self).ok_or(ENOMEM)?;
        PINNED_PAGES.fetch_add(umem.num_pages(), Ordering::Relaxed);
        Ok(umem)
    }

    /// The user address of the first pinned byte.
    pub(crate) fn address(&self) -> u64 {
        // SAFETY: a live umem (type invariant); `address` never changes.
        unsafe { (*self.0.as_ptr()).address as u64 }
    }

    /// The length of the pinned range in bytes.
    pub(crate) fn length(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.0.as_ptr()).length as u64 }
    }

    /// Whether the pages were pinned for writing (`FOLL_WRITE`); only then
    /// may the device write to them.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.0.as_ptr()).writable() != 0 }
    }

    /// Offset of the first byte within its page.
    pub(crate) fn first_page_offset(&self) -> usize {
        (self.address() % PAGE_SIZE as u64) as usize
    }

    /// Number of pages the range touches (`ib_umem_num_pages`).
    pub(crate) fn num_pages(&self) -> usize {
        let span = self.first_page_offset() as u64 + self.length();
        // The core checked that the page-aligned end does not wrap.
        span.div_ceil(PAGE_SIZE as u64) as usize
    }

    /// Calls `f` with each pinned page, in address order.
    pub(crate) fn for_each_page(&self, mut f: impl FnMut(PinnedPage) -> Result) -> Result {
        let mut iter = bindings::sg_page_iter::default();
        // SAFETY: the umem is live (type invariant) and its sg table is
        // complete; `orig_nents` is the CPU-side entry count, what
        // `for_each_sgtable_page` walks.
        unsafe {
            let sgt = &raw mut (*self.0.as_ptr()).sgt_append.sgt;
            bindings::__sg_page_iter_start(&mut iter, (*sgt).sgl, (*sgt).orig_nents, 0);
        }
        // SAFETY: `iter` was started on this umem's table above.
        while unsafe { bindings::__sg_page_iter_next(&mut iter) } {
            // SAFETY: the iterator points at a valid entry of the table.
            let page = unsafe { bindings::sroce_sg_page_iter_page(&mut iter) };
            f(PinnedPage(NonNull::new(page).ok_or(EFAULT)?))?;
        }
        Ok(())
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        PINNED_PAGES.fetch_sub(self.num_pages(), Ordering::Relaxed);
        // SAFETY: we own the umem (type invariant); this unpins the pages
        // (marking them dirty if they were writable), uncharges
        // `pinned_vm` and frees it. Drop runs in process context: the MR
        // that owns a umem is only dropped by `dereg_mr` or a failed
        // registration.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}

/// A page pinned by a [`Umem`]. It stays valid, mapped into the page
/// tables or not, as long as that umem lives; the holder must not outlive
/// it (the MR keeps both together).
#[derive(Clone, Copy)]
pub(crate) struct PinnedPage(NonNull<bindings::page>);

// SAFETY: a pointer to a `struct page`, which is not tied to any task.
unsafe impl Send for PinnedPage {}
// SAFETY: as above; access to the page's memory is through `&self` methods
// whose callers follow the rules of `mr_memory`.
unsafe impl Sync for PinnedPage {}

impl PinnedPage {
    /// The `struct page`.
    pub(super) fn as_raw(self) -> *mut bindings::page {
        self.0.as_ptr()
    }
}
