// SPDX-License-Identifier: GPL-2.0

//! The memory behind a memory region and the device's view of it: the
//! "address translation table" a hardware NIC would hold.
//!
//! A user MR keeps the list of its pinned pages, built once at
//! registration, so an access at byte `n` of the region is one index
//! computation: page `(first_offset + n) / PAGE_SIZE`, offset
//! `(first_offset + n) % PAGE_SIZE`. Pages are reached through
//! `kmap_local_page`, which is `page_address` on 64-bit kernels (all memory
//! is in the direct map) and a short-lived per-CPU mapping with HIGHMEM, so
//! the code is right on both.
//!
//! A DMA MR (`get_dma_mr`, kernel consumers only) covers all memory: under
//! `CONFIG_INFINIBAND_VIRT_DMA` the addresses kernel consumers put in their
//! work requests come from `ib_dma_map_*`, which returns kernel virtual
//! addresses, so its iova is used as one.
//!
//! Memory here is shared with user space (or with the kernel consumer),
//! which may touch it while the device does; the copies go through the C
//! `memcpy_{to,from}_page`, as every other provider's data path does, and the
//! atomics use locked instructions.

use super::{
    access::Access,
    bindings,
    device::{Device, Driver},
    mr_fast::FastReg,
    mr_odp::OdpPages,
    mr_odp_implicit::ImplicitOdp,
    umem::{PinnedPage, Umem},
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    sync::atomic::{Atomic, Full},
};

/// The bytes a memory region covers.
pub(crate) enum MrMemory {
    /// Pinned user pages.
    User(UserPages),
    /// User memory paged on demand: pages are faulted in when the data
    /// path first needs them (see [`super::mr_odp`]).
    OnDemand(Pin<KBox<OdpPages>>),
    /// The whole address space paged on demand (implicit ODP); offsets are
    /// addresses.
    ImplicitOnDemand(Pin<KBox<ImplicitOdp>>),
    /// All kernel memory; iovas are kernel virtual addresses (DMA MR).
    KernelVirtual,
    /// Pages a kernel consumer maps and registers through its send queue
    /// (reached through [`super::mr::MrRef`], which knows the key).
    FastReg(Pin<KBox<FastReg>>),
}

/// Pinned user memory and the list of its pages.
///
/// # Invariants
///
/// `pages` are the pages of `_umem` in address order, `_umem.num_pages()` of
/// them; the region's byte 0 is at `first_offset` in `pages[0]` and it has
/// `length` bytes, so `first_offset + length <= pages.len() * PAGE_SIZE`.
pub(crate) struct UserPages {
    pages: KVVec<PinnedPage>,
    first_offset: usize,
    length: u64,
    writable: bool,
    // Held for its drop, which unpins the pages; last, so the list goes
    // first.
    _umem: Umem,
}

impl UserPages {
    /// Whether the pages were pinned writable (the rights at registration
    /// included a write).
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// Pins `length` bytes at user address `start` and lists their pages.
    pub(crate) fn pin<T: Driver>(
        dev: &Device<T>,
        start: u64,
        length: u64,
        access: Access,
    ) -> Result<Self> {
        let umem = Umem::pin(dev, start, length, access)?;
        let n = umem.num_pages();
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
        umem.for_each_page(|page| {
            // Capacity was reserved, so this does not allocate.
            pages.push(page, GFP_KERNEL)?;
            Ok(())
        })?;
        let first_offset = umem.first_page_offset();
        let span = (first_offset as u64).checked_add(umem.length());
        let room = (pages.len() as u64).checked_mul(PAGE_SIZE as u64);
        if pages.len() != n || span.zip(room).is_none_or(|(s, r)| s > r) {
            // The core's table disagrees with its own length: refuse rather
            // than risk an access past the pinned pages.
            pr_err!("umem page list does not cover its range\n");
            return Err(EFAULT);
        }
        // INVARIANT: checked just above.
        Ok(Self {
            pages,
            first_offset,
            length: umem.length(),
            writable: umem.writable(),
            _umem: umem,
        })
    }

    /// The page and in-page offset of byte `offset` of the region, and how
    /// many bytes of the region follow in that page.
    fn locate(&self, offset: u64) -> Result<(PinnedPage, usize, usize)> {
        if offset >= self.length {
            return Err(EFAULT);
        }
        let pos = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(self.first_offset))
            .ok_or(EFAULT)?;
        let page = *self.pages.get(pos / PAGE_SIZE).ok_or(EFAULT)?;
        let in_page = pos % PAGE_SIZE;
        Ok((page, in_page, PAGE_SIZE - in_page))
    }

    /// Calls `f(page, offset in page, range of the buffer)` for each page
    /// piece of `len` bytes starting at region byte `offset`.
    fn for_each_piece(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(PinnedPage, usize, core::ops::Range<usize>),
    ) -> Result {
        let mut done = 0usize;
        while done < len {
            let at = offset.checked_add(done as u64).ok_or(EFAULT)?;
            let (page, in_page, room) = self.locate(at)?;
            let n = room.min(len - done);
            f(page, in_page, done..done + n);
            done += n;
        }
        Ok(())
    }
}

impl MrMemory {
    /// `with_pieces` of on-demand memory, explicit or implicit.
    fn on_demand_pieces(
        &self,
        offset: u64,
        len: usize,
        write: bool,
        f: impl FnMut(*mut bindings::page, usize, core::ops::Range<usize>),
    ) -> Result {
        match self {
            Self::OnDemand(o) => o.with_pieces(offset, len, write, f),
            Self::ImplicitOnDemand(o) => {
                if write && !o.writable() {
                    return Err(EACCES);
                }
                o.with_pieces(offset, len, write, f)
            }
            _ => Err(EFAULT),
        }
    }

    /// Copies `src` to region byte `offset` (the caller checked the range).
    pub(crate) fn copy_to(&self, offset: u64, iova: u64, src: &[u8]) -> Result {
        match self {
            Self::User(u) => {
                if !u.writable {
                    // Pinned without FOLL_WRITE: the page may be shared
                    // (page cache, zero page), so it must never be written.
                    return Err(EACCES);
                }
                check_user_range(u, offset, src.len())?;
                u.for_each_piece(offset, src.len(), |page, at, r| {
                    let Some(chunk) = src.get(r) else { return };
                    // SAFETY: the page is pinned writable while `u` lives;
                    // `at + chunk.len() <= PAGE_SIZE` (`locate`); `chunk` is
                    // valid for reads.
                    unsafe {
                        bindings::sroce_memcpy_to_page(
                            page.as_raw(),
                            at,
                            chunk.as_ptr().cast(),
                            chunk.len(),
                        )
                    };
                })
            }
            Self::OnDemand(_) | Self::ImplicitOnDemand(_) => {
                self.on_demand_pieces(offset, src.len(), true, |page, at, r| {
                    let Some(chunk) = src.get(r) else { return };
                    // SAFETY: the page is present and writable while
                    // `with_pieces` holds the table's lock;
                    // `at + chunk.len() <= PAGE_SIZE`; `chunk` is valid for
                    // reads.
                    unsafe {
                        bindings::sroce_memcpy_to_page(page, at, chunk.as_ptr().cast(), chunk.len())
                    };
                })
            }
            Self::KernelVirtual => {
                let dst = kernel_ptr(iova, src.len())?;
                // SAFETY: DMA MRs exist only for kernel consumers, whose work
                // requests carry addresses from `ib_dma_map_*`: mapped kernel
                // memory of at least the length they give (the contract of
                // `get_dma_mr`, as with a hardware device's DMA).
                unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
                Ok(())
            }
            // Needs the key: see `MrRef`.
            Self::FastReg(_) => Err(EFAULT),
        }
    }

    /// Copies region byte `offset` onwards into `dst` (range checked by
    /// the caller).
    pub(crate) fn copy_from(&self, offset: u64, iova: u64, dst: &mut [u8]) -> Result {
        match self {
            Self::User(u) => {
                check_user_range(u, offset, dst.len())?;
                u.for_each_piece(offset, dst.len(), |page, at, r| {
                    let Some(chunk) = dst.get_mut(r) else { return };
                    // SAFETY: the page is pinned while `u` lives;
                    // `at + chunk.len() <= PAGE_SIZE` (`locate`); `chunk` is
                    // valid for writes.
                    unsafe {
                        bindings::sroce_memcpy_from_page(
                            chunk.as_mut_ptr().cast(),
                            page.as_raw(),
                            at,
                            chunk.len(),
                        )
                    };
                })
            }
            Self::OnDemand(_) | Self::ImplicitOnDemand(_) => {
                self.on_demand_pieces(offset, dst.len(), false, |page, at, r| {
                    let Some(chunk) = dst.get_mut(r) else { return };
                    // SAFETY: the page is present while `with_pieces` holds the
                    // table's lock; `at + chunk.len() <= PAGE_SIZE`; `chunk`
                    // is valid for writes.
                    unsafe {
                        bindings::sroce_memcpy_from_page(
                            chunk.as_mut_ptr().cast(),
                            page,
                            at,
                            chunk.len(),
                        )
                    };
                })
            }
            Self::KernelVirtual => {
                let src = kernel_ptr(iova, dst.len())?;
                // SAFETY: as in `copy_to`.
                unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
                Ok(())
            }
            Self::FastReg(_) => Err(EFAULT),
        }
    }

    /// Compare-and-swap on the aligned `u64` at `iova` (region byte
    /// `offset`): stores `swap` if it holds `compare`; returns the value it
    /// held. Fully ordered, like `atomic64_cmpxchg`.
    pub(crate) fn compare_swap(
        &self,
        offset: u64,
        iova: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64> {
        self.with_atomic_u64(offset, iova, |a| {
            a.cmpxchg(compare, swap, Full).unwrap_or_else(|old| old)
        })
    }

    /// Fetch-and-add on the aligned `u64` at `iova` (region byte `offset`),
    /// wrapping; returns the value before the addition. Fully ordered.
    pub(crate) fn fetch_add(&self, offset: u64, iova: u64, add: u64) -> Result<u64> {
        self.with_atomic_u64(offset, iova, |a| a.fetch_add(add, Full))
    }

    /// Stores `value` in the aligned `u64` at `iova` (region byte
    /// `offset`) at once. Fully ordered, like the other atomics.
    pub(crate) fn store(&self, offset: u64, iova: u64, value: u64) -> Result {
        self.with_atomic_u64(offset, iova, |a| {
            a.xchg(value, Full);
        })
    }

    /// Runs `op` on the naturally aligned 8 bytes at region byte `offset`
    /// (virtual address `iova`) as an atomic `u64`. `EINVAL` if misaligned.
    ///
    /// Locked instructions rather than rxe's lock around plain accesses:
    /// they are atomic against every CPU and user space too, need no
    /// device-wide lock, and are safe in any context.
    fn with_atomic_u64<R>(
        &self,
        offset: u64,
        iova: u64,
        op: impl FnOnce(&Atomic<u64>) -> R,
    ) -> Result<R> {
        if iova % 8 != 0 {
            return Err(EINVAL);
        }
        match self {
            Self::User(u) => {
                if !u.writable {
                    return Err(EACCES);
                }
                check_user_range(u, offset, 8)?;
                // Aligned, so the 8 bytes are in one page: iova and user
                // address share their offset within a page.
                let (page, at, room) = u.locate(offset)?;
                if room < 8 {
                    return Err(EINVAL);
                }
                // SAFETY: the page is pinned writable while `u` lives.
                let base = unsafe { bindings::sroce_kmap_local_page(page.as_raw()) };
                // SAFETY: `at + 8 <= PAGE_SIZE` and `at` is a multiple of 8
                // (the page is page aligned); the page stays mapped until
                // `kunmap_local` below. Other accesses to the word from this
                // kernel are atomic too; user space may race, which the
                // hardware's locked instructions make well defined.
                let r = op(unsafe { Atomic::from_ptr(base.cast::<u8>().add(at).cast::<u64>()) });
                // SAFETY: unmaps the mapping made above, the only one made
                // since (mappings are released in reverse order).
                unsafe { bindings::sroce_kunmap_local(base) };
                Ok(r)
            }
            Self::OnDemand(_) | Self::ImplicitOnDemand(_) => {
                // Aligned, so the 8 bytes are in one page.
                let mut r = None;
                let mut op = Some(op);
                self.on_demand_pieces(offset, 8, true, |page, at, _| {
                    let Some(op) = op.take() else { return };
                    // SAFETY: the page is present and writable while
                    // `with_pieces` holds the table's lock.
                    let base = unsafe { bindings::sroce_kmap_local_page(page) };
                    // SAFETY: as for pinned pages below: `at + 8 <=
                    // PAGE_SIZE`, `at` a multiple of 8, mapped until the
                    // `kunmap_local`.
                    r = Some(op(unsafe {
                        Atomic::from_ptr(base.cast::<u8>().add(at).cast::<u64>())
                    }));
                    // SAFETY: unmaps the mapping made above.
                    unsafe { bindings::sroce_kunmap_local(base) };
                })?;
                r.ok_or(EINVAL)
            }
            Self::KernelVirtual => {
                let p = kernel_ptr(iova, 8)?;
                // SAFETY: a mapped kernel address (see `copy_to`), aligned
                // as checked above.
                Ok(op(unsafe { Atomic::from_ptr(p.cast::<u64>()) }))
            }
            Self::FastReg(_) => Err(EFAULT),
        }
    }
}

/// The device-side rule for user regions, checked again here so that no
/// caller mistake can reach past the pinned pages.
fn check_user_range(u: &UserPages, offset: u64, len: usize) -> Result {
    let end = offset.checked_add(len as u64).ok_or(EFAULT)?;
    if end > u.length {
        return Err(EFAULT);
    }
    Ok(())
}

/// A kernel virtual address of a DMA MR access, refusing NULL and ranges
/// that wrap the address space.
fn kernel_ptr(iova: u64, len: usize) -> Result<*mut u8> {
    let addr = usize::try_from(iova).map_err(|_| EFAULT)?;
    if addr == 0 || addr.checked_add(len).is_none() {
        return Err(EFAULT);
    }
    Ok(addr as *mut u8)
}
