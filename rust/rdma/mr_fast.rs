// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions (`alloc_mr` with `IB_MR_TYPE_MEM_REG`),
//! the way kernel consumers (NVMe over RDMA, iSER, RDS, NFS) expose
//! buffers to their peers.
//!
//! Life of one: `alloc_mr` reserves a key and room for `max_pages` pages,
//! and the region starts invalid (free). The consumer maps a scatterlist
//! (`ib_map_mr_sg`: the core's `ib_sg_to_pages` calls back with each page)
//! into a *staged* page list, then posts `IB_WR_REG_MR`: when the send
//! queue reaches it, the staged list becomes the *active* one and the
//! region valid under the key, rights, iova and length the request gives.
//! A local invalidate (`IB_WR_LOCAL_INV`) or a peer's SEND with invalidate
//! makes it invalid again, until the next registration.
//!
//! Pages are kernel virtual addresses: a software device uses virtual DMA
//! (`ib_uses_virt_dma`), so what `ib_dma_map_sg` put in the scatterlist is
//! the memory's own address, mapped for as long as the consumer keeps the
//! region registered (as hardware DMA would need).
//!
//! The state, both page lists included, sits under one IRQ-safe spinlock
//! that every access of the data path holds while it copies (at most a
//! packet's worth): an invalidation therefore waits for copies under way,
//! and once it returns no copy reaches the memory, which the consumer may
//! then reuse (the guarantee a completed invalidate gives).

use super::access::Access;
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{atomic::Atomic, SpinLockIrq},
};

/// Page sizes accepted from `ib_map_mr_sg`: 4 KiB up to 1 GiB.
const MIN_PAGE_SHIFT: u32 = 12;
const MAX_PAGE_SHIFT: u32 = 30;

/// A page list built by `ib_sg_to_pages`.
///
/// # Invariants
///
/// `pages.len() <= pages.capacity()` (never grows: filled in atomic
/// context); each entry is a `1 << page_shift` aligned kernel virtual
/// address; the region's byte 0 is at `first_offset` in `pages[0]`.
struct PageList {
    pages: KVVec<u64>,
    page_shift: u32,
    first_offset: u64,
}

impl PageList {
    fn new(max_pages: usize) -> Result<Self> {
        Ok(Self {
            pages: KVVec::with_capacity(max_pages, GFP_KERNEL)?,
            page_shift: MIN_PAGE_SHIFT,
            first_offset: 0,
        })
    }

    /// Bytes the pages hold after `first_offset`.
    fn span(&self) -> u64 {
        ((self.pages.len() as u64) << self.page_shift).saturating_sub(self.first_offset)
    }
}

/// The state of a fast-registration region.
///
/// # Invariants
///
/// When `valid`, `length <= active.span()`, so every offset below `length`
/// falls in a page of `active`. `key` keeps the index bits of the key the
/// region was allocated with.
struct State {
    key: u32,
    valid: bool,
    iova: u64,
    length: u64,
    access: Access,
    active: PageList,
    staged: PageList,
}

/// The fast-registration part of a memory region.
#[pin_data]
pub(crate) struct FastReg {
    #[pin]
    state: SpinLockIrq<State>,
}

/// What a registration request (`IB_WR_REG_MR`) asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    /// The new key: the region's index, the consumer's variant.
    pub(crate) key: u32,
    /// Rights.
    pub(crate) access: Access,
    /// First address, from the `ib_mr` after mapping.
    pub(crate) iova: u64,
    /// Length in bytes, from the `ib_mr` after mapping.
    pub(crate) length: u64,
}

/// Why a request on a fast-registration region fails (the send queue
/// completes it with a local QP operation error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FastRegError {
    /// Registration of a region that is still valid.
    StillValid,
    /// The key names another region (index bits differ).
    WrongIndex,
    /// The key is not the region's current key.
    WrongKey,
    /// The mapped pages do not cover iova + length.
    BeyondPages,
}

impl FastReg {
    /// An invalid region with key `key` and room for `max_pages` pages.
    pub(crate) fn new(key: u32, max_pages: usize) -> Result<Pin<KBox<Self>>> {
        let active = PageList::new(max_pages)?;
        let staged = PageList::new(max_pages)?;
        KBox::pin_init(
            pin_init!(Self {
                state <- new_spinlock_irq!(
                    State {
                        key,
                        valid: false,
                        iova: 0,
                        length: 0,
                        access: Access::NONE,
                        active,
                        staged,
                    },
                    "sroce::fast_reg"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Starts mapping pages of `page_size` bytes into the staged list.
    pub(crate) fn begin_map(&self, page_size: u32) -> Result {
        if !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        let shift = page_size.trailing_zeros();
        if !(MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&shift) {
            return Err(EINVAL);
        }
        let mut s = self.state.lock();
        s.staged.pages.clear();
        s.staged.page_shift = shift;
        s.staged.first_offset = 0;
        Ok(())
    }

    /// Appends one page (`ib_sg_to_pages`' callback). `ENOMEM` when the
    /// list is full, which ends the mapping short, as the core expects.
    pub(crate) fn push_page(&self, addr: u64) -> Result {
        let mut s = self.state.lock();
        let mask = (1u64 << s.staged.page_shift) - 1;
        if addr & mask != 0 || addr == 0 {
            return Err(EINVAL);
        }
        s.staged
            .pages
            .push_within_capacity(addr)
            .map_err(|_| ENOMEM)
    }

    /// Ends a mapping whose first byte is at `iova` (the core's choice).
    pub(crate) fn end_map(&self, iova: u64) {
        let mut s = self.state.lock();
        let mask = (1u64 << s.staged.page_shift) - 1;
        s.staged.first_offset = iova & mask;
    }

    /// Performs `IB_WR_REG_MR`: the staged pages become the region's.
    pub(crate) fn register(&self, r: &Registration) -> core::result::Result<(), FastRegError> {
        let mut s = self.state.lock();
        if s.valid {
            return Err(FastRegError::StillValid);
        }
        if (r.key ^ s.key) & !0xff != 0 {
            return Err(FastRegError::WrongIndex);
        }
        if r.length > s.staged.span() || r.iova.checked_add(r.length).is_none() {
            return Err(FastRegError::BeyondPages);
        }
        let st = &mut *s;
        core::mem::swap(&mut st.active, &mut st.staged);
        // The staged list stays the last mapping: a later REG_MR without a
        // new `map_mr_sg` (after an invalidate) registers the same pages
        // again, as the verbs allow. Same capacity, so nothing is dropped.
        st.staged.pages.clear();
        for &p in st.active.pages.iter() {
            let _ = st.staged.pages.push_within_capacity(p);
        }
        st.staged.page_shift = st.active.page_shift;
        st.staged.first_offset = st.active.first_offset;
        // INVARIANT: `length <= active.span()`, checked above.
        st.key = r.key;
        st.iova = r.iova;
        st.length = r.length;
        st.access = r.access;
        st.valid = true;
        Ok(())
    }

    /// Performs a local invalidate or a SEND with invalidate of `key`.
    pub(crate) fn invalidate(&self, key: u32) -> core::result::Result<(), FastRegError> {
        let mut s = self.state.lock();
        if s.key != key {
            return Err(FastRegError::WrongKey);
        }
        s.valid = false;
        Ok(())
    }

    /// Whether `key` is the key of the valid region.
    pub(crate) fn matches(&self, key: u32) -> bool {
        let s = self.state.lock();
        s.valid && s.key == key
    }

    /// The rights and range of the valid region under `key`.
    pub(crate) fn view(&self, key: u32) -> Option<(Access, u64, u64)> {
        let s = self.state.lock();
        (s.valid && s.key == key).then_some((s.access, s.iova, s.length))
    }

    /// Copies `src` to `iova`, if `key` still names the valid region and
    /// the range is inside it.
    pub(crate) fn copy_to(&self, key: u32, iova: u64, src: &[u8]) -> Result {
        self.with_pieces(key, iova, src.len(), |addr, r| {
            let chunk = src.get(r).ok_or(EFAULT)?;
            // SAFETY: `addr` is inside a mapped page of the valid region
            // (`with_pieces`), `chunk.len()` bytes fit in that page, and the
            // consumer keeps the memory while the region is valid, which
            // the held lock keeps it.
            unsafe { core::ptr::copy_nonoverlapping(chunk.as_ptr(), addr as *mut u8, chunk.len()) };
            Ok(())
        })
    }

    /// Fills `dst` from `iova`, under the same conditions as `copy_to`.
    pub(crate) fn copy_from(&self, key: u32, iova: u64, dst: &mut [u8]) -> Result {
        let len = dst.len();
        self.with_pieces(key, iova, len, |addr, r| {
            let chunk = dst.get_mut(r).ok_or(EFAULT)?;
            // SAFETY: as in `copy_to`; `chunk` is valid for writes.
            unsafe {
                core::ptr::copy_nonoverlapping(addr as *const u8, chunk.as_mut_ptr(), chunk.len())
            };
            Ok(())
        })
    }

    /// Runs `op` on the aligned `u64` at `iova`; `EINVAL` if misaligned.
    pub(crate) fn with_atomic_u64<R>(
        &self,
        key: u32,
        iova: u64,
        op: impl FnOnce(&Atomic<u64>) -> R,
    ) -> Result<R> {
        if iova % 8 != 0 {
            return Err(EINVAL);
        }
        let mut op = Some(op);
        let mut out = None;
        self.with_pieces(key, iova, 8, |addr, r| {
            // Aligned and pages are at least 4 KiB: one piece.
            if r.len() != 8 {
                return Err(EINVAL);
            }
            let f = op.take().ok_or(EINVAL)?;
            // SAFETY: 8 mapped bytes of the valid region (`with_pieces`),
            // 8-byte aligned (the page is, and so is `iova`'s offset).
            out = Some(f(unsafe { Atomic::from_ptr(addr as *mut u64) }));
            Ok(())
        })?;
        out.ok_or(EINVAL)
    }

    /// Calls `f(kernel address, range of the buffer)` for each page piece
    /// of `len` bytes at `iova`, holding the lock throughout. `EFAULT` if
    /// `key` does not name the valid region or the range leaves it.
    fn with_pieces(
        &self,
        key: u32,
        iova: u64,
        len: usize,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let s = self.state.lock();
        if !s.valid || s.key != key {
            return Err(EFAULT);
        }
        let offset = iova.checked_sub(s.iova).ok_or(EFAULT)?;
        let end = offset.checked_add(len as u64).ok_or(EFAULT)?;
        if end > s.length {
            return Err(EFAULT);
        }
        let shift = s.active.page_shift;
        let page_size = 1u64 << shift;
        let mut done = 0usize;
        while done < len {
            let pos = s.active.first_offset + offset + done as u64;
            let page = *s
                .active
                .pages
                .get(usize::try_from(pos >> shift).map_err(|_| EFAULT)?)
                .ok_or(EFAULT)?;
            let in_page = pos & (page_size - 1);
            let n = ((page_size - in_page) as usize).min(len - done);
            f(page + in_page, done..done + n)?;
            done += n;
        }
        Ok(())
    }
}
