// SPDX-License-Identifier: GPL-2.0

//! Implicit on-demand paging: one region over the whole address space of
//! the process (`ibv_reg_mr(pd, NULL, SIZE_MAX, ... ON_DEMAND)`), whose
//! iovas are the process's addresses.
//!
//! The core's implicit umem is only a root: it watches nothing. The
//! region's pages are kept in chunks of [`CHUNK`] bytes, each a child umem
//! of the root (with a notifier of its own) and an [`OdpPages`] table,
//! made by the first fault in it that succeeds (process context: where the
//! process has memory) and kept until the region goes. The data path finds a chunk under a bottom-half lock, then
//! accesses it as an explicit region's pages; a chunk not made yet reads as
//! [`NOT_PRESENT`]. An access across two chunks may be done in part when
//! it stops on the second: doing it again is harmless (the data path
//! copies whole packets again).

use super::{
    access::Access,
    bh_lock::{new_spinlock_bh, SpinLockBh},
    bindings,
    device::{Device, Driver},
    mr_odp::{core_access, InvalidatedHook, OdpPages, NOT_PRESENT},
};
use core::ptr::NonNull;
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT, error::from_err_ptr, new_mutex, prelude::*, sync::Mutex,
};

/// Bytes of a chunk: 2 MiB (a huge page), so that the tables a process
/// makes the device keep (sroce's and the core's, 4 KiB each per chunk)
/// stay small beside the memory they describe, however sparsely it is
/// touched.
const CHUNK_SHIFT: u32 = 21;
const CHUNK: u64 = 1 << CHUNK_SHIFT;

/// A chunk made, by index (address >> [`CHUNK_SHIFT`]).
struct Chunk {
    index: u64,
    pages: Pin<KBox<OdpPages>>,
}

/// An implicit on-demand region.
///
/// # Invariants
///
/// - `root` is an implicit umem `ib_umem_odp_alloc_implicit` returned,
///   released on drop after every chunk (its children).
/// - `chunks` is sorted by index, one entry per index at most; an entry is
///   never removed or moved out of its box until the region is dropped.
#[pin_data(PinnedDrop)]
pub(crate) struct ImplicitOdp {
    root: NonNull<bindings::ib_umem_odp>,
    writable: bool,
    hook: InvalidatedHook,
    hook_arg: *const core::ffi::c_void,
    #[pin]
    chunks: SpinLockBh<KVVec<Chunk>>,
    /// Serialises making chunks.
    #[pin]
    growing: Mutex<()>,
}

// SAFETY: the root umem is not tied to the task that registered it; the
// chunks are behind a lock (and are `Send`/`Sync`); the hook argument is
// the device, which is `Sync` and outlives its regions.
unsafe impl Send for ImplicitOdp {}
// SAFETY: as above.
unsafe impl Sync for ImplicitOdp {}

impl ImplicitOdp {
    /// Registers the whole address space of the current process for
    /// on-demand paging with `access`: nothing is faulted now.
    pub(crate) fn new<T: Driver>(dev: &Device<T>, access: Access) -> Result<Pin<KBox<Self>>> {
        let access = core_access(access)?;
        // SAFETY: a live device; the core takes `current->mm` and returns
        // a root umem or an ERR_PTR.
        let root =
            from_err_ptr(unsafe { bindings::sroce_umem_odp_alloc_implicit(dev.as_raw(), access) })?;
        let root = NonNull::new(root).ok_or(ENOMEM)?;
        // SAFETY: a umem just returned; `writable` is set at creation.
        let writable = unsafe { (*root.as_ptr()).umem.writable() != 0 };
        let (hook, hook_arg) = OdpPages::hook_of(dev);
        let init = try_pin_init!(Self {
            root,
            writable,
            hook,
            hook_arg,
            chunks <- new_spinlock_bh!(KVVec::new(), "sroce::odp_chunks"),
            growing <- new_mutex!((), "sroce::odp_growing"),
        }? Error);
        KBox::pin_init(init, GFP_KERNEL).inspect_err(|_| {
            // SAFETY: the root was never shared; released here.
            unsafe { bindings::sroce_umem_odp_release_implicit(root.as_ptr()) };
        })
    }

    /// Whether the region may be written.
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// The chunk with `index`, if it was made.
    fn chunk(&self, index: u64) -> Option<&OdpPages> {
        let chunks = self.chunks.lock();
        let i = chunks.binary_search_by_key(&index, |c| c.index).ok()?;
        let pages: *const OdpPages = &*chunks.get(i)?.pages;
        drop(chunks);
        // SAFETY: a chunk stays in its box until `self` is dropped (type
        // invariant), which the borrow of `self` prevents.
        Some(unsafe { &*pages })
    }

    /// Makes chunk `index` if `first`, its first fault, succeeds on it, so
    /// that chunks exist only where the process has memory (an access to
    /// an address it has nothing at fails without leaving one behind), or
    /// runs `first` on the chunk if another fault made it meanwhile.
    /// Process context.
    fn make_chunk(&self, index: u64, first: impl FnOnce(&OdpPages) -> Result) -> Result {
        let growing = self.growing.lock();
        if let Some(c) = self.chunk(index) {
            drop(growing);
            return first(c);
        }
        let addr = index.checked_mul(CHUNK).ok_or(EFAULT)?;
        // SAFETY: the root is live and outlives its chunks (type
        // invariant); the hook is the region's device's.
        let pages = unsafe { OdpPages::child(self.root, addr, CHUNK, self.hook, self.hook_arg)? };
        // A failure drops the child here, in process context.
        first(&pages)?;
        // Room first, outside the lock the data path takes: a new list
        // with the old entries moved over (their boxes stay put).
        let (len, cap) = {
            let c = self.chunks.lock();
            (c.len(), c.capacity())
        };
        let mut grown = if len == cap {
            Some(KVVec::with_capacity(cap * 2 + 4, GFP_KERNEL_ACCOUNT)?)
        } else {
            None
        };
        let mut chunks = self.chunks.lock();
        // `growing` is held: the list is as it was measured, so the new
        // list (or the old one) has room for one more. Checked anyway
        // before anything moves, so that no chunk can be dropped (which
        // sleeps) under the lock.
        let room = grown.as_ref().map_or(cap, |g| g.capacity());
        if chunks.len() >= room {
            drop(chunks);
            return Err(ENOMEM);
        }
        if let Some(g) = grown.as_mut() {
            for c in chunks.drain_all() {
                // Cannot fail: room checked above.
                let _ = g.push_within_capacity(c);
            }
            core::mem::swap(&mut *chunks, g);
        }
        let at = chunks.partition_point(|c| c.index < index);
        // Cannot fail either; `pages` would be dropped after the lock.
        let refused = chunks
            .insert_within_capacity(at, Chunk { index, pages })
            .err();
        drop(chunks);
        // The old, empty list is freed outside the lock.
        drop(grown);
        drop(growing);
        match refused {
            Some(_) => Err(ENOMEM),
            None => Ok(()),
        }
    }

    /// Calls `f(page, offset in page, range of the caller's buffer)` for
    /// each page piece of `len` bytes at address `addr`, chunk by chunk,
    /// with the pages held present; [`NOT_PRESENT`] at the first chunk not
    /// made or with a page absent (see the module's note on pieces).
    pub(crate) fn with_pieces(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(*mut bindings::page, usize, core::ops::Range<usize>),
    ) -> Result {
        let mut done = 0usize;
        while done < len {
            let at = addr.checked_add(done as u64).ok_or(EFAULT)?;
            let index = at >> CHUNK_SHIFT;
            let in_chunk = at & (CHUNK - 1);
            let n = ((CHUNK - in_chunk) as usize).min(len - done);
            let chunk = self.chunk(index).ok_or(NOT_PRESENT)?;
            chunk.with_pieces(in_chunk, n, write, |page, off, r| {
                f(page, off, r.start + done..r.end + done)
            })?;
            done += n;
        }
        Ok(())
    }

    /// Faults `len` bytes at address `addr` in (see
    /// [`OdpPages::fault_in`]), making the chunks they are in. Process
    /// context; sleeps.
    pub(crate) fn fault_in(&self, addr: u64, len: u64, write: bool, fault: bool) -> Result {
        let end = addr.checked_add(len).ok_or(EFAULT)?;
        let mut at = addr;
        while at < end {
            let index = at >> CHUNK_SHIFT;
            let in_chunk = at & (CHUNK - 1);
            let n = (CHUNK - in_chunk).min(end - at);
            let fault_chunk = |c: &OdpPages| c.fault_in(in_chunk, n, write, fault);
            match self.chunk(index) {
                Some(c) => fault_chunk(c)?,
                // A lookup that faults nothing (`PREFETCH_NO_FAULT`) makes
                // no chunk: it would cost the process nothing, so a range
                // of untouched address space would make the kernel keep
                // tables for all of it.
                None if !fault => {}
                None => self.make_chunk(index, fault_chunk)?,
            }
            at += n;
        }
        Ok(())
    }
}

#[pinned_drop]
impl PinnedDrop for ImplicitOdp {
    fn drop(self: Pin<&mut Self>) {
        // The children first (each releases its umem), then the root.
        let chunks = core::mem::take(&mut *self.chunks.lock());
        drop(chunks);
        // SAFETY: we own the root (type invariant) and its children are
        // gone. Process context, as for every region.
        unsafe { bindings::sroce_umem_odp_release_implicit(self.root.as_ptr()) };
    }
}
